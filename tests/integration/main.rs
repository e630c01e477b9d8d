//! Integration tests: the real `scrape` binary against sites served on `127.0.0.1:0`.
//!
//! One test binary, a module per feature; `support` holds the shared servers and helpers.

mod support;

mod bad_input;
mod browser;
mod browsing;
mod bucket;
mod cli;
mod cluster;
mod crawl;
mod cursor;
mod dataset;
mod devtools;
mod disk;
mod docs;
mod e2e;
mod fuzz;
mod hostile;
mod layout;
mod metrics;
mod proxy;
mod refresh;
mod render;
mod replay;
mod resize;
mod resume;
mod robots;
mod runs;
mod schema;
mod session;
mod sitemap;
mod tools;
mod urls;
