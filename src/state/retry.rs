//! `scrape retry`: failed images back in the queue; `--recheck-images`: stored ones asked again.

use redb::{ReadableDatabase, ReadableTable, TableHandle};

use super::tables::{CONTENT, COUNTERS, IMAGES, PENDING};
use super::{ImageRecord, ImageStatus, State, StateError, counter, decode, encode};

/// Image records read per transaction by [`State::queue_rechecks`].
const RECHECK_BATCH: usize = 10_000;

impl State {
    /// Re-queues failed images whose class is in `classes` (all failed ones when empty), in one
    /// transaction; returns how many. Run only while no job uses this state (redb's file lock
    /// guarantees it).
    pub fn requeue_failed(&self, classes: &[String]) -> Result<u64, StateError> {
        self.requeue(
            |_, record| {
                record.status == ImageStatus::Failed
                    && (classes.is_empty()
                        || record
                            .failure
                            .as_ref()
                            .is_some_and(|f| classes.contains(&f.class)))
            },
            &[],
        )
    }

    /// Re-queues the images in `urls`, stored or not (`scrape verify --requeue`: their files
    /// are missing or damaged); a stored file's hash is forgotten, so the next download is
    /// placed again instead of taken for a duplicate of it. Returns how many.
    /// Images whose stored path `taken_out` says was taken out of its shard are re-queued too
    /// (duplicates pointing at it included), and the shards' `records` as they are now are
    /// saved in the same transaction.
    pub fn requeue_urls(
        &self,
        urls: &std::collections::BTreeSet<String>,
        taken_out: impl Fn(&str) -> bool,
        records: &[super::ShardRecord],
    ) -> Result<u64, StateError> {
        self.requeue(
            |url, record| {
                urls.contains(url)
                    || record
                        .stored
                        .as_ref()
                        .is_some_and(|file| taken_out(&file.path))
            },
            records,
        )
    }

    /// Queues every stored image (and duplicate) to be asked again by the download stage, only
    /// if it changed where its validators were kept (`--recheck-images`); it keeps what it has
    /// meanwhile. Images queued already (by a run that stopped) stay queued once. Committed
    /// [`RECHECK_BATCH`] images at a time, so memory stays flat however many there are; a run
    /// stopped midway queues the rest next time. Returns how many are queued now.
    pub fn queue_rechecks(&self) -> Result<u64, StateError> {
        self.queue_rechecks_by(RECHECK_BATCH)
    }

    pub(super) fn queue_rechecks_by(&self, batch: usize) -> Result<u64, StateError> {
        let mut after: Option<String> = None;
        loop {
            let txn = self.db.begin_write()?;
            let (last, queued) = {
                let mut images = txn.open_table(IMAGES)?;
                let mut pending = txn.open_table(PENDING)?;
                let mut counters = txn.open_table(COUNTERS)?;
                let mut chosen = Vec::new();
                let mut last = None;
                let range = match &after {
                    Some(after) => images.range::<&str>((
                        std::ops::Bound::Excluded(after.as_str()),
                        std::ops::Bound::Unbounded,
                    ))?,
                    None => images.range::<&str>(..)?,
                };
                for entry in range.take(batch) {
                    let (url, value) = entry?;
                    let record: ImageRecord =
                        decode(super::tables::IMAGES.name(), url.value(), value.value())?;
                    let kept =
                        matches!(record.status, ImageStatus::Stored | ImageStatus::Duplicate);
                    if kept && !record.recheck {
                        chosen.push((url.value().to_owned(), record));
                    }
                    last = Some(url.value().to_owned());
                }
                let mut seq = counters.get(counter::NEXT_SEQ)?.map_or(0, |v| v.value());
                for (url, mut record) in chosen.iter().cloned() {
                    record.recheck = true;
                    record.seq = seq;
                    images.insert(url.as_str(), encode(&record).as_slice())?;
                    pending.insert(seq, url.as_str())?;
                    seq += 1;
                }
                counters.insert(counter::NEXT_SEQ, seq)?;
                let before = counters
                    .get(counter::RECHECKS_QUEUED)?
                    .map_or(0, |v| v.value());
                let queued = before + chosen.len() as u64;
                counters.insert(counter::RECHECKS_QUEUED, queued)?;
                (last, queued)
            };
            txn.commit()?;
            match last {
                Some(last) => after = Some(last),
                None => return Ok(queued),
            }
        }
    }

