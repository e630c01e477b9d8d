//! `scrape retry`: failed images back in the queue.

use redb::{ReadableTable, TableHandle};

use super::tables::{COUNTERS, IMAGES, PENDING};
use super::{ImageRecord, ImageStatus, State, StateError, counter, decode, encode};

impl State {
    /// Re-queues failed images whose class is in `classes` (all failed ones when empty), in one
    /// transaction; returns how many. Run only while no job uses this state (redb's file lock
    /// guarantees it).
    pub fn requeue_failed(&self, classes: &[String]) -> Result<u64, StateError> {
        let txn = self.db.begin_write()?;
        let requeued;
        {
            let mut images = txn.open_table(IMAGES)?;
            let mut pending = txn.open_table(PENDING)?;
            let mut counters = txn.open_table(COUNTERS)?;
            let mut chosen = Vec::new();
            for entry in images.iter()? {
                let (url, value) = entry?;
                let record: ImageRecord = decode(super::tables::IMAGES.name(), value.value())?;
                let wanted = record.status == ImageStatus::Failed
                    && (classes.is_empty()
                        || record
                            .failure
                            .as_ref()
                            .is_some_and(|f| classes.contains(&f.class)));
                if wanted {
                    chosen.push((url.value().to_owned(), record));
                }
            }
            let mut seq = counters.get(counter::NEXT_SEQ)?.map_or(0, |v| v.value());
            for (url, mut record) in chosen.iter().cloned() {
                record.status = ImageStatus::Pending;
                record.failure = None;
                record.attempts = 0;
                record.seq = seq;
                images.insert(url.as_str(), encode(&record).as_slice())?;
                pending.insert(seq, url.as_str())?;
                seq += 1;
            }
            requeued = chosen.len() as u64;
            let failed = counters.get(counter::FAILED)?.map_or(0, |v| v.value());
            counters.insert(counter::FAILED, failed.saturating_sub(requeued))?;
            counters.insert(counter::NEXT_SEQ, seq)?;
        }
        txn.commit()?;
        Ok(requeued)
    }
}
