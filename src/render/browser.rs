//! One Chromium process of the pool: found on the system (never downloaded), launched with a fresh
//! temporary profile, its CDP handler polled in its own task, shut down without leftovers.
//!
//! Leftovers are prevented even when `scrape` itself dies without cleaning up (SIGKILL, a
//! crash, the OOM killer):
//!
//! - The browser is spawned by `scrape` (not by chromiumoxide, which offers no hook between
//!   fork and exec) with `PR_SET_PDEATHSIG = SIGKILL`: the kernel kills it when its parent
//!   dies. Linux sends that signal when the parent *thread* ends, so every browser is forked
//!   by one launcher thread that lives as long as the process, never by a runtime thread that
//!   may retire. Chromium's helpers (zygote, renderers, GPU and utility processes) exit on
//!   their own once the browser process is gone. The browser also gets its own process group,
//!   so a Ctrl-C at the terminal reaches `scrape`, which closes it in order, and not Chromium.
//! - What the kernel cannot clean is the temporary profile folder. It is deleted only once no
//!   process of the browser runs any more: a killed process may still finish the system call
//!   it was in, and a helper forked just before the kill escapes it, so a folder deleted at
//!   once comes back or stays half-deleted. A dropped browser is waited for on a thread of
//!   its own, so no runtime worker blocks. The folder's name carries the pid of the `scrape`
//!   process that made it (`scrape-chromium-<pid>-<random>`); each launch removes the folders
//!   whose owner is no longer running, after killing any process still using one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use chromiumoxide::browser::Browser;
use chromiumoxide::error::CdpError;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::handler::viewport::Viewport;
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::limits::{descendants_and_self, watch_memory};
use super::{BrowserSettings, RenderError};
use crate::proxy::ProxyEndpoint;

/// Environment variable naming the Chromium binary.
pub const CHROMIUM_ENV: &str = "SCRAPE_CHROMIUM";

/// Names looked up on `PATH`, in order.
const CANDIDATES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// The start of every temporary profile folder's name, followed by the owner's pid and `-`.
pub(crate) const PROFILE_PREFIX: &str = "scrape-chromium-";

/// Chromium's flags: headless, the DevTools port chosen by Chromium (announced on stderr), the
/// switches of Puppeteer's and Playwright's defaults that matter for a headless crawler reusing
/// each tab for many pages of sites it does not trust, and ours for Debian's Chromium on a
/// closed network. The browser is spawned here, not by chromiumoxide's `BrowserConfig`, so each
/// goes to the process verbatim, as one argument. [`DISABLED_FEATURES`] follow them.
const FLAGS: [&str; 33] = [
    // No window (the new headless mode, the only one Chromium has kept).
    "--headless",
    // Screenshots (`probe --screenshot`) without scrollbars.
    "--hide-scrollbars",
    // Pages never make a sound.
    "--mute-audio",
    // DevTools on a port Chromium picks, announced on stderr.
    "--remote-debugging-port=0",
    // No extensions: Debian's wrapper would load the system-wide ones (`/etc/chromium.d`).
    "--disable-extensions",
    // No requests of Chromium's own (variations, safe-browsing lists): only the pages'.
    "--disable-background-networking",
    // The timers of tabs not in front run at full rate: several tabs render at once.
    "--disable-background-timer-throttling",
    // A tab covered by another is not treated as hidden (throttled, not painted).
    "--disable-backgrounding-occluded-windows",
    // The renderers of background tabs keep their priority.
    "--disable-renderer-backgrounding",
    // A reused tab keeps no page it left alive in the back-forward cache (twice the CPU per page).
    "--disable-back-forward-cache",
    // No crash dumps.
    "--disable-breakpad",
    // No phishing classifier run on every page.
    "--disable-client-side-phishing-detection",
    // No built-in extensions with background pages (each one a renderer of its own).
    "--disable-component-extensions-with-background-pages",
    // No component downloads (certificate lists, Widevine) after start.
    "--disable-component-update",
    // No default apps installed into each fresh profile.
    "--disable-default-apps",
    // Shared memory in /tmp: a container's /dev/shm (often 64 MB) is too small, tabs crash.
    "--disable-dev-shm-usage",
    // No experiments from the field-trial config unofficial builds (Debian's) apply.
    "--disable-field-trial-config",
    // A renderer busy on a heavy page is not reported as hung: the page timeout decides.
    "--disable-hang-monitor",
    // Many CDP messages in a row (scrolls, evaluations, intercepted requests) are not throttled.
    "--disable-ipc-flooding-protection",
    // A reload of a POST result never waits on a confirmation dialog.
    "--disable-prompt-on-repost",
    // No account sync.
    "--disable-sync",
    // Permission requests (notifications, location, camera) denied at once, never left pending.
    "--deny-permission-prompts",
    // Screenshots in the same colours on every machine.
    "--force-color-profile=srgb",
    // Usage statistics are never uploaded.
    "--metrics-recording-only",
    // No default-browser check (Debian's wrapper adds this; other executables do not).
    "--no-default-browser-check",
    // No first-run setup in a fresh profile.
    "--no-first-run",
    // Automation mode, as Puppeteer and Playwright run it (sets `navigator.webdriver`).
    "--enable-automation",
    // Passwords in the profile, never the desktop keyring (no keyring daemon asked, no wait).
    "--password-store=basic",
    // The same for macOS's keychain.
    "--use-mock-keychain",
    // chromiumoxide's default: pages may use the Idle Detection API.
    "--enable-blink-features=IdleDetection",
    // English as the browser's language, whatever the machine's locale.
    "--lang=en_US",
    // Software rendering: no GPU (nor GPU driver) on servers.
    "--disable-gpu",
    // HTTP over TCP only, as the static fetcher: UDP is often blocked on closed networks.
    "--disable-quic",
];

