//! The output stage: what a user gets in the output folder.
//!
//! - [`place`]: a verified download gets its final name (called by the state writer only)
//! - [`audit`]: stored files re-hashed against the state (`scrape verify`)
//! - [`shards`]: WebDataset tar shards, the placement of `format = "webdataset"`
//! - [`manifest`]: `manifest.jsonl` and `failures.jsonl`, derived from the state database
//! - [`parquet`]: `images.parquet` (`format = "parquet"`), derived from it likewise

pub mod audit;
pub mod manifest;
mod original;
pub mod parquet;
pub mod place;
pub mod shards;

use std::path::Path;

use crate::profile::{DatasetSettings, OutputFormat};
use crate::state::{Placement, State, StateError};

pub use manifest::{ExportSummary, FAILURES, JobRecords, MANIFEST, export};

/// Where verified images go for `dataset`'s format: files, or the shards of `out` as `state`
/// recorded them.
pub fn placement(
    dataset: &DatasetSettings,
    out: &Path,
    state: &State,
) -> Result<Box<dyn Placement>, StateError> {
    Ok(match dataset.format {
        OutputFormat::Files | OutputFormat::Parquet => Box::new(place::Files::new(out)),
        OutputFormat::WebDataset => Box::new(shards::Shards::open(out, state, dataset.shard_size)?),
    })
}
