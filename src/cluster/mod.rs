//! Scale-out: the same binary as many workers of one job over one Redis.
//!
//! Work items (pages of the frontier, images to download) are entries of two Redis Streams,
//! read through one consumer group. A worker acknowledges an entry only in the script that
//! commits its effect (records, the items it leads to, counters, the done mark), so a worker
//! killed at any point loses nothing: its entries are reclaimed by the others once their lease
//! runs out. Per-host limits and back-off are kept in Redis for the whole job.
//!
//! - [`keys`], [`item`]: key names and item encoding (pure)
//! - [`identity`]: which profile a job runs, as a digest (pure)
//! - [`scripts`]: the Lua scripts that make each effect atomic and safe to repeat
//! - [`queue`]: the job's streams, counters and host leases over one reconnecting connection
//! - [`ledger`]: the job in Redis as a worker's ledger of pages
//! - [`worker`]: the worker loop (`scrape worker`)
//! - [`report`]: a job's totals and its export (`scrape status`, `scrape export`)

pub mod identity;
pub mod item;
pub mod keys;
pub mod ledger;
pub mod queue;
pub mod report;
pub mod retry;
pub mod scripts;
pub mod shards;
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
    Login(#[from] crate::net::session::LoginError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error("{0}")]
    Job(String),
    #[error("cannot use the output bucket")]
    Bucket(#[source] crate::output::bucket::BucketError),
    #[error("a worker task stopped unexpectedly")]
    TaskLost,
    #[error("interrupted")]
    Cancelled,
}

/// A Redis URL as it may be shown in a message or a log: without its user and password, even
/// when it does not parse (a mistyped port must not print the password either).
pub fn shown_url(url: &str) -> String {
    if let Ok(parsed) = url::Url::parse(url) {
        return crate::redact::redact(&parsed);
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// `text` (an error of the redis crate about `url`) with `url`'s user and password taken out,
/// in case the crate named them.
pub fn hide_credentials(text: &str, url: &str) -> String {
    let mut text = text.replace(url, &shown_url(url));
    if let Ok(parsed) = url::Url::parse(url) {
        for secret in [parsed.password().unwrap_or(""), parsed.username()] {
            if secret.len() >= 3 {
                text = text.replace(secret, "***");
            }
        }
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_url_is_shown_without_its_user_and_password() {
        let cases = [
            (
                "password",
                "redis://:pw-7q@127.0.0.1:6379/0",
                "redis://127.0.0.1:6379/0",
            ),
            (
                "user and password",
                "redis://ann:pw-7q@h:6379/1",
                "redis://h:6379/1",
            ),
            ("no credentials", "redis://h:6379/0", "redis://h:6379/0"),
            (
                "port that does not parse",
                "redis://:pw-7q@h:port/0",
                "redis://h:port/0",
            ),
        ];
        for (name, url, shown) in cases {
            assert_eq!(shown_url(url), shown, "{name}");
        }
    }

    #[test]
    fn credentials_named_in_an_error_are_hidden() {
        let url = "redis://ann:pw-7q@h:6379/0";
        let text = hide_credentials(&format!("bad answer from {url} for pw-7q and ann"), url);
        assert_eq!(text, "bad answer from redis://h:6379/0 for *** and ***");
    }
}
