//! One Chromium process: found on the system (never downloaded), launched with a fresh
//! temporary profile, its CDP handler polled in its own task, shut down without leftovers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::error::CdpError;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{BrowserSettings, RenderError};

/// Environment variable naming the Chromium binary.
pub const CHROMIUM_ENV: &str = "SCRAPE_CHROMIUM";

/// Names looked up on `PATH`, in order.
const CANDIDATES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// Flags for Debian's Chromium on a closed network. chromiumoxide
/// adds the leading `--` itself: `"--x"` would become `----x` and be silently ignored.
const FLAGS: [&str; 6] = [
    "disable-gpu",
    "disable-quic",
    "no-first-run",
    "disable-background-networking",
    "disable-component-update",
    "disable-sync",
];

/// How long a polite `Browser.close` may take before the process is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The Chromium binary to use: `configured` if given (it must exist), else `$SCRAPE_CHROMIUM`,
/// else the first of `chromium`, `chromium-browser`, `google-chrome` on `PATH`.
pub fn find_executable(configured: Option<&Path>) -> Result<PathBuf, RenderError> {
    let explicit = configured
        .map(Path::to_owned)
        .or_else(|| std::env::var_os(CHROMIUM_ENV).map(PathBuf::from));
    if let Some(path) = explicit {
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(RenderError::BrowserNotFound {
                searched: vec![path.display().to_string()],
            })
        };
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for name in CANDIDATES {
        for dir in &dirs {
            let path = dir.join(name);
            if is_executable(&path) {
                return Ok(path);
            }
        }
    }
    Err(RenderError::BrowserNotFound {
        searched: CANDIDATES.iter().map(|n| format!("{n} on PATH")).collect(),
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Root cannot use Chromium's sandbox.
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A running Chromium with its handler task and its temporary profile folder.
pub(crate) struct BrowserProcess {
    browser: Option<Browser>,
    handler: tokio::task::JoinHandle<()>,
    /// Cancelled when the CDP connection is gone (the browser exited or was killed).
    lost: CancellationToken,
    pid: Option<u32>,
    profile: Option<tempfile::TempDir>,
}

impl BrowserProcess {
    pub(crate) async fn launch(settings: &BrowserSettings) -> Result<Self, RenderError> {
        let executable = find_executable(settings.executable.as_deref())?;
        let launch_error = |source: Box<dyn std::error::Error + Send + Sync>| RenderError::Launch {
            executable: executable.clone(),
            source,
        };
        let profile = tempfile::Builder::new()
            .prefix("scrape-chromium-")
            .tempdir()
            .map_err(|e| launch_error(Box::new(e)))?;
        let mut builder = BrowserConfig::builder()
            .chrome_executable(&executable)
            .user_data_dir(profile.path())
            .args(FLAGS)
            // The pool bounds every page itself; this only stops a lost reply from hanging.
            .request_timeout(settings.page_timeout + Duration::from_secs(5))
            .launch_timeout(Duration::from_secs(30));
        if running_as_root() {
            builder = builder.no_sandbox();
        }
        let config = builder.build().map_err(|e| launch_error(e.into()))?;
        let (mut browser, mut handler) = Browser::launch(config)
            .await
            .map_err(|e| launch_error(Box::new(e)))?;
        let pid = browser
            .get_mut_child()
            .and_then(|child| child.as_mut_inner().id());
        let lost = CancellationToken::new();
        let token = lost.clone();
        // Every CDP call hangs unless this stream is polled. One bad message is no reason to
        // stop; a WebSocket error is: the browser is gone, and chromiumoxide would report it
        // again on every poll rather than end the stream.
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                match event {
                    Ok(()) => {}
                    Err(CdpError::Ws(e)) => {
                        tracing::debug!(error = %e, "chromium connection lost");
                        break;
                    }
                    Err(e) => tracing::debug!(error = %e, "chromium handler"),
                }
            }
            token.cancel();
        });
        tracing::debug!(pid, profile = %profile.path().display(), "chromium started");
        Ok(Self {
            browser: Some(browser),
            handler,
            lost,
            pid,
            profile: Some(profile),
        })
    }

    pub(crate) fn browser(&self) -> Option<&Browser> {
        self.browser.as_ref()
    }

    /// The browser process id (the Chromium main process).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The temporary profile folder (`--user-data-dir`), unique to this process.
    pub(crate) fn profile_dir(&self) -> Option<&Path> {
        self.profile.as_ref().map(|p| p.path())
    }

    /// Whether the CDP connection is up and the process has not exited.
    pub(crate) fn is_alive(&mut self) -> bool {
        let exited = self
            .browser
            .as_mut()
            .is_none_or(|b| !matches!(b.try_wait(), Ok(None)));
        !exited && !self.lost.is_cancelled()
    }

    /// Cancelled once the browser is gone; in-flight CDP calls would otherwise wait for their
    /// request timeout.
    pub(crate) fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Asks Chromium to quit, waits for it (killing it after a grace period), kills whatever of
    /// its process tree is left, then deletes the profile folder.
    pub(crate) async fn shutdown(mut self) {
        let tree = self.process_tree();
        let alive = self.is_alive();
        if let Some(mut browser) = self.browser.take() {
            let exited = alive
                && match tokio::time::timeout(CLOSE_GRACE, browser.close()).await {
                    Ok(Ok(_)) => matches!(
                        tokio::time::timeout(CLOSE_GRACE, browser.wait()).await,
                        Ok(Ok(_))
                    ),
                    _ => false,
                };
            if !exited {
                let _ = browser.kill().await;
                let _ = browser.wait().await;
            }
        }
        kill_all(&tree, self.profile_dir());
        let _ = tokio::time::timeout(CLOSE_GRACE, &mut self.handler).await;
        self.handler.abort();
        self.remove_profile();
    }

    /// The browser and all its descendants, collected while the tree is intact (once the main
    /// process is gone, its children are re-parented and can no longer be found this way).
    fn process_tree(&self) -> Vec<u32> {
        self.pid.map(descendants_and_self).unwrap_or_default()
    }

    fn remove_profile(&mut self) {
        if let Some(profile) = self.profile.take() {
            let path = profile.path().to_owned();
            if let Err(e) = profile.close() {
                tracing::debug!(error = %e, path = %path.display(), "chromium profile not removed");
            }
        }
    }
}

