//! The pool: one browser process, tabs checked out as guards, reused, recycled and replaced.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::browser::BrowserProcess;
use super::tab::{self, Tab};
use super::{BrowserSettings, RenderError, RenderRequest};
use crate::page::PageSnapshot;

/// Bound for the housekeeping steps between pages (blank a tab, close a tab).
const HOUSEKEEPING_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound for opening a tab; a healthy browser takes well under a second.
const TAB_OPEN_TIMEOUT: Duration = Duration::from_secs(8);

/// Renders pages in a pool of Chromium tabs. See the [module docs](super).
///
/// Dropped without [`BrowserPool::close`], it kills the browser's processes at once and
/// deletes the profile folder in the background, once they have all exited.
pub struct BrowserPool {
    shared: Arc<Shared>,
}

struct Shared {
    settings: BrowserSettings,
    browser: tokio::sync::Mutex<BrowserSlot>,
    idle: Mutex<Vec<Tab>>,
    permits: Semaphore,
    closed: AtomicBool,
    stats: Counters,
}

#[derive(Default)]
struct BrowserSlot {
    process: Option<BrowserProcess>,
    generation: u64,
}

#[derive(Default)]
struct Counters {
    browsers_launched: AtomicU64,
    tabs_opened: AtomicU64,
    tabs_recycled: AtomicU64,
    tabs_discarded: AtomicU64,
    pages_rendered: AtomicU64,
    retries: AtomicU64,
}

/// What the pool has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Browser processes started (more than 1 means the browser was replaced).
    pub browsers_launched: u64,
    pub tabs_opened: u64,
    /// Tabs closed after [`BrowserSettings::recycle_after`] pages.
    pub tabs_recycled: u64,
    /// Tabs thrown away after a timeout, crash or error.
    pub tabs_discarded: u64,
    pub pages_rendered: u64,
    /// Pages retried after a crash.
    pub retries: u64,
}

/// The running browser process, for monitoring and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserProcessInfo {
    pub pid: u32,
    /// Its temporary `--user-data-dir`; every process of the browser names it on its command
    /// line, and it is deleted when the browser has exited.
    pub profile_dir: PathBuf,
}

impl BrowserPool {
    /// Starts Chromium (so a missing or broken browser is reported now, not on the first page).
    pub async fn launch(mut settings: BrowserSettings) -> Result<Self, RenderError> {
        settings.tabs = settings.tabs.max(1);
        settings.recycle_after = settings.recycle_after.max(1);
        let process = BrowserProcess::launch(&settings).await?;
        let shared = Shared {
            permits: Semaphore::new(settings.tabs),
            settings,
            browser: tokio::sync::Mutex::new(BrowserSlot {
                process: Some(process),
                generation: 1,
            }),
            idle: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            stats: Counters::default(),
        };
        shared.stats.browsers_launched.store(1, Ordering::Relaxed);
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// The settings in force (`tabs` and `recycle_after` at least 1).
    pub fn settings(&self) -> &BrowserSettings {
        &self.shared.settings
    }

    /// Renders one page. At most [`BrowserSettings::tabs`] pages render at once; callers
    /// beyond that wait for a tab. A crash of the tab or the browser is retried once on a fresh
    /// tab (in a fresh browser if needed); a timeout is not retried.
    pub async fn render(&self, request: &RenderRequest) -> Result<PageSnapshot, RenderError> {
        let (snapshot, _) = self.render_capturing(request, None).await?;
        Ok(snapshot)
    }

    /// [`BrowserPool::render`], then a PNG of the rendered page (`Page.captureScreenshot`): the
    /// whole page, as wide as its content, cut at `max_height` CSS pixels. Only asked for by
    /// tools (`scrape probe --screenshot`), so a run never pays for it.
    pub async fn render_with_screenshot(
        &self,
        request: &RenderRequest,
        max_height: u32,
    ) -> Result<(PageSnapshot, Vec<u8>), RenderError> {
        let (snapshot, png) = self.render_capturing(request, Some(max_height)).await?;
        Ok((snapshot, png.unwrap_or_default()))
    }

    async fn render_capturing(
        &self,
        request: &RenderRequest,
        screenshot: Option<u32>,
    ) -> Result<(PageSnapshot, Option<Vec<u8>>), RenderError> {
        let shared = &self.shared;
        let _permit = shared
            .permits
            .acquire()
            .await
            .map_err(|_| RenderError::Closed)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self.render_once(request, screenshot).await;
            match result {
                Err(e) if e.is_crash() && attempt == 1 => {
                    tracing::info!(url = %request.url, error = %e, "retrying the page on a fresh tab");
                    shared.stats.retries.fetch_add(1, Ordering::Relaxed);
                }
                other => return other,
            }
        }
    }

