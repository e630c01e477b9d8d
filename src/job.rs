//! A job: one profile's crawl and download running together in one process, over one state.
//!
//! Crawl and download are joined by the state database (durable) and the writer's
//! notifications (fast): the first images are stored while later pages are still fetched.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::crawl::{ChainOutcome, crawl};
use crate::download::{DownloadError, Downloader};
use crate::fetch::PageFetcher;
use crate::profile::Profile;
use crate::state::{ExportSummary, STATE_DIR, State, StateError, StateWriter, export};
use crate::telemetry::{Live, ProgressMode, ProgressReporter, RunSummary};
use crate::transport::build_client;

/// How to run a job.
#[derive(Debug, Clone)]
pub struct JobOptions {
    pub out: PathBuf,
    /// Forget all progress first.
    pub fresh: bool,
    pub progress: ProgressMode,
    /// Interval of plain progress lines.
    pub plain_every: Duration,
}

/// What a finished (or interrupted) job did.
#[derive(Debug)]
pub struct JobOutcome {
    pub summary: RunSummary,
    pub export: ExportSummary,
    pub out: PathBuf,
}

impl JobOutcome {
    /// Whether anything is recorded as failed (pages or images).
    pub fn has_failures(&self) -> bool {
        self.summary.after.failed > 0 || self.summary.after.pages_failed > 0
    }
}

/// Why a job could not run or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("output folder `{path}` is not writable")]
    OutputNotWritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Download(#[from] DownloadError),
}

/// Runs `profile` to completion or until `cancel`; progress is resumed from the state in
/// `options.out`.
pub async fn run_job(
    profile: Profile,
    options: JobOptions,
    cancel: CancellationToken,
) -> Result<JobOutcome, JobError> {
    let began = Instant::now();
    let out = options.out.clone();
    prepare_output(&out, options.fresh)?;
    let state = State::open(&out, &profile.name)?;
    let before = state.counters()?;
    let run_cancel = cancel.child_token();
    let (writer, writer_thread) = StateWriter::start(&state, &out, run_cancel.clone())?;
    let client = build_client(&profile.download).map_err(JobError::Client)?;
    let live = Arc::new(Live::default());
    let reporter = ProgressReporter::start(
        options.progress,
        writer.counters(),
        Arc::clone(&live),
        options.plain_every,
    );
    let profile = Arc::new(profile);
    let (crawl_done_tx, crawl_done) = watch::channel(false);

    let downloader = Downloader {
        client: client.clone(),
        settings: Arc::new(profile.download.clone()),
        profile: Arc::from(profile.name.as_str()),
        parts: out.join(STATE_DIR).join("parts"),
        state: state.clone(),
        writer: writer.clone(),
        live: Arc::clone(&live),
    };
    let download = tokio::spawn(downloader.run(crawl_done, run_cancel.clone()));
    let fetcher = PageFetcher::new(client, profile.download.retries);
    let crawled = crawl(
        Arc::clone(&profile),
        fetcher,
        state.clone(),
        writer.clone(),
        run_cancel.clone(),
    )
    .await;
    let _ = crawl_done_tx.send(true);
    let downloaded = download.await.unwrap_or(Ok(()));
    let flushed = writer.flush().await;
    reporter.finish().await;

    let fatal = writer.take_fatal();
    drop(writer);
    let _ = tokio::task::spawn_blocking(move || writer_thread.join()).await;
    if let Some(e) = fatal {
        return Err(e.into());
    }
    let chains = crawled?;
    downloaded?;
    flushed?;

    let export = {
        let (state, out) = (state.clone(), out.clone());
        tokio::task::spawn_blocking(move || export(&state, &out))
            .await
            .map_err(|_| StateError::WriterGone)??
    };
    let after = state.counters()?;
    if after.pending() == 0 {
        // Nothing is in flight any more: leftover parts belong to nobody.
        let _ = std::fs::remove_dir_all(out.join(STATE_DIR).join("parts"));
    }
    let failure_classes = state.failure_classes()?;
    let interrupted =
        cancel.is_cancelled() || chains.iter().any(|(_, o)| *o == ChainOutcome::Interrupted);
    let chains = chains
        .into_iter()
        .map(|(start, outcome)| {
            let text = match outcome {
                ChainOutcome::Ended(reason) => format!("ended ({})", reason.describe()),
                ChainOutcome::Failed { page, error } => {
                    format!("stopped at {page}: {error} (the next run retries it)")
                }
                ChainOutcome::Interrupted => "interrupted (the next run continues)".to_owned(),
            };
            (start, text)
        })
        .collect();
    Ok(JobOutcome {
        summary: RunSummary {
            before,
            after,
            elapsed: began.elapsed(),
            failure_classes,
            chains,
            interrupted,
        },
        export,
        out,
    })
}

/// Creates the output folder and proves it writable; with `fresh`, forgets earlier progress
/// (the state, partial files and the derived lists; stored images stay and are reused by name).
fn prepare_output(out: &Path, fresh: bool) -> Result<(), JobError> {
    let unwritable = |source| JobError::OutputNotWritable {
        path: out.to_owned(),
        source,
    };
    std::fs::create_dir_all(out.join(STATE_DIR)).map_err(unwritable)?;
    let probe = out.join(STATE_DIR).join(".write-test");
    std::fs::write(&probe, b"ok").map_err(unwritable)?;
    let _ = std::fs::remove_file(&probe);
    if fresh {
        for name in ["state.redb", "parts"] {
            let path = out.join(STATE_DIR).join(name);
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            match removed {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(JobError::OutputNotWritable { path, source }),
            }
        }
        for name in [crate::state::MANIFEST, crate::state::FAILURES] {
            let _ = std::fs::remove_file(out.join(name));
        }
    }
    Ok(())
}
