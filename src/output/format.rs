//! An output format, in one place: how verified images are stored by one process, how by the
//! workers of a job, and what is written at the end of a run (or by `scrape export`).
//!
//! | format | one process | workers | at the end |
//! |---|---|---|---|
//! | `files` | [`place::Files`] | a file each, create-only ([`store`]) | manifest |
//! | `webdataset` | [`shards::Shards`] | a shard per worker ([`own_shard`]) | manifest |
//! | `parquet` | as `files` | as `files` | manifest, `images.parquet` |
//!
//! Into a bucket (`--out s3://...`, [`bucket`]), one process puts each image as an object
//! ([`bucket::Uploads`]) or each finished shard ([`bucket::ShardPublisher`]); workers put
//! images create-only, and refuse WebDataset (a worker's open shard is on its own disk, and a
//! worker whose machine is gone could not be finished by another); the exports are put at the
//! end.
//!
//! [`place::Files`]: super::place::Files
//! [`shards::Shards`]: super::shards::Shards
//! [`own_shard`]: super::own_shard
//! [`store`]: super::store

use std::path::Path;
use std::sync::Arc;

use super::bucket::{self, Destination};
use super::manifest::{ExportSummary, JobRecords, export_checking};
use super::{FAILURES, MANIFEST, parquet, place, run_list_name, shards};
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

    /// One process: where the state writer places verified images, in `to` as `state`
    /// recorded it. Called on the runtime, whose handle puts objects into a bucket.
    pub fn placement(
        &self,
        to: &Destination,
        state: &State,
    ) -> Result<Box<dyn Placement>, StateError> {
        let out = &to.dir;
        let runtime = tokio::runtime::Handle::current;
        Ok(match (self.dataset.format, &to.bucket) {
            (OutputFormat::Files | OutputFormat::Parquet, None) => Box::new(place::Files::new(out)),
            (OutputFormat::Files | OutputFormat::Parquet, Some(bucket)) => {
                Box::new(bucket::Uploads::new(Arc::clone(bucket), runtime()))
            }
            (OutputFormat::WebDataset, bucket) => Box::new(shards::Shards::open(
                out,
                state,
                self.dataset.shard_size,
                bucket
                    .as_ref()
                    .map(|b| bucket::ShardPublisher::new(Arc::clone(b), runtime())),
            )?),
        })
    }

    /// Workers: how each stores verified images; an error says why they cannot store into
    /// `to`.
    pub fn for_workers(&self, bucket: Option<&bucket::Bucket>) -> Result<WorkerStorage, String> {
        match (self.dataset.format, bucket) {
            (OutputFormat::Files | OutputFormat::Parquet, _) => Ok(WorkerStorage::Files),
            (OutputFormat::WebDataset, None) => Ok(WorkerStorage::Shards {
                shard_size: self.dataset.shard_size,
            }),
            (OutputFormat::WebDataset, Some(bucket)) => Err(format!(
                "workers cannot write WebDataset shards into `{}`: a worker's open shard is on                  its own disk, and one whose machine is gone could not be finished by another;                  give the workers a shared folder as --out, or run `format = \"webdataset\"`                  into the bucket from one process",
                bucket.url()
            )),
        }
    }

    /// At the end: `manifest.jsonl` and `failures.jsonl` from `records`, and what the format
    /// adds (`images.parquet`), written in `out`. Stored files are looked for there only when
    /// they are not objects of a bucket (`files_here`).
    pub fn export(
        &self,
        records: &impl JobRecords,
        out: &Path,
        files_here: bool,
    ) -> Result<ExportSummary, StateError> {
        let summary = export_checking(records, out, files_here)?;
        if self.dataset.format == OutputFormat::Parquet {
            parquet::export_parquet(records, out, self.dataset.parquet_images)?;
        }
        Ok(summary)
    }

    /// The names (in the output folder) of what [`Format::export`] wrote, as it said in
    /// `summary`: what goes into a bucket after it.
    pub fn exported_files(&self, summary: &ExportSummary) -> Vec<String> {
        let mut names = vec![MANIFEST.to_owned(), FAILURES.to_owned()];
        names.extend(self.exported_table().map(str::to_owned));
        names.extend(summary.run_list.as_ref().map(|l| run_list_name(l.number)));
        names
    }

    /// The files the export writes besides the manifest, for what a run says at its end.
    pub fn exported_table(&self) -> Option<&'static str> {
        (self.dataset.format == OutputFormat::Parquet).then_some(parquet::PARQUET)
    }
}
