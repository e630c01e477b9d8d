//! A worker: reads pages and images of one job from Redis and processes them with the same
//! code a one-process run uses (page source, analysis, image transfer, verification), then
//! commits each effect atomically with the acknowledgement of its entry.
//!
//! Pages and images are two loops over the two streams, each with its own limit of tasks in
//! flight (`[crawl] concurrency`, `[download] concurrency`). Every lease a task holds (its
//! stream entry, its request to a host) is renewed while the task runs, so only a worker that
//! died or lost Redis has its work reclaimed by others.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::ClusterError;
use super::item::{ImageItem, Item, PageItem};
use super::keys::Stream;
use super::ledger::{EntryPage, is_wall_class};
use super::queue::{Entry, ImageCommitted, ImageEffect, ImageOutcome, JobQueue};
use super::shards::{WorkerShard, finish_orphans};
use crate::download::fetch_image::{AttemptError, Part, fetch_image};
use crate::download::resize::resize_fetched;
use crate::engine::source::PageSource;
use crate::engine::stages::{self, Driver, Stages};
use crate::engine::{
    ApiReply, Fetched, PagePlace, PageStep, PageYield, api_images, ends_on_missing, page_step,
    read_api_reply,
};
use crate::fetch::PageFailure;
use crate::fetch::api::ApiFetcher;
use crate::net::hosts::host_of;
use crate::net::hosts::{HostLimits, START_WINDOW};
use crate::net::retry::{Gate, RetryPolicy, Stopped, Turn, backoff, with_retries};
use crate::net::robots::TdmRepGate;
use crate::net::session::{EnvValues, Session, resolve_download_env};
use crate::net::walls::Asked;
use crate::net::{Failure, FailureClass, HttpClient};
use crate::output::bucket::{Bucket, BucketError, Destination};
use crate::output::store::{StoreError, store_create_only};
use crate::output::{Format, WorkerStorage};
use crate::paginate::json_cursor::{self, ApiReading};
use crate::paginate::resume::{self, AfterExpiry};
use crate::paginate::{EndReason, NextPage, PagePosition};
use crate::profile::{DownloadSettings, JsonCursor, Pagination, Profile};
use crate::replay::Network;
use crate::state::{
    FailureRecord, Held, ImageRecord, ImageStatus, PageCommitted, PageLedger, PageSeen, PageUnit,
    STATE_DIR, Sample, ShardRecord, StoredFile, commit_page, image_step,
};
use crate::telemetry::Live;
use scrape_core::fate::{ImageFate, image_fate};

/// How a worker runs.
#[derive(Clone)]
pub struct WorkerOptions {
    /// The output folder every worker shares; into a bucket, this worker's own folder of part
    /// files.
    pub out: PathBuf,
    /// The bucket images are put in (`--out s3://...`), if any.
    pub bucket: Option<Arc<Bucket>>,
    /// An entry not renewed for this long is reclaimed by another worker.
    pub lease: Duration,
    /// An item delivered more often than this goes to the dead-letter stream.
    pub max_deliveries: u64,
    /// Keep waiting for work once the job is finished, instead of exiting.
    pub keep_waiting: bool,
    /// What is in flight in this worker, for its progress display.
    pub live: Arc<Live>,
}

impl WorkerOptions {
    /// The defaults of `scrape worker` for a worker storing into `to`: a 30 s lease, 5
    /// deliveries, exit when the job is finished.
    pub fn new(to: Destination) -> Self {
        Self {
            out: to.dir,
            bucket: to.bucket,
            lease: Duration::from_secs(30),
            max_deliveries: 5,
            keep_waiting: false,
            live: Arc::new(Live::default()),
        }
    }
}

/// What one worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerSummary {
    pub pages: u64,
    pub pages_failed: u64,
    pub images: u64,
    pub images_failed: u64,
    /// Entries it moved to the dead-letter stream.
    pub dead: u64,
    /// Entries it found done already (redelivered after their commit).
    pub already_done: u64,
}

#[derive(Default)]
struct Tally {
    pages: AtomicU64,
    pages_failed: AtomicU64,
    images: AtomicU64,
    images_failed: AtomicU64,
    dead: AtomicU64,
    already_done: AtomicU64,
}