    async fn render_once(
        &self,
        request: &RenderRequest,
        screenshot: Option<u32>,
    ) -> Result<(PageSnapshot, Option<Vec<u8>>), RenderError> {
        let shared = &self.shared;
        let timeout = shared.settings.page_timeout;
        // Opening a tab (maybe a new renderer process) is part of the page's time.
        let deadline = Instant::now() + timeout;
        let guard = self.checkout(deadline).await?;
        let page = guard.page().clone();
        let lost = guard.browser_lost.clone();
        let recorder = match &shared.settings.network {
            crate::replay::Network::Record(recorder) => Some(Arc::clone(recorder)),
            _ => None,
        };
        let url = request.url.to_string();
        let result = tokio::select! {
            r = tokio::time::timeout_at(deadline, tab::render(&page, request, deadline, screenshot, recorder)) => r,
            () = lost.cancelled() => Ok(Err(RenderError::BrowserCrashed { url: url.clone() })),
        };
        let result = match result {
            Ok(Ok(rendered)) => {
                shared.stats.pages_rendered.fetch_add(1, Ordering::Relaxed);
                self.checkin(guard).await;
                return Ok(rendered);
            }
            Ok(Err(RenderError::Timeout { .. })) | Err(_) => RenderError::Timeout { url, timeout },
            Ok(Err(e)) => e,
        };
        // The tab is in an unknown state: never reuse it. A dead browser explains any error.
        drop(guard);
        if !self.browser_is_alive().await {
            return Err(RenderError::BrowserCrashed {
                url: request.url.to_string(),
            });
        }
        Err(result)
    }

