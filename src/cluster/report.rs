//! A job's view over all its workers: totals, per worker, per host, rate and ETA
//! (`scrape status --redis`), and `manifest.jsonl` and `failures.jsonl` for the whole job
//! (`scrape export --redis`), written by the same export a one-process run uses.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::Serialize;

use super::ClusterError;
use super::keys::JOBS;
use super::queue::{Counters, JobQueue};
use crate::output::{ExportSummary, JobRecords, export};
use crate::state::{FailureRecord, ImageRecord, ImageStatus, PageRecord, PageStatus, StateError};

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

/// The records of a whole job, read from Redis for the export.
struct ClusterRecords {
    images: Vec<(String, ImageRecord)>,
    pages: Vec<(String, PageRecord)>,
}

impl JobRecords for ClusterRecords {
    fn for_each_image(
        &self,
        mut visit: impl FnMut(&str, &ImageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        self.images.iter().try_for_each(|(url, r)| visit(url, r))
    }

    fn for_each_page(
        &self,
        mut visit: impl FnMut(&str, &PageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        self.pages.iter().try_for_each(|(url, r)| visit(url, r))
    }
}

/// Writes `manifest.jsonl` and `failures.jsonl` of `queue`'s whole job into `out`: an image
/// stored under bytes another URL stored first is a duplicate, as in a one-process run; an
/// item in the dead-letter stream is a failure of class `dead_letter`.
pub async fn export_job(queue: &JobQueue, out: &Path) -> Result<ExportSummary, ClusterError> {
    let keys = queue.keys();
    let owners: HashMap<String, String> =
        queue.scan_hash(keys.owners()).await?.into_iter().collect();
    let damaged = |what: &str, key: &str, e: serde_json::Error| {
        ClusterError::Job(format!(
            "the {what} record of `{key}` in Redis is damaged: {e}"
        ))
    };
    let mut images = Vec::new();
    for (url, json) in queue.scan_hash(keys.images()).await? {
        let mut record: ImageRecord =
            serde_json::from_str(&json).map_err(|e| damaged("image", &url, e))?;
        if let Some(file) = &record.stored
            && owners.get(&file.sha256).is_some_and(|owner| *owner != url)
        {
            record.status = ImageStatus::Duplicate;
        }
        images.push((url, record));
    }
    let mut pages = Vec::new();
    for (url, json) in queue.scan_hash(keys.pages()).await? {
        let record: PageRecord =
            serde_json::from_str(&json).map_err(|e| damaged("page", &url, e))?;
        pages.push((url, record));
    }
    for dead in queue.dead_entries().await? {
        let item = dead.get("item").cloned().unwrap_or_default();
        let stream = dead.get("stream").map_or("", String::as_str);
        let url = serde_json::from_str::<serde_json::Value>(&item)
            .ok()
            .and_then(|v| {
                v.get("url")
                    .or_else(|| v.get("position").and_then(|p| p.get("url")))
                    .and_then(|u| u.as_str().map(str::to_owned))
            })
            .unwrap_or(item);
        let reason = dead.get("reason").cloned().unwrap_or_default();
        let failure = FailureRecord {
            class: "dead_letter".into(),
            detail: reason.clone(),
        };
        if stream == "images" {
            images.push((
                url.clone(),
                ImageRecord {
                    seq: 0,
                    page: String::new(),
                    rule: String::new(),
                    attribute: String::new(),
                    metadata: BTreeMap::new(),
                    status: ImageStatus::Failed,
                    attempts: dead
                        .get("deliveries")
                        .and_then(|d| d.parse().ok())
                        .unwrap_or(0),
                    stored: None,
                    failure: Some(failure),
                },
            ));
        } else {
            pages.push((
                url,
                PageRecord {
                    start: String::new(),
                    number: 0,
                    status: PageStatus::Failed,
                    images_found: 0,
                    error: Some(reason),
                    class: Some("dead_letter".into()),
                    updated: 0,
                },
            ));
        }
    }
    images.sort_by(|a, b| a.0.cmp(&b.0));
    pages.sort_by(|a, b| a.0.cmp(&b.0));
    let records = ClusterRecords { images, pages };
    let out = out.to_owned();
    std::fs::create_dir_all(&out).map_err(|source| ClusterError::Disk {
        path: out.clone(),
        source,
    })?;
    tokio::task::spawn_blocking(move || export(&records, &out))
        .await
        .map_err(|_| ClusterError::TaskLost)?
        .map_err(ClusterError::from)
}
