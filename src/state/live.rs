//! What a running job shows to `scrape status` from another terminal: the database is locked by
//! the run (redb lets one process open it), so the run also keeps a small snapshot of the
//! totals and checkpoints beside it, `.scrape/live.json`, replaced atomically when the totals
//! change (at most every [`EVERY`]) and removed when the run ends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{ChainCheckpoint, Counters, STATE_DIR, State, StateError, now};
use crate::net::HostWindow;

/// How often the snapshot is replaced while commits go on.
pub const EVERY: Duration = Duration::from_secs(2);

/// The snapshot's file name in the state folder.
const FILE: &str = "live.json";

/// A running job's state as of its last snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStatus {
    /// The running `scrape` process.
    pub pid: u32,
    pub profile: String,
    /// When the run started and when the snapshot was taken, seconds since the Unix epoch.
    pub started: u64,
    pub updated: u64,
    /// The totals when the run started, and at the snapshot.
    pub at_start: Counters,
    pub counters: Counters,
    pub chains: Vec<(String, ChainCheckpoint)>,
    /// The busiest hosts' windows of requests in flight, stage by stage.
    #[serde(default)]
    pub hosts: Vec<HostWindow>,
}

impl LiveStatus {
    /// How long ago the snapshot was taken.
    pub fn age(&self) -> Duration {
        Duration::from_secs(now().saturating_sub(self.updated))
    }
}

/// Keeps the snapshot of a running job up to date.
pub struct Snapshots {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    out: PathBuf,
}

impl Snapshots {
    /// Writes a snapshot of `state` (output folder `out`), with the host windows `windows`
    /// reads, now and again whenever `counters` change, at most every [`EVERY`]. A snapshot
    /// that cannot be written is skipped: it only informs `scrape status`, the database holds
    /// the truth.
    pub fn start(
        state: State,
        out: PathBuf,
        mut counters: watch::Receiver<Counters>,
        windows: impl Fn() -> Vec<HostWindow> + Send + 'static,
    ) -> Self {
        let stop = CancellationToken::new();
        let (started, at_start) = (now(), *counters.borrow());
        let task = tokio::spawn({
            let (stop, out) = (stop.clone(), out.clone());
            async move {
                loop {
                    let current = *counters.borrow_and_update();
                    let (state, out, hosts) = (state.clone(), out.clone(), windows());
                    let taken = tokio::task::spawn_blocking(move || {
                        take(&state, &out, (started, at_start), current, hosts)
                    });
                    if let Ok(Err(e)) = taken.await {
                        tracing::debug!(error = %e, "live status not written");
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(EVERY) => {}
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        changed = counters.changed() => if changed.is_err() { return },
                    }
                }
            }
        });
        Self { stop, task, out }
    }

    /// Stops updating and removes the snapshot: the run is over, the database tells the rest.
    pub async fn finish(mut self) {
        self.stop.cancel();
        let _ = (&mut self.task).await;
        let _ = std::fs::remove_file(path_for(&self.out));
    }
}

impl Drop for Snapshots {
    /// A run that ends on an error stops updating; its last snapshot stays until the next run,
    /// and `scrape status` reads the database once the run no longer holds it.
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Writes the snapshot of `state` with `counters`, for a run that started at `start` (seconds
/// since the epoch, and the totals then).
fn take(
    state: &State,
    out: &Path,
    (started, at_start): (u64, Counters),
    counters: Counters,
    hosts: Vec<HostWindow>,
) -> Result<(), StateError> {
    let status = LiveStatus {
        pid: std::process::id(),
        profile: state.profile_name()?.unwrap_or_default(),
        started,
        updated: now(),
        at_start,
        counters,
        chains: state.chains()?,
        hosts,
    };
    write(out, &status).map_err(|source| StateError::Io {
        path: path_for(out),
        source,
    })
}

/// The snapshot file of output folder `out`.
pub fn path_for(out: &Path) -> PathBuf {
    out.join(STATE_DIR).join(FILE)
}

/// Replaces the snapshot of `out` with `status` (a temporary file renamed over it, so a reader
/// never sees half of one).
pub fn write(out: &Path, status: &LiveStatus) -> std::io::Result<()> {
    let path = path_for(out);
    let dir = out.join(STATE_DIR);
    let mut temp = tempfile::NamedTempFile::new_in(&dir)?;
    serde_json::to_writer(&mut temp, status)?;
    temp.persist(&path).map_err(|e| e.error)?;
    Ok(())
}

/// The snapshot of `out`, if a run left one that can be read.
pub fn read(out: &Path) -> Option<LiveStatus> {
    let text = std::fs::read(path_for(out)).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_back_as_written() {
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(out.path().join(STATE_DIR)).unwrap();
        assert_eq!(read(out.path()), None);
        let status = LiveStatus {
            pid: 42,
            profile: "demo".into(),
            started: 1_796_045_500,
            updated: 1_796_045_542,
            at_start: Counters::default(),
            counters: Counters {
                pages_done: 3,
                images_found: 10,
                stored: 7,
                ..Counters::default()
            },
            chains: vec![("http://a.test/".into(), ChainCheckpoint::default())],
            hosts: vec![HostWindow {
                stage: "download".into(),
                host: "a.test:80".into(),
                window: 37,
                in_flight: 35,
            }],
        };
        write(out.path(), &status).unwrap();
        assert_eq!(read(out.path()), Some(status));
    }

    #[test]
    fn a_damaged_snapshot_is_no_snapshot() {
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(out.path().join(STATE_DIR)).unwrap();
        std::fs::write(path_for(out.path()), "{\"pid\": 4").unwrap();
        assert_eq!(read(out.path()), None);
    }
}
