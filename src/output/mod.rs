//! The output stage: what a user gets in the output folder.
//!
//! - [`format`]: an output format in one place: one process, workers, the end of a run
//! - [`place`]: a verified download gets its final name (called by the state writer only)
//! - [`store`]: create-only, content-addressed files on a folder many workers share
//! - [`bucket`]: images, shards and exports in an S3-compatible bucket (`--out s3://...`)
//! - [`audit`]: stored files re-hashed against the state (`scrape verify`)
//! - [`shards`]: WebDataset tar shards, the placement of `format = "webdataset"`
//! - [`own_shard`]: the WebDataset shard each worker of a job writes
//! - [`manifest`]: `manifest.jsonl`, `failures.jsonl` and the run's `runs/NNNNN.jsonl`, derived
//!   from the state database
//! - [`parquet`]: `images.parquet` (`format = "parquet"`), derived from it likewise

pub mod audit;
pub mod bucket;
mod format;
pub mod manifest;
mod original;
pub mod own_shard;
pub mod parquet;
pub mod place;
pub mod shards;
pub mod store;

pub use format::{Format, WorkerStorage};
pub use manifest::{
    ExportSummary, FAILURES, JobRecords, MANIFEST, RUNS_DIR, RunListed, RunWindow, export,
    found_at, run_list_name, run_list_path, run_time,
};
