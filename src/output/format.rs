//! An output format, in one place: how verified images are stored by one process, how by the
//! workers of a job, and what is written at the end of a run (or by `scrape export`).
//!
//! | format | one process | workers | at the end |
//! |---|---|---|---|
//! | `files` | [`place::Files`] | a file each, create-only ([`crate::cluster::store`]) | manifest |
//! | `webdataset` | [`shards::Shards`] | a shard per worker ([`own_shard`]) | manifest |
//! | `parquet` | as `files` | as `files` | manifest, `images.parquet` |
//!
//! [`place::Files`]: super::place::Files
//! [`shards::Shards`]: super::shards::Shards
//! [`own_shard`]: super::own_shard

use std::path::Path;

use super::manifest::{ExportSummary, JobRecords, export};
use super::{parquet, place, shards};
use crate::profile::{DatasetSettings, OutputFormat};
use crate::state::{Placement, State, StateError};

/// The output format of a job, with the settings it stores by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    dataset: DatasetSettings,
}

/// How each worker of a job stores verified images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerStorage {
    /// A file each at its path template's name, linked create-only.
    Files,
    /// Samples of a tar shard of the worker's own, `shard_size` samples each.
    Shards { shard_size: u64 },
}

impl Format {
    pub fn of(dataset: &DatasetSettings) -> Self {
        Self { dataset: *dataset }
    }

    pub fn name(&self) -> &'static str {
        self.dataset.format.name()
    }

    /// One process: where the state writer places verified images, in `out` as `state`
    /// recorded it.
    pub fn placement(&self, out: &Path, state: &State) -> Result<Box<dyn Placement>, StateError> {
        Ok(match self.dataset.format {
            OutputFormat::Files | OutputFormat::Parquet => Box::new(place::Files::new(out)),
            OutputFormat::WebDataset => {
                Box::new(shards::Shards::open(out, state, self.dataset.shard_size)?)
            }
        })
    }

    /// Workers: how each stores verified images.
    pub fn for_workers(&self) -> WorkerStorage {
        match self.dataset.format {
            OutputFormat::Files | OutputFormat::Parquet => WorkerStorage::Files,
            OutputFormat::WebDataset => WorkerStorage::Shards {
                shard_size: self.dataset.shard_size,
            },
        }
    }

    /// At the end: `manifest.jsonl` and `failures.jsonl` from `records`, and what the format
    /// adds (`images.parquet`).
    pub fn export(
        &self,
        records: &impl JobRecords,
        out: &Path,
    ) -> Result<ExportSummary, StateError> {
        let summary = export(records, out)?;
        if self.dataset.format == OutputFormat::Parquet {
            parquet::export_parquet(records, out, self.dataset.parquet_images)?;
        }
        Ok(summary)
    }

    /// The files the export writes besides the manifest, for what a run says at its end.
    pub fn exported_table(&self) -> Option<&'static str> {
        (self.dataset.format == OutputFormat::Parquet).then_some(parquet::PARQUET)
    }
}
