//! `scrape`: turns image sites into complete, verified, resumable image collections.
//!
//! The I/O half of the tool; the pure half (profiles, extraction, pagination, verification,
//! drafts, HAR matching) is the `scrape-core` crate, re-exported here under the same names.
//! The pipeline, in the order data flows:
//!
//! - [`profile`]: TOML site profiles, checked, with `file:line:col` diagnostics (core)
//! - [`input`]: URL lists (txt, csv, jsonl, gzipped) imported into the state
//! - [`net`]: the network edge: the HTTP client, failure classes, retries, sessions; [`proxy`]:
//!   proxy endpoints and their rotation (core)
//! - [`fetch`]: pages over plain HTTP → [`page::PageSnapshot`]; [`render`]: the same through
//!   Chromium, for JavaScript-heavy sites
//! - [`extract`]: image URLs from a page by the profile's rules (core)
//! - [`paginate`]: the next page (core); [`analyze`] runs a page through both (core)
//! - [`engine`]: where pages come from (plain HTTP or the browser), how they are read, and what
//!   each leads to: the one page step both drivers (`crawl`, `cluster`) call
//! - [`crawl`]: chains of pages, checkpointed in the state
//! - [`state`]: the redb database that makes everything resumable
//! - [`download`]: images fetched, verified ([`verify`], core), resized when asked, and handed
//!   to the state writer
//! - [`output`]: files placed under their final names, manifest and failure list
//! - [`exit`]: how a run that stopped with an error ends (its exit code, and the help shown)
//! - [`job`]: crawl and download together; [`telemetry`]: progress, metrics and summary
//! - [`cluster`]: the same job run by many workers over one Redis (`scrape worker`)
//! - [`replay`]: runs recorded to HAR files and replayed from them, offline
//! - [`draft`]: a first profile for a new site, drafted from its pages (core)
//! - [`demo`]: the bundled demo site served on loopback
//! - [`redact`]: secrets out of URLs before they are shown (core)
//! - [`sitemap`]: sitemap files, the pages and images they list (core)
//! - [`wall`]: sign-in walls and bot challenges told from pages (core)
//! - [`fuzz`]: fuzz entry points of the I/O crate's parsers (URL lists)

pub use scrape_core::{
    analyze, bucket_url, draft, embedded, extract, failure, form, page, paginate, profile, proxy,
    redact, robots, sitemap, verify, wall,
};

pub mod cluster;
pub mod crawl;
pub mod demo;
pub mod download;
pub mod engine;
pub mod exit;
pub mod fetch;
pub mod fuzz;
pub mod input;
pub mod job;
pub mod net;
pub mod output;
pub mod render;
pub mod replay;
pub mod state;
pub mod telemetry;
