//! One attempt at one image: request, stream to a part file while hashing, verify.
//!
//! Small bodies stay in memory and are written with one blocking call (per-file syscalls, not
//! bytes, dominate small images). Large ones spill to `<seq>.part`, with a sidecar
//! `<seq>.part.json` naming the URL and the validator (ETag or Last-Modified) of the response;
//! a later attempt, in this run or after a crash, resumes such a part with `Range` and
//! `If-Range`, and appends only when the server answers 206 with a `Content-Range` that starts
//! exactly where the part ends. Anything else starts the file over.
//!
//! [`fetch_image_held`] goes further for small bodies: it never writes them to a part file at
//! all, and hands them to the state writer in memory ([`Held`]), within a byte budget shared by
//! every download ([`HoldBudget`]): once the budget is spent, a finished body waits (and its
//! connection slot with it) until the writer has placed others. Bodies over [`HELD_BYTES`]
//! still go through part files, so a large one resumes with `Range` after a failure or a crash.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::extract::rights::link_license;
use futures_util::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_RANGE, ETAG, HeaderMap, IF_RANGE, LAST_MODIFIED, LINK, RANGE};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::net::hosts::retry_after;
use crate::net::{Failure, FailureClass, HttpClient, classify};
use crate::page::Validators;
use crate::profile::{DownloadSettings, PathValues};
use crate::state::{Held, StoredFile, phash_hex};
use crate::telemetry::Live;
use crate::verify::{ImageFormat, ImageInfo, VerifyError, check_dimensions, inspect, sniff};

/// Bytes kept in memory for sniffing and header parsing.
const HEAD_BYTES: usize = 256 * 1024;
/// Bodies up to this size are collected in memory and written with one blocking call.
const IN_MEMORY_BYTES: usize = 2 * 1024 * 1024;
/// Bodies up to this size are handed to the writer in memory by [`fetch_image_held`].
pub const HELD_BYTES: u64 = 1024 * 1024;
/// Bytes of bodies held in memory for the writer at most, over all downloads.
pub const HELD_BUDGET_BYTES: u64 = 64 * 1024 * 1024;

/// The memory that bodies handed to the writer may take, over all downloads: a semaphore of
/// KiB, each body holding its share until the writer has placed it.
#[derive(Clone)]
pub struct HoldBudget(std::sync::Arc<tokio::sync::Semaphore>);

impl HoldBudget {
    pub fn new(bytes: u64) -> Self {
        Self(std::sync::Arc::new(tokio::sync::Semaphore::new(
            (bytes / 1024).max(1) as usize,
        )))
    }

    /// Waits until `len` bytes fit in the budget, and holds them.
    async fn take(&self, len: u64) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let kib = len.div_ceil(1024).clamp(1, u64::from(u32::MAX)) as u32;
        std::sync::Arc::clone(&self.0)
            .acquire_many_owned(kib)
            .await
            .ok()
    }
}

/// The window over which the minimum transfer speed is measured; a body that sends nothing
/// for this long has stalled.
const SPEED_WINDOW: Duration = Duration::from_secs(10);

/// Why an attempt ended without a file.
#[derive(Debug)]
pub enum AttemptError {
    /// Recorded against the image; retried first when transient.
    Failed(Failure),
    /// The output folder cannot be written: the run must stop.
    Disk {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<Failure> for AttemptError {
    fn from(f: Failure) -> Self {
        Self::Failed(f)
    }
}

/// A verified body waiting in its part file.
pub struct Fetched {
    /// Where the body waits; no file when it is `held`.
    pub part: PathBuf,
    /// The body itself, when it was kept in memory for the writer ([`fetch_image_held`]).
    pub held: Option<Held>,
    pub file: StoredFile,
    /// The body's format, as verified.
    pub format: ImageFormat,
    /// The URL the body came from, after redirects (for `{host}` and `{name}` in paths).
    pub final_url: url::Url,
    /// The body continued a part file of an earlier attempt (from this offset).
    pub resumed_from: Option<u64>,
    /// The response's validators, kept with the image for `--recheck-images`.
    pub validators: Validators,
    /// The rights the file carries in itself (its XMP, a C2PA manifest).
    pub embedded: crate::extract::rights::Rights,
}

/// What a part's sidecar remembers of the response it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PartMeta {
    url: String,
    /// `ETag` (preferred) or `Last-Modified`, sent back as `If-Range`.
    validator: String,
}

/// A sidecar: the response a part comes from, and what was written to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PartRecord {
    #[serde(flatten)]
    meta: PartMeta,
    /// Bytes written to the part when the sidecar was written.
    written_bytes: u64,
    /// SHA-256 (hex) of those bytes.
    sha256: String,
}

