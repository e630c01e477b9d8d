//! Object storage as the output: `--out s3://bucket/prefix` (or `[download] out`) puts each
//! verified image in the bucket under the name its path template gives it, each finished
//! WebDataset shard as an object, and the exports at the end, on any S3-compatible store (AWS,
//! MinIO, Ceph, R2). The endpoint, region and credentials are taken as AWS tools take them:
//! `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, or the
//! profile `AWS_PROFILE` names in `~/.aws/credentials` and `~/.aws/config`.
//!
//! The state stays local ([`Destination`]): redb in a folder of its own per bucket and prefix
//! (one process), or Redis (workers); part files and the shard being written live beside it.
//!
//! Exactly once: an image object is put create-only (`If-None-Match: *`), so no name is ever
//! written twice, and a name that already holds the same bytes (a batch a kill cut off before
//! its commit, another worker) counts as stored, checked by size and SHA-256. A put is atomic
//! and a multipart upload is visible only once completed: an object is whole or absent.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::store::Stored;
pub use crate::bucket_url::BucketUrl;
use crate::state::{Payload, Placement, STATE_DIR, Sample, ShardRecord, StateError, StoredFile};

/// Files above this size are uploaded in parts of this size.
const PART_BYTES: usize = 16 * 1024 * 1024;

/// Image puts one process keeps in flight while the state writer waits for a batch's.
const UPLOADS_IN_FLIGHT: usize = 32;

/// Where a job's output goes: the local folder of its state (for a bucket, also of its part
/// files and the shard being written) and the bucket its images go to, if any.
#[derive(Debug, Clone)]
pub struct Destination {
    pub dir: PathBuf,
    pub bucket: Option<Arc<Bucket>>,
}

impl Destination {
    /// `out` as the user gave it: a folder, or a bucket URL (connected to, not yet checked).
    pub fn resolve(out: &Path) -> Result<Self, BucketError> {
        match bucket_of(out)? {
            None => Ok(Self {
                dir: out.to_owned(),
                bucket: None,
            }),
            Some(url) => Ok(Self {
                dir: state_dir(&url)?,
                bucket: Some(Arc::new(Bucket::connect(url)?)),
            }),
        }
    }

    /// The folder of the state of `out`, without connecting to a bucket (for commands that
    /// read the state alone).
    pub fn state_folder(out: &Path) -> Result<PathBuf, BucketError> {
        match bucket_of(out)? {
            None => Ok(out.to_owned()),
            Some(url) => state_dir(&url),
        }
    }
}

/// The local folder of the state of `url`: `$SCRAPE_STATE_HOME` (else
/// `$XDG_STATE_HOME/scrape`, else `~/.local/state/scrape`), then `s3/BUCKET/PREFIX`.
fn state_dir(url: &BucketUrl) -> Result<PathBuf, BucketError> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = var("SCRAPE_STATE_HOME")
        .or_else(|| var("XDG_STATE_HOME").map(|d| d.join("scrape")))
        .or_else(|| var("HOME").map(|d| d.join(".local/state/scrape")))
        .ok_or_else(|| BucketError::NoStateHome {
            url: url.to_string(),
        })?;
    let mut dir = home.join("s3").join(&url.bucket);
    if !url.prefix.is_empty() {
        dir.push(&url.prefix);
    }
    Ok(dir)
}

/// The bucket `out` names, if it is a bucket URL.
fn bucket_of(out: &Path) -> Result<Option<BucketUrl>, BucketError> {
    BucketUrl::of(out)
        .transpose()
        .map_err(|reason| BucketError::Url {
            text: out.display().to_string(),
            reason,
        })
}

/// Why the bucket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BucketError {
    #[error("`{text}` is not a bucket URL: {reason}")]
    Url { text: String, reason: String },
    #[error("no folder for the state of `{url}`: set SCRAPE_STATE_HOME (or HOME)")]
    NoStateHome { url: String },
    #[error("cannot use bucket `{url}`")]
    Connect {
        url: String,
        #[source]
        source: object_store::Error,
    },
    // The store's answer is said short (`said`), not chained: its error repeats the whole
    // XML answer at each level.
    #[error(
        "bucket `{url}` did not take a test write ({}): check the endpoint (AWS_ENDPOINT_URL), \
         the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and what \
         they may write", said(.error)
    )]
    Refused {
        url: String,
        error: object_store::Error,
    },
    /// Ctrl-C came while the bucket was asked to take a test write: nothing was fetched.
    #[error("interrupted while bucket `{url}` was asked to take a test write; nothing was fetched")]
    Interrupted { url: String },
    #[error("cannot store `{object}`: {}", said(.error))]
    Put {
        object: String,
        error: object_store::Error,
    },
    #[error("cannot read `{object}`: {}", said(.error))]
    Get {
        object: String,
        error: object_store::Error,
    },
    #[error("`{object}` already holds other bytes")]
    Taken { object: String },
    #[error("`{name}` is not a valid object name")]
    Name {
        name: String,
        #[source]
        source: object_store::path::Error,
    },
    #[error("cannot read `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl BucketError {
    /// Whether what the user gave is wrong (the URL, the credentials, the permissions).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Self::Url { .. }
                | Self::NoStateHome { .. }
                | Self::Connect { .. }
                | Self::Refused { .. }
        )
    }
}

