//! A job: one profile's crawl and download running together in one process, over one state.
//!
//! Crawl and download are joined by the state database (durable) and the writer's
//! notifications (fast): the first images are stored while later pages are still fetched.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::crawl::{ChainOutcome, LinkTally, SitemapTally, crawl};
use crate::download::{DownloadError, Downloader};
use crate::engine::stages::{self, Driver, Stages};
use crate::input::{ImportError, import_list};
use crate::net::HttpClient;
use crate::net::session::{EnvValues, LoginError, Session, SessionError, resolve_download_env};
use crate::net::walls::Walls;
use crate::output::bucket::{BucketError, Destination};
use crate::output::{ExportSummary, Format};
use crate::profile::{DownloadSettings, Profile, SignedOut};
use crate::render::RenderError;
use crate::replay::Network;
use crate::state::{
    ImportCheckpoint, RobotsCache, STATE_DIR, State, StateError, StateWriter, WriterHandle,
};
use crate::telemetry::{
    Live, MetricsError, MetricsListener, MetricsServer, ProgressMode, ProgressReporter, RunSummary,
};

/// How to run a job.
#[derive(Debug, Clone)]
pub struct JobOptions {
    pub out: PathBuf,
    /// Forget all progress first.
    pub fresh: bool,
    pub progress: ProgressMode,
    /// Interval of plain progress lines.
    pub plain_every: Duration,
    /// Where requests go: to the network, also into a recording, or to a recording only.
    pub network: Network,
    /// Whether found images are downloaded; `false` only finds them (the download stage is
    /// not started).
    pub download: bool,
    /// Where to serve the Prometheus metrics of the run, if anywhere.
    pub metrics: Option<MetricsListener>,
    /// Stored images are asked again, only if they changed (`--recheck-images`).
    pub recheck_images: bool,
}

/// What a finished (or interrupted) job did.
#[derive(Debug)]
pub struct JobOutcome {
    pub summary: RunSummary,
    pub export: ExportSummary,
    pub out: PathBuf,
}

