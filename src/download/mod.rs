//! Download: fetches pending images with a global and a per-host limit, retries transient
//! failures with back-off, resizes them when the profile asks ([`resize`]), and hands verified
//! part files to the state writer.
//!
//! Work streams out of the state database in sequence order, a batch at a time, so memory does
//! not grow with the number of URLs. The writer gives each file its final name; this stage never
//! does, so a file under a final name is always complete and recorded.

pub mod fetch_image;
pub mod perceptual;
pub mod resize;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::net::hosts::{Host, HostLimits, Hosts, LocalGate};
use crate::net::retry::{RetryPolicy, Stopped, with_retries};
use crate::net::robots::TdmRepGate;
use crate::net::walls::{Asked, Walls};
use crate::net::{Failure, FailureClass, HttpClient};
use crate::profile::{DownloadSettings, SignedOut};
use crate::state::{
    DownloadResult, FailureRecord, State, StateError, WriterHandle, panic_message, read,
};
use crate::telemetry::Live;
use fetch_image::{
    AttemptError, HELD_BUDGET_BYTES, HoldBudget, Part, fetch_image_held, resumable_parts,
};

/// Folders part files are spread over.
const PART_FOLDERS: u64 = 64;

/// Pending items read from the database at a time.
const BATCH: usize = 512;

/// Items held back in memory, over all hosts, while their host has enough tasks; past this,
/// an item waits for a task slot whatever its host, so memory stays flat.
const MAX_HELD_BACK: usize = 16 * 1024;

/// Pictures decoded at once (perceptual hashes, resizing), over every download: one per core,
/// so CPU work never takes more than the machine has and the network tasks keep theirs.
fn decode_slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| {
        Semaphore::new(std::thread::available_parallelism().map_or(2, std::num::NonZero::get))
    })
}

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
fn note_panic<T>(
    joined: Result<T, tokio::task::JoinError>,
    fatal: &Mutex<Option<DownloadError>>,
    cancel: &CancellationToken,
) -> Option<T> {
    let error = match joined {
        Ok(value) => return Some(value),
        Err(error) => error,
    };
    if !error.is_panic() {
        return None;
    }
    let message = panic_message(error.into_panic());
    if let Ok(mut slot) = fatal.lock() {
        slot.get_or_insert(DownloadError::Stopped(format!(
            "a download task panicked: {message}"
        )));
    }
    cancel.cancel();
    None
}