/// Chromium features turned off, all in one `--disable-features` (given twice, a switch
/// counts once: the last).
const DISABLED_FEATURES: [&str; 9] = [
    // The back-forward cache itself, which `--disable-back-forward-cache` also turns off.
    "BackForwardCache",
    // No language detection and translate offer on every page.
    "Translate",
    // No cast-device discovery on the network.
    "MediaRouter",
    // No optimization hints downloaded at start.
    "OptimizationHints",
    // No request restarted for client hints: request interception does not expect restarts.
    "AcceptCHFrame",
    // An http:// URL is loaded as given, not tried over https first.
    "HttpsUpgrades",
    // No new frame host for every navigation of a reused tab.
    "RenderDocument",
    // No process of its own for every sandboxed (ad) iframe.
    "IsolateSandboxedIframes",
    // The tabs of one site are not packed into one renderer, which would render them in turn.
    "ProcessPerSiteUpToMainFrameThreshold",
];

/// The one `--disable-features` switch, naming every feature of [`DISABLED_FEATURES`].
fn disabled_features() -> String {
    format!("--disable-features={}", DISABLED_FEATURES.join(","))
}

/// How long Chromium may take to announce its DevTools address.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a polite `Browser.close` may take before the process is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How long killed browser processes may take to exit before their profile folder is deleted
/// anyway (a process stuck in uninterruptible I/O ignores SIGKILL until the I/O ends).
const REAP_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the processes of a killed browser are looked for while waiting for them to exit.
const REAP_POLL: Duration = Duration::from_millis(10);

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
    child: Child,
    handler: tokio::task::JoinHandle<()>,
    /// Cancelled when the CDP connection is gone (the browser exited or was killed).
    lost: CancellationToken,
    /// Cancelled when the process tree passed its memory limit (and was killed for it).
    over_memory: CancellationToken,
    /// Reads the tree's memory while the browser runs (see `limits`).
    memory_watch: Option<tokio::task::JoinHandle<()>>,
    pid: Option<u32>,
    profile: Option<tempfile::TempDir>,
}

