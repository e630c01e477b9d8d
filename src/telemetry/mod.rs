//! Telemetry: live counters, progress display, the metrics endpoint and the end-of-run summary.

mod metrics;
mod progress;
mod summary;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::net::{HostWindow, Hosts};

pub use metrics::{MetricsError, MetricsListener, MetricsServer, MetricsSnapshot, render_metrics};
pub use progress::{Pace, ProgressMode, ProgressReporter};
pub use summary::RunSummary;

/// Counters that change faster than the state commits: bytes as they arrive, downloads in
/// progress, image answers by status class, and the stages' per-host windows.
#[derive(Default)]
pub struct Live {
    bytes: AtomicU64,
    in_flight: AtomicU64,
    pages_in_flight: AtomicU64,
    chains: [AtomicU64; 3],
    /// Index 0: no answer (connect error, timeout); 1 to 5: 1xx to 5xx.
    answers: [AtomicU64; 6],
    /// The per-host limits of each stage that runs (crawl, download).
    hosts: Mutex<Vec<Arc<Hosts>>>,
}

/// A page being fetched or rendered, counted by [`Live::pages_in_flight`] until dropped.
pub struct PageInFlight<'a>(&'a Live);

impl Drop for PageInFlight<'_> {
    fn drop(&mut self) {
        self.0.pages_in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A chain being crawled, counted by [`Live::chains`] as active until dropped, then as done.
pub struct ChainInFlight<'a>(&'a Live);

impl Drop for ChainInFlight<'_> {
    fn drop(&mut self) {
        self.0.chains[ACTIVE].fetch_sub(1, Ordering::Relaxed);
        self.0.chains[DONE].fetch_add(1, Ordering::Relaxed);
    }
}

const TOTAL: usize = 0;
const ACTIVE: usize = 1;
const DONE: usize = 2;

/// How the crawl's chains stand: how many there are, are being crawled and are done (ended,
/// failed or interrupted) in this run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainCounts {
    pub total: u64,
    pub active: u64,
    pub done: u64,
}

/// A download in progress, counted by [`Live::in_flight`] until dropped.
pub struct InFlight<'a>(&'a Live);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Live {
    /// Counts bytes received (including those of attempts that later fail).
    pub fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes received so far in this run.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Counts a download attempt as in progress until the guard is dropped.
    pub fn begin_download(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    /// Counts a page fetch or render as in progress until the guard is dropped.
    pub fn begin_page(&self) -> PageInFlight<'_> {
        self.pages_in_flight.fetch_add(1, Ordering::Relaxed);
        PageInFlight(self)
    }

    /// The crawl has `total` chains (one per start URL).
    pub fn set_chains(&self, total: u64) {
        self.chains[TOTAL].store(total, Ordering::Relaxed);
    }

    /// Counts a chain as active until the guard is dropped, then as done.
    pub fn begin_chain(&self) -> ChainInFlight<'_> {
        self.chains[ACTIVE].fetch_add(1, Ordering::Relaxed);
        ChainInFlight(self)
    }

    /// The crawl's chains: in all, active, done.
    pub fn chains(&self) -> ChainCounts {
        ChainCounts {
            total: self.chains[TOTAL].load(Ordering::Relaxed),
            active: self.chains[ACTIVE].load(Ordering::Relaxed),
            done: self.chains[DONE].load(Ordering::Relaxed),
        }
    }

    /// Pages being fetched or rendered, or waiting for their host's turn.
    pub fn pages_in_flight(&self) -> u64 {
        self.pages_in_flight.load(Ordering::Relaxed)
    }

    /// Of [`Live::pages_in_flight`], those whose host's turn has come (requests in flight at
    /// the crawl's hosts) and those still waiting for it.
    pub fn pages_fetching_and_waiting(&self) -> (u64, u64) {
        let stages: Vec<Arc<Hosts>> = self.hosts.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let fetching: u64 = stages
            .iter()
            .filter(|hosts| hosts.stage() == "crawl")
            .map(|hosts| hosts.in_flight() as u64)
            .sum();
        let pages = self.pages_in_flight();
        let fetching = fetching.min(pages);
        (fetching, pages - fetching)
    }

    /// Download attempts in progress.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Counts an image server's answer: its status, or `None` when none came.
    pub fn count_answer(&self, status: Option<u16>) {
        let class = status.map_or(0, |s| usize::from(s / 100).clamp(1, 5));
        self.answers[class].fetch_add(1, Ordering::Relaxed);
    }

    /// Answers so far: none, then 1xx to 5xx.
    pub fn answers(&self) -> [u64; 6] {
        std::array::from_fn(|i| self.answers[i].load(Ordering::Relaxed))
    }

    /// Shows the windows of a stage's hosts in snapshots and metrics from now on.
    pub fn watch_hosts(&self, hosts: Arc<Hosts>) {
        self.hosts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(hosts);
    }

    /// The busiest hosts' windows, stage by stage.
    pub fn host_windows(&self) -> Vec<HostWindow> {
        let stages: Vec<Arc<Hosts>> = self.hosts.lock().unwrap_or_else(|e| e.into_inner()).clone();
        stages.iter().flat_map(|hosts| hosts.windows()).collect()
    }
}

/// `1234567` → `1.2 MB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A duration as `1h02m03s`, `4m05s` or `6.7s`.
pub fn human_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{:.1}s", d.as_secs_f64()),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m{:02}s", secs / 3600, secs % 3600 / 60, secs % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_page_waiting_for_its_hosts_turn_is_not_counted_in_flight() {
        let live = Live::default();
        let limits = crate::net::HostLimits {
            per_host: 1,
            adaptive: false,
            rate: None,
        };
        let crawl = Arc::new(Hosts::new("crawl", limits));
        live.watch_hosts(Arc::clone(&crawl));
        let host = crawl.get(&url::Url::parse("http://a.test/").unwrap());
        let pages: Vec<_> = (0..3).map(|_| live.begin_page()).collect();
        assert_eq!(live.pages_fetching_and_waiting(), (0, 3));
        let turn = host.acquire().await;
        assert_eq!(live.pages_fetching_and_waiting(), (1, 2));
        drop(turn);
        drop(pages);
        assert_eq!(live.pages_fetching_and_waiting(), (0, 0));
    }

    #[test]
    fn bytes_and_durations_read_like_a_person_writes_them() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_234_567), "1.2 MB");
        assert_eq!(human_duration(Duration::from_millis(6700)), "6.7s");
        assert_eq!(human_duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(human_duration(Duration::from_secs(3723)), "1h02m03s");
    }
}
