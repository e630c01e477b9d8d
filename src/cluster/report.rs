//! A job's view over all its workers: totals, per worker, per host, rate and ETA
//! (`scrape status --redis`), and `manifest.jsonl` and `failures.jsonl` for the whole job
//! (`scrape export --redis`), written by the same export a one-process run uses.

use crate::output::bucket::Destination;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use super::ClusterError;
use super::keys::{JOBS, Stream};
use super::queue::{BATCH, Counters, JobQueue};
use super::shards::finish_orphans;
use crate::output::{ExportSummary, Format, JobRecords};
use crate::state::{
    FailureRecord, ImageRecord, ImageStatus, PageRecord, PageStatus, ShardRecord, StateError,
};

/// The job a command is about: `job` when given, else the only job this Redis holds.
pub async fn pick_job(
    queue_for: &super::Connection,
    job: Option<&str>,
) -> Result<String, ClusterError> {
    if let Some(job) = job {
        return Ok(job.to_owned());
    }
    let probe = JobQueue::new(queue_for.clone(), "", "status");
    let mut jobs = probe.members(JOBS.to_owned()).await?;
    jobs.sort();
    match jobs.len() {
        1 => Ok(jobs.remove(0)),
        0 => Err(ClusterError::Job(
            "this Redis holds no job; seed one with `scrape enqueue`".into(),
        )),
        _ => Err(ClusterError::Job(format!(
            "this Redis holds several jobs ({}); name one with --job",
            jobs.join(", ")
        ))),
    }
}

/// The job's totals as a run's progress shows them, read from Redis every second until `stop`
/// (a read that fails keeps the last totals).
pub fn watch_counters(
    queue: JobQueue,
    stop: tokio_util::sync::CancellationToken,
) -> (
    tokio::sync::watch::Receiver<crate::state::Counters>,
    tokio::task::JoinHandle<()>,
) {
    let (send, counters) = tokio::sync::watch::channel(crate::state::Counters::default());
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            if let Ok(totals) = queue.counters().await {
                let _ = send.send(totals.as_run());
            }
        }
    });
    (counters, task)
}

/// Everything `scrape status --redis` shows.
#[derive(Debug, Clone, Serialize)]
pub struct JobStatus {
    pub job: String,
    pub pages_enqueued: u64,
    pub pages_done: u64,
    pub pages_failed: u64,
    pub images_enqueued: u64,
    pub images_stored: u64,
    pub images_duplicate: u64,
    pub images_failed: u64,
    /// Items moved to the dead-letter stream.
    pub dead: u64,
    pub bytes: u64,
    /// Items enqueued and not settled.
    pub pending: u64,
    pub finished: bool,
    /// Items settled per second since the first enqueue.
    pub items_per_second: f64,
    /// Seconds until the pending items are settled at that rate.
    pub eta_seconds: Option<u64>,
    pub workers: BTreeMap<String, BTreeMap<String, u64>>,
    /// `STAGE HOST` -> items of that host settled.
    pub hosts: BTreeMap<String, u64>,
    pub dead_letters: Vec<BTreeMap<String, String>>,
}

/// Reads the status of `queue`'s job.
pub async fn job_status(queue: &JobQueue) -> Result<JobStatus, ClusterError> {
    let c: Counters = queue.counters().await?;
    let keys = queue.keys();
    let mut workers = BTreeMap::new();
    for name in queue.members(keys.workers()).await? {
        let totals = queue.hash_u64(keys.worker(&name)).await?;
        workers.insert(name, totals.into_iter().collect());
    }
    let hosts: HashMap<String, u64> = queue.hash_u64(keys.hosts()).await?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let elapsed = now_ms.saturating_sub(c.started_ms) as f64 / 1000.0;
    let rate = if elapsed > 0.0 {
        c.settled() as f64 / elapsed
    } else {
        0.0
    };
    let pending = c.pending();
    let eta_seconds = (rate > 0.0 && pending > 0).then(|| (pending as f64 / rate).ceil() as u64);
    let dead_letters = queue
        .dead_entries()
        .await?
        .into_iter()
        .map(|e| e.into_iter().collect())
        .collect();
    Ok(JobStatus {
        job: keys.job().to_owned(),
        pages_enqueued: c.enqueued_pages,
        pages_done: c.pages_done,
        pages_failed: c.pages_failed,
        images_enqueued: c.enqueued_images,
        images_stored: c.images_stored,
        images_duplicate: c.images_duplicate,
        images_failed: c.images_failed,
        dead: c.dead,
        bytes: c.bytes,
        pending,
        finished: c.is_finished(),
        items_per_second: rate,
        eta_seconds,
        workers,
        hosts: hosts.into_iter().collect(),
        dead_letters,
    })
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "job        {} ({})",
            self.job,
            if self.finished { "finished" } else { "running" }
        )?;
        writeln!(
            f,
            "pages      {} done, {} failed, of {} enqueued",
            self.pages_done, self.pages_failed, self.pages_enqueued
        )?;
        writeln!(
            f,
            "images     {} stored, {} duplicate, {} failed, of {} enqueued ({} bytes)",
            self.images_stored,
            self.images_duplicate,
            self.images_failed,
            self.images_enqueued,
            self.bytes
        )?;
        writeln!(f, "pending    {}", self.pending)?;
        writeln!(f, "dead       {}", self.dead)?;
        let eta = self
            .eta_seconds
            .map_or_else(|| "-".to_owned(), |s| format!("{s} s"));
        writeln!(
            f,
            "rate       {:.1} items/s, ETA {eta}",
            self.items_per_second
        )?;
        for (name, totals) in &self.workers {
            let get = |k: &str| totals.get(k).copied().unwrap_or(0);
            writeln!(
                f,
                "worker     {name}: {} pages ({} failed), {} images ({} duplicate, {} failed)",
                get("pages_done"),
                get("pages_failed"),
                get("images_stored"),
                get("images_duplicate"),
                get("images_failed"),
            )?;
        }
        for (host, n) in &self.hosts {
            writeln!(f, "host       {host}: {n}")?;
        }
        for dead in &self.dead_letters {
            writeln!(
                f,
                "dead item  {} {}: {}",
                dead.get("stream").map_or("", String::as_str),
                dead.get("item").map_or("", String::as_str),
                dead.get("reason").map_or("", String::as_str),
            )?;
        }
        Ok(())
    }
}