/// A part checked against its sidecar, ready to be continued.
struct Resume {
    offset: u64,
    meta: PartMeta,
    hasher: Sha256,
    head: Vec<u8>,
}

/// Where an attempt keeps its body while it downloads.
pub struct Part {
    pub path: PathBuf,
    /// Whether an earlier attempt may have left a part to continue (a sidecar beside it);
    /// `false` skips looking for one, a blocking call per image.
    pub may_resume: bool,
}

impl Part {
    /// A part that may continue an earlier attempt's.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            may_resume: true,
        }
    }
}

/// Downloads `url` into `part`, verifying it against the profile's rules.
pub async fn fetch_image(
    client: &HttpClient,
    settings: &DownloadSettings,
    profile: &str,
    url: &url::Url,
    part: Part,
    live: &Live,
) -> Result<Fetched, AttemptError> {
    fetch(client, settings, profile, url, part, live, None, None).await
}

/// As [`fetch_image`], but a body of at most [`HELD_BYTES`] is kept in memory within `budget`
/// and handed over in [`Fetched::held`], with no part file; with `unless`, the validators of
/// the bytes stored before, asked only if it changed (a `304` fails with class `http_304`).
#[allow(clippy::too_many_arguments)]
pub async fn fetch_image_held(
    client: &HttpClient,
    settings: &DownloadSettings,
    profile: &str,
    url: &url::Url,
    part: Part,
    live: &Live,
    budget: &HoldBudget,
    unless: Option<&Validators>,
) -> Result<Fetched, AttemptError> {
    fetch(
        client,
        settings,
        profile,
        url,
        part,
        live,
        Some(budget),
        unless,
    )
    .await
}

/// One attempt, in four steps: the request (resuming the part, or asked only if it changed),
/// the body its answer opens, the bytes received into it, and what they are once verified.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    client: &HttpClient,
    settings: &DownloadSettings,
    profile: &str,
    url: &url::Url,
    Part {
        path: part,
        may_resume,
    }: Part,
    live: &Live,
    budget: Option<&HoldBudget>,
    unless: Option<&Validators>,
) -> Result<Fetched, AttemptError> {
    let _in_flight = live.begin_download();
    let resume = if may_resume {
        let (part, url) = (part.clone(), url.to_string());
        tokio::task::spawn_blocking(move || resume_point(&part, &url))
            .await
            .map_err(|e| Failure::new(FailureClass::Other, e.to_string()))?
    } else {
        None
    };
    let response = ask(client, settings, url, resume.as_ref(), unless, live).await?;
    let headers = response.headers().clone();
    if let Some(opted_out) = crate::net::robots::opted_out(&headers, settings) {
        return Err(opted_out.into());
    }
    let mut body = open_body(&response, part, resume, url).await?;
    if let Some(length) = body.expected.filter(|l| *l > settings.max_bytes) {
        body.discard();
        return Err(too_large(length, settings.max_bytes).into());
    }
    let final_url = response.url().clone();
    receive(response, &mut body, settings, live).await?;
    let answer = Answer {
        headers,
        final_url,
        profile,
    };
    verified(body, answer, settings, budget).await
}

/// The request for `url`: from where the part ends when it may be resumed (`Range`, only if
/// the file is still the one the part began: `If-Range`), or only if it changed since
/// `unless`; its answer's head, within the first-byte timeout.
async fn ask(
    client: &HttpClient,
    settings: &DownloadSettings,
    url: &url::Url,
    resume: Option<&Resume>,
    unless: Option<&Validators>,
    live: &Live,
) -> Result<reqwest::Response, AttemptError> {
    let mut request = client.get(url.clone());
    if let Some(resume) = resume {
        request = request
            .header(RANGE, format!("bytes={}-", resume.offset))
            .header(IF_RANGE, resume.meta.validator.as_str());
    } else if let Some(unless) = unless {
        for (name, value) in unless.conditional_headers() {
            request = request.header(name, value);
        }
    }
    let response =
        match tokio::time::timeout(settings.first_byte_timeout, client.send(request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                live.count_answer(None);
                return Err(classify(&e).into());
            }
            Err(_) => {
                live.count_answer(None);
                let waited = settings.first_byte_timeout;
                return Err(Failure::new(
                    FailureClass::Timeout,
                    format!("no response within {waited:?}"),
                )
                .into());
            }
        };
    live.count_answer(Some(response.status().as_u16()));
    Ok(response)
}

