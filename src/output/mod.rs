//! The output stage: what a user gets in the output folder.
//!
//! - [`place`]: a verified download gets its final name (called by the state writer only)
//! - [`manifest`]: `manifest.jsonl` and `failures.jsonl`, derived from the state database

pub mod manifest;
pub mod place;

pub use manifest::{ExportSummary, FAILURES, MANIFEST, export};