impl Drop for BrowserProcess {
    /// An error path or a cancelled task: no polite close is possible without `.await`, so the
    /// whole tree is killed (the `Browser` itself would only kill the main process).
    fn drop(&mut self) {
        if self.browser.is_some() {
            kill_all(&self.process_tree(), self.profile_dir());
            if let Some(mut browser) = self.browser.take()
                && let Some(child) = browser.get_mut_child()
            {
                // Reaped here when it already exited; else tokio reaps it in the background.
                let _ = child.as_mut_inner().try_wait();
            }
        }
        self.handler.abort();
        self.remove_profile();
    }
}

/// SIGKILLs `pids` that still belong to this browser: after Chromium exits, a pid could be
/// reused, so a process is only killed if its command line names our profile folder.
fn kill_all(pids: &[u32], profile: Option<&Path>) {
    let Some(profile) = profile.map(|p| p.to_string_lossy().into_owned()) else {
        return;
    };
    for &pid in pids {
        let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains(&profile));
        if ours && let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
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
    fn a_configured_executable_that_does_not_exist_is_not_found() {
        let e = find_executable(Some(Path::new("/nonexistent/chromium"))).unwrap_err();
        assert!(
            matches!(&e, RenderError::BrowserNotFound { searched } if searched == &["/nonexistent/chromium"]),
            "{e}"
        );
    }

    #[test]
    fn the_process_tree_of_this_process_includes_itself() {
        let me = std::process::id();
        assert_eq!(descendants_and_self(me)[0], me);
    }
}
