//! One attempt at one image: request, stream to a part file while hashing, verify.

use std::io::Write;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::verify::{ImageFormat, ImageInfo, VerifyError, check_dimensions, inspect};
use crate::profile::{DownloadSettings, PathValues};
use crate::state::StoredFile;
use crate::telemetry::Live;
use crate::transport::{Failed, FailureClass, classify};

/// Bytes kept in memory for sniffing and header parsing.
const HEAD_BYTES: usize = 256 * 1024;
/// Bodies up to this size are collected in memory and written with one blocking call: per-file
/// syscalls, not bytes, dominate small-image downloads.
const IN_MEMORY_BYTES: usize = 2 * 1024 * 1024;

/// Why an attempt ended without a file.
#[derive(Debug)]
pub enum AttemptError {
    /// Recorded against the image; retried first when transient.
    Failed(Failed),
    /// The output folder cannot be written: the run must stop.
    Disk {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<Failed> for AttemptError {
    fn from(f: Failed) -> Self {
        Self::Failed(f)
    }
}

/// A verified body waiting in its part file.
pub struct Fetched {
    pub part: PathBuf,
    pub file: StoredFile,
}

/// Downloads `url` into `part`, verifying it against the profile's rules.
pub async fn fetch_image(
    client: &reqwest::Client,
    settings: &DownloadSettings,
    profile: &str,
    url: &url::Url,
    part: PathBuf,
    live: &Live,
) -> Result<Fetched, AttemptError> {
    let response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| classify(&e))?;
    let status = response.status();
    if !status.is_success() {
        let code = status.as_u16();
        return Err(Failed::new(FailureClass::Http(code), format!("HTTP {status}")).into());
    }
    let declared = response.content_length();
    if let Some(length) = declared.filter(|l| *l > settings.max_bytes) {
        return Err(too_large(length, settings.max_bytes).into());
    }
    let final_url = response.url().clone();
    let mut body = Body::new(part);
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| classify(&e))?;
        live.add_bytes(chunk.len() as u64);
        if body.len + chunk.len() as u64 > settings.max_bytes {
            body.discard();
            return Err(too_large(body.len + chunk.len() as u64, settings.max_bytes).into());
        }
        body.push(&chunk).await?;
    }
    if let Some(length) = declared.filter(|l| *l != body.len) {
        body.discard();
        return Err(Failed::new(
            FailureClass::Truncated,
            format!("got {} of {length} bytes", body.len),
        )
        .into());
    }
    let whole = body.len as usize <= body.head.len();
    let info = match inspect(&body.head, whole, &settings.verify) {
        Ok(info) => info,
        Err(VerifyError::HeaderBeyondHead { .. }) => {
            let format = super::verify::sniff(&body.head).map_err(|e| verify_failed(&e))?;
            body.finish().await?;
            measure_on_disk(&body.part, format, settings).await?
        }
        Err(e) => {
            body.discard();
            return Err(verify_failed(&e).into());
        }
    };
    let bytes = body.len;
    let sha256 = body.finish().await?;
    let path = settings.path.render(&PathValues {
        sha256: &sha256,
        ext: info.format.extension(),
        host: final_url.host_str().unwrap_or_default(),
        name: &file_stem(&final_url),
        profile,
    });
    Ok(Fetched {
        part: body.part,
        file: StoredFile {
            path,
            sha256,
            bytes,
            content_type: info.format.content_type().to_owned(),
            width: info.width,
            height: info.height,
        },
    })
}

fn too_large(length: u64, max: u64) -> Failed {
    Failed::new(
        FailureClass::TooLarge,
        format!("{length} bytes is over the {max} byte limit"),
    )
}

fn verify_failed(error: &VerifyError) -> Failed {
    let class = match error {
        VerifyError::TooSmall { .. } => FailureClass::TooSmall,
        VerifyError::TooManyPixels { .. } => FailureClass::TooLarge,
        _ => FailureClass::NotAnImage,
    };
    Failed::new(class, error.to_string())
}

async fn measure_on_disk(
    part: &Path,
    format: ImageFormat,
    settings: &DownloadSettings,
) -> Result<ImageInfo, AttemptError> {
    let path = part.to_owned();
    let size = tokio::task::spawn_blocking(move || imagesize::size(&path))
        .await
        .map_err(|e| Failed::new(FailureClass::Other, e.to_string()))?
        .map_err(|e| {
            Failed::new(
                FailureClass::NotAnImage,
                format!("{format} header unreadable: {e}"),
            )
        })?;
    check_dimensions(format, size.width, size.height, &settings.verify)
        .map_err(|e| verify_failed(&e).into())
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
    url::form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map_or_else(|| text.to_owned(), |(_, v)| v.into_owned())
}

/// A body being received: hashed as it arrives, kept in memory while small, spilled to the
/// part file when it grows.
struct Body {
    part: PathBuf,
    head: Vec<u8>,
    memory: Vec<u8>,
    file: Option<std::fs::File>,
    hasher: Sha256,
    len: u64,
    sha256: Option<String>,
}

impl Body {
    fn new(part: PathBuf) -> Self {
        Self {
            part,
            head: Vec::new(),
            memory: Vec::new(),
            file: None,
            hasher: Sha256::new(),
            len: 0,
            sha256: None,
        }
    }

    async fn push(&mut self, chunk: &[u8]) -> Result<(), AttemptError> {
        self.hasher.update(chunk);
        self.len += chunk.len() as u64;
        if self.head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        self.memory.extend_from_slice(chunk);
        if self.memory.len() > IN_MEMORY_BYTES {
            self.spill().await?;
        }
        Ok(())
    }

    /// Appends the in-memory bytes to the part file (created on first use).
    async fn spill(&mut self) -> Result<(), AttemptError> {
        let data = std::mem::take(&mut self.memory);
        let path = self.part.clone();
        let file = self.file.take();
        let result = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let mut file = match file {
                Some(f) => f,
                None => std::fs::File::create(&path)?,
            };
            file.write_all(&data)?;
            Ok(file)
        })
        .await;
        match result {
            Ok(Ok(file)) => {
                self.file = Some(file);
                Ok(())
            }
            Ok(Err(source)) => Err(AttemptError::Disk {
                path: self.part.clone(),
                source,
            }),
            Err(e) => Err(Failed::new(FailureClass::Other, e.to_string()).into()),
        }
    }

    /// Writes what is left; returns the sha256 (hex). Idempotent.
    async fn finish(&mut self) -> Result<String, AttemptError> {
        if let Some(sha256) = &self.sha256 {
            return Ok(sha256.clone());
        }
        self.spill().await?;
        self.file = None;
        let sha256 = hex::encode(self.hasher.clone().finalize());
        self.sha256 = Some(sha256.clone());
        Ok(sha256)
    }

    fn discard(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.part);
    }
}