/// Where the answer's bytes go: appended to the part when the server continues it (a `206`
/// from where it ends), else a body of their own (the part started over); an answer that is
/// no image's body is the attempt's failure.
async fn open_body(
    response: &reqwest::Response,
    part: PathBuf,
    resume: Option<Resume>,
    url: &url::Url,
) -> Result<Body, AttemptError> {
    let headers = response.headers();
    match (response.status(), resume) {
        (StatusCode::PARTIAL_CONTENT, Some(resume)) => match content_range(headers) {
            Some((start, total)) if start == resume.offset => {
                Ok(Body::resume(part, total, resume).await?)
            }
            _ => {
                discard_part(&part);
                Err(Failure::new(
                    FailureClass::Reset,
                    "206 with a Content-Range that does not continue the part",
                )
                .into())
            }
        },
        (StatusCode::RANGE_NOT_SATISFIABLE, Some(_)) => {
            discard_part(&part);
            Err(Failure::new(
                FailureClass::Reset,
                "416: the part no longer fits the file; starting over",
            )
            .into())
        }
        (s, resume) if s.is_success() => {
            if resume.is_some() {
                // The server ignored Range (or the file changed): start the file over.
                discard_part(&part);
            }
            // A 206 to a request without Range is the whole file only if it starts the file,
            // and then its length to reach is the total, not the piece's.
            let expected = match (s, content_range(headers)) {
                (StatusCode::PARTIAL_CONTENT, Some((0, total))) => Some(total),
                (StatusCode::PARTIAL_CONTENT, _) => {
                    return Err(Failure::new(
                        FailureClass::Truncated,
                        "206 that does not start the file, to a request without a usable Range",
                    )
                    .into());
                }
                _ => response.content_length(),
            };
            let meta = validator(headers).map(|validator| PartMeta {
                url: url.to_string(),
                validator,
            });
            Ok(Body::new(part, expected, meta))
        }
        (s, _) => {
            let mut failed = Failure::new(FailureClass::Http(s.as_u16()), format!("HTTP {s}"));
            failed.retry_after = retry_after(headers);
            Err(failed.into())
        }
    }
}

/// Receives the answer's bytes into `body`, within `max_bytes` and above `min_speed_bytes`;
/// what arrived before a read failed, stalled or fell short of its length is kept in the part
/// for a resume.
async fn receive(
    response: reqwest::Response,
    body: &mut Body,
    settings: &DownloadSettings,
    live: &Live,
) -> Result<(), AttemptError> {
    let mut stream = response.bytes_stream();
    let mut window = (Instant::now(), 0u64);
    loop {
        let next = if settings.min_speed_bytes > 0 {
            match tokio::time::timeout(SPEED_WINDOW, stream.next()).await {
                Ok(next) => next,
                Err(_) => {
                    return Err(Failure::new(
                        FailureClass::Timeout,
                        format!("no data for {SPEED_WINDOW:?}"),
                    )
                    .into());
                }
            }
        } else {
            stream.next().await
        };
        let Some(chunk) = next else { break };
        // A failed read keeps what arrived in the part file, for a resume.
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                body.keep_for_resume().await;
                return Err(classify(&e).into());
            }
        };
        live.add_bytes(chunk.len() as u64);
        if body.len + chunk.len() as u64 > settings.max_bytes {
            body.discard();
            return Err(too_large(body.len + chunk.len() as u64, settings.max_bytes).into());
        }
        window.1 += chunk.len() as u64;
        body.push(chunk).await?;
        let elapsed = window.0.elapsed();
        if elapsed >= SPEED_WINDOW {
            let speed = window.1 as f64 / elapsed.as_secs_f64();
            if speed < settings.min_speed_bytes as f64 {
                body.keep_for_resume().await;
                let detail = format!(
                    "{speed:.0} B/s is below the minimum of {} B/s",
                    settings.min_speed_bytes
                );
                return Err(Failure::new(FailureClass::Timeout, detail).into());
            }
            window = (Instant::now(), 0);
        }
    }
    if let Some(length) = body.expected.filter(|l| *l != body.len) {
        body.keep_for_resume().await;
        return Err(Failure::new(
            FailureClass::Truncated,
            format!("got {} of {length} bytes", body.len),
        )
        .into());
    }
    Ok(())
}