impl From<BucketError> for StateError {
    fn from(e: BucketError) -> Self {
        StateError::Output(Box::new(e))
    }
}

/// A bucket (and prefix) of an S3-compatible store.
#[derive(Debug)]
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    url: BucketUrl,
}

impl Bucket {
    /// The bucket at `url`, configured from the environment as AWS tools are.
    pub fn connect(url: BucketUrl) -> Result<Self, BucketError> {
        Self::connect_with(url, &[])
    }

    /// [`Bucket::connect`], with `settings` (`object_store`'s `aws_*` config keys, e.g.
    /// `aws_endpoint`) over what the environment says.
    pub fn connect_with(url: BucketUrl, settings: &[(&str, &str)]) -> Result<Self, BucketError> {
        // The client's TLS takes the process's crypto provider: ring, as every client of the
        // tool (the binary installs it first; a library user may not have).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&url.bucket);
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if env("AWS_ACCESS_KEY_ID").is_none() {
            let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
            for (key, value) in shared_profile(&profile) {
                if let Ok(key) = key.parse() {
                    builder = builder.with_config(key, value);
                }
            }
        }
        for (key, value) in settings {
            let key = key.parse().map_err(|source| BucketError::Connect {
                url: url.to_string(),
                source,
            })?;
            builder = builder.with_config(key, *value);
        }
        let endpoint = settings
            .iter()
            .find(|(key, _)| key.starts_with("aws_endpoint"))
            .map(|(_, value)| (*value).to_owned())
            .or_else(|| env("AWS_ENDPOINT_URL_S3"))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .or_else(|| env("AWS_ENDPOINT"));
        if endpoint.is_some_and(|e| e.starts_with("http://")) {
            // The user named a plain-HTTP endpoint (a store on the local network, a test).
            builder = builder.with_allow_http(true);
        }
        let store = builder.build().map_err(|source| BucketError::Connect {
            url: url.to_string(),
            source,
        })?;
        Ok(Self {
            store: Arc::new(store),
            url,
        })
    }

    pub fn url(&self) -> &BucketUrl {
        &self.url
    }

    /// The URL of the object at `path` (relative to the prefix), for messages.
    pub fn object_url(&self, path: &str) -> String {
        format!("{}/{path}", self.url)
    }

    fn key(&self, path: &str) -> Result<Key, BucketError> {
        let name = if self.url.prefix.is_empty() {
            path.to_owned()
        } else {
            format!("{}/{path}", self.url.prefix)
        };
        Key::parse(&name).map_err(|source| BucketError::Name { name, source })
    }

