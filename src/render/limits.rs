//! What a page and a browser may take: the bytes of each response a page receives, and the
//! memory of a browser's process tree.
//!
//! - **Page size.** Every response of the page is counted as it arrives (`Network.dataReceived`,
//!   decoded bytes, so a gzip document of a few megabytes that unpacks to gigabytes counts for
//!   what it unpacks to), and the page ends as too large once one passes
//!   [`BrowserSettings::max_page_bytes`], the bound the static fetch puts on a page. Images,
//!   media and fonts are blocked before they load and never count.
//! - **Memory.** A page can grow its DOM or its JavaScript heap without loading anything. Each
//!   browser's process tree (the browser, its renderers, GPU and utility processes) is read from
//!   `/proc` every [`MEMORY_POLL`]: the sum of their private resident memory (`RssAnon`; the
//!   shared libraries and shared memory they all map would be counted once per process). A
//!   browser past [`BrowserSettings::memory_limit_bytes`] is killed at once, before the
//!   machine runs out, and the pool replaces it.

use std::collections::HashMap;
use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{EventDataReceived, RequestId};
use chromiumoxide::error::CdpError;
use chromiumoxide::listeners::EventStream;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

#[cfg(doc)]
use super::BrowserSettings;

/// How often a browser's memory is read. A page that grows by a few hundred MB a second passes
/// the limit by a fraction of that before it is stopped.
pub(crate) const MEMORY_POLL: Duration = Duration::from_millis(250);

/// The default limit when the machine's memory cannot be read.
const FALLBACK_MEMORY_LIMIT_BYTES: u64 = 4 << 30;

/// The smallest default limit, on a machine with little memory or many browser processes.
const MIN_DEFAULT_MEMORY_LIMIT_BYTES: u64 = 1 << 30;

/// The memory limit of each of `processes` browser processes when the profile gives none: half
/// of the machine's memory (`MemTotal`) shared by them, at least 1 GiB.
pub fn default_memory_limit(processes: usize) -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|meminfo| kib_field(&meminfo, "MemTotal:"));
    match total {
        Some(total) => (total / 2 / processes.max(1) as u64).max(MIN_DEFAULT_MEMORY_LIMIT_BYTES),
        None => FALLBACK_MEMORY_LIMIT_BYTES,
    }
}

/// The private resident memory of process `root` and all its descendants, in bytes (processes
/// that exit while they are read count for nothing).
pub fn tree_memory_bytes(root: u32) -> u64 {
    descendants_and_self(root)
        .into_iter()
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            kib_field(&status, "RssAnon:")
        })
        .sum()
}

/// The value of a `Name:   1234 kB` line of a `/proc` file, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Reads the memory of browser `root`'s tree every [`MEMORY_POLL`] until it passes
/// `limit_bytes` (then returns what it found) or the browser is `lost` (`None`).
pub(crate) async fn watch_memory(
    root: u32,
    limit_bytes: u64,
    lost: CancellationToken,
) -> Option<u64> {
    loop {
        tokio::select! {
            () = lost.cancelled() => return None,
            () = tokio::time::sleep(MEMORY_POLL) => {}
        }
        let used = tokio::task::spawn_blocking(move || tree_memory_bytes(root))
            .await
            .unwrap_or(0);
        if used > limit_bytes {
            return Some(used);
        }
    }
}

/// The bytes each response of one page has received so far; listening starts before the page
/// navigates.
pub(crate) struct SizeWatch {
    received: EventStream<EventDataReceived>,
    limit_bytes: u64,
}

impl SizeWatch {
    pub(crate) async fn start(page: &Page, limit_bytes: u64) -> Result<Self, CdpError> {
        Ok(Self {
            received: page.event_listener::<EventDataReceived>().await?,
            limit_bytes,
        })
    }

    /// Returns once one response has received more than the limit; pends forever otherwise
    /// (also once the tab is gone: the render notices that by itself).
    pub(crate) async fn passed(mut self) {
        let mut totals: HashMap<RequestId, u64> = HashMap::new();
        while let Some(chunk) = self.received.next().await {
            let total = totals.entry(chunk.request_id.clone()).or_default();
            *total += u64::try_from(chunk.data_length).unwrap_or(0);
            if *total > self.limit_bytes {
                return;
            }
        }
        std::future::pending::<()>().await;
    }
}

/// `root` and every process below it, from `/proc/*/stat` parent links.
pub(crate) fn descendants_and_self(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid = after.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_tree_of_this_process_includes_itself() {
        let me = std::process::id();
        assert_eq!(descendants_and_self(me)[0], me);
    }

    #[test]
    fn proc_fields_are_read_in_bytes() {
        let status = "Name:\tchromium\nRssAnon:\t  123456 kB\nRssFile:\t 10 kB\n";
        assert_eq!(kib_field(status, "RssAnon:"), Some(123_456 * 1024));
        assert_eq!(kib_field(status, "VmSwap:"), None);
        assert_eq!(
            kib_field("MemTotal:       24576000 kB\n", "MemTotal:"),
            Some(24_576_000 * 1024)
        );
    }

    #[test]
    fn the_default_memory_limit_is_shared_by_the_processes_and_at_least_a_gib() {
        let one = default_memory_limit(1);
        assert!(one >= MIN_DEFAULT_MEMORY_LIMIT_BYTES, "{one}");
        assert!(default_memory_limit(4) <= one);
        assert!(default_memory_limit(10_000) == MIN_DEFAULT_MEMORY_LIMIT_BYTES);
    }

    #[test]
    fn this_process_tree_has_private_memory() {
        assert!(tree_memory_bytes(std::process::id()) > 0);
    }
}