    /// The validators an image queued by [`State::queue_rechecks`] is asked again with
    /// (empty when none were kept: it is asked in full); `None` for any other image.
    pub fn recheck_of(&self, url: &str) -> Result<Option<crate::page::Validators>, StateError> {
        let txn = self.db.begin_read()?;
        let images = txn.open_table(IMAGES)?;
        let Some(value) = images.get(url)? else {
            return Ok(None);
        };
        let record: ImageRecord = decode(super::tables::IMAGES.name(), url, value.value())?;
        Ok(record.recheck.then_some(record.validators))
    }

    /// Images queued to be asked again and not asked yet.
    pub fn rechecks_queued(&self) -> Result<u64, StateError> {
        let txn = self.db.begin_read()?;
        let counters = match txn.open_table(COUNTERS) {
            Ok(counters) => counters,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        Ok(counters
            .get(counter::RECHECKS_QUEUED)?
            .map_or(0, |v| v.value()))
    }

    /// Puts every image `wanted` chooses back in the queue, in one transaction, keeping the
    /// counters in step.
    fn requeue(
        &self,
        wanted: impl Fn(&str, &ImageRecord) -> bool,
        shards: &[super::ShardRecord],
    ) -> Result<u64, StateError> {
        let txn = self.db.begin_write()?;
        super::shards::save_shards(&txn, shards)?;
        let requeued;
        {
            let mut images = txn.open_table(IMAGES)?;
            let mut pending = txn.open_table(PENDING)?;
            let mut counters = txn.open_table(COUNTERS)?;
            let mut content = txn.open_table(CONTENT)?;
            let mut chosen = Vec::new();
            for entry in images.iter()? {
                let (url, value) = entry?;
                let record: ImageRecord =
                    decode(super::tables::IMAGES.name(), url.value(), value.value())?;
                if record.status != ImageStatus::Pending && wanted(url.value(), &record) {
                    chosen.push((url.value().to_owned(), record));
                }
            }
            let mut seq = counters.get(counter::NEXT_SEQ)?.map_or(0, |v| v.value());
            let mut less = std::collections::BTreeMap::<&str, u64>::new();
            for (url, mut record) in chosen.iter().cloned() {
                match record.status {
                    ImageStatus::Failed => *less.entry(counter::FAILED).or_default() += 1,
                    ImageStatus::Duplicate => *less.entry(counter::DUPLICATES).or_default() += 1,
                    ImageStatus::Stored => {
                        *less.entry(counter::STORED).or_default() += 1;
                        if let Some(file) = &record.stored {
                            *less.entry(counter::STORED_BYTES).or_default() += file.bytes;
                            content.remove(file.content_key())?;
                        }
                    }
                    ImageStatus::Pending => {}
                }
                if record.recheck {
                    *less.entry(counter::RECHECKS_QUEUED).or_default() += 1;
                }
                record.status = ImageStatus::Pending;
                record.recheck = false;
                record.failure = None;
                record.stored = None;
                record.seq = seq;
                images.insert(url.as_str(), encode(&record).as_slice())?;
                pending.insert(seq, url.as_str())?;
                seq += 1;
            }
            for (name, by) in less {
                let now = counters.get(name)?.map_or(0, |v| v.value());
                counters.insert(name, now.saturating_sub(by))?;
            }
            requeued = chosen.len() as u64;
            counters.insert(counter::NEXT_SEQ, seq)?;
        }
        txn.commit()?;
        Ok(requeued)
    }
}