    /// Proves the bucket takes writes with these credentials: a small object is put
    /// create-only and removed. Called before anything is fetched; Ctrl-C (`cancel`) stops it
    /// at once, an endpoint that does not answer being waited for as long as the client's
    /// retries last.
    pub async fn check_writable(&self, cancel: &CancellationToken) -> Result<(), BucketError> {
        let refused = |error| BucketError::Refused {
            url: self.url.to_string(),
            error,
        };
        let key = self.key(&format!(
            "{STATE_DIR}-write-test-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ))?;
        let check = async {
            self.store
                .put_opts(&key, PutPayload::from_static(b"ok"), create_only())
                .await
                .map_err(refused)?;
            self.store.delete(&key).await.map_err(refused)
        };
        tokio::select! {
            checked = check => checked,
            () = cancel.cancelled() => Err(BucketError::Interrupted {
                url: self.url.to_string(),
            }),
        }
    }

    /// Puts `bytes` (whose SHA-256 is `sha256`) at `path`, create-only: a name that already
    /// holds the same bytes counts as stored, other bytes are [`BucketError::Taken`].
    pub async fn put_image(
        &self,
        path: &str,
        bytes: Bytes,
        sha256: &str,
    ) -> Result<Stored, BucketError> {
        let key = self.key(path)?;
        let len = bytes.len() as u64;
        match self
            .store
            .put_opts(&key, PutPayload::from(bytes), create_only())
            .await
        {
            Ok(_) => Ok(Stored::New),
            Err(object_store::Error::AlreadyExists { .. }) => match self.hash(path).await? {
                Some((size, hash)) if size == len && hash == sha256 => Ok(Stored::AlreadyThere),
                _ => Err(BucketError::Taken {
                    object: self.object_url(path),
                }),
            },
            Err(error) => Err(BucketError::Put {
                object: self.object_url(path),
                error,
            }),
        }
    }

    /// Puts the file at `file` as `path`, replacing what is there: in parts above
    /// [`PART_BYTES`], visible only once whole.
    pub async fn put_file(&self, path: &str, file: &Path) -> Result<(), BucketError> {
        let key = self.key(path)?;
        let read = |source| BucketError::Read {
            path: file.to_owned(),
            source,
        };
        let put = |error| BucketError::Put {
            object: self.object_url(path),
            error,
        };
        let mut reader = tokio::fs::File::open(file).await.map_err(read)?;
        let len = reader.metadata().await.map_err(read)?.len();
        if len <= PART_BYTES as u64 {
            let bytes = tokio::fs::read(file).await.map_err(read)?;
            self.store
                .put(&key, PutPayload::from(bytes))
                .await
                .map_err(put)?;
            return Ok(());
        }
        let upload = self.store.put_multipart(&key).await.map_err(put)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut chunk = vec![0; PART_BYTES];
        loop {
            let n = match reader.read(&mut chunk).await {
                Ok(n) => n,
                Err(e) => {
                    let _ = writer.abort().await;
                    return Err(read(e));
                }
            };
            if n == 0 {
                break;
            }
            if let Err(e) = writer.wait_for_capacity(4).await {
                let _ = writer.abort().await;
                return Err(put(e));
            }
            writer.write(&chunk[..n]);
        }
        writer.finish().await.map(drop).map_err(put)
    }

    /// The object at `path` as the store answers it; `None` when there is none.
    async fn get(&self, path: &str) -> Result<Option<object_store::GetResult>, BucketError> {
        match self.store.get(&self.key(path)?).await {
            Ok(found) => Ok(Some(found)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(self.get_error(path, error)),
        }
    }

    fn get_error(&self, path: &str, error: object_store::Error) -> BucketError {
        BucketError::Get {
            object: self.object_url(path),
            error,
        }
    }

    /// The size and SHA-256 of the object at `path`, read whole; `None` when there is none.
    pub async fn hash(&self, path: &str) -> Result<Option<(u64, String)>, BucketError> {
        let get = |error| self.get_error(path, error);
        let Some(found) = self.get(path).await? else {
            return Ok(None);
        };
        let mut stream = found.into_stream();
        let (mut hasher, mut size) = (Sha256::new(), 0u64);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(get)?;
            size += chunk.len() as u64;
            hasher.update(&chunk);
        }
        Ok(Some((size, hex::encode(hasher.finalize()))))
    }

    /// Downloads the object at `path` into `file`; `false` when there is none.
    pub async fn fetch_to(&self, path: &str, file: &Path) -> Result<bool, BucketError> {
        let Some(found) = self.get(path).await? else {
            return Ok(false);
        };
        let bytes = found
            .bytes()
            .await
            .map_err(|error| self.get_error(path, error))?;
        tokio::fs::write(file, bytes)
            .await
            .map_err(|source| BucketError::Read {
                path: file.to_owned(),
                source,
            })?;
        Ok(true)
    }

    /// Removes the object at `path`, if there is one.
    pub async fn remove(&self, path: &str) -> Result<(), BucketError> {
        let key = self.key(path)?;
        match self.store.delete(&key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(BucketError::Put {
                object: self.object_url(path),
                error,
            }),
        }
    }

    /// Puts the files `names` of the folder `dir` under the same names, replacing what is
    /// there; a name `dir` does not hold is left out.
    pub async fn put_files(&self, dir: &Path, names: &[String]) -> Result<(), BucketError> {
        for name in names {
            let file = dir.join(name);
            if file.exists() {
                self.put_file(name, &file).await?;
            }
        }
        Ok(())
    }
}

/// What the store said, short: the S3 error's code and message when its answer has them (a
/// refused signature, a missing bucket), else the innermost cause (a refused connection).
fn said(error: &object_store::Error) -> String {
    let text = error.to_string();
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{name}>"))? + start;
        Some(&text[start..end])
    };
    match (tag("Code"), tag("Message")) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => {
            let mut inner: &dyn std::error::Error = error;
            while let Some(cause) = inner.source() {
                inner = cause;
            }
            inner.to_string()
        }
    }
}