/// What an answer says of the bytes beside them: its headers, where it came from after
/// redirects, and the profile whose `path` names the file.
struct Answer<'a> {
    headers: HeaderMap,
    final_url: url::Url,
    profile: &'a str,
}

/// The received `body`, verified: its format and size, the rights it and its answer carry
/// (one that prohibits mining opted out), its perceptual hash when near-duplicates are
/// looked for, and its digest; small bodies are held in memory for the writer within
/// `budget`, the others finished in their part file.
async fn verified(
    mut body: Body,
    answer: Answer<'_>,
    settings: &DownloadSettings,
    budget: Option<&HoldBudget>,
) -> Result<Fetched, AttemptError> {
    let Answer {
        headers,
        final_url,
        profile,
    } = answer;
    let whole = body.len as usize <= body.head().len();
    let info = match inspect(body.head(), whole, &settings.verify) {
        Ok(info) => info,
        Err(VerifyError::HeaderBeyondHead { .. }) => {
            let format = sniff(body.head()).map_err(|e| verify_failed(&e))?;
            body.finish().await?;
            match measure_on_disk(&body.part, format, settings).await {
                Ok(info) => info,
                Err(e) => {
                    body.discard();
                    return Err(e);
                }
            }
        }
        Err(e) => {
            body.discard();
            return Err(verify_failed(&e).into());
        }
    };
    // What the file says of its rights; one that prohibits mining is opted out, as a page's
    // `noai` is, while opt-outs are obeyed.
    let mut embedded = crate::embedded::read(body.head());
    // And the licence its response links to (`Link: <...>; rel="license"`).
    let links = headers.get_all(LINK).iter().filter_map(|v| v.to_str().ok());
    for (field, value) in link_license(links, &final_url).unwrap_or_default() {
        embedded.rights.entry(field).or_insert(value);
    }
    if let Some(value) = &embedded.prohibits_mining
        && !settings.politeness.opt_out.is_empty()
    {
        body.discard();
        return Err(
            Failure::new(FailureClass::OptedOut, format!("plus:DataMining: {value}")).into(),
        );
    }
    let bytes = body.len;
    let phash = if settings.dataset.near_duplicates.is_some() {
        body.perceptual_hash(info.format).await?
    } else {
        None
    };
    let held = match budget {
        Some(budget) if body.file.is_none() && body.len <= HELD_BYTES => Some(Held {
            permit: budget.take(body.len).await,
            bytes: std::mem::take(&mut body.memory).whole_bytes(),
        }),
        _ => None,
    };
    let sha256 = match held {
        Some(_) => body.digest(),
        None => body.finish().await?,
    };
    let path = stored_path(settings, profile, &final_url, &sha256, info.format);
    if body.has_sidecar {
        discard_sidecar(&body.part);
    }
    Ok(Fetched {
        resumed_from: body.resumed_from,
        held,
        part: body.part,
        format: info.format,
        final_url,
        file: StoredFile {
            path,
            sha256,
            bytes,
            content_type: info.format.content_type().to_owned(),
            width: info.width,
            height: info.height,
            phash: phash.map(phash_hex),
            near_duplicate_of: None,
            original: None,
        },
        embedded: embedded.rights,
        validators: Validators::from_headers(
            headers.get(ETAG).map(|v| v.as_bytes()),
            headers.get(LAST_MODIFIED).map(|v| v.as_bytes()),
        ),
    })
}

/// The name the profile's `path` template gives a file of `format` whose bytes hash to
/// `sha256`, downloaded from `final_url`.
pub fn stored_path(
    settings: &DownloadSettings,
    profile: &str,
    final_url: &url::Url,
    sha256: &str,
    format: ImageFormat,
) -> String {
    // Only made when the template names it: it percent-decodes the URL's last segment.
    let name = if settings.path.uses("name") {
        file_stem(final_url)
    } else {
        String::new()
    };
    settings.path.render(&PathValues {
        sha256,
        ext: format.extension(),
        host: final_url.host_str().unwrap_or_default(),
        name: &name,
        profile,
    })
}