/// The records of a whole job, read from Redis in batches while the export writes them, so
/// memory stays flat however many there are: the images and pages with a record (committed),
/// in the order of their records hash (`HSCAN`), then the dead letters. The work streams are
/// not read: their entries go once done ([`super::scripts::TRIM`]).
struct ClusterRecords {
    queue: JobQueue,
    runtime: tokio::runtime::Handle,
    /// Whether workers may still be committing: a hash that grows while it is scanned may
    /// give a record twice, so the URLs listed are then remembered (16 bytes each) to list each
    /// once. A finished job's hashes do not change, and nothing is remembered.
    running: bool,
    /// The Redis error that stopped the export, if one did.
    failed: Mutex<Option<ClusterError>>,
}

/// What [`ClusterRecords`] reads of one batch: an item's URL and its record's JSON.
type Batch = Vec<(String, String)>;

impl ClusterRecords {
    /// Runs a Redis read from the export's blocking thread; an error is kept for the caller
    /// and stops the export.
    fn block_on<T>(
        &self,
        read: impl std::future::Future<Output = Result<T, ClusterError>>,
    ) -> Result<T, StateError> {
        self.runtime.block_on(read).map_err(|e| {
            if let Ok(mut failed) = self.failed.lock() {
                failed.get_or_insert(e);
            }
            StateError::TaskLost
        })
    }