impl BrowserProcess {
    /// Starts Chromium with `settings`, every request of it going through `proxy` if given.
    pub(crate) async fn launch(
        settings: &BrowserSettings,
        proxy: Option<&ProxyEndpoint>,
    ) -> Result<Self, RenderError> {
        let executable = find_executable(settings.executable.as_deref())?;
        let launch_error = |source: Box<dyn std::error::Error + Send + Sync>| RenderError::Launch {
            executable: executable.clone(),
            source,
        };
        let temp = std::env::temp_dir();
        remove_orphaned_profiles(&temp);
        let profile = tempfile::Builder::new()
            .prefix(&format!("{PROFILE_PREFIX}{}-", std::process::id()))
            .tempdir_in(&temp)
            .map_err(|e| launch_error(Box::new(e)))?;
        let mut command = Command::new(&executable);
        command
            .args(
                FLAGS
                    .iter()
                    .filter(|f| !(settings.window && **f == "--headless")),
            )
            .arg(disabled_features())
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if running_as_root() {
            command.args(["--no-sandbox", "--disable-setuid-sandbox"]);
        }
        if let Some(proxy) = proxy {
            if proxy.scheme().is_socks() && proxy.credentials().is_some() {
                return Err(RenderError::SocksLogin {
                    proxy: proxy.to_string(),
                });
            }
            // Credentials never go on the command line: tabs answer the proxy's challenge.
            command.arg(format!("--proxy-server={}", proxy.server()));
            // Chromium sends loopback addresses around a proxy unless told otherwise.
            command.arg("--proxy-bypass-list=<-loopback>");
        }
        die_with_parent(&mut command);
        let mut child = spawn_on_launcher_thread(command)
            .await
            .map_err(|e| launch_error(Box::new(e)))?;
        let pid = child.id();
        let connected = async {
            let ws = devtools_url(&mut child).await?;
            let config = HandlerConfig {
                viewport: Some(Viewport::default()),
                // The pool bounds every page itself; this only stops a lost reply from hanging.
                request_timeout: settings.page_timeout + Duration::from_secs(5),
                // Through a proxy with credentials, chromiumoxide answers the proxy's challenges
                // and leaves every paused request to the tab's interceptor (`intercept`).
                request_intercept: super::intercept::answers_every_request(settings, proxy),
                ..HandlerConfig::default()
            };
            Browser::connect_with_config(ws, config)
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })
        }
        .await;
        let (browser, mut handler) = match connected {
            Ok(connected) => connected,
            Err(e) => {
                kill_all(
                    &pid.map(descendants_and_self).unwrap_or_default(),
                    Some(profile.path()),
                );
                let _ = child.kill().await;
                reap_and_remove_on_blocking_thread(profile).await;
                return Err(launch_error(e));
            }
        };
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
        let over_memory = CancellationToken::new();
        let memory_watch = pid.map(|pid| {
            let (lost, over_memory) = (lost.clone(), over_memory.clone());
            let (limit, profile) = (settings.memory_limit_bytes, profile.path().to_owned());
            tokio::spawn(async move {
                if let Some(used) = watch_memory(pid, limit, lost).await {
                    tracing::warn!(
                        pid,
                        used_mib = used >> 20,
                        limit_mib = limit >> 20,
                        "chromium passed its memory limit; killing it"
                    );
                    // First the word, then the kill: whoever sees the browser lost can tell why.
                    over_memory.cancel();
                    kill_all(&descendants_and_self(pid), Some(&profile));
                }
            })
        });
        Ok(Self {
            browser: Some(browser),
            child,
            handler,
            lost,
            over_memory,
            memory_watch,
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
        let running = self.browser.is_some() && matches!(self.child.try_wait(), Ok(None));
        running && !self.lost.is_cancelled()
    }

    /// Cancelled once the browser is gone; in-flight CDP calls would otherwise wait for their
    /// request timeout.
    pub(crate) fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Cancelled once the browser passed its memory limit, before it is killed for it.
    pub(crate) fn over_memory(&self) -> CancellationToken {
        self.over_memory.clone()
    }

    /// Asks Chromium to quit, waits for it (killing it after a grace period), kills whatever of
    /// its process tree is left, waits until all of it has exited, then deletes the profile
    /// folder.
    pub(crate) async fn shutdown(mut self) {
        if let Some(watch) = self.memory_watch.take() {
            watch.abort();
        }
        let tree = self.process_tree();
        let alive = self.is_alive();
        if let Some(mut browser) = self.browser.take() {
            let exited = alive
                && match tokio::time::timeout(CLOSE_GRACE, browser.close()).await {
                    Ok(Ok(_)) => matches!(
                        tokio::time::timeout(CLOSE_GRACE, self.child.wait()).await,
                        Ok(Ok(_))
                    ),
                    _ => false,
                };
            if !exited {
                let _ = self.child.kill().await;
            }
        }
        kill_all(&tree, self.profile_dir());
        let _ = tokio::time::timeout(CLOSE_GRACE, &mut self.handler).await;
        self.handler.abort();
        if let Some(profile) = self.profile.take() {
            reap_and_remove_on_blocking_thread(profile).await;
        }
    }

    /// The browser and all its descendants, and every process naming its profile folder: once
    /// the main process is gone (killed, crashed), its helpers are re-parented and only their
    /// command line still tells them apart, and a profile folder removed while they run can be
    /// left half-deleted.
    fn process_tree(&self) -> Vec<u32> {
        let mut tree = self.pid.map(descendants_and_self).unwrap_or_default();
        if let Some(profile) = self.profile_dir() {
            tree.extend(processes_using(profile));
        }
        tree
    }
}