impl JobOutcome {
    /// Whether anything is recorded as failed (pages or images), or held back by a wall.
    pub fn has_failures(&self) -> bool {
        self.summary.after.failed > 0
            || self.summary.after.pages_failed > 0
            || self.summary.walled
            || self.export.missing_files > 0
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
    // Not transparent: the binary finds `StateError::Locked` and friends in the source chain
    // to exit 2 for them.
    #[error("cannot use the state of the output folder")]
    State(#[from] StateError),
    #[error(transparent)]
    Download(#[from] DownloadError),
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error("cannot start the browser")]
    Render(#[source] RenderError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Login(#[from] LoginError),
    #[error(transparent)]
    Bucket(#[from] BucketError),
}

/// What finds the images of a job.
#[derive(Debug)]
pub enum Source {
    /// Crawl the profile's pages.
    Crawl(Box<Profile>),
    /// Read a URL list (`column` names the URL column of CSV/TSV/JSONL lists).
    List { path: PathBuf, column: String },
    /// Nothing new: download what is pending (after `scrape retry`, say).
    Pending,
}

/// A job: its name (checked against the state), its download settings and its source.
#[derive(Debug)]
pub struct JobSpec {
    pub name: String,
    pub download: DownloadSettings,
    pub source: Source,
}

impl JobSpec {
    /// The job of crawling and downloading `profile`.
    pub fn crawl(profile: Profile) -> Self {
        Self {
            name: profile.name.clone(),
            download: profile.download.clone(),
            source: Source::Crawl(Box::new(profile)),
        }
    }
}

/// Runs `spec` to completion or until `cancel`; progress is resumed from the state in
/// `options.out`.
pub async fn run_job(
    mut spec: JobSpec,
    options: JobOptions,
    cancel: CancellationToken,
) -> Result<JobOutcome, JobError> {
    let began = Instant::now();
    let metrics_listener = match &options.metrics {
        Some(listener) => listener.take()?,
        None => None,
    };
    // Before anything is touched: a missing variable is the environment's error, not a page's.
    let env = match options.network {
        Network::Replay(_) => EnvValues::Redacted,
        _ => EnvValues::Read,
    };
    resolve_download_env(&mut spec.download, env)?;
    let session = match &mut spec.source {
        Source::Crawl(profile) => Session::start(profile, env)?,
        _ => Session::default(),
    };
    // A bucket keeps the state, part files and the open shard in a local folder of its own.
    let to = Destination::resolve(&options.out)?;
    let out = to.dir.clone();
    prepare_output(&out)?;
    if let Some(bucket) = &to.bucket {
        // Before anything is fetched: wrong credentials are the user's to fix, not a page's.
        bucket.check_writable(&cancel).await?;
        tracing::info!(bucket = %bucket.url(), state = %out.display(), "storing into a bucket");
    }
    let state = if options.fresh {
        // Forget only once the state is ours: a run still using the folder keeps its files.
        let state = State::open_fresh(&out, &spec.name, &spec.download.dataset)?;
        forget_outputs(&out)?;
        state
    } else {
        State::open(&out, &spec.name, Some(&spec.download.dataset))?
    };
    if options.recheck_images && options.download {
        let queued = state.queue_rechecks()?;
        tracing::info!(images = queued, "stored images queued to be asked again");
    }
    let before = state.counters()?;
    let run_cancel = cancel.child_token();
    let (writer, writer_thread) = StateWriter::start(
        &state,
        Format::of(&spec.download.dataset).placement(&to, &state)?,
        spec.download.dataset.near_duplicates,
        run_cancel.clone(),
    )?;
    let client = HttpClient::new(&spec.download, &session, options.network.clone())
        .map_err(JobError::Client)?;
    let live = Arc::new(Live::default());
    let snapshots =
        crate::state::live::Snapshots::start(state.clone(), out.clone(), writer.counters(), {
            let live = Arc::clone(&live);
            move || live.host_windows()
        });
    let reporter = ProgressReporter::start(
        options.progress,
        writer.counters(),
        Arc::clone(&live),
        options.plain_every,
    );
    let metrics = metrics_listener.map(|listener| {
        MetricsServer::start(listener, &spec.name, writer.counters(), Arc::clone(&live))
    });
    let (found_all_tx, found_all) = watch::channel(false);

    // Shared by pages and images: a host that answered either with a sign-in wall is paused,
    // or signed in again where the profile says how.
    let rules = match &spec.source {
        Source::Crawl(profile) => profile.session.signed_out.clone(),
        _ => SignedOut::default(),
    };
    let walls = stages::signed_in(rules, &session, &client).await?;
    // Not even built without downloads: it holds a writer handle, which keeps the writer alive.
    let download = if options.download {
        let downloader = Downloader::new(
            client.clone(),
            spec.download.clone(),
            &spec.name,
            out.join(STATE_DIR).join("parts"),
            state.clone(),
            writer.clone(),
            Arc::clone(&live),
        )
        .with_walls(Arc::clone(&walls));
        tokio::spawn(downloader.run(found_all, run_cancel.clone()))
    } else {
        tokio::spawn(async { Ok(()) })
    };
    let found = match spec.source {
        Source::Crawl(profile) => {
            let stages = CrawlStages {
                client: &client,
                session: &session,
                walls: &walls,
                state: &state,
                writer: &writer,
                live: &live,
                cancel: &run_cancel,
            };
            crawl_profile(Arc::from(profile), spec.download.retries, stages).await
        }
        Source::List { path, column } => import_list(&path, &column, &state, &writer, &run_cancel)
            .await
            .map(|c| vec![(path.display().to_string(), describe_import(&c))])
            .map_err(JobError::from),
        Source::Pending => Ok(Vec::new()),
    };
    let _ = found_all_tx.send(true);
    if found.is_err() {
        run_cancel.cancel();
    }
    let downloaded = download
        .await
        .unwrap_or_else(|e| Err(DownloadError::Stopped(e.to_string())));
    let finished = found.is_ok()
        && downloaded.is_ok()
        && options.download
        && !run_cancel.is_cancelled()
        // Read from the database: the flushes before this point are committed, while the
        // writer's published totals may lag a moment behind them.
        && state.counters().is_ok_and(|c| c.pending() == 0);
    // A job with nothing left pending finishes its open output (the last WebDataset shard);
    // an interrupted one leaves it open for the rerun to continue.
    let flushed = if finished {
        writer.seal().await
    } else {
        writer.flush().await
    };
    reporter.finish().await;
    snapshots.finish().await;
    if let Some(metrics) = metrics {
        metrics.finish().await;
    }

    let fatal = writer.take_fatal();
    drop(writer);
    let _ = tokio::task::spawn_blocking(move || writer_thread.join()).await;
    if let Some(e) = fatal {
        return Err(e.into());
    }
    let mut sources = found?;
    sources.extend(walls.describe());
    downloaded?;
    flushed?;

    let format = Format::of(&spec.download.dataset);
    let export = {
        let (state, out, files_here) = (state.clone(), out.clone(), to.bucket.is_none());
        tokio::task::spawn_blocking(move || format.export(&state, &out, files_here))
            .await
            .map_err(|_| StateError::TaskLost)??
    };
    if let Some(bucket) = &to.bucket {
        bucket
            .put_files(&out, &format.exported_files(&export))
            .await?;
    }
    if let Some(listed) = &export.run_list {
        state.mark_run_listed(listed.number)?;
    }
    let after = state.counters()?;
    if after.pending() == 0 {
        // Nothing is in flight any more: leftover parts belong to nobody.
        let _ = std::fs::remove_dir_all(out.join(STATE_DIR).join("parts"));
    }
    let interrupted = cancel.is_cancelled();
    if !interrupted {
        state.mark_run_finished()?;
    }
    Ok(JobOutcome {
        summary: RunSummary {
            before,
            after,
            elapsed: began.elapsed(),
            failure_classes: export.failure_classes.clone(),
            sources,
            interrupted,
            walled: walls.any(),
            run_list: export.run_list,
        },
        export,
        out: options.out,
    })
}

/// What the crawl of one process's run is built on: shared with its download.
struct CrawlStages<'a> {
    client: &'a HttpClient,
    session: &'a Session,
    walls: &'a Arc<Walls>,
    state: &'a State,
    writer: &'a WriterHandle,
    live: &'a Arc<Live>,
    cancel: &'a CancellationToken,
}

/// The crawl of `profile` on the page stages the engine builds for one process: its pages
/// walked, then the summary's lines of what it found.
async fn crawl_profile(
    profile: Arc<Profile>,
    retries: u32,
    run: CrawlStages<'_>,
) -> Result<Vec<(String, String)>, JobError> {
    let driver = Driver {
        retries,
        robots_store: Some(Arc::new(RobotsCache::new(
            run.state.clone(),
            run.writer.clone(),
        ))),
    };
    let Stages { source, api } = Stages::start(
        &profile,
        run.client,
        run.session,
        Arc::clone(run.walls),
        driver,
    )
    .await
    .map_err(JobError::Render)?;
    run.live.watch_hosts(Arc::clone(source.hosts()));
    let crawled = crawl(
        Arc::clone(&profile),
        &source,
        api,
        run.state.clone(),
        run.writer.clone(),
        Arc::clone(run.live),
        run.cancel.clone(),
    )
    .await;
    let (checked, unchanged) = source.pages_checked();
    if checked > 0 {
        // For `scrape status`: what the last refresh found unchanged.
        let state = run.state.clone();
        let _ =
            tokio::task::spawn_blocking(move || state.record_run_checks(checked, unchanged)).await;
    }
    let (static_pages, browser_pages) = source.pages_by_way();
    let opted_out = source.opted_out();
    source.close().await;
    let crawled = crawled?;
    let mut lines = describe_chains(crawled.chains);
    if !profile.levels.is_empty() || !profile.sitemap.is_empty() {
        lines.push(("linked pages".to_owned(), describe_links(crawled.links)));
    }
    if !profile.sitemap.is_empty() {
        lines.push((
            "sitemaps".to_owned(),
            describe_sitemaps(crawled.links.sitemaps),
        ));
    }
    if let Some(opted_out) = opted_out.describe() {
        lines.push(("opted out".to_owned(), opted_out));
    }
    if profile.uses_browser() {
        lines.push((
            "pages".to_owned(),
            format!("{static_pages} over plain HTTP, {browser_pages} rendered in the browser"),
        ));
    }
    if checked > 0 {
        lines.push((
            "refresh".to_owned(),
            format!("{checked} pages checked, {unchanged} unchanged (304)"),
        ));
    }
    Ok(lines)
}

/// Chains named one by one in the summary at most; more are counted by how they ended, with
/// the first few that did not end named.
const CHAINS_NAMED: usize = 5;

/// The summary's lines for the crawl's chains: one per chain for a few, else a count by
/// outcome and the chains that stopped early (failed or interrupted), a few of them by name.
fn describe_chains(chains: Vec<(String, ChainOutcome)>) -> Vec<(String, String)> {
    if chains.len() <= CHAINS_NAMED {
        return chains
            .into_iter()
            .map(|(start, outcome)| (start, describe_chain(outcome)))
            .collect();
    }
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    let mut stopped = Vec::new();
    for (start, outcome) in chains.iter() {
        let kind = match outcome {
            ChainOutcome::Ended(reason) => format!("ended ({})", reason.describe()),
            ChainOutcome::Failed { .. } => "stopped at a failed page".to_owned(),
            ChainOutcome::Interrupted => "interrupted".to_owned(),
        };
        *counts.entry(kind).or_default() += 1;
        if !matches!(outcome, ChainOutcome::Ended(_)) {
            stopped.push((start.clone(), outcome.clone()));
        }
    }
    let tally: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let mut lines = vec![(format!("{} chains", chains.len()), tally.join(", "))];
    let shown = CHAINS_NAMED - 2;
    let more = stopped.len().saturating_sub(shown);
    lines.extend(
        stopped
            .into_iter()
            .take(shown)
            .map(|(start, outcome)| (start, describe_chain(outcome))),
    );
    if more > 0 {
        lines.push((
            format!("{more} more"),
            "stopped early (`scrape status` lists every chain)".to_owned(),
        ));
    }
    lines
}

fn describe_links(links: LinkTally) -> String {
    let mut text = format!("{} done this run", links.done);
    if links.failed > 0 {
        text.push_str(&format!(
            ", {} failed (the next run retries them)",
            links.failed
        ));
    }
    if links.interrupted > 0 {
        text.push_str(&format!(", {} interrupted", links.interrupted));
    }
    text
}

fn describe_sitemaps(sitemaps: SitemapTally) -> String {
    let mut text = format!(
        "{} read this run: {} pages and {} images listed",
        sitemaps.read, sitemaps.pages, sitemaps.images
    );
    if sitemaps.skipped > 0 {
        text.push_str(&format!(", {} entries skipped", sitemaps.skipped));
    }
    if sitemaps.failed > 0 {
        text.push_str(&format!(
            ", {} failed (the next run retries them)",
            sitemaps.failed
        ));
    }
    text
}

fn describe_chain(outcome: ChainOutcome) -> String {
    match outcome {
        ChainOutcome::Ended(reason) => format!("ended ({})", reason.describe()),
        ChainOutcome::Failed { page, error } => {
            format!("stopped at {page}: {error} (the next run retries it)")
        }
        ChainOutcome::Interrupted => "interrupted (the next run continues)".to_owned(),
    }
}

fn describe_import(c: &ImportCheckpoint) -> String {
    let mut text = format!(
        "{} lines read: {} URLs, {} duplicates",
        c.lines_done, c.added, c.duplicates
    );
    for (reason, n) in &c.skipped {
        text.push_str(&format!(", {n} {reason}"));
    }
    if !c.complete {
        text.push_str(" (interrupted: the next run continues)");
    }
    text
}

/// Creates the output folder and proves it writable.
fn prepare_output(out: &Path) -> Result<(), JobError> {
    let unwritable = |source| JobError::OutputNotWritable {
        path: out.to_owned(),
        source,
    };
    std::fs::create_dir_all(out.join(STATE_DIR)).map_err(unwritable)?;
    let probe = out.join(STATE_DIR).join(".write-test");
    std::fs::write(&probe, b"ok").map_err(unwritable)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// For `--fresh`, once the state is emptied: removes partial files and the derived lists.
/// Stored images stay and are reused by name.
fn forget_outputs(out: &Path) -> Result<(), JobError> {
    let parts = out.join(STATE_DIR).join("parts");
    match std::fs::remove_dir_all(&parts) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(JobError::OutputNotWritable {
                path: parts,
                source,
            });
        }
    }
    for name in [crate::output::MANIFEST, crate::output::FAILURES] {
        let _ = std::fs::remove_file(out.join(name));
    }
    Ok(())
}