    /// Walks the records hash at `records`, [`BATCH`] fields at a time: each item's URL with
    /// its record, each once.
    fn for_each_batch(
        &self,
        records: String,
        mut visit: impl FnMut(Batch) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let mut listed: HashSet<[u8; 16]> = HashSet::new();
        let mut cursor = 0;
        loop {
            let (next, fields) =
                self.block_on(self.queue.scan_hash(records.clone(), cursor, BATCH))?;
            let batch = fields
                .into_iter()
                .filter(|(url, _)| !self.running || listed.insert(url_digest(url)))
                .collect();
            visit(batch)?;
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// Every dead letter of `stream`, as the URL of its item and its fields.
    fn for_each_dead(
        &self,
        stream: Stream,
        mut visit: impl FnMut(String, &HashMap<String, String>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        self.for_each_range(self.queue.keys().dead(), |entries| {
            for (_, dead) in entries {
                if dead.get("stream").map(String::as_str) != Some(stream.name()) {
                    continue;
                }
                let item = dead.get("item").cloned().unwrap_or_default();
                let url = serde_json::from_str::<serde_json::Value>(&item)
                    .ok()
                    .and_then(|v| item_url(&v))
                    .unwrap_or(item);
                visit(url, &dead)?;
            }
            Ok(())
        })
    }

    /// Walks the stream at `key` from its first entry, [`BATCH`] entries at a time.
    fn for_each_range(
        &self,
        key: String,
        mut visit: impl FnMut(Vec<(String, HashMap<String, String>)>) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let mut after: Option<String> = None;
        loop {
            let entries = self.block_on(self.queue.stream_range(
                key.clone(),
                after.as_deref(),
                BATCH,
            ))?;
            let full = entries.len() >= BATCH;
            after = entries.last().map(|(id, _)| id.clone());
            visit(entries)?;
            if !full {
                return Ok(());
            }
        }
    }
}

/// The first 16 bytes of `url`'s SHA-256: enough to tell the URLs of a job apart.
fn url_digest(url: &str) -> [u8; 16] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(url.as_bytes());
    let mut first = [0; 16];
    first.copy_from_slice(&digest[..16]);
    first
}

/// The URL of an image item or a page item, from its JSON.
fn item_url(item: &serde_json::Value) -> Option<String> {
    item.get("url")
        .or_else(|| item.get("position").and_then(|p| p.get("url")))
        .and_then(|u| u.as_str().map(str::to_owned))
}

fn damaged(table: &str, record: &str, e: serde_json::Error) -> StateError {
    StateError::Corrupt {
        table: table.to_owned(),
        record: record.to_owned(),
        detail: e.to_string(),
    }
}

impl JobRecords for ClusterRecords {
    /// An image stored under bytes another URL stored first is a duplicate, as in a
    /// one-process run.
    fn for_each_image(
        &self,
        mut visit: impl FnMut(&str, &ImageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let keys = self.queue.keys();
        self.for_each_batch(keys.images(), |batch| {
            let mut records = Vec::with_capacity(batch.len());
            for (url, json) in batch {
                let record: ImageRecord =
                    serde_json::from_str(&json).map_err(|e| damaged("image-records", &url, e))?;
                records.push((url, record));
            }
            let hashes: Vec<String> = records
                .iter()
                .map(|(_, r)| {
                    r.stored
                        .as_ref()
                        .map(|f| f.content_key().to_owned())
                        .unwrap_or_default()
                })
                .collect();
            let owners = self.block_on(self.queue.hash_values(keys.owners(), &hashes))?;
            for ((url, mut record), owner) in records.into_iter().zip(owners) {
                if record.stored.is_some() && owner.is_some_and(|owner| owner != url) {
                    record.status = ImageStatus::Duplicate;
                }
                visit(&url, &record)?;
            }
            Ok(())
        })?;
        self.for_each_dead(Stream::Images, |url, dead| {
            let record = ImageRecord {
                seq: 0,
                page: String::new(),
                rule: String::new(),
                attribute: String::new(),
                metadata: BTreeMap::new(),
                caption: None,
                rights: None,
                status: ImageStatus::Failed,
                attempts: dead
                    .get("deliveries")
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(0),
                stored: None,
                failure: Some(FailureRecord {
                    class: DEAD_LETTER_CLASS.into(),
                    detail: dead.get("reason").cloned().unwrap_or_default(),
                }),
                run: 0,
                stored_run: 0,
                validators: Default::default(),
                recheck: false,
            };
            visit(&url, &record)
        })
    }

    fn for_each_page(
        &self,
        mut visit: impl FnMut(&str, &PageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let keys = self.queue.keys();
        self.for_each_batch(keys.pages(), |batch| {
            for (url, json) in batch {
                let record: PageRecord =
                    serde_json::from_str(&json).map_err(|e| damaged("page-records", &url, e))?;
                visit(&url, &record)?;
            }
            Ok(())
        })?;
        self.for_each_dead(Stream::Pages, |url, dead| {
            let record = PageRecord {
                start: String::new(),
                number: 0,
                status: PageStatus::Failed,
                images_found: 0,
                error: dead.get("reason").cloned(),
                class: Some(DEAD_LETTER_CLASS.into()),
                updated: 0,
                validators: Default::default(),
                next: None,
            };
            visit(&url, &record)
        })
    }

    fn shards(&self) -> Result<Vec<ShardRecord>, StateError> {
        self.block_on(self.queue.shard_records())
    }
}

/// The failure class of an item moved to the dead-letter stream.
pub(super) const DEAD_LETTER_CLASS: &str = "dead_letter";

/// Writes `manifest.jsonl` and `failures.jsonl` of `queue`'s whole job into `out`, streaming
/// the records from Redis (see [`ClusterRecords`]), and what `format` adds (`images.parquet`);
/// an item in the dead-letter stream is a failure of class `dead_letter`. Shards that workers
/// left open when they died are finished first, so every sample is in a complete tar.
pub async fn export_job(
    queue: &JobQueue,
    to: &Destination,
    format: Format,
    lease: Duration,
) -> Result<ExportSummary, ClusterError> {
    let out = to.dir.clone();
    std::fs::create_dir_all(&out).map_err(|source| ClusterError::Disk {
        path: out.clone(),
        source,
    })?;
    finish_orphans(queue, &out, lease).await?;
    let records = ClusterRecords {
        queue: queue.clone(),
        runtime: tokio::runtime::Handle::current(),
        running: !queue.counters().await?.is_finished(),
        failed: Mutex::new(None),
    };
    let files_here = to.bucket.is_none();
    let (exported, records) = tokio::task::spawn_blocking(move || {
        let exported = format.export(&records, &out, files_here);
        (exported, records)
    })
    .await
    .map_err(|_| ClusterError::TaskLost)?;
    if let Some(e) = records.failed.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    let summary = exported.map_err(|e| match e {
        StateError::Corrupt { record, detail, .. } => ClusterError::Job(format!(
            "the record of `{record}` in Redis is damaged: {detail}"
        )),
        other => ClusterError::from(other),
    })?;
    if let Some(bucket) = &to.bucket {
        bucket
            .put_files(&to.dir, &format.exported_files(&summary))
            .await
            .map_err(ClusterError::Bucket)?;
    }
    Ok(summary)
}