fn too_large(length: u64, max: u64) -> Failure {
    Failure::new(
        FailureClass::TooLarge,
        format!("{length} bytes is over the {max} byte limit"),
    )
}

fn verify_failed(error: &VerifyError) -> Failure {
    let class = match error {
        VerifyError::TooSmall { .. } => FailureClass::TooSmall,
        VerifyError::TooManyPixels { .. } => FailureClass::TooLarge,
        _ => FailureClass::NotAnImage,
    };
    Failure::new(class, error.to_string())
}

async fn measure_on_disk(
    part: &Path,
    format: ImageFormat,
    settings: &DownloadSettings,
) -> Result<ImageInfo, AttemptError> {
    let path = part.to_owned();
    let size = tokio::task::spawn_blocking(move || imagesize::size(&path))
        .await
        .map_err(|e| Failure::new(FailureClass::Other, e.to_string()))?
        .map_err(|e| {
            Failure::new(
                FailureClass::NotAnImage,
                format!("{format} header unreadable: {e}"),
            )
        })?;
    check_dimensions(format, size.width, size.height, &settings.verify)
        .map_err(|e| verify_failed(&e).into())
}

/// The validator to resume with: a strong ETag, else Last-Modified (RFC 9110 §13.1.5: a weak
/// ETag cannot be used in If-Range).
fn validator(headers: &HeaderMap) -> Option<String> {
    let etag = headers
        .get(ETAG)
        .and_then(|v| v.to_str().ok())
        .filter(|e| !e.starts_with("W/"));
    etag.or_else(|| headers.get(LAST_MODIFIED).and_then(|v| v.to_str().ok()))
        .map(str::to_owned)
}

/// `Content-Range: bytes START-END/TOTAL` → (START, TOTAL); `None` unless fully specified.
fn content_range(headers: &HeaderMap) -> Option<(u64, u64)> {
    let value = headers.get(CONTENT_RANGE)?.to_str().ok()?;
    let (range, total) = value.strip_prefix("bytes ")?.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    let (start, end, total): (u64, u64, u64) = (
        start.trim().parse().ok()?,
        end.trim().parse().ok()?,
        total.trim().parse().ok()?,
    );
    (start <= end && end < total).then_some((start, total))
}

/// The items whose parts in `folder` have a sidecar (`<seq>.part.json`): those an earlier run
/// left to continue with `Range`.
pub fn resumable_parts(folder: &Path) -> std::io::Result<Vec<u64>> {
    let mut seqs = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let name = entry?.file_name();
        let seq = name
            .to_str()
            .and_then(|name| name.strip_suffix(".part.json"))
            .and_then(|seq| seq.parse::<u64>().ok());
        seqs.extend(seq);
    }
    Ok(seqs)
}

/// Creates the part file at `part`, and its folder the first time one is written there.
fn create_part(part: &Path) -> std::io::Result<std::fs::File> {
    match std::fs::File::create(part) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(folder) = part.parent() {
                std::fs::create_dir_all(folder)?;
            }
            std::fs::File::create(part)
        }
        created => created,
    }
}

