//! WebDataset shards with workers (`format = "webdataset"`): each worker appends to a shard of
//! its own ([`crate::output::own_shard`]) and commits each sample with the shard's record, so
//! the job in Redis always says how much of every shard is committed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::Mutex;

use super::ClusterError;
use super::queue::{ImageCommitted, JobQueue};
use crate::output::own_shard::{self, OwnShard};
use crate::state::{Held, Sample, ShardRecord, StoredFile};

/// A worker's shard: samples are placed and committed one at a time, so a sample whose commit
/// does not count it stored (a redelivery done before, bytes another URL owns) can be taken
/// back off the end of the shard.
pub struct WorkerShard {
    shard: Mutex<OwnShard>,
    out: PathBuf,
    lease: Duration,
}

impl WorkerShard {
    pub fn new(out: &Path, shard_size: u64, lease: Duration) -> Self {
        Self {
            shard: Mutex::new(OwnShard::new(out, shard_size)),
            out: out.to_owned(),
            lease,
        }
    }

    /// The number of the shard this worker has open.
    pub async fn number(&self) -> Option<u64> {
        self.shard.lock().await.number()
    }

    /// Places `body` in this worker's shard as the sample of `file` (whose path becomes the
    /// member's) and has `commit` commit it with the shard's record; a sample not counted
    /// stored is taken back out. A full shard is finished after the commit.
    pub async fn place<F, Fut>(
        &self,
        queue: &JobQueue,
        body: Held,
        file: &mut StoredFile,
        sample: Sample<'_>,
        commit: F,
    ) -> Result<ImageCommitted, ClusterError>
    where
        F: FnOnce(StoredFile, ShardRecord) -> Fut,
        Fut: std::future::Future<Output = Result<ImageCommitted, ClusterError>>,
    {
        let mut shard = self.shard.lock().await;
        if shard.number().is_none() {
            let number = queue.take_shard(self.lease).await?;
            shard.open(number)?;
        }
        let (before, after) = shard.append(body, file, sample).await?;
        let committed = commit(file.clone(), after).await;
        match committed {
            Ok(ImageCommitted::Counted) => {}
            // Not committed, or not as stored: its bytes are not this shard's to keep.
            _ => shard.undo(before).await?,
        }
        let committed = committed?;
        if shard.is_full() {
            self.finish_locked(queue, &mut shard).await?;
        }
        Ok(committed)
    }

    /// Finishes this worker's shard as it is (the worker stops).
    pub async fn finish(&self, queue: &JobQueue) -> Result<(), ClusterError> {
        let mut shard = self.shard.lock().await;
        self.finish_locked(queue, &mut shard).await
    }

    async fn finish_locked(
        &self,
        queue: &JobQueue,
        shard: &mut OwnShard,
    ) -> Result<(), ClusterError> {
        let Some(number) = shard.number() else {
            return Ok(());
        };
        match shard.finish().await? {
            // Nothing was ever committed to it: it is no shard of the job.
            Some(record) if record.samples == 0 => own_shard::remove_open(&self.out, number)?,
            Some(record) => {
                queue.save_shard(&record).await?;
                own_shard::rename_finished(&self.out, number)?;
            }
            None => {}
        }
        Ok(())
    }

    /// Extends this worker's ownership of its open shard.
    pub async fn renew(&self, queue: &JobQueue) -> Result<(), ClusterError> {
        match self.number().await {
            Some(number) => queue.hold_shard(number, self.lease).await,
            None => Ok(()),
        }
    }
}

/// Finishes the shards in `out` that workers left open when they died (no worker owns them
/// any more): each is cut to what the job committed, ended and renamed, and one nothing was
/// committed to is removed. How many were finished.
pub async fn finish_orphans(
    queue: &JobQueue,
    out: &Path,
    lease: Duration,
) -> Result<usize, ClusterError> {
    let records = queue.shard_records().await?;
    let mut finished = 0;
    // A shard recorded as finished whose rename a crash interrupted, or one still open.
    let open = own_shard::open_shards(out);
    for number in open {
        if !queue.adopt_shard(number, lease).await? {
            continue;
        }
        match records.iter().find(|r| r.shard == number) {
            Some(record) => {
                let (folder, record) = (out.to_owned(), record.clone());
                let done =
                    tokio::task::spawn_blocking(move || own_shard::finish_orphan(&folder, record))
                        .await
                        .map_err(|_| ClusterError::TaskLost)??;
                queue.save_shard(&done).await?;
                own_shard::rename_finished(out, number)?;
                finished += 1;
            }
            None => own_shard::remove_open(out, number)?,
        }
    }
    Ok(finished)
}