impl Drop for BrowserProcess {
    /// An error path or a cancelled task: no polite close is possible without `.await`, so the
    /// whole tree is killed (the `Browser` itself would only kill the main process). The
    /// profile folder is deleted by a thread of its own once the tree has exited: waiting here
    /// could block a runtime worker for seconds.
    fn drop(&mut self) {
        if let Some(watch) = self.memory_watch.take() {
            watch.abort();
        }
        if self.browser.take().is_some() {
            kill_all(&self.process_tree(), self.profile_dir());
            // Reaped here when it already exited; else tokio reaps it in the background.
            let _ = self.child.try_wait();
        }
        self.handler.abort();
        if let Some(profile) = self.profile.take() {
            let started = std::thread::Builder::new()
                .name("scrape-chromium-reaper".into())
                .spawn(move || reap_and_remove(profile));
            // Without a thread the folder was dropped with the closure and deleted at once; what
            // a dying helper writes there after that goes once this `scrape` has exited, at
            // the next launch.
            if let Err(e) = started {
                tracing::debug!(error = %e, "no thread to wait for chromium's processes");
            }
        }
    }
}

/// [`reap_and_remove`] on a blocking thread, awaited.
async fn reap_and_remove_on_blocking_thread(profile: tempfile::TempDir) {
    if let Err(e) = tokio::task::spawn_blocking(move || reap_and_remove(profile)).await {
        tracing::debug!(error = %e, "chromium profile not removed");
    }
}

/// Deletes a browser's profile folder once no process uses it, killing those that still do,
/// and gives up waiting after [`REAP_TIMEOUT`]. Blocks: call it off the runtime's workers.
///
/// Deleting right after the kill is not enough: a killed process still finishes the system
/// call it was in (a thread of the browser writing its profile, while the main thread already
/// exited), and a helper the browser forked just before the kill was not among the killed and
/// recreates the folder as it starts.
fn reap_and_remove(profile: tempfile::TempDir) {
    let path = profile.keep();
    let deadline = Instant::now() + REAP_TIMEOUT;
    loop {
        let left = processes_using(&path);
        let timed_out = Instant::now() >= deadline;
        if left.is_empty() || timed_out {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) if timed_out => {
                    tracing::debug!(error = %e, pids = ?left, path = %path.display(), "chromium profile not removed");
                    return;
                }
                // Written to while it was deleted: by a process that exited since.
                Err(_) => {}
            }
        }
        kill_all(&left, Some(&path));
        std::thread::sleep(REAP_POLL);
    }
}

/// Has the kernel SIGKILL the browser when `scrape` dies, however it dies.
fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs between fork and exec and only makes two system calls, which
    // are async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent may have died before the line above: then no signal would ever come.
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::other(
                    "scrape exited while starting chromium",
                ));
            }
            Ok(())
        });
    }
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// Spawns `command` from the launcher thread, which never ends: `PR_SET_PDEATHSIG` fires when
/// the thread that forked the child ends, and runtime threads come and go (`spawn_blocking`
/// threads retire when idle, a runtime may be dropped while the pool lives on).
async fn spawn_on_launcher_thread(mut command: Command) -> std::io::Result<Child> {
    static LAUNCHER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<SpawnJob>();
        let started = std::thread::Builder::new()
            .name("scrape-chromium-launcher".into())
            .spawn(move || queue.into_iter().for_each(|job| job()));
        if let Err(e) = started {
            tracing::warn!(error = %e, "no launcher thread; chromium will not die with scrape");
        }
        Mutex::new(jobs)
    });
    // The child is registered with this runtime's process driver, wherever it is forked.
    let runtime = tokio::runtime::Handle::current();
    let (done, spawned) = tokio::sync::oneshot::channel();
    let job: SpawnJob = Box::new(move || {
        let _entered = runtime.enter();
        let _ = done.send(command.spawn());
    });
    let sent = launcher
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send(job);
    if let Err(mpsc::SendError(job)) = sent {
        // No launcher thread: spawn here, the child then dies with this thread.
        job();
    }
    spawned
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the launcher thread is gone")))
}