/// Runs a worker of `profile`'s job until the job is finished (or `cancel`).
pub async fn run_worker(
    mut profile: Profile,
    queue: JobQueue,
    options: WorkerOptions,
    cancel: CancellationToken,
) -> Result<WorkerSummary, ClusterError> {
    resolve_download_env(&mut profile.download, EnvValues::Read)?;
    let session = Session::start(&mut profile, EnvValues::Read)?;
    let settings = profile.download.clone();
    let client =
        HttpClient::new(&settings, &session, Network::Live).map_err(ClusterError::Client)?;
    let queue = queue.with_readers().await?;
    // Each worker signs in for itself, and again when a page meets a sign-in wall. One attempt
    // per fetch: the worker tries again, each attempt in a job-wide turn of its host.
    let walls = stages::signed_in(profile.session.signed_out.clone(), &session, &client).await?;
    let driver = Driver {
        retries: 0,
        robots_store: None,
    };
    let Stages { source, api } = Stages::start(&profile, &client, &session, walls, driver)
        .await
        .map_err(ClusterError::Render)?;
    let all_parts = options.out.join(STATE_DIR).join("parts");
    remove_stale_parts(&queue, &all_parts).await?;
    let parts = all_parts.join(queue.consumer());
    std::fs::create_dir_all(&parts).map_err(|source| ClusterError::Disk {
        path: parts.clone(),
        source,
    })?;
    let storage = Format::of(&settings.dataset)
        .for_workers(options.bucket.as_deref())
        .map_err(ClusterError::Unsupported)?;
    if let Some(bucket) = &options.bucket {
        // Before anything is fetched: wrong credentials are the user's to fix, not a page's.
        bucket
            .check_writable(&cancel)
            .await
            .map_err(ClusterError::Bucket)?;
    }
    let shard = match storage {
        WorkerStorage::Files => None,
        WorkerStorage::Shards { shard_size } => {
            let finished = finish_orphans(&queue, &options.out, options.lease).await?;
            if finished > 0 {
                tracing::info!(
                    shards = finished,
                    "finished the shards of workers that stopped"
                );
            }
            Some(WorkerShard::new(&options.out, shard_size, options.lease))
        }
    };
    let levels = profile
        .levels
        .keys()
        .filter_map(|name| Some((name.clone(), Arc::new(profile.for_level(name)?))))
        .collect();
    let worker = Arc::new(Worker {
        page_slots: Arc::new(Semaphore::new(profile.crawl.concurrency)),
        image_slots: Arc::new(Semaphore::new(settings.concurrency)),
        profile: Arc::new(profile),
        levels,
        source,
        api,
        tdmrep: TdmRepGate::new(client.clone()),
        client,
        settings,
        queue: queue.clone(),
        parts,
        shard,
        live: Arc::clone(&options.live),
        options,
        in_flight: Mutex::new(HashMap::new()),
        held: Mutex::new(HashMap::new()),
        successes: Mutex::new(HashMap::new()),
        tokens: AtomicU64::new(0),
        tally: Tally::default(),
        cancel: cancel.clone(),
    });
    queue.heartbeat().await?;
    let renewing = tokio::spawn(Arc::clone(&worker).renew_leases());
    let beating = tokio::spawn(heartbeat(queue.clone()));
    let trimming = tokio::spawn(trim_streams(queue.clone()));
    let (pages, images) = tokio::join!(
        Arc::clone(&worker).run_stream(Stream::Pages),
        Arc::clone(&worker).run_stream(Stream::Images),
    );
    renewing.abort();
    beating.abort();
    trimming.abort();
    // What the last commits left in the streams goes too, so a finished job keeps none.
    if let Err(e) = queue.trim().await {
        tracing::debug!(error = %e, "cannot trim the job's streams");
    }
    // This worker's shard is finished as it is, whether the job is done or the worker stops.
    let sealed = match &worker.shard {
        Some(shard) => shard.finish(&queue).await,
        None => Ok(()),
    };
    let tally = &worker.tally;
    let summary = WorkerSummary {
        pages: tally.pages.load(Ordering::Relaxed),
        pages_failed: tally.pages_failed.load(Ordering::Relaxed),
        images: tally.images.load(Ordering::Relaxed),
        images_failed: tally.images_failed.load(Ordering::Relaxed),
        dead: tally.dead.load(Ordering::Relaxed),
        already_done: tally.already_done.load(Ordering::Relaxed),
    };
    if let Ok(worker) = Arc::try_unwrap(worker) {
        worker.source.close().await;
    }
    // Its leases are not waited for: they are given back, or dropped as soon as needed.
    if let Err(e) = queue.farewell().await {
        tracing::debug!(error = %e, "cannot say this worker stops");
    }
    pages?;
    images?;
    sealed?;
    if !cancel.is_cancelled() {
        remove_stale_parts(&queue, &all_parts).await?;
        // This worker's own folder, if it is empty now.
        let _ = std::fs::remove_dir(all_parts.join(queue.consumer()));
    }
    Ok(summary)
}

/// Keeps this worker's liveness key set (see [`crate::cluster::queue::ALIVE`]) until aborted.
async fn heartbeat(queue: JobQueue) {
    let mut tick = tokio::time::interval(super::queue::ALIVE / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = queue.heartbeat().await {
            tracing::debug!(error = %e, "cannot renew this worker's liveness");
        }
    }
}

/// How often a worker drops the stream entries every worker is done with: a command a second
/// per worker, not one per item.
const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Drops the entries of the job's streams that every worker is done with (acknowledged), every
/// [`TRIM_EVERY`], until aborted: a job's streams hold what is in flight or waiting, not every
/// item it ever had.
async fn trim_streams(queue: JobQueue) {
    let mut tick = tokio::time::interval(TRIM_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = queue.trim().await {
            tracing::debug!(error = %e, "cannot trim the job's streams");
        }
    }
}

