//! Every redb table of the state database, declared once. Names carry a version so a layout
//! change is a new table, never a misread old one.

use redb::{MultimapTableDefinition, TableDefinition};

/// Facts about the job: `schema`, `profile` (name), `created`.
pub const META: TableDefinition<&str, &str> = TableDefinition::new("meta_v1");

/// Running totals kept in step with the records they count (see [`super::Counter`]), so
/// `status` and progress never scan the big tables.
pub const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters_v1");

/// The crawl frontier: start URL → JSON [`super::ChainCheckpoint`].
pub const CHAINS: TableDefinition<&str, &[u8]> = TableDefinition::new("chains_v1");

/// Pages reached through `[[follow]]` links, queued or done: URL → JSON
/// [`super::LinkRecord`] (so a link found twice is queued once).
pub const LINKS: TableDefinition<&str, &[u8]> = TableDefinition::new("links_v1");

/// Linked pages still to crawl, in discovery order: sequence number → URL.
pub const LINK_QUEUE: TableDefinition<u64, &str> = TableDefinition::new("link_queue_v1");

/// Every page fetched or failed: URL → JSON [`super::PageRecord`].
pub const PAGES: TableDefinition<&str, &[u8]> = TableDefinition::new("pages_v1");

/// Every image URL discovered: normalised URL → JSON [`super::ImageRecord`].
pub const IMAGES: TableDefinition<&str, &[u8]> = TableDefinition::new("images_v1");

/// Images still to download, in discovery order: sequence number → normalised URL.
pub const PENDING: TableDefinition<u64, &str> = TableDefinition::new("pending_v1");

/// Stored content: sha256 (hex) → path relative to the output folder.
pub const CONTENT: TableDefinition<&str, &str> = TableDefinition::new("content_v1");

/// URL lists read by `scrape download`: list path → JSON [`super::ImportCheckpoint`].
pub const IMPORTS: TableDefinition<&str, &[u8]> = TableDefinition::new("imports_v1");

/// robots.txt of each origin the crawl asked, with when it was fetched and for how long it
/// holds: origin (`https://host:port`) → JSON [`super::RobotsRecord`].
pub const ROBOTS: TableDefinition<&str, &[u8]> = TableDefinition::new("robots_v1");

/// WebDataset tar shards written so far (finished ones and the one open): shard number → JSON
/// [`super::ShardRecord`], committed with the images placed in them.
pub const SHARDS: TableDefinition<u64, &[u8]> = TableDefinition::new("shards_v1");

/// The band index of perceptual hashes (near-duplicate flags): `(distance, band number, band
/// value)` → `(hash, sha256)` of each stored image, with the bands of
/// `scrape_core::phash::bands` for that distance. Two hashes within the distance share a band,
/// so a lookup reads a few short runs of the index, never every hash. Written in the
/// transaction that records the image as stored.
pub const PHASH_BANDS: MultimapTableDefinition<(u32, u32, u64), (u64, &str)> =
    MultimapTableDefinition::new("phash_bands_v1");

/// Every run of the job, numbered from 1 in the order they began: number → JSON
/// [`super::RunRecord`]. Kept by `--fresh`, so a number never names two runs. Images of a state
/// from before runs were numbered count as found by run 0, which has no record.
pub const RUNS: TableDefinition<u32, &[u8]> = TableDefinition::new("runs_v1");
