//! The output stage: what a user gets in the output folder.
//!
//! - [`place`]: a verified download gets its final name (called by the state writer only)
//! - [`audit`]: stored files re-hashed against the state (`scrape verify`)
//! - [`manifest`]: `manifest.jsonl` and `failures.jsonl`, derived from the state database

pub mod audit;
pub mod manifest;
pub mod place;

pub use manifest::{ExportSummary, FAILURES, JobRecords, MANIFEST, export};