/// Everything the download stage needs.
pub struct Downloader {
    client: HttpClient,
    settings: DownloadSettings,
    /// The job's name, for `{profile}` in path templates.
    profile: String,
    /// Where part files live while they download.
    parts: PathBuf,
    /// Items whose parts an earlier run left with a sidecar, found when the stage starts: only
    /// their first attempts look for a part to continue (later attempts always do).
    resumable: HashSet<u64>,
    state: State,
    writer: WriterHandle,
    live: Arc<Live>,
    /// Per-host windows and pace, and the attempts in flight over every host.
    hosts: Arc<Hosts>,
    /// Memory for small bodies handed to the writer whole: a shard does not read a part file
    /// back, and a file is written once, by the writer, with no part file to create and move.
    hold: HoldBudget,
    /// Stored images are queued to be asked again (`--recheck-images`): each download looks
    /// up whether its image is one, and the validators to ask it with.
    rechecking: bool,
    /// The run's walls: an image of a host that showed one is not asked, and stays pending.
    walls: Arc<Walls>,
    /// Each origin's TDMRep file, asked before its first image.
    tdmrep: TdmRepGate,
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
        // Attempts in flight over every host: `[download] concurrency`, each place taken once
        // its host's turn has come.
        let hosts = Arc::new(
            Hosts::new(
                "download",
                HostLimits {
                    per_host: settings.per_host,
                    adaptive: settings.adaptive,
                    rate: settings.per_host_rps,
                },
            )
            .with_total(settings.concurrency),
        );
        live.watch_hosts(Arc::clone(&hosts));
        Self {
            hold: HoldBudget::new(HELD_BUDGET_BYTES),
            hosts,
            settings,
            profile: profile.to_owned(),
            parts,
            resumable: HashSet::new(),
            state,
            writer,
            live,
            rechecking: false,
            walls: Arc::new(Walls::new(SignedOut::default(), false)),
            tdmrep: TdmRepGate::new(client.clone()),
            client,
        }
    }

    /// The same stage pausing the hosts of `walls`, the run's walls shared with its pages.
    pub fn with_walls(mut self, walls: Arc<Walls>) -> Self {
        self.walls = walls;
        self
    }

    /// Downloads until nothing is pending and `crawl_done` is true, or until `cancel`.
    pub async fn run(
        mut self,
        mut crawl_done: watch::Receiver<bool>,
        cancel: CancellationToken,
    ) -> Result<(), DownloadError> {
        // Parts an earlier run left to resume; the folders are created as parts are written.
        let parts = self.parts.clone();
        let left = tokio::task::spawn_blocking(move || {
            let mut left = Vec::new();
            for folder in 0..PART_FOLDERS {
                let dir = parts.join(format!("{folder:02x}"));
                match resumable_parts(&dir) {
                    Ok(seqs) => left.extend(seqs),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => return Err(DownloadError::Disk { path: dir, source }),
                }
            }
            Ok(left)
        })
        .await
        .map_err(|e| DownloadError::Stopped(e.to_string()))??;
        self.resumable.extend(left);
        self.rechecking = read(&self.state, State::rechecks_queued).await? > 0;
        let this = Arc::new(self);
        let mut dispatch = Dispatch::new(Arc::clone(&this), cancel.clone());
        let new_work = this.writer.new_work();
        let mut cursor = 0u64;
        'outer: loop {
            if cancel.is_cancelled() {
                break;
            }
            let batch = read(&this.state, move |s| s.pending_from(cursor, BATCH)).await?;
            if batch.is_empty() {
                let finished = *crawl_done.borrow_and_update();
                if finished && dispatch.is_idle() {
                    // Results are queued before tasks end; make sure they are committed.
                    this.writer.flush().await?;
                    let more = read(&this.state, move |s| s.pending_from(cursor, 1)).await?;
                    if more.is_empty() {
                        break;
                    }
                    continue;
                }
                if dispatch.tasks.is_empty() && dispatch.start_any_held().await.is_none() {
                    break;
                }
                tokio::select! {
                    () = new_work.notified() => {}
                    ended = dispatch.tasks.join_next(), if !dispatch.tasks.is_empty() => {
                        if let Some(ended) = ended
                            && dispatch.ended(note_panic(ended, &dispatch.fatal, &cancel)).await.is_none()
                        {
                            break 'outer;
                        }
                    }
                    _ = crawl_done.changed(), if !finished => {}
                    () = cancel.cancelled() => break,
                }
                continue;
            }
            for (seq, url) in batch {
                cursor = seq + 1;
                if dispatch.offer(seq, url).await.is_none() {
                    break 'outer;
                }
            }
        }
        while let Some(joined) = dispatch.tasks.join_next().await {
            note_panic(joined, &dispatch.fatal, &cancel);
        }
        if let Some(e) = dispatch.fatal.lock().ok().and_then(|mut slot| slot.take()) {
            return Err(e);
        }
        Ok(())
    }

    /// Downloads one image with retries and queues its result for the writer.
    async fn download(
        &self,
        seq: u64,
        url: &str,
        host: Option<Arc<Host>>,
        cancel: &CancellationToken,
    ) -> Result<(), DownloadError> {
        self.download_once_more_after_sign_in(seq, url, host, cancel, true)
            .await
    }

    /// [`Downloader::download`]; `may_sign_in`: an image that meets a sign-in wall may sign
    /// the run in again and be tried once more.
    async fn download_once_more_after_sign_in(
        &self,
        seq: u64,
        url: &str,
        host: Option<Arc<Host>>,
        cancel: &CancellationToken,
        may_sign_in: bool,
    ) -> Result<(), DownloadError> {
        let again = host.clone();
        // Parts spread over PART_FOLDERS folders: creating files in one folder serialises on
        // that folder's lock.
        let part = self
            .parts
            .join(format!("{:02x}", seq % PART_FOLDERS))
            .join(format!("{seq}.part"));
        let (Ok(parsed), Some(host)) = (url::Url::parse(url), host) else {
            let failure = Failure::new(FailureClass::Other, "not a valid URL");
            return self.record_failure(url, failure, 0).await;
        };
        // Its host showed a wall: the image waits, pending, for the next run.
        if self.walls.admit(&parsed, Asked::Image).await.is_err() {
            return Ok(());
        }
        if let Err(reserved) = self.tdmrep.check(&parsed, &self.settings).await {
            return self.record_failure(url, reserved, 0).await;
        }
        // An image stored before, asked again only if it changed.
        let unless = match self.rechecking {
            false => None,
            true => {
                read(&self.state, {
                    let url = url.to_owned();
                    move |s| s.recheck_of(&url)
                })
                .await?
            }
        };
        let gate = LocalGate::<DownloadError>::new(&host);
        let policy = RetryPolicy::new(self.settings.retries);
        let (parsed, unless) = (&parsed, unless.as_ref());
        let tried = with_retries(policy, &gate, cancel, |attempt| {
            // An attempt that failed may have left a part to continue; a first one only when
            // an earlier run did.
            let part = Part {
                path: part.clone(),
                may_resume: attempt > 1 || self.resumable.contains(&seq),
            };
            async move {
                let (client, settings, live) = (&self.client, &self.settings, &self.live);
                match fetch_image_held(
                    client,
                    settings,
                    &self.profile,
                    parsed,
                    part,
                    live,
                    &self.hold,
                    unless,
                )
                .await
                {
                    Ok(fetched) => Ok(Ok(fetched)),
                    Err(AttemptError::Failed(failed)) => Ok(Err(failed)),
                    Err(AttemptError::Disk { path, source }) => {
                        Err(DownloadError::Disk { path, source })
                    }
                }
            }
        })
        .await;
        let (fetched, attempts) = match tried {
            Ok(tried) => tried,
            Err(Stopped::Fatal(e)) => return Err(e),
            Err(Stopped::Cancelled) => return Ok(()),
        };
        let fetched = match fetched {
            Ok(fetched) => fetched,
            Err(failed) if unless.is_some() && failed.class == FailureClass::Http(304) => {
                let url = url.to_owned();
                return Ok(self
                    .writer
                    .finish_download(DownloadResult::Unchanged { url })
                    .await?);
            }
            Err(failed) => {
                let failed = self.walls.checked(parsed, Asked::Image, failed);
                if matches!(
                    failed.class,
                    FailureClass::LoginRequired | FailureClass::Blocked
                ) {
                    if may_sign_in && self.walls.renew(parsed).await {
                        return Box::pin(
                            self.download_once_more_after_sign_in(seq, url, again, cancel, false),
                        )
                        .await;
                    }
                    // A wall: the image waits, pending, for the run after a fresh sign-in.
                    return Ok(());
                }
                return self.record_failure(url, failed, attempts).await;
            }
        };
        self.walls.let_in(parsed);
        if let Some(offset) = fetched.resumed_from {
            tracing::debug!(url, offset, "download resumed with Range");
        }
        // The host's turn ended with the transfer: the next download goes while this one is
        // resized.
        let fetched = match self.settings.dataset.resize {
            None => fetched,
            Some(rules) => {
                match resize::resize_fetched(fetched, rules, &self.settings, &self.profile).await {
                    Ok(fetched) => fetched,
                    Err(AttemptError::Disk { path, source }) => {
                        return Err(DownloadError::Disk { path, source });
                    }
                    Err(AttemptError::Failed(failed)) => {
                        return self.record_failure(url, failed, attempts).await;
                    }
                }
            }
        };
        let result = DownloadResult::Stored {
            url: url.to_owned(),
            part: fetched.part,
            held: fetched.held,
            file: fetched.file,
            validators: fetched.validators,
            embedded: fetched.embedded,
            attempts,
        };
        self.writer.finish_download(result).await?;
        Ok(())
    }

    async fn record_failure(
        &self,
        url: &str,
        failed: Failure,
        attempts: u32,
    ) -> Result<(), DownloadError> {
        tracing::debug!(url, class = %failed.class.name(), error = %failed.detail, "download failed");
        let failure = FailureRecord {
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

/// Hands pending items to download tasks, so that no host takes every task slot: a host may have
/// a few times its window in tasks (in flight, waiting for their turn, or waiting to retry), and
/// its other items wait in memory for one of them to end, while other hosts' items go ahead. A
/// host that stops answering keeps its own items waiting, not everyone's.
struct Dispatch {
    downloader: Arc<Downloader>,
    cancel: CancellationToken,
    /// Tasks alive at once (some may be waiting out a back-off); each attempt also takes an
    /// `active` permit, so sleeping tasks never hold a connection slot.
    slots: Arc<Semaphore>,
    /// Each task ends with its host's key (empty for an item without a host).
    tasks: JoinSet<Arc<str>>,
    /// Tasks alive by host, counted down by the tasks themselves as they end (see
    /// [`TaskCount`]), even when one panics.
    per_host: HashMap<Arc<str>, Arc<AtomicUsize>>,
    /// Items held back by host, in order.
    held: HashMap<Arc<str>, VecDeque<(u64, String)>>,
    held_count: usize,
    fatal: Arc<Mutex<Option<DownloadError>>>,
}

impl Dispatch {
    fn new(downloader: Arc<Downloader>, cancel: CancellationToken) -> Self {
        let slots = Arc::new(Semaphore::new(
            downloader.settings.concurrency.saturating_mul(4),
        ));
        Self {
            downloader,
            cancel,
            slots,
            tasks: JoinSet::new(),
            per_host: HashMap::new(),
            held: HashMap::new(),
            held_count: 0,
            fatal: Arc::new(Mutex::new(None)),
        }
    }

    /// No task alive and nothing held back.
    fn is_idle(&self) -> bool {
        self.tasks.is_empty() && self.held_count == 0
    }

    /// Tasks a host may have alive: a few times its window, so that it never waits for work.
    fn budget(host: &Host) -> usize {
        host.window().saturating_mul(4).max(8)
    }

    /// Starts a task for item `seq`, or holds it back while its host has its share of tasks.
    /// `None` when the run was cancelled.
    async fn offer(&mut self, seq: u64, url: String) -> Option<()> {
        let host = url::Url::parse(&url)
            .ok()
            .map(|parsed| self.downloader.hosts.get(&parsed));
        if let Some(host) = &host {
            let key: Arc<str> = Arc::from(host.key());
            let alive = self.alive(&key);
            let queued = self.held.get(&key).is_some_and(|q| !q.is_empty());
            if (queued || alive >= Self::budget(host)) && self.held_count < MAX_HELD_BACK {
                self.held.entry(key).or_default().push_back((seq, url));
                self.held_count += 1;
                return Some(());
            }
        }
        self.spawn(seq, url, host).await?;
        match self.tasks.try_join_next() {
            Some(ended) => {
                let host = note_panic(ended, &self.fatal, &self.cancel);
                self.ended(host).await
            }
            None => Some(()),
        }
    }

    /// Tasks of host `key` alive now.
    fn alive(&self, key: &str) -> usize {
        self.per_host
            .get(key)
            .map_or(0, |n| n.load(Ordering::Relaxed))
    }

    /// A task of host `key` ended (`None`: a task whose host is not known, one that panicked),
    /// and maybe others meanwhile: starts the held-back items their hosts now have room for.
    /// `None` when the run was cancelled.
    async fn ended(&mut self, key: Option<Arc<str>>) -> Option<()> {
        let mut ended = vec![key];
        loop {
            while let Some(task) = self.tasks.try_join_next() {
                ended.push(note_panic(task, &self.fatal, &self.cancel));
            }
            match ended.pop() {
                None => return Some(()),
                Some(Some(key)) => self.start_held(&key).await?,
                Some(None) => self.start_any_held().await?,
            }
        }
    }

    /// Starts no task at all: starts what every host holds back, as far as its budget goes.
    async fn start_any_held(&mut self) -> Option<()> {
        let keys: Vec<Arc<str>> = self.held.keys().cloned().collect();
        for key in keys {
            self.start_held(&key).await?;
        }
        Some(())
    }

    /// Starts the held-back items of host `key` while it has room for them.
    async fn start_held(&mut self, key: &Arc<str>) -> Option<()> {
        loop {
            let Some((seq, url)) = self.held.get(key).and_then(|q| q.front()).cloned() else {
                self.held.remove(key);
                return Some(());
            };
            let host = url::Url::parse(&url)
                .ok()
                .map(|parsed| self.downloader.hosts.get(&parsed));
            if host
                .as_ref()
                .is_some_and(|h| self.alive(key) >= Self::budget(h))
            {
                return Some(());
            }
            if let Some(queue) = self.held.get_mut(key) {
                queue.pop_front();
            }
            self.held_count -= 1;
            self.spawn(seq, url, host).await?;
        }
    }

    /// Starts a task for item `seq` once a task slot is free. `None` when the run was
    /// cancelled.
    async fn spawn(&mut self, seq: u64, url: String, host: Option<Arc<Host>>) -> Option<()> {
        let slot = tokio::select! {
            p = Arc::clone(&self.slots).acquire_owned() => p.ok()?,
            () = self.cancel.cancelled() => return None,
        };
        let key: Arc<str> = host
            .as_ref()
            .map_or_else(|| Arc::from(""), |h| Arc::from(h.key()));
        let count = TaskCount::new(Arc::clone(
            self.per_host.entry(Arc::clone(&key)).or_default(),
        ));
        let downloader = Arc::clone(&self.downloader);
        let cancel = self.cancel.clone();
        let fatal = Arc::clone(&self.fatal);
        self.tasks.spawn(async move {
            let (_slot, _count) = (slot, count);
            tokio::select! {
                result = downloader.download(seq, &url, host, &cancel) => {
                    if let Err(e) = result {
                        if let Ok(mut slot) = fatal.lock() { slot.get_or_insert(e); }
                        cancel.cancel();
                    }
                }
                () = cancel.cancelled() => {}
            }
            key
        });
        Some(())
    }
}

/// A task counted among its host's until it ends.
struct TaskCount(Arc<AtomicUsize>);

impl TaskCount {
    fn new(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for TaskCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
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
