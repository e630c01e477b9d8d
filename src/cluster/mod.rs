//! Scale-out: the same binary as many workers of one job over one Redis.
//!
//! Work items (pages of the frontier, images to download) are entries of two Redis Streams,
//! read through one consumer group. A worker acknowledges an entry only in the script that
//! commits its effect (records, the items it leads to, counters, the done mark), so a worker
//! killed at any point loses nothing: its entries are reclaimed by the others once their lease
//! runs out. Per-host limits and back-off are kept in Redis for the whole job.
//!
//! - [`keys`], [`item`]: key names and item encoding (pure)
//! - [`scripts`]: the Lua scripts that make each effect atomic and safe to repeat
//! - [`queue`]: the job's streams, counters and host leases over one reconnecting connection
//! - [`store`]: create-only, content-addressed files on a shared folder
//! - [`worker`]: the worker loop (`scrape worker`)
//! - [`report`]: a job's totals and its export (`scrape status`, `scrape export`)

pub mod item;
pub mod keys;
pub mod queue;
pub mod report;
pub mod scripts;
pub mod store;
pub mod worker;

use std::path::PathBuf;

pub use item::{ImageItem, Item, PageItem};
pub use keys::{JobKeys, Stream};
pub use queue::{Connection, Counters, JobQueue};
pub use worker::{WorkerOptions, WorkerSummary, run_worker};

use crate::paginate::first_page;
use crate::profile::Profile;

/// Why a worker, an enqueue, a status or an export over Redis could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("`{url}` is not a Redis URL (redis://HOST:PORT/DB)")]
    Url {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("cannot connect to Redis at `{url}`")]
    Connect {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("{what} failed on Redis at `{url}`")]
    Redis {
        what: String,
        url: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("cannot write `{path}`")]
    Disk {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Unsupported(String),
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("cannot start the browser")]
    Render(#[source] crate::render::RenderError),
    #[error(transparent)]
    Session(#[from] crate::net::session::SessionError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error("{0}")]
    Job(String),
    #[error("a worker task stopped unexpectedly")]
    TaskLost,
    #[error("interrupted")]
    Cancelled,
}

/// The first page of each of `profile`'s chains, as items.
pub fn start_items(profile: &Profile) -> Vec<Item> {
    profile
        .start
        .iter()
        .map(|start| {
            Item::Page(PageItem {
                start: start.to_string(),
                position: first_page(&profile.pagination, start),
                level: None,
                depth: 0,
                metadata: Default::default(),
                last_id: None,
            })
        })
        .collect()
}