/// Removes the part files in `root` (one folder per worker, `<entry id>.part` and its
/// `.part.json`) whose image entry is pending no more: committed or dead-lettered, so no
/// worker resumes them. A killed worker's parts stay only while its entries wait to be taken
/// over; its folder stays, empty (another worker of that name may be using it). The files are listed before the pending entries are read: a file made meanwhile
/// belongs to an entry that is pending by then, so no live task's file is taken for stale.
async fn remove_stale_parts(queue: &JobQueue, root: &Path) -> Result<(), ClusterError> {
    let listed: Vec<(PathBuf, String)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|worker| {
            std::fs::read_dir(worker.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|file| {
            let name = file.file_name().to_string_lossy().into_owned();
            let id = name.split_once(".part")?.0.to_owned();
            Some((file.path(), id))
        })
        .collect();
    if listed.is_empty() {
        return Ok(());
    }
    let pending = queue.pending_ids(Stream::Images).await?;
    let mut removed = 0;
    for (path, id) in listed {
        if !pending.contains(&id) && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(removed, "part files of entries no longer pending removed");
    }
    Ok(())
}

struct Worker {
    profile: Arc<Profile>,
    /// The profile as it applies to each level's pages.
    levels: HashMap<String, Arc<Profile>>,
    source: PageSource,
    /// `kind = "json_cursor"`: the API chains' pages are asked for with it.
    api: Option<ApiFetcher>,
    /// Each origin's TDMRep file, asked before its first image.
    tdmrep: TdmRepGate,
    client: HttpClient,
    settings: DownloadSettings,
    queue: JobQueue,
    /// This worker's part files.
    parts: PathBuf,
    /// `format = "webdataset"`: the shard this worker appends to.
    shard: Option<WorkerShard>,
    options: WorkerOptions,
    live: Arc<Live>,
    page_slots: Arc<Semaphore>,
    image_slots: Arc<Semaphore>,
    /// Entries being processed, by stream: their leases are renewed.
    in_flight: Mutex<HashMap<Stream, HashSet<String>>>,
    /// Host leases held: token -> lease set key.
    held: Mutex<HashMap<String, String>>,
    /// Successes not told to the hosts' shared windows yet, by stream and host.
    successes: Mutex<HashMap<(Stream, String), Successes>>,
    tokens: AtomicU64,
    tally: Tally,
    cancel: CancellationToken,
}

/// Requests to a host that succeeded since its shared window was last told: each one's latency
/// and the requests in flight when it went out.
struct Successes {
    since: tokio::time::Instant,
    seen: Vec<(Duration, usize)>,
}

/// Successes are told to a host's shared window at least this often (while requests go to it)...
const TELL_EVERY: Duration = Duration::from_millis(250);
/// ...or once this many have come, whichever is first.
const TELL_AFTER: usize = 32;

/// A lease on one request to a host, given back with [`Worker::release`].
struct HostTurn {
    stream: Stream,
    host: String,
    token: String,
    /// The shared window's decreases when it was taken, and the host's requests in flight.
    epoch: u64,
    in_flight: usize,
    started: tokio::time::Instant,
}

impl Worker {
    /// Reads, reclaims and processes `stream`'s entries until the job is finished.
    async fn run_stream(self: Arc<Self>, stream: Stream) -> Result<(), ClusterError> {
        let slots = match stream {
            Stream::Pages => Arc::clone(&self.page_slots),
            Stream::Images => Arc::clone(&self.image_slots),
        };
        let mut tasks: JoinSet<Result<(), ClusterError>> = JoinSet::new();
        let mut last_reclaim: Option<tokio::time::Instant> = None;
        let outcome = loop {
            let mut fatal = None;
            while let Some(done) = tasks.try_join_next() {
                fatal = fatal.or(task_error(done));
            }
            if let Some(error) = fatal {
                self.cancel.cancel();
                break Err(error);
            }
            if self.cancel.is_cancelled() {
                break Ok(());
            }
            let free = slots.available_permits();
            if free == 0 {
                if let Some(done) = tasks.join_next().await
                    && let Some(error) = task_error(done)
                {
                    self.cancel.cancel();
                    break Err(error);
                }
                continue;
            }
            let mut entries = Vec::new();
            if last_reclaim.is_none_or(|at| at.elapsed() >= self.options.lease / 2) {
                last_reclaim = Some(tokio::time::Instant::now());
                let reclaimed = self.queue.reclaim(stream, self.options.lease, free).await?;
                if !reclaimed.is_empty() {
                    tracing::warn!(
                        stream = stream.name(),
                        entries = reclaimed.len(),
                        "took over entries of a worker that stopped answering"
                    );
                }
                entries = self.sort_reclaimed(reclaimed).await?;
            }
            if entries.is_empty() {
                entries = match self.queue.read(stream, free, &self.cancel).await {
                    Ok(entries) => entries,
                    Err(ClusterError::Cancelled) => break Ok(()),
                    Err(e) => break Err(e),
                };
            }
            if entries.is_empty()
                && tasks.is_empty()
                && !self.options.keep_waiting
                && self.queue.counters().await?.is_finished()
            {
                break Ok(());
            }
            for entry in entries {
                // Invariant: the semaphore is never closed.
                let permit = Arc::clone(&slots)
                    .acquire_owned()
                    .await
                    .expect("slots open");
                self.track(stream, &entry.id, true);
                let worker = Arc::clone(&self);
                tasks.spawn(async move {
                    let done = worker.process(&entry).await;
                    worker.track(stream, &entry.id, false);
                    drop(permit);
                    done
                });
            }
        };
        while let Some(done) = tasks.join_next().await {
            if let Some(error) = task_error(done) {
                return Err(error);
            }
        }
        outcome
    }

    /// Reclaimed entries worth processing: those done already are acknowledged, those
    /// delivered too often go to the dead-letter stream.
    async fn sort_reclaimed(&self, reclaimed: Vec<Entry>) -> Result<Vec<Entry>, ClusterError> {
        if reclaimed.is_empty() {
            return Ok(reclaimed);
        }
        let deliveries = self.queue.count_reclaims(&reclaimed).await?;
        let done = self.queue.are_done(&reclaimed).await?;
        let mut keep = Vec::new();
        for ((entry, deliveries), done) in reclaimed.into_iter().zip(deliveries).zip(done) {
            if done {
                self.queue.ack(entry.stream, &entry.id).await?;
                self.tally.already_done.fetch_add(1, Ordering::Relaxed);
            } else if deliveries > self.options.max_deliveries {
                tracing::warn!(stream = entry.stream.name(), id = %entry.id, deliveries, "delivered too often: moved to the dead-letter stream");
                let reason = format!(
                    "delivered {deliveries} times; each worker that took it stopped before finishing it"
                );
                self.queue.dead_letter(&entry, deliveries, &reason).await?;
                self.tally.dead.fetch_add(1, Ordering::Relaxed);
            } else {
                tracing::info!(stream = entry.stream.name(), id = %entry.id, deliveries, "reclaimed from a worker that stopped answering");
                keep.push(entry);
            }
        }
        Ok(keep)
    }

    fn track(&self, stream: Stream, id: &str, running: bool) {
        if let Ok(mut in_flight) = self.in_flight.lock() {
            let ids = in_flight.entry(stream).or_default();
            if running {
                ids.insert(id.to_owned());
            } else {
                ids.remove(id);
            }
        }
    }

    /// Renews, every third of a lease, the leases of everything in flight.
    async fn renew_leases(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.options.lease / 3);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let entries: Vec<(Stream, Vec<String>)> = match self.in_flight.lock() {
                Ok(in_flight) => in_flight
                    .iter()
                    .map(|(s, ids)| (*s, ids.iter().cloned().collect()))
                    .collect(),
                Err(_) => return,
            };
            for (stream, ids) in entries {
                if let Err(e) = self.queue.renew(stream, ids).await {
                    tracing::warn!(error = %e, "cannot renew the leases of entries in flight");
                }
            }
            let held: Vec<(String, String)> = match self.held.lock() {
                Ok(held) => held.iter().map(|(t, k)| (k.clone(), t.clone())).collect(),
                Err(_) => return,
            };
            if let Err(e) = self.queue.renew_hosts(&held, self.options.lease).await {
                tracing::warn!(error = %e, "cannot renew the leases of requests in flight");
            }
            if let Some(shard) = &self.shard
                && let Err(e) = shard.renew(&self.queue).await
            {
                tracing::warn!(error = %e, "cannot renew the ownership of this worker's shard");
            }
        }
    }

    /// One entry: its item processed and committed, or dead-lettered when it cannot be read.
    async fn process(&self, entry: &Entry) -> Result<(), ClusterError> {
        match &entry.item {
            Ok(Item::Page(page)) => self.page(entry, page).await,
            Ok(Item::Image(image)) => self.image(entry, image).await,
            Err(reason) => {
                tracing::warn!(id = %entry.id, %reason, "an entry that is not an item: moved to the dead-letter stream");
                self.tally.dead.fetch_add(1, Ordering::Relaxed);
                self.queue.dead_letter(entry, 1, reason).await
            }
        }
    }

    /// Waits for the job-wide permission to send one request of `stream` to `host`: within
    /// the profile's per-host limit and rate over all workers, after any back-off.
    async fn host_turn(&self, stream: Stream, host: &str) -> Result<HostTurn, ClusterError> {
        let (limit, rate) = self.host_limits(stream);
        let interval = rate
            .filter(|r| *r > 0.0)
            .map_or(Duration::ZERO, |r| Duration::from_secs_f64(1.0 / r));
        let token = format!(
            "{} {}",
            self.queue.consumer(),
            self.tokens.fetch_add(1, Ordering::Relaxed)
        );
        let start = if limit.adaptive {
            START_WINDOW.min(limit.per_host)
        } else {
            0
        };
        let mut full = 0;
        let grant = loop {
            let grant = self
                .queue
                .acquire_host(
                    stream,
                    host,
                    self.options.lease,
                    (limit.per_host, start),
                    interval,
                    &token,
                )
                .await?;
            if grant.wait == 0 {
                break grant;
            }
            let wait = match u64::try_from(grant.wait) {
                Ok(ms) => Duration::from_millis(ms),
                // At its limit: a lease ends when a request ends, which nobody announces; ask
                // again soon, then less often, so many waiting tasks do not flood Redis.
                Err(_) => {
                    full += 1;
                    backoff(full, Duration::from_millis(5), Duration::from_millis(250))
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.cancel.cancelled() => return Err(ClusterError::Cancelled),
            }
        };
        if let Ok(mut held) = self.held.lock() {
            held.insert(token.clone(), self.queue.keys().host_leases(stream, host));
        }
        Ok(HostTurn {
            stream,
            host: host.to_owned(),
            token,
            epoch: grant.epoch,
            in_flight: grant.in_flight,
            started: tokio::time::Instant::now(),
        })
    }

    /// The per-host limits of `stream`'s requests, and their rate.
    fn host_limits(&self, stream: Stream) -> (HostLimits, Option<f64>) {
        let limits = match stream {
            Stream::Pages => HostLimits {
                per_host: self.profile.crawl.per_host,
                adaptive: self.profile.crawl.adaptive,
                rate: self.profile.crawl.per_host_rps,
            },
            Stream::Images => HostLimits {
                per_host: self.settings.per_host,
                adaptive: self.settings.adaptive,
                rate: self.settings.per_host_rps,
            },
        };
        (limits, limits.rate)
    }

    /// Tells the host's shared window how a request that went out with `turn` ended: a
    /// success in healthy time may widen it, a congestion signal (429, 503, a time-out, a
    /// reset) narrows it once per event, as the windows of one process do (`net::hosts::Window`).
    async fn adapt_window(
        &self,
        turn: &HostTurn,
        failed: Option<&Failure>,
    ) -> Result<(), ClusterError> {
        let (limits, _) = self.host_limits(turn.stream);
        if !limits.adaptive || failed.is_some_and(|f| !f.is_throttle()) {
            return Ok(());
        }
        let latency = turn.started.elapsed();
        let (epoch, in_use) = (turn.epoch, turn.in_flight);
        let throttled = failed.is_some();
        // Successes are told a batch at a time (a congestion at once, with those before it):
        // one read and one swap of the shared window per batch, not per request.
        let successes = {
            let Ok(mut all) = self.successes.lock() else {
                return Ok(());
            };
            let batch = all
                .entry((turn.stream, turn.host.clone()))
                .or_insert_with(|| Successes {
                    since: tokio::time::Instant::now(),
                    seen: Vec::new(),
                });
            if !throttled {
                batch.seen.push((latency, in_use));
                if batch.since.elapsed() < TELL_EVERY && batch.seen.len() < TELL_AFTER {
                    return Ok(());
                }
            }
            batch.since = tokio::time::Instant::now();
            std::mem::take(&mut batch.seen)
        };
        // The window outlives idle spells of a few leases, as a process's windows do its run.
        let ttl = self.options.lease * 20;
        self.queue
            .change_window(turn.stream, &turn.host, limits.per_host, ttl, |window| {
                for (latency, in_use) in &successes {
                    window.succeeded(*latency, *in_use);
                }
                if throttled {
                    window.congested(epoch);
                }
            })
            .await
    }

    /// After a 429 or 503 from `host`: every worker's requests of `stream` to it wait its
    /// `Retry-After` (or a second).
    async fn hold_back(
        &self,
        stream: Stream,
        host: &str,
        failed: &Failure,
    ) -> Result<(), ClusterError> {
        if !matches!(failed.class, FailureClass::Http(429 | 503)) {
            return Ok(());
        }
        let wait = failed.retry_after.unwrap_or(Duration::from_secs(1));
        tracing::debug!(
            host,
            stage = stream.name(),
            "the host is busy: every worker holds back for {wait:?}"
        );
        self.queue.pause_host(stream, host, wait).await
    }

    async fn release(&self, turn: HostTurn) -> Result<(), ClusterError> {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&turn.token);
        }
        self.queue
            .release_host(turn.stream, &turn.host, &turn.token)
            .await
    }

    /// A page: fetched and analysed by the engine, its step decided by [`page_step`], then
    /// committed with the entries it leads to (its images, the pages its links lead to, the
    /// next page of its chain).
    async fn page(&self, entry: &Entry, item: &PageItem) -> Result<(), ClusterError> {
        let url = &item.position.url;
        let profile = match &item.level {
            None => Some(Arc::clone(&self.profile)),
            Some(level) => self.levels.get(level).cloned(),
        };
        let parsed = (Url::parse(url), Url::parse(&item.start));
        let mut last_id = item.last_id.clone();
        let fetched = match (profile.clone(), parsed) {
            (Some(profile), (Ok(parsed), Ok(start))) => {
                let read = match (&profile.pagination, &item.level, &self.api) {
                    (Pagination::JsonCursor(cursor), None, Some(api)) => {
                        self.api_page(&profile, cursor, api, &start, item, &mut last_id)
                            .await
                    }
                    _ => {
                        self.html_page(profile, start, &item.position, &parsed)
                            .await
                    }
                };
                match read {
                    Ok(fetched) => fetched,
                    Err(ClusterError::Cancelled) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
            (None, _) => Err(PageFailure::Failed(Failure::new(
                FailureClass::Other,
                format!(
                    "the profile has no level `{}`",
                    item.level.as_deref().unwrap_or_default()
                ),
            ))),
            _ => Err(PageFailure::Failed(Failure::new(
                FailureClass::Other,
                "not a valid URL",
            ))),
        };
        let place = PagePlace {
            position: &item.position,
            in_chain: item.level.is_none(),
            depth: item.depth,
            max_depth: self.profile.crawl.max_depth,
            ends_on_missing: profile.as_deref().is_some_and(ends_on_missing),
            inherited: &item.metadata,
            // Workers do not refresh (`scrape enqueue` refuses it).
            revisited: &BTreeSet::new(),
        };
        let mut ledger = EntryPage {
            queue: &self.queue,
            entry,
            item,
            last_id,
        };
        let (result, next) = match page_step(&place, fetched) {
            // Not acknowledged: another worker takes it over after the lease.
            PageStep::Interrupted => return Ok(()),
            PageStep::EndOfChain { code } => {
                tracing::debug!(page = %url, code, "page missing: end of pagination");
                let (start, position) = (&item.start, &item.position);
                return ledger
                    .end_chain(start, position, EndReason::MissingPage)
                    .await;
            }
            PageStep::Commit { result, next } => (result, next),
        };
        let tally = match result.error() {
            None => &self.tally.pages,
            Some(_) => &self.tally.pages_failed,
        };
        tally.fetch_add(1, Ordering::Relaxed);
        let page = PageUnit {
            start: item.start.clone(),
            position: item.position.clone(),
            in_chain: item.level.is_none(),
            result,
            next,
            seen: PageSeen::default(),
        };
        if commit_page(&mut ledger, page).await? == PageCommitted::Before {
            self.tally.already_done.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// [`Worker::transfer`] past sign-in walls: an image that meets one signs the worker in
    /// again (where the profile says how) and is tried once more.
    async fn transfer_signed_in(
        &self,
        url: &Url,
        host: &str,
        part: &std::path::Path,
    ) -> Result<(TransferResult, u32), ClusterError> {
        let walls = self.source.walls();
        if let Err(held) = walls.admit(url, Asked::Image).await {
            return Ok((Err(held), 0));
        }
        let (result, attempts) = self.transfer(url, host, part).await?;
        match result {
            Ok(fetched) => {
                walls.let_in(url);
                Ok((Ok(fetched), attempts))
            }
            Err(failed) => {
                let failed = walls.checked(url, Asked::Image, failed);
                if is_wall_class(&failed.class.name()) && walls.renew(url).await {
                    return self.transfer(url, host, part).await;
                }
                Ok((Err(failed), attempts))
            }
        }
    }

    async fn image(&self, entry: &Entry, item: &ImageItem) -> Result<(), ClusterError> {
        let key = Item::Image(item.clone()).key();
        let parsed = Url::parse(&item.url);
        let host = parsed.as_ref().map(host_of).unwrap_or_default();
        let part = self.parts.join(format!("{}.part", entry.id));
        let (result, attempts) = match &parsed {
            Ok(url) => match self.tdmrep.check(url, &self.settings).await {
                Err(reserved) => (Err(reserved), 0),
                Ok(()) => match self.transfer_signed_in(url, &host, &part).await {
                    Ok(done) => done,
                    Err(ClusterError::Cancelled) => return Ok(()),
                    Err(e) => return Err(e),
                },
            },
            Err(_) => (Err(Failure::new(FailureClass::Other, "not a valid URL")), 0),
        };
        let mut record = ImageRecord {
            seq: 0,
            page: item.page.clone(),
            rule: item.rule.clone(),
            attribute: item.attribute.clone(),
            metadata: item.metadata.clone(),
            caption: item.caption.clone(),
            rights: item.rights.clone(),
            status: ImageStatus::Pending,
            attempts,
            stored: None,
            failure: None,
            // Workers over Redis number no runs.
            run: 0,
            stored_run: 0,
            validators: Default::default(),
            recheck: false,
        };
        // Resized by the one resize step (`[download.resize]`), in its bounded pool. The
        // resized picture is deterministic, so workers storing the same original race for one
        // name, as they do without resizing.
        let result = match (result, self.settings.dataset.resize) {
            (Ok(fetched), Some(rules)) => {
                match resize_fetched(fetched, rules, &self.settings, &self.profile.name).await {
                    Ok(resized) => Ok(resized),
                    Err(AttemptError::Failed(failed)) => Err(failed),
                    Err(AttemptError::Disk { path, source }) => {
                        return Err(ClusterError::Disk { path, source });
                    }
                }
            }
            (result, _) => result,
        };
        let fetched = match result {
            Ok(fetched) => fetched,
            Err(failed) => {
                tracing::debug!(url = %item.url, class = %failed.class.name(), error = %failed.detail, "download failed");
                record.settle_failed(FailureRecord {
                    class: failed.class.name(),
                    detail: failed.detail,
                });
                self.tally.images_failed.fetch_add(1, Ordering::Relaxed);
                let committed = self.commit_image(entry, &key, &host, &record, None);
                return self.count(committed.await?);
            }
        };
        let _ = std::fs::remove_file(format!("{}.json", fetched.part.display()));
        record.add_embedded(fetched.embedded.clone());
        let mut file = fetched.file.clone();
        // The image step, on what the job holds: the same bytes stored already, and (for new
        // bytes) the nearest picture in the job's shared index, which new bytes join.
        let rule = self.settings.dataset.near_duplicates;
        let decided = image_step(&self.queue, &item.url, &mut file, rule).await?;
        let fate = decided.fate;
        self.tally.images.fetch_add(1, Ordering::Relaxed);
        let committed = if fate.keeps_bytes() {
            self.store(entry, &key, &host, &record, fetched, file.clone())
                .await?
        } else {
            let _ = std::fs::remove_file(&fetched.part);
            self.commit_duplicate(entry, &key, &host, &mut record, file.clone(), &fate)
                .await?
        };
        let committed = match committed {
            // Another URL stored these bytes first (a race between workers): a duplicate of
            // them, as it would have been had it come second.
            ImageCommitted::Lost => {
                let path = self.queue.stored_path(file.content_key()).await?;
                let fate = image_fate(path.or_else(|| Some(file.path.clone())), None, None);
                self.commit_duplicate(entry, &key, &host, &mut record, file, &fate)
                    .await?
            }
            other => other,
        };
        self.count(committed)
    }

    /// Counts an image committed before (a redelivery).
    fn count(&self, committed: ImageCommitted) -> Result<(), ClusterError> {
        if committed == ImageCommitted::AlreadyDone {
            self.tally.already_done.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Commits an image whose bytes are another picture's (`fate`).
    async fn commit_duplicate(
        &self,
        entry: &Entry,
        key: &str,
        host: &str,
        record: &mut ImageRecord,
        file: StoredFile,
        fate: &ImageFate,
    ) -> Result<ImageCommitted, ClusterError> {
        record.settle_stored(file, fate);
        self.commit_image(entry, key, host, record, None).await
    }

    /// Commits `record`, `entry`'s image, as its status says (stored, in `shard` when it is
    /// a sample of this worker's; a duplicate, owning no bytes; failed), and acknowledges the
    /// entry.
    async fn commit_image(
        &self,
        entry: &Entry,
        key: &str,
        host: &str,
        record: &ImageRecord,
        shard: Option<&ShardRecord>,
    ) -> Result<ImageCommitted, ClusterError> {
        let url = item_url(entry);
        let (outcome, sha256, bytes) = match (record.status, &record.stored) {
            (ImageStatus::Stored, Some(file)) => {
                let stored = ImageOutcome::Stored { shard };
                (stored, Some(file.content_key()), file.bytes)
            }
            (ImageStatus::Duplicate, Some(file)) => {
                (ImageOutcome::Duplicate, Some(file.content_key()), 0)
            }
            _ => (ImageOutcome::Failed, None, 0),
        };
        let effect = ImageEffect {
            url: &url,
            record_json: serde_json::to_string(record).unwrap_or_default(),
            sha256,
            bytes,
            host,
            outcome,
        };
        self.queue.commit_image(entry, key, effect).await
    }

    /// Stores new bytes as the output format has workers store them (a file, create-only; or
    /// a sample of this worker's shard) and commits them as stored.
    async fn store(
        &self,
        entry: &Entry,
        key: &str,
        host: &str,
        record: &ImageRecord,
        fetched: crate::download::fetch_image::Fetched,
        mut file: StoredFile,
    ) -> Result<ImageCommitted, ClusterError> {
        let url = item_url(entry);
        let commit = |file: StoredFile, shard: Option<ShardRecord>| {
            let mut settled = record.clone();
            settled.settle_stored(file, &ImageFate::Store);
            async move {
                let committed = self.commit_image(entry, key, host, &settled, shard.as_ref());
                committed.await
            }
        };
        if let Some(shard) = &self.shard {
            let bytes = body_bytes(fetched.held, &fetched.part).await?;
            let body = Held {
                bytes,
                permit: None,
            };
            let sample = Sample { url: &url, record };
            return shard
                .place(&self.queue, body, &mut file, sample, |file, after| {
                    commit(file, Some(after))
                })
                .await;
        }
        let taken = match &self.options.bucket {
            Some(bucket) => {
                let bytes = body_bytes(fetched.held, &fetched.part).await?;
                match bucket.put_image(&file.path, bytes, &file.sha256).await {
                    Ok(_) => None,
                    Err(BucketError::Taken { object }) => Some(object),
                    Err(e) => return Err(ClusterError::Bucket(e)),
                }
            }
            None => {
                let out = self.options.out.clone();
                let tag = format!("{}-{}", self.queue.consumer(), entry.id);
                let (part, path, sha256) =
                    (fetched.part.clone(), file.path.clone(), file.sha256.clone());
                let stored = tokio::task::spawn_blocking(move || {
                    store_create_only(&part, &out, &path, &sha256, &tag)
                })
                .await
                .map_err(|_| ClusterError::TaskLost)?;
                match stored {
                    Ok(_) => None,
                    Err(StoreError::Taken { path }) => Some(path.display().to_string()),
                    Err(StoreError::Io { path, source }) => {
                        return Err(ClusterError::Disk { path, source });
                    }
                }
            }
        };
        match taken {
            None => commit(file, None).await,
            Some(taken) => {
                let mut failed = record.clone();
                failed.settle_failed(FailureRecord {
                    class: FailureClass::Other.name(),
                    detail: format!("`{taken}` already holds other bytes"),
                });
                self.commit_image(entry, key, host, &failed, None).await
            }
        }
    }

    /// Attempts at one image under the retry policy, verified into `part`. The attempts
    /// made, with the result.
    async fn transfer(
        &self,
        url: &Url,
        host: &str,
        part: &std::path::Path,
    ) -> Result<(TransferResult, u32), ClusterError> {
        self.with_retries(Stream::Images, host, move |_| async move {
            let fetched = fetch_image(
                &self.client,
                &self.settings,
                &self.profile.name,
                url,
                Part::new(part.to_owned()),
                &self.live,
            )
            .await;
            match fetched {
                Ok(fetched) => Ok(Ok(fetched)),
                Err(AttemptError::Failed(failed)) => Ok(Err(failed)),
                Err(AttemptError::Disk { path, source }) => {
                    Err(ClusterError::Disk { path, source })
                }
            }
        })
        .await
    }

    /// The page at `position` of the chain from `start`, fetched or rendered as `profile`
    /// says (retried as [`Worker::with_retries`] does) and analysed by the engine.
    async fn html_page(
        &self,
        profile: Arc<Profile>,
        start: Url,
        position: &PagePosition,
        url: &Url,
    ) -> Result<Fetched, ClusterError> {
        let (from, start_at) = (&profile, &start);
        let (snapshot, _) = self
            .with_retries(Stream::Pages, &host_of(url), move |_| async move {
                match self
                    .source
                    .fetch(from, start_at, position, url, &self.cancel)
                    .await
                {
                    Err(PageFailure::Failed(failed)) => Ok(Err(failed)),
                    other => Ok(Ok(other)),
                }
            })
            .await?;
        Ok(match snapshot {
            Ok(Ok(snapshot)) => {
                self.source
                    .analyse(profile, start, position.clone(), snapshot, &self.cancel)
                    .await
            }
            Ok(Err(failure)) => Err(failure),
            Err(failed) => Err(PageFailure::Failed(failed)),
        })
    }

    /// A page of a `json_cursor` chain: the API asked for it (retried as
    /// [`Worker::with_retries`] does) and the reply read by the engine. Its
    /// next page carries the cursor; a cursor the API calls expired is followed by the page
    /// after `last_id` (the furthest id of the chain so far, updated here).
    async fn api_page(
        &self,
        profile: &Arc<Profile>,
        cursor: &JsonCursor,
        api: &ApiFetcher,
        start: &Url,
        item: &PageItem,
        last_id: &mut Option<String>,
    ) -> Result<Fetched, ClusterError> {
        let position = &item.position;
        let request = json_cursor::request(cursor, start, position);
        let asked = &request;
        let (response, _) = self
            .with_retries(Stream::Pages, &host_of(&request.url), move |_| async move {
                match api.fetch(asked, &self.cancel).await {
                    Ok(response) if FailureClass::Http(response.status).is_transient() => {
                        let status = response.status;
                        let mut failed =
                            Failure::new(FailureClass::Http(status), format!("HTTP {status}"));
                        failed.retry_after = response.retry_after;
                        Ok(Err(failed))
                    }
                    Ok(response) => Ok(Ok(Ok(response))),
                    Err(PageFailure::Failed(failed)) => Ok(Err(failed)),
                    Err(other) => Ok(Ok(Err(other))),
                }
            })
            .await?;
        let response = match response {
            Ok(Ok(response)) => response,
            Ok(Err(failure)) => return Ok(Err(failure)),
            Err(failed) => return Ok(Err(PageFailure::Failed(failed))),
        };
        let reply = ApiReply {
            url: response.url,
            status: response.status,
            body: response.body,
        };
        let reading = read_api_reply(
            Arc::clone(profile),
            start,
            position,
            reply,
            profile.max_pages,
        )
        .await;
        let failed = |detail: String| {
            Ok(Err(PageFailure::Failed(Failure::new(
                FailureClass::Other,
                detail,
            ))))
        };
        match reading {
            None => failed("the API page's reading stopped".into()),
            Some(ApiReading::Failed(error)) => failed(error),
            Some(ApiReading::Page(page)) => {
                if page.last_id.is_some() {
                    last_id.clone_from(&page.last_id);
                }
                Ok(Ok(PageYield {
                    images: api_images(profile, &page),
                    links: Vec::new(),
                    next: page.next,
                    partial: None,
                }))
            }
            Some(ApiReading::Expired { reason }) => {
                match resume::after_expiry(cursor, start, position, last_id.as_deref()) {
                    AfterExpiry::AfterId(resume) => {
                        tracing::warn!(page = %position.url, %reason, "the cursor has expired; resuming after the last id `{}`", last_id.as_deref().unwrap_or_default());
                        Ok(Ok(PageYield {
                            images: Vec::new(),
                            links: Vec::new(),
                            next: NextPage::Fetch(resume),
                            partial: None,
                        }))
                    }
                    // The first page of the chain is an entry done long ago: the job would
                    // not take it again.
                    AfterExpiry::FromFirst(_) => failed(format!(
                        "the cursor has expired ({reason}) and there is no id to resume after"
                    )),
                }
            }
        }
    }

    /// Attempts at one request of `stream` to `host` through the one attempt loop
    /// ([`with_retries`]), each in a job-wide turn of its host ([`JobGate`]): a 429 or 503
    /// holds the host back for every worker, and no turn is held while waiting to try again.
    /// The attempts made, with the last result.
    async fn with_retries<T, F>(
        &self,
        stream: Stream,
        host: &str,
        attempt: impl FnMut(u32) -> F,
    ) -> Result<(Result<T, Failure>, u32), ClusterError>
    where
        F: std::future::Future<Output = Result<Result<T, Failure>, ClusterError>>,
    {
        let policy = RetryPolicy::new(self.settings.retries);
        let gate = JobGate {
            worker: self,
            stream,
            host,
        };
        with_retries(policy, &gate, &self.cancel, attempt)
            .await
            .map_err(|stopped| match stopped {
                Stopped::Cancelled => ClusterError::Cancelled,
                Stopped::Fatal(e) => e,
            })
    }
}

/// The turns of one host shared by every worker of the job, through Redis.
struct JobGate<'a> {
    worker: &'a Worker,
    stream: Stream,
    host: &'a str,
}

/// A turn given by [`JobGate`].
struct JobTurn<'a> {
    worker: &'a Worker,
    turn: HostTurn,
}

impl<'a> Gate for JobGate<'a> {
    type Turn = JobTurn<'a>;
    type Error = ClusterError;

    async fn turn(&self) -> Result<JobTurn<'a>, ClusterError> {
        let turn = self.worker.host_turn(self.stream, self.host).await?;
        Ok(JobTurn {
            worker: self.worker,
            turn,
        })
    }
}

impl Turn for JobTurn<'_> {
    type Error = ClusterError;

    /// A 429 or 503 holds the host back before the turn is given back, so no other request
    /// takes its place in between.
    async fn end(self, failed: Option<&Failure>) -> Result<(), ClusterError> {
        let turn = &self.turn;
        if let Some(failed) = failed {
            self.worker
                .hold_back(turn.stream, &turn.host, failed)
                .await?;
        }
        self.worker.adapt_window(turn, failed).await?;
        self.worker.release(self.turn).await
    }
}

type TransferResult = Result<crate::download::fetch_image::Fetched, Failure>;

/// The URL of an image entry's item.
fn item_url(entry: &Entry) -> String {
    match &entry.item {
        Ok(Item::Image(item)) => item.url.clone(),
        _ => String::new(),
    }
}

/// The error a finished task ended with, if any (a panicking task is one).
fn task_error(
    joined: Result<Result<(), ClusterError>, tokio::task::JoinError>,
) -> Option<ClusterError> {
    match joined {
        Ok(Ok(())) | Ok(Err(ClusterError::Cancelled)) => None,
        Ok(Err(e)) => Some(e),
        Err(e) if e.is_panic() => Some(ClusterError::TaskLost),
        Err(_) => None,
    }
}

/// A verified body's bytes: held in memory, or read from its part file (removed after).
async fn body_bytes(
    held: Option<Held>,
    part: &std::path::Path,
) -> Result<bytes::Bytes, ClusterError> {
    if let Some(held) = held {
        return Ok(held.bytes);
    }
    let read = tokio::fs::read(part).await;
    let _ = tokio::fs::remove_file(part).await;
    read.map(Into::into).map_err(|source| ClusterError::Disk {
        path: part.to_owned(),
        source,
    })
}
