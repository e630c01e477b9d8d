//! Download: fetches pending images with a global and a per-host limit, retries transient
//! failures with back-off, and hands verified part files to the state writer.
//!
//! Work streams out of the state database in sequence order, a batch at a time, so memory does
//! not grow with the number of URLs. The writer gives each file its final name; this stage never
//! does, so a file under a final name is always complete and recorded.

mod fetch_image;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::net::hosts::Hosts;
use crate::net::retry::RetryPolicy;
use crate::net::{Failed, FailureClass, HttpClient};
use crate::profile::DownloadSettings;
use crate::state::{DownloadResult, Failure, State, StateError, WriterHandle};
use crate::telemetry::Live;
use fetch_image::{AttemptError, fetch_image};

/// Folders part files are spread over.
const PART_FOLDERS: u64 = 64;

/// Pending items read from the database at a time.
const BATCH: usize = 512;

/// Why the download stage stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("the download stage stopped unexpectedly: {0}")]
    Stopped(String),
    #[error("cannot write to `{path}`")]
    Disk {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A download task that panicked stops the stage with an error: the run must not report
/// "done" while its images stay pending.
fn note_panic(
    joined: Result<(), tokio::task::JoinError>,
    fatal: &Mutex<Option<DownloadError>>,
    cancel: &CancellationToken,
) {
    let Err(error) = joined else { return };
    if !error.is_panic() {
        return;
    }
    let message = panic_message(error.into_panic());
    if let Ok(mut slot) = fatal.lock() {
        slot.get_or_insert(DownloadError::Stopped(format!(
            "a download task panicked: {message}"
        )));
    }
    cancel.cancel();
}

/// The text of a panic's payload (`panic!` with a literal or a formatted message).
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// Everything the download stage needs.
pub struct Downloader {
    client: HttpClient,
    settings: DownloadSettings,
    /// The job's name, for `{profile}` in path templates.
    profile: String,
    /// Where part files live while they download.
    parts: PathBuf,
    state: State,
    writer: WriterHandle,
    live: Arc<Live>,
    /// Per-host limits and pace.
    hosts: Hosts,
    /// Attempts in flight at once: `settings.concurrency`.
    active: Semaphore,
}

impl Downloader {
    /// A download stage for job `profile`, keeping part files in `parts`.
    pub fn new(
        client: HttpClient,
        settings: DownloadSettings,
        profile: &str,
        parts: PathBuf,
        state: State,
        writer: WriterHandle,
        live: Arc<Live>,
    ) -> Self {
        Self {
            hosts: Hosts::new(settings.per_host, settings.per_host_rps),
            active: Semaphore::new(settings.concurrency),
            client,
            settings,
            profile: profile.to_owned(),
            parts,
            state,
            writer,
            live,
        }
    }

    /// Downloads until nothing is pending and `crawl_done` is true, or until `cancel`.
    pub async fn run(
        self,
        mut crawl_done: watch::Receiver<bool>,
        cancel: CancellationToken,
    ) -> Result<(), DownloadError> {
        for folder in 0..PART_FOLDERS {
            let dir = self.parts.join(format!("{folder:02x}"));
            std::fs::create_dir_all(&dir)
                .map_err(|source| DownloadError::Disk { path: dir, source })?;
        }
        let this = Arc::new(self);
        // Tasks alive at once (some may be waiting out a back-off); each attempt also takes an
        // `active` permit, so sleeping tasks never hold a connection slot.
        let slots = Arc::new(Semaphore::new(this.settings.concurrency.saturating_mul(4)));
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
                    .map_err(|_| StateError::TaskLost)??
            };
            if batch.is_empty() {
                let finished = *crawl_done.borrow_and_update();
                if finished && tasks.is_empty() {
                    // Results are queued before tasks end; make sure they are committed.
                    this.writer.flush().await?;
                    let state = this.state.clone();
                    let more = tokio::task::spawn_blocking(move || state.pending_from(cursor, 1))
                        .await
                        .map_err(|_| StateError::TaskLost)??;
                    if more.is_empty() {
                        break;
                    }
                    continue;
                }
                tokio::select! {
                    () = new_work.notified() => {}
                    Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                        note_panic(joined, &fatal, &cancel);
                    }
                    _ = crawl_done.changed(), if !finished => {}
                    () = cancel.cancelled() => break,
                }
                continue;
            }
            for (seq, url) in batch {
                cursor = seq + 1;
                let slot = tokio::select! {
                    p = Arc::clone(&slots).acquire_owned() => p.map_err(|_| StateError::TaskLost)?,
                    () = cancel.cancelled() => break 'outer,
                };
                while let Some(joined) = tasks.try_join_next() {
                    note_panic(joined, &fatal, &cancel);
                }
                let this = Arc::clone(&this);
                let cancel = cancel.clone();
                let fatal = Arc::clone(&fatal);
                tasks.spawn(async move {
                    let _slot = slot;
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
        while let Some(joined) = tasks.join_next().await {
            note_panic(joined, &fatal, &cancel);
        }
        if let Some(e) = fatal.lock().ok().and_then(|mut slot| slot.take()) {
            return Err(e);
        }
        Ok(())
    }

    /// Downloads one image with retries and queues its result for the writer.
    async fn download(&self, seq: u64, url: &str) -> Result<(), DownloadError> {
        // Parts spread over PART_FOLDERS folders: creating files in one folder serialises on
        // that folder's lock.
        let part = self
            .parts
            .join(format!("{:02x}", seq % PART_FOLDERS))
            .join(format!("{seq}.part"));
        let Ok(parsed) = url::Url::parse(url) else {
            let failure = Failed::new(FailureClass::Other, "not a valid URL");
            return self.record_failure(url, failure, 0).await;
        };
        let host = self.hosts.get(&parsed);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let fetched = {
                let _host = host.acquire().await;
                // Invariant: the semaphore is never closed.
                let _active = self.active.acquire().await.expect("active semaphore open");
                fetch_image(
                    &self.client,
                    &self.settings,
                    &self.profile,
                    &parsed,
                    part.clone(),
                    &self.live,
                )
                .await
            };
            match fetched {
                Ok(fetched) => {
                    host.succeeded();
                    if let Some(offset) = fetched.resumed_from {
                        tracing::debug!(url, offset, "download resumed with Range");
                    }
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
                Err(AttemptError::Failed(failed)) => {
                    if failed.is_throttle() {
                        host.throttled(failed.retry_after);
                        tracing::debug!(url, interval = ?host.interval(), "host slowed down");
                    }
                    let Some(wait) =
                        RetryPolicy::new(self.settings.retries).next_wait(attempt, &failed)
                    else {
                        return self.record_failure(url, failed, attempt).await;
                    };
                    tracing::debug!(url, attempt, error = %failed.detail, "download failed; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_download_task_that_panics_stops_the_stage_with_an_error() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async { panic!("overflow when adding duration to instant") });
        let fatal = Mutex::new(None);
        let cancel = CancellationToken::new();
        while let Some(joined) = tasks.join_next().await {
            note_panic(joined, &fatal, &cancel);
        }
        assert!(cancel.is_cancelled());
        let error = fatal.lock().unwrap().take().expect("an error");
        assert!(
            error.to_string().contains("overflow when adding"),
            "{error}"
        );
    }
}
