//! The WebDataset shards the state knows of: how far each tar (and its index) is committed, and
//! whether it is finished. The output stage writes the shards; the writer commits their records
//! in the transaction that records the images placed in them, so the state and the tars never
//! disagree about what a committed shard holds.

use redb::{ReadableDatabase, ReadableTable, TableHandle, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::records::Record;
use super::tables::SHARDS;
use super::{State, StateError, decode, encode};

/// One shard as committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub shard: u64,
    pub samples: u64,
    /// Bytes of the tar that hold its committed samples (with the end-of-archive blocks once
    /// finished); anything past this in a `.tmp` tar is from a batch that was never committed.
    pub tar_bytes: u64,
    /// Bytes of its JSON-lines index, likewise.
    pub index_bytes: u64,
    /// Complete: renamed (or to be renamed) to its final name, never written again.
    pub finished: bool,
}

impl Record for ShardRecord {
    fn check(&self) -> Result<(), String> {
        if self.finished && !self.tar_bytes.is_multiple_of(512) {
            return Err(format!(
                "a finished shard of {} bytes, not whole 512-byte blocks",
                self.tar_bytes
            ));
        }
        Ok(())
    }
}

impl State {
    /// Every shard record, in shard order.
    pub fn shards(&self) -> Result<Vec<ShardRecord>, StateError> {
        let txn = self.database().begin_read()?;
        let table = match txn.open_table(SHARDS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut shards = Vec::new();
        for entry in table.iter()? {
            let (key, value) = entry?;
            let key = key.value();
            shards.push(decode(SHARDS.name(), &key.to_string(), value.value())?);
        }
        Ok(shards)
    }
}

/// Writes `records` in `txn` (by the writer, before the commit of the images they hold).
pub(super) fn save_shards(
    txn: &WriteTransaction,
    records: &[ShardRecord],
) -> Result<(), StateError> {
    if records.is_empty() {
        return Ok(());
    }
    let mut table = txn.open_table(SHARDS)?;
    for record in records {
        table.insert(record.shard, encode(record).as_slice())?;
    }
    Ok(())
}