fn create_only() -> PutOptions {
    PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    }
}

/// The state writer's placement for images stored as objects (`files` and `parquet` into a
/// bucket): each image is put in the background as it is placed, and the batch waits for its
/// puts before it is committed, so an image recorded as stored is always in the bucket. A put
/// that fails fails the batch: its images stay pending and the run stops; the rerun puts them
/// again (a name already holding their bytes counts as stored).
pub struct Uploads {
    bucket: Arc<Bucket>,
    runtime: Handle,
    in_flight: Arc<Semaphore>,
    pending: Vec<JoinHandle<Result<Stored, BucketError>>>,
}

impl Uploads {
    pub fn new(bucket: Arc<Bucket>, runtime: Handle) -> Self {
        Self {
            bucket,
            runtime,
            in_flight: Arc::new(Semaphore::new(UPLOADS_IN_FLIGHT)),
            pending: Vec::new(),
        }
    }
}

impl Placement for Uploads {
    fn place(
        &mut self,
        body: Payload,
        file: &mut StoredFile,
        _sample: Sample<'_>,
    ) -> Result<(), StateError> {
        let (bucket, in_flight) = (Arc::clone(&self.bucket), Arc::clone(&self.in_flight));
        let (path, sha256) = (file.path.clone(), file.sha256.clone());
        self.pending.push(self.runtime.spawn(async move {
            let _slot = in_flight.acquire_owned().await;
            match body {
                // Kept until the put ends: the body's share of the memory budget with it.
                Payload::Memory(held) => bucket.put_image(&path, held.bytes.clone(), &sha256).await,
                Payload::Part(part) => {
                    let bytes = tokio::fs::read(&part).await;
                    let _ = tokio::fs::remove_file(&part).await;
                    let bytes = bytes.map_err(|source| BucketError::Read { path: part, source })?;
                    bucket.put_image(&path, bytes.into(), &sha256).await
                }
            }
        }));
        Ok(())
    }

    fn take_records(&mut self) -> Result<Vec<ShardRecord>, StateError> {
        let mut first_error = None;
        for task in self.pending.drain(..) {
            match self.runtime.block_on(task) {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(StateError::from(e));
                }
                Err(_) => {
                    first_error.get_or_insert(StateError::TaskLost);
                }
            }
        }
        first_error.map_or(Ok(Vec::new()), Err)
    }
}

/// Puts finished shards into the bucket from the folder they were finished in, in the
/// background (up to [`SHARDS_IN_FLIGHT`] at once, the state writer going on meanwhile), and
/// removes them there once they are: a finished shard still in the folder is one not yet put,
/// and the rerun puts it.
#[derive(Debug)]
pub struct ShardPublisher {
    bucket: Arc<Bucket>,
    runtime: Handle,
    putting: VecDeque<JoinHandle<Result<(), StateError>>>,
}

/// Shards put at once; one more waits for the oldest.
pub const SHARDS_IN_FLIGHT: usize = 4;

impl ShardPublisher {
    pub fn new(bucket: Arc<Bucket>, runtime: Handle) -> Self {
        Self {
            bucket,
            runtime,
            putting: VecDeque::new(),
        }
    }

    /// Starts putting the files `names` of `dir` (a finished shard: its index first, then
    /// its tar), then removing them from `dir`, the last first: while the last is in `dir`,
    /// the shard is not known to be put. Names `dir` does not hold were put already. A put
    /// that failed before is this call's error.
    pub fn publish(&mut self, dir: &Path, names: &[String]) -> Result<(), StateError> {
        while self
            .putting
            .front()
            .is_some_and(|put| put.is_finished() || self.putting.len() >= SHARDS_IN_FLIGHT)
            && let Some(put) = self.putting.pop_front()
        {
            self.runtime
                .block_on(put)
                .map_err(|_| StateError::TaskLost)??;
        }
        let (bucket, dir, names) = (Arc::clone(&self.bucket), dir.to_owned(), names.to_vec());
        self.putting.push_back(self.runtime.spawn(async move {
            bucket.put_files(&dir, &names).await?;
            tokio::task::spawn_blocking(move || remove_put(&dir, &names))
                .await
                .map_err(|_| StateError::TaskLost)?
        }));
        Ok(())
    }