    /// An idle tab of the current browser, or a new one. The browser is replaced when it died,
    /// or when it cannot open a tab within [`TAB_OPEN_TIMEOUT`] (seen after renderer crashes).
    async fn checkout(&self, deadline: Instant) -> Result<TabGuard, RenderError> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::SeqCst) {
            return Err(RenderError::Closed);
        }
        let mut slot = shared.browser.lock().await;
        let mut replace = !slot.process.as_mut().is_some_and(BrowserProcess::is_alive);
        loop {
            if replace {
                self.replace_browser(&mut slot).await?;
            }
            let generation = slot.generation;
            let reused = {
                let mut idle = lock(&shared.idle);
                idle.retain(|t| t.generation == generation);
                idle.pop()
            };
            let process = slot.process.as_ref().ok_or(RenderError::Closed)?;
            let browser_lost = process.lost();
            let tab = match reused {
                Some(tab) => tab,
                None => {
                    let browser = process.browser().ok_or(RenderError::Closed)?;
                    let open_by = deadline.min(Instant::now() + TAB_OPEN_TIMEOUT);
                    let opened = tokio::time::timeout_at(
                        open_by,
                        Tab::open(browser, &shared.settings, generation),
                    )
                    .await;
                    match opened {
                        Ok(Ok(tab)) => {
                            shared.stats.tabs_opened.fetch_add(1, Ordering::Relaxed);
                            tab
                        }
                        Err(_) | Ok(Err(_)) if !replace && Instant::now() < deadline => {
                            tracing::warn!("chromium could not open a tab; starting a new one");
                            replace = true;
                            continue;
                        }
                        Err(_) => {
                            return Err(RenderError::Timeout {
                                url: "about:blank".into(),
                                timeout: shared.settings.page_timeout,
                            });
                        }
                        Ok(Err(source)) => {
                            return Err(RenderError::Cdp {
                                url: "about:blank".into(),
                                source,
                            });
                        }
                    }
                }
            };
            return Ok(TabGuard {
                tab: Some(tab),
                browser_lost,
                shared: Arc::clone(shared),
            });
        }
    }

    async fn replace_browser(&self, slot: &mut BrowserSlot) -> Result<(), RenderError> {
        let shared = &self.shared;
        if let Some(old) = slot.process.take() {
            tracing::warn!(pid = old.pid(), "replacing chromium");
            old.shutdown().await;
        }
        slot.process = Some(BrowserProcess::launch(&shared.settings).await?);
        slot.generation += 1;
        shared
            .stats
            .browsers_launched
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Back to the idle list after a good page: blanked (which also stops whatever the page
    /// still runs), or closed when it has rendered `recycle_after` pages.
    async fn checkin(&self, mut guard: TabGuard) {
        let shared = &self.shared;
        let Some(mut tab) = guard.tab.take() else {
            return;
        };
        tab.pages += 1;
        if tab.pages >= shared.settings.recycle_after {
            shared.stats.tabs_recycled.fetch_add(1, Ordering::Relaxed);
            let _ = tokio::time::timeout(HOUSEKEEPING_TIMEOUT, tab.page.close()).await;
            return;
        }
        let blank = tokio::time::timeout(HOUSEKEEPING_TIMEOUT, tab.page.goto("about:blank")).await;
        if matches!(blank, Ok(Ok(_))) {
            lock(&shared.idle).push(tab);
        } else {
            guard.tab = Some(tab);
            // Dropped: discarded.
        }
    }

    async fn browser_is_alive(&self) -> bool {
        let mut slot = self.shared.browser.lock().await;
        slot.process.as_mut().is_some_and(BrowserProcess::is_alive)
    }

    /// The current browser process, if one is running.
    pub async fn browser_process(&self) -> Option<BrowserProcessInfo> {
        let slot = self.shared.browser.lock().await;
        let process = slot.process.as_ref()?;
        Some(BrowserProcessInfo {
            pid: process.pid()?,
            profile_dir: process.profile_dir()?.to_owned(),
        })
    }

    /// Counters since launch.
    pub fn stats(&self) -> PoolStats {
        let c = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PoolStats {
            browsers_launched: get(&c.browsers_launched),
            tabs_opened: get(&c.tabs_opened),
            tabs_recycled: get(&c.tabs_recycled),
            tabs_discarded: get(&c.tabs_discarded),
            pages_rendered: get(&c.pages_rendered),
            retries: get(&c.retries),
        }
    }

    /// Closes the browser (`Browser.close`, then waits for the process; killed if it does not
    /// exit in time) and deletes its profile folder. No Chromium process is left afterwards.
    pub async fn close(self) {
        let shared = &self.shared;
        shared.closed.store(true, Ordering::SeqCst);
        shared.permits.close();
        lock(&shared.idle).clear();
        let process = shared.browser.lock().await.process.take();
        if let Some(process) = process {
            process.shutdown().await;
        }
    }
}

/// A checked-out tab. Dropped without being checked in (an error, a timeout, a cancelled
/// render), the tab is discarded: closed in the background, never reused.
struct TabGuard {
    tab: Option<Tab>,
    browser_lost: tokio_util::sync::CancellationToken,
    shared: Arc<Shared>,
}

impl TabGuard {
    fn page(&self) -> &chromiumoxide::Page {
        // Invariant: `tab` is only taken by `checkin`, which consumes the guard.
        &self.tab.as_ref().expect("a checked-out tab").page
    }
}

impl Drop for TabGuard {
    fn drop(&mut self) {
        if let Some(tab) = self.tab.take() {
            self.shared
                .stats
                .tabs_discarded
                .fetch_add(1, Ordering::Relaxed);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = tokio::time::timeout(HOUSEKEEPING_TIMEOUT, tab.page.close()).await;
                });
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
