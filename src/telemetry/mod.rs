//! Telemetry: live counters, progress display, the metrics endpoint and the end-of-run summary.

mod metrics;
mod progress;
mod summary;

use std::sync::atomic::{AtomicU64, Ordering};

pub use metrics::{MetricsError, MetricsListener, MetricsServer, MetricsSnapshot, render_metrics};
pub use progress::{Pace, ProgressMode, ProgressReporter};
pub use summary::RunSummary;

/// Counters that change faster than the state commits: bytes as they arrive.
#[derive(Debug, Default)]
pub struct Live {
    bytes: AtomicU64,
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

    #[test]
    fn bytes_and_durations_read_like_a_person_writes_them() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_234_567), "1.2 MB");
        assert_eq!(human_duration(Duration::from_millis(6700)), "6.7s");
        assert_eq!(human_duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(human_duration(Duration::from_secs(3723)), "1h02m03s");
    }
}