    /// Waits for every shard being put; the first error of them.
    pub fn wait(&mut self) -> Result<(), StateError> {
        let mut first_error = None;
        for put in self.putting.drain(..) {
            if let Err(e) = self
                .runtime
                .block_on(put)
                .map_err(|_| StateError::TaskLost)
                .and_then(|put| put)
            {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Removes the files `names` of `dir`, put into the bucket, the last first.
fn remove_put(dir: &Path, names: &[String]) -> Result<(), StateError> {
    for name in names.iter().rev() {
        let file = dir.join(name);
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StateError::Io { path: file, source }),
        }
    }
    Ok(())
}

/// The settings of `profile` in the shared AWS files (`AWS_SHARED_CREDENTIALS_FILE` or
/// `~/.aws/credentials`, `AWS_CONFIG_FILE` or `~/.aws/config`), as `aws_*` config keys.
fn shared_profile(profile: &str) -> Vec<(String, String)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default()
    };
    let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config = file("AWS_CONFIG_FILE", "config");
    profile_settings(&credentials, &config, profile)
}

/// The settings of `profile` in the text of the shared credentials and config files: its
/// section of each (`[NAME]` in credentials; `[profile NAME]`, or `[default]`, in config),
/// keys named as object_store's `aws_*` config keys. Credentials win over config.
fn profile_settings(credentials: &str, config: &str, profile: &str) -> Vec<(String, String)> {
    const KEYS: [(&str, &str); 5] = [
        ("aws_access_key_id", "aws_access_key_id"),
        ("aws_secret_access_key", "aws_secret_access_key"),
        ("aws_session_token", "aws_session_token"),
        ("region", "aws_region"),
        ("endpoint_url", "aws_endpoint"),
    ];
    let config_section = if profile == "default" {
        "default".to_owned()
    } else {
        format!("profile {profile}")
    };
    let mut found: Vec<(String, String)> = Vec::new();
    for (text, section) in [(credentials, profile.to_owned()), (config, config_section)] {
        for (key, value) in section_of(text, &section) {
            let Some((_, name)) = KEYS.iter().find(|(k, _)| *k == key) else {
                continue;
            };
            if !found.iter().any(|(n, _)| n == name) {
                found.push(((*name).to_owned(), value));
            }
        }
    }
    found
}

/// The `key = value` lines of `[section]` in an INI text.
fn section_of(text: &str, section: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut lines = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            continue;
        }
        if inside && let Some((key, value)) = line.split_once('=') {
            lines.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stores_answer_is_said_short() {
        let answer = "403 Forbidden: <?xml version=\"1.0\"?><Error><Code>AccessDenied</Code>\
                      <Message>Access Denied</Message></Error>";
        let refused = object_store::Error::Generic {
            store: "S3",
            source: answer.into(),
        };
        assert_eq!(said(&refused), "AccessDenied: Access Denied");
        let error = BucketError::Put {
            object: "s3://b/x.jpg".into(),
            error: refused,
        };
        assert_eq!(
            error.to_string(),
            "cannot store `s3://b/x.jpg`: AccessDenied: Access Denied"
        );
        let unreachable = object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::other("Connection refused (os error 111)")),
        };
        assert_eq!(said(&unreachable), "Connection refused (os error 111)");
    }

    #[test]
    fn a_profile_is_read_from_the_credentials_and_config_files() {
        let credentials = "[default]\naws_access_key_id = A\naws_secret_access_key = S\n\n\
                           [work]\naws_access_key_id=WA\naws_secret_access_key=WS\n";
        let config = "[default]\nregion = eu-west-1\n[profile work]\n# a comment\nregion = auto\n\
                      endpoint_url = http://127.0.0.1:9000\naws_access_key_id = ignored\n";
        let work = profile_settings(credentials, config, "work");
        assert_eq!(
            work,
            [
                ("aws_access_key_id", "WA"),
                ("aws_secret_access_key", "WS"),
                ("aws_region", "auto"),
                ("aws_endpoint", "http://127.0.0.1:9000"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        let default = profile_settings(credentials, config, "default");
        assert!(default.contains(&("aws_region".to_owned(), "eu-west-1".to_owned())));
        assert!(profile_settings(credentials, config, "none").is_empty());
    }
}