fn sidecar(part: &Path) -> PathBuf {
    let mut name = part.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// Where a part left by an earlier attempt for `url` can be continued from: only a part whose
/// first `written_bytes` still hash to what its sidecar recorded. A longer part is cut back to
/// that length; a damaged one is discarded. Blocking: it reads the part.
fn resume_point(part: &Path, url: &str) -> Option<Resume> {
    let record: PartRecord = serde_json::from_slice(&std::fs::read(sidecar(part)).ok()?).ok()?;
    if record.meta.url != url || record.written_bytes == 0 {
        return None;
    }
    match check_part(part, &record) {
        Ok(Some((hasher, head))) => Some(Resume {
            offset: record.written_bytes,
            meta: record.meta,
            hasher,
            head,
        }),
        Ok(None) => {
            tracing::warn!(
                url,
                part = %part.display(),
                "the part file no longer holds what was written to it; downloading from the start"
            );
            discard_part(part);
            None
        }
        Err(e) => {
            tracing::debug!(url, part = %part.display(), error = %e, "part file unreadable");
            discard_part(part);
            None
        }
    }
}

/// Hashes the first `record.written_bytes` of `part`: the hasher and head to continue with when
/// they match the record (the part is then cut to that length), `None` when they do not.
fn check_part(part: &Path, record: &PartRecord) -> std::io::Result<Option<(Sha256, Vec<u8>)>> {
    let file = std::fs::File::open(part)?;
    if file.metadata()?.len() < record.written_bytes {
        return Ok(None);
    }
    let mut hasher = Sha256::new();
    let mut head = Vec::new();
    let mut buffer = vec![0; 256 * 1024];
    let mut reader = file.take(record.written_bytes);
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        if head.len() < HEAD_BYTES {
            head.extend_from_slice(&buffer[..n.min(HEAD_BYTES - head.len())]);
        }
    }
    if hex::encode(hasher.clone().finalize()) != record.sha256 {
        return Ok(None);
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(part)?
        .set_len(record.written_bytes)?;
    Ok(Some((hasher, head)))
}

fn discard_sidecar(part: &Path) {
    let _ = std::fs::remove_file(sidecar(part));
}

fn discard_part(part: &Path) {
    let _ = std::fs::remove_file(part);
    discard_sidecar(part);
}

/// The URL's last path segment without its extension, for `{name}` in path templates.
fn file_stem(url: &url::Url) -> String {
    let last = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .unwrap_or_default();
    let decoded = percent_decode(last);
    match decoded.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_owned(),
        _ => decoded,
    }
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// A body in memory as the chunks the client received it in: not copied while it arrives, and
/// joined into one only when it came in several and is read whole.
#[derive(Default)]
struct Chunks {
    chunks: Vec<bytes::Bytes>,
    len: usize,
}

impl Chunks {
    fn push(&mut self, chunk: bytes::Bytes) {
        self.len += chunk.len();
        self.chunks.push(chunk);
    }

    fn len(&self) -> usize {
        self.len
    }

    /// The bytes as one chunk (joined first if they are in several).
    fn whole_bytes(&mut self) -> bytes::Bytes {
        if self.chunks.len() > 1 {
            let joined = self.chunks.concat();
            self.chunks = vec![joined.into()];
        }
        self.chunks.first().cloned().unwrap_or_default()
    }

    /// The bytes as one slice (joined first if they are in several).
    fn whole(&mut self) -> &[u8] {
        self.whole_bytes();
        self.chunks.first().map_or(&[], |chunk| chunk)
    }
}

/// A body being received: hashed as it arrives, kept in memory while small, spilled to the
/// part file when it grows.
struct Body {
    part: PathBuf,
    /// The whole length the server announced, if it did.
    expected: Option<u64>,
    meta: Option<PartMeta>,
    /// The first `HEAD_BYTES`, copied out once the body spills to disk (see [`Body::head`]).
    head: Vec<u8>,
    memory: Chunks,
    file: Option<std::fs::File>,
    hasher: Sha256,
    len: u64,
    sha256: Option<String>,
    resumed_from: Option<u64>,
    /// Whether a sidecar was written for this part (only parts on disk get one).
    has_sidecar: bool,
}

impl Body {
    fn new(part: PathBuf, expected: Option<u64>, meta: Option<PartMeta>) -> Self {
        Self {
            part,
            expected,
            meta,
            head: Vec::new(),
            memory: Chunks::default(),
            file: None,
            hasher: Sha256::new(),
            len: 0,
            sha256: None,
            resumed_from: None,
            has_sidecar: false,
        }
    }

    /// Continues the part file checked by [`resume_point`] where it ends.
    async fn resume(part: PathBuf, total: u64, resume: Resume) -> Result<Self, AttemptError> {
        let path = part.clone();
        let reopened = tokio::task::spawn_blocking(move || {
            std::fs::OpenOptions::new().append(true).open(&path)
        })
        .await
        .map_err(|e| Failure::new(FailureClass::Other, e.to_string()))?;
        let file = reopened.map_err(|source| AttemptError::Disk {
            path: part.clone(),
            source,
        })?;
        let mut body = Self::new(part, Some(total), Some(resume.meta));
        body.file = Some(file);
        body.hasher = resume.hasher;
        body.head = resume.head;
        body.len = resume.offset;
        body.resumed_from = Some(resume.offset);
        body.has_sidecar = true;
        Ok(body)
    }

    /// The body's first bytes (up to `HEAD_BYTES`), for sniffing and header parsing: kept apart
    /// once the body is on disk, read from memory while it is not (the whole body has been
    /// received: its chunks are joined).
    fn head(&mut self) -> &[u8] {
        if self.head.is_empty() {
            let memory = self.memory.whole();
            &memory[..memory.len().min(HEAD_BYTES)]
        } else {
            &self.head
        }
    }

    async fn push(&mut self, chunk: bytes::Bytes) -> Result<(), AttemptError> {
        self.hasher.update(&chunk);
        self.len += chunk.len() as u64;
        self.memory.push(chunk);
        if self.memory.len() > IN_MEMORY_BYTES {
            self.spill(true).await?;
        }
        Ok(())
    }

    /// Appends the in-memory bytes to the part file, created on first use. A `resumable` part
    /// (a large body still arriving) gets its sidecar; a small body written whole at the end does
    /// not need one: it is never resumed.
    async fn spill(&mut self, resumable: bool) -> Result<(), AttemptError> {
        for chunk in &self.memory.chunks {
            let take = (HEAD_BYTES - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        let data = std::mem::take(&mut self.memory).chunks;
        let path = self.part.clone();
        let file = self.file.take();
        // The sidecar follows the bytes: written after them, it never vouches for bytes that
        // are not on disk yet.
        let record = self
            .meta
            .clone()
            .filter(|_| resumable)
            .map(|meta| PartRecord {
                meta,
                written_bytes: self.len,
                sha256: hex::encode(self.hasher.clone().finalize()),
            });
        let result = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let mut file = match file {
                Some(f) => f,
                None => create_part(&path)?,
            };
            for chunk in &data {
                file.write_all(chunk)?;
            }
            if let Some(record) = &record {
                // Invariant: PartRecord is strings and a number; it always serializes.
                let json = serde_json::to_vec(record).expect("part record serializes");
                std::fs::write(sidecar(&path), json)?;
            }
            Ok(file)
        })
        .await;
        match result {
            Ok(Ok(file)) => {
                self.file = Some(file);
                self.has_sidecar |= resumable && self.meta.is_some();
                Ok(())
            }
            Ok(Err(source)) => Err(AttemptError::Disk {
                path: self.part.clone(),
                source,
            }),
            Err(e) => Err(Failure::new(FailureClass::Other, e.to_string()).into()),
        }
    }

    /// After a broken transfer: a part already on disk keeps what arrived (a later attempt
    /// resumes it); a body still in memory is dropped (small, cheaper to fetch again).
    async fn keep_for_resume(&mut self) {
        if self.file.is_some() && self.has_sidecar {
            if self.spill(true).await.is_err() {
                self.discard();
            }
            self.file = None;
        } else {
            self.discard();
        }
    }

    /// The perceptual hash of the whole body (see [`super::perceptual`]): decoded from memory
    /// while it is there, else from the part file (written out first).
    async fn perceptual_hash(&mut self, format: ImageFormat) -> Result<Option<u64>, AttemptError> {
        if self.file.is_none() {
            let bytes = self.memory.whole_bytes();
            return Ok(super::perceptual::hash_off_task(bytes, format).await);
        }
        self.finish().await?;
        Ok(super::perceptual::hash_file_off_task(self.part.clone(), format).await)
    }

    /// The sha256 (hex) of the whole body, which stays where it is (in memory).
    fn digest(&mut self) -> String {
        let sha256 = hex::encode(self.hasher.clone().finalize());
        self.sha256 = Some(sha256.clone());
        sha256
    }

    /// Writes what is left; returns the sha256 (hex). Idempotent.
    async fn finish(&mut self) -> Result<String, AttemptError> {
        if let Some(sha256) = &self.sha256 {
            return Ok(sha256.clone());
        }
        self.spill(false).await?;
        self.file = None;
        let sha256 = hex::encode(self.hasher.clone().finalize());
        self.sha256 = Some(sha256.clone());
        Ok(sha256)
    }

    fn discard(&mut self) {
        self.file = None;
        discard_part(&self.part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(reqwest::header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[tokio::test]
    async fn a_held_body_waits_while_the_budget_is_spent_and_goes_on_once_it_is_placed() {
        use futures_util::FutureExt;
        let budget = HoldBudget::new(4 * 1024);
        let first = budget.take(3 * 1024).await.expect("fits");
        let mut second = Box::pin(budget.take(2 * 1024));
        assert!(
            (&mut second).now_or_never().is_none(),
            "5 KiB do not fit in 4"
        );
        drop(first);
        assert!(
            second.now_or_never().flatten().is_some(),
            "placed: room again"
        );
        assert!(
            budget.take(1).now_or_never().flatten().is_some(),
            "a byte is a KiB"
        );
    }

    #[test]
    fn content_range_must_be_complete_and_consistent() {
        let cases = [
            ("bytes 100-199/200", Some((100, 200))),
            ("bytes 0-0/1", Some((0, 1))),
            ("bytes 100-199/*", None),
            ("bytes */200", None),
            ("bytes 200-100/300", None),
            ("bytes 100-200/200", None),
            ("items 1-2/3", None),
        ];
        for (value, expected) in cases {
            assert_eq!(
                content_range(&headers(&[(CONTENT_RANGE, value)])),
                expected,
                "{value}"
            );
        }
    }

    #[test]
    fn weak_etags_are_not_validators() {
        assert_eq!(
            validator(&headers(&[(ETAG, "\"abc\"")])),
            Some("\"abc\"".into())
        );
        let weak = headers(&[
            (ETAG, "W/\"abc\""),
            (LAST_MODIFIED, "Sun, 06 Nov 1994 08:49:37 GMT"),
        ]);
        assert_eq!(
            validator(&weak),
            Some("Sun, 06 Nov 1994 08:49:37 GMT".into())
        );
        assert_eq!(validator(&headers(&[(ETAG, "W/\"abc\"")])), None);
    }

    /// A part holding `bytes` and a sidecar recording `recorded` as written, for `url`.
    fn part_with(dir: &Path, bytes: &[u8], recorded: &[u8]) -> PathBuf {
        let part = dir.join("7.part");
        std::fs::write(&part, bytes).unwrap();
        let record = PartRecord {
            meta: PartMeta {
                url: "http://a.test/x.jpg".into(),
                validator: "\"v1\"".into(),
            },
            written_bytes: recorded.len() as u64,
            sha256: hex::encode(Sha256::digest(recorded)),
        };
        std::fs::write(sidecar(&part), serde_json::to_vec(&record).unwrap()).unwrap();
        part
    }

    fn offset(resume: Option<Resume>) -> Option<u64> {
        resume.map(|r| r.offset)
    }

    #[test]
    fn only_parts_with_a_sidecar_are_listed_as_resumable() {
        let dir = tempfile::tempdir().unwrap();
        let with_sidecar = part_with(dir.path(), b"12345", b"12345");
        assert_eq!(with_sidecar.file_name().unwrap(), "7.part");
        std::fs::write(dir.path().join("8.part"), b"no sidecar").unwrap();
        std::fs::write(dir.path().join("x.part.json"), b"{}").unwrap();
        assert_eq!(resumable_parts(dir.path()).unwrap(), [7]);
    }

    #[test]
    fn a_part_resumes_only_for_its_own_url() {
        let dir = tempfile::tempdir().unwrap();
        let part = part_with(dir.path(), b"12345", b"12345");
        assert_eq!(offset(resume_point(&part, "http://a.test/other.jpg")), None);
        assert_eq!(offset(resume_point(&part, "http://a.test/x.jpg")), Some(5));
        discard_part(&part);
        assert_eq!(offset(resume_point(&part, "http://a.test/x.jpg")), None);
        assert!(!sidecar(&part).exists());
    }

    #[test]
    fn a_part_resumes_only_while_it_holds_what_was_written() {
        let url = "http://a.test/x.jpg";
        let cases: [(&str, &[u8], Option<u64>); 4] = [
            ("intact", b"12345", Some(5)),
            ("a byte flipped", b"12x45", None),
            ("cut short", b"123", None),
            ("longer than recorded, cut back", b"1234567", Some(5)),
        ];
        for (name, bytes, expected) in cases {
            let dir = tempfile::tempdir().unwrap();
            let part = part_with(dir.path(), bytes, b"12345");
            assert_eq!(offset(resume_point(&part, url)), expected, "{name}");
            match expected {
                Some(len) => assert_eq!(std::fs::metadata(&part).unwrap().len(), len, "{name}"),
                None => assert!(!part.exists() && !sidecar(&part).exists(), "{name}"),
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let part = part_with(dir.path(), b"12345", b"12345");
        std::fs::write(sidecar(&part), b"\x00garbage").unwrap();
        assert_eq!(offset(resume_point(&part, url)), None, "a garbled sidecar");
    }
}
