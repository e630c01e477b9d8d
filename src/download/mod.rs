//! Download: fetches pending images with a global and a per-host limit, retries transient
//! failures with back-off, and hands verified part files to the state writer.
//!
//! Work streams out of the state database in sequence order, a batch at a time, so memory does
//! not grow with the number of URLs. The writer gives each file its final name; this stage never
//! does, so a file under a final name is always complete and recorded.

mod fetch_image;
pub mod verify;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::profile::DownloadSettings;
use crate::state::{DownloadResult, Failure, State, StateError, WriterHandle};
use crate::telemetry::Live;
use crate::transport::{Failed, FailureClass, backoff};
use fetch_image::{AttemptError, fetch_image};

/// Pending items read from the database at a time.
const BATCH: usize = 512;

/// Why the download stage stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("cannot write to `{path}`")]
    Disk {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Everything the download stage needs.
pub struct Downloader {
    pub client: reqwest::Client,
    pub settings: Arc<DownloadSettings>,
    pub profile: Arc<str>,
    /// Where part files live while they download.
    pub parts: PathBuf,
    pub state: State,
    pub writer: WriterHandle,
    pub live: Arc<Live>,
}

impl Downloader {
    /// Downloads until nothing is pending and `crawl_done` is true, or until `cancel`.
    pub async fn run(
        self,
        mut crawl_done: watch::Receiver<bool>,
        cancel: CancellationToken,
    ) -> Result<(), DownloadError> {
        std::fs::create_dir_all(&self.parts).map_err(|source| DownloadError::Disk {
            path: self.parts.clone(),
            source,
        })?;
        let this = Arc::new(self);
        let global = Arc::new(Semaphore::new(this.settings.concurrency));
        let mut hosts: HashMap<String, Arc<Semaphore>> = HashMap::new();
        let fatal: Arc<Mutex<Option<DownloadError>>> = Arc::new(Mutex::new(None));
        let new_work = this.writer.new_work();
        let mut tasks = JoinSet::new();
        let mut cursor = 0u64;
        'outer: loop {
            if cancel.is_cancelled() {
                break;
            }
            let batch = {
                let state = this.state.clone();
                tokio::task::spawn_blocking(move || state.pending_from(cursor, BATCH))
                    .await
                    .map_err(|_| StateError::WriterGone)??
            };
            if batch.is_empty() {
                let finished = *crawl_done.borrow_and_update();
                if finished && tasks.is_empty() {
                    // Results are queued before tasks end; make sure they are committed.
                    this.writer.flush().await?;
                    let state = this.state.clone();
                    let more = tokio::task::spawn_blocking(move || state.pending_from(cursor, 1))
                        .await
                        .map_err(|_| StateError::WriterGone)??;
                    if more.is_empty() {
                        break;
                    }
                    continue;
                }
                tokio::select! {
                    () = new_work.notified() => {}
                    Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                    _ = crawl_done.changed(), if !finished => {}
                    () = cancel.cancelled() => break,
                }
                continue;
            }
            for (seq, url) in batch {
                cursor = seq + 1;
                let permit = tokio::select! {
                    p = Arc::clone(&global).acquire_owned() => p.map_err(|_| StateError::WriterGone)?,
                    () = cancel.cancelled() => break 'outer,
                };
                while tasks.try_join_next().is_some() {}
                let host = url::Url::parse(&url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned))
                    .unwrap_or_default();
                let per_host = Arc::clone(
                    hosts
                        .entry(host)
                        .or_insert_with(|| Arc::new(Semaphore::new(this.settings.per_host))),
                );
                let this = Arc::clone(&this);
                let cancel = cancel.clone();
                let fatal = Arc::clone(&fatal);
                tasks.spawn(async move {
                    let _global = permit;
                    let Ok(_host) = per_host.acquire_owned().await else {
                        return;
                    };
                    tokio::select! {
                        result = this.download(seq, &url) => {
                            if let Err(e) = result {
                                if let Ok(mut slot) = fatal.lock() { slot.get_or_insert(e); }
                                cancel.cancel();
                            }
                        }
                        () = cancel.cancelled() => {}
                    }
                });
            }
        }
        while tasks.join_next().await.is_some() {}
        if let Some(e) = fatal.lock().ok().and_then(|mut slot| slot.take()) {
            return Err(e);
        }
        Ok(())
    }

    /// Downloads one image with retries and queues its result for the writer.
    async fn download(&self, seq: u64, url: &str) -> Result<(), DownloadError> {
        let part = self.parts.join(format!("{seq}.part"));
        let Ok(parsed) = url::Url::parse(url) else {
            let failure = Failed::new(FailureClass::Other, "not a valid URL");
            return self.record_failure(url, failure, 0).await;
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match fetch_image(
                &self.client,
                &self.settings,
                &self.profile,
                &parsed,
                part.clone(),
                &self.live,
            )
            .await
            {
                Ok(fetched) => {
                    let result = DownloadResult::Stored {
                        url: url.to_owned(),
                        part: fetched.part,
                        file: fetched.file,
                        attempts: attempt,
                    };
                    self.writer.finish_download(result).await?;
                    return Ok(());
                }
                Err(AttemptError::Disk { path, source }) => {
                    return Err(DownloadError::Disk { path, source });
                }
                Err(AttemptError::Failed(failed))
                    if failed.class.is_transient() && attempt <= self.settings.retries =>
                {
                    let wait =
                        backoff(attempt, Duration::from_millis(200), Duration::from_secs(30));
                    tracing::debug!(url, attempt, error = %failed.detail, "download failed; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                }
                Err(AttemptError::Failed(failed)) => {
                    return self.record_failure(url, failed, attempt).await;
                }
            }
        }
    }

    async fn record_failure(
        &self,
        url: &str,
        failed: Failed,
        attempts: u32,
    ) -> Result<(), DownloadError> {
        tracing::debug!(url, class = %failed.class.name(), error = %failed.detail, "download failed");
        let failure = Failure {
            class: failed.class.name(),
            detail: failed.detail,
        };
        self.writer
            .finish_download(DownloadResult::Failed {
                url: url.to_owned(),
                failure,
                attempts,
            })
            .await?;
        Ok(())
    }
}
