//! `scrape`: turns image sites into complete, verified, resumable image collections.
//!
//! The pipeline, in the order data flows:
//!
//! - [`profile`]: TOML site profiles, checked, with `file:line:col` diagnostics (pure)
//! - [`fetch`]: pages over plain HTTP (I/O) → [`page::PageSnapshot`]; [`render`]: the same
//!   through Chromium, for JavaScript-heavy sites (I/O)
//! - [`extract`]: image URLs from a page by the profile's rules (pure)
//! - [`paginate`]: the next page (pure); [`analyze`] runs a page through both
//! - [`crawl`]: chains of pages, checkpointed (I/O); [`session`]: headers from the environment,
//!   cookies and tokens that requests carry (I/O)
//! - [`state`]: the redb database that makes everything resumable (I/O)
//! - [`download`]: images fetched, verified and stored (I/O)
//! - [`job`]: crawl and download together; [`telemetry`]: progress and summary
//! - [`demo`]: the bundled demo site served on loopback
//! - [`proxy`]: the proxies requests go through, rotated, failing ones benched (pure)
//! - [`replay`]: runs recorded to HAR files and replayed from them, offline
//! - [`draft`]: a first profile for a new site, drafted from its pages (pure)

pub use scrape_core::{analyze, draft, extract, page, paginate, profile, proxy, redact, verify};

pub mod crawl;
pub mod demo;
pub mod download;
pub mod fetch;
pub mod import;
pub mod job;
pub mod render;
pub mod replay;
pub mod session;
pub mod source;
pub mod state;
pub mod telemetry;
pub mod transport;
pub mod urllist;