/// Reads Chromium's stderr until it announces its DevTools WebSocket address; the rest of
/// its stderr is logged at trace level.
async fn devtools_url(
    child: &mut Child,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    let found = tokio::time::timeout(LAUNCH_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if let Some((_, ws)) = line.rsplit_once("listening on ")
                && ws.starts_with("ws")
                && ws.contains("devtools/browser")
            {
                return Ok(Some(ws.trim().to_owned()));
            }
            seen.push(line);
        }
        Ok::<_, std::io::Error>(None)
    })
    .await;
    let said = || seen.join("\n");
    match found {
        Ok(Ok(Some(ws))) => {
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::trace!(%line, "chromium stderr");
                }
            });
            Ok(ws)
        }
        Ok(Ok(None)) => Err(format!("chromium exited before it was ready: {}", said()).into()),
        Ok(Err(e)) => Err(Box::new(e)),
        Err(_) => Err(format!(
            "chromium did not announce its DevTools address within {LAUNCH_TIMEOUT:?}: {}",
            said()
        )
        .into()),
    }
}

/// Removes the temporary profiles in `temp` that killed `scrape` processes left behind: a
/// folder whose owner (the pid in its name) no longer runs, after SIGKILLing any process
/// still using it. Folders of running `scrape` processes are left alone.
pub(crate) fn remove_orphaned_profiles(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PROFILE_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let path = entry.path();
        kill_all(&processes_using(&path), Some(&path));
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                tracing::debug!(path = %path.display(), "removed an orphaned chromium profile")
            }
            Err(e) => {
                tracing::debug!(error = %e, path = %path.display(), "orphaned chromium profile not removed")
            }
        }
    }
}

/// Running processes whose command line names `profile` (a browser's temporary profile
/// folder): the browser's whole process tree, helpers included. A process is running while
/// any of its threads is: a killed process whose main thread has exited may still be
/// finishing a write in another. Zombies have an empty command line and are not listed.
pub fn processes_using(profile: &Path) -> Vec<u32> {
    let needle = profile.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            runs_naming(&entry.path(), &needle).then_some(pid)
        })
        .collect()
}

/// Whether a live thread of the process at `proc_dir` (`/proc/<pid>`) runs a command line
/// containing `needle`. The process's own command line is empty once its main thread has
/// exited, even while other threads run; theirs still reads.
fn runs_naming(proc_dir: &Path, needle: &str) -> bool {
    let names = |dir: &Path| match std::fs::read(dir.join("cmdline")) {
        Ok(cmdline) if !cmdline.is_empty() => {
            Some(String::from_utf8_lossy(&cmdline).contains(needle))
        }
        _ => None,
    };
    names(proc_dir).unwrap_or_else(|| {
        std::fs::read_dir(proc_dir.join("task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|thread| names(&thread.path()) == Some(true))
    })
}

/// SIGKILLs `pids` that still belong to this browser: after Chromium exits, a pid could be
/// reused, so a process is only killed if its command line names our profile folder.
fn kill_all(pids: &[u32], profile: Option<&Path>) {
    let Some(profile) = profile.map(|p| p.to_string_lossy().into_owned()) else {
        return;
    };
    for &pid in pids {
        let ours = runs_naming(Path::new(&format!("/proc/{pid}")), &profile);
        if ours && let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
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
    fn only_profiles_of_exited_scrape_processes_are_removed() {
        let temp = tempfile::tempdir().unwrap();
        let mut exited = std::process::Command::new("true").spawn().unwrap();
        let dead = exited.id();
        exited.wait().unwrap();
        let orphan = temp.path().join(format!("{PROFILE_PREFIX}{dead}-a1b2"));
        let ours = temp
            .path()
            .join(format!("{PROFILE_PREFIX}{}-c3d4", std::process::id()));
        let unnamed = temp.path().join(format!("{PROFILE_PREFIX}e5f6"));
        let other = temp.path().join("chromium-profile");
        for dir in [&orphan, &ours, &unnamed, &other] {
            std::fs::create_dir_all(dir.join("Default")).unwrap();
        }
        remove_orphaned_profiles(temp.path());
        assert!(!orphan.exists());
        assert!(ours.exists() && unnamed.exists() && other.exists());
    }

    /// Each flag is one switch, `--name` or `--name=value` (a `----name` is silently ignored by
    /// Chromium), and no switch is given twice (only the last would count).
    #[test]
    fn flags_are_distinct_well_formed_switches() {
        let features = disabled_features();
        let all: Vec<&str> = FLAGS.iter().copied().chain([features.as_str()]).collect();
        let mut names = std::collections::BTreeSet::new();
        for flag in &all {
            let name = flag
                .strip_prefix("--")
                .unwrap_or_else(|| panic!("`{flag}`"));
            assert!(
                name.starts_with(|c: char| c.is_ascii_lowercase()),
                "`{flag}`"
            );
            assert!(!flag.contains(char::is_whitespace), "`{flag}`");
            let name = name.split_once('=').map_or(name, |(name, _)| name);
            assert!(names.insert(name), "`--{name}` given twice");
        }
        assert!(names.contains("disable-back-forward-cache"));
        assert!(
            !names.contains("disable-popup-blocking"),
            "popups stay blocked"
        );
    }

    /// The arguments of process `pid`, as the kernel has them.
    fn cmdline(pid: u32) -> Vec<String> {
        let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        bytes
            .split(|&b| b == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect()
    }

    /// What Chromium was started with, read back from `/proc/<pid>/cmdline`: every flag as
    /// one argument, `--disable-back-forward-cache` once, one `--disable-features` with all
    /// of its features.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_browser_process_gets_every_flag_as_one_argument() {
        if let Err(e) = find_executable(None) {
            assert!(std::env::var_os("CI").is_none(), "{e}");
            eprintln!("skipping: {e}");
            return;
        }
        let process = BrowserProcess::launch(&BrowserSettings::default(), None)
            .await
            .unwrap();
        let args = cmdline(process.pid().unwrap());
        process.shutdown().await;
        let count = |wanted: &str| args.iter().filter(|a| *a == wanted).count();
        assert_eq!(count("--disable-back-forward-cache"), 1, "{args:?}");
        // Ours in order, after whatever a wrapper script (Debian's) puts first.
        let ours: Vec<String> = FLAGS
            .iter()
            .map(|f| f.to_string())
            .chain([disabled_features()])
            .collect();
        let at = args.iter().position(|a| a == FLAGS[0]).expect("--headless");
        assert_eq!(args.get(at..at + ours.len()), Some(&ours[..]), "{args:?}");
        let disabled: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("--disable-features="))
            .collect();
        assert_eq!(disabled, [&disabled_features()], "{args:?}");
        let features: Vec<&str> = disabled[0]["--disable-features=".len()..]
            .split(',')
            .collect();
        assert!(features.contains(&"BackForwardCache"), "{features:?}");
        assert_eq!(features, DISABLED_FEATURES);
        assert!(!args.iter().any(|a| a.starts_with("---")), "{args:?}");
        assert_eq!(count("--disable-popup-blocking"), 0, "{args:?}");
    }

    /// `PR_SET_PDEATHSIG` fires when the thread that forked the browser ends; the launcher
    /// thread keeps a browser launched from a short-lived thread alive.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_browser_outlives_the_thread_that_launched_it() {
        if let Err(e) = find_executable(None) {
            assert!(std::env::var_os("CI").is_none(), "{e}");
            eprintln!("skipping: {e}");
            return;
        }
        let runtime = tokio::runtime::Handle::current();
        let mut process = std::thread::spawn(move || {
            runtime.block_on(BrowserProcess::launch(&BrowserSettings::default(), None))
        })
        .join()
        .unwrap()
        .unwrap();
        // Exiting the thread sends the death signal at once, if it is the parent.
        let page = process.browser().unwrap().new_page("about:blank").await;
        assert!(page.is_ok(), "{page:?}");
        assert!(process.is_alive());
        process.shutdown().await;
    }

    /// Helpers forked after the processes were listed and killed recreate the folder: a
    /// shell that keeps starting `mkdir -p` on it stands in for Chromium's.
    #[test]
    fn a_profile_folder_is_removed_only_once_no_process_uses_it() {
        let temp = tempfile::tempdir().unwrap();
        let profile = tempfile::Builder::new()
            .prefix(PROFILE_PREFIX)
            .tempdir_in(temp.path())
            .unwrap();
        let path = profile.path().to_owned();
        let mut writer = std::process::Command::new("sh")
            .args(["-c", "while :; do mkdir -p \"$0/Default\"; done"])
            .arg(&path)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while processes_using(&path).len() < 2 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no mkdir started"
            );
            std::thread::yield_now();
        }
        reap_and_remove(profile);
        assert!(!writer.wait().unwrap().success());
        assert!(processes_using(&path).is_empty());
        assert!(!path.exists(), "{} left behind", path.display());
    }
}
