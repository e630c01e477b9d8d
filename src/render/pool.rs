//! The pool: browser processes, each in a slot of its own, and their tabs checked out as
//! guards, reused, recycled and replaced.
//!
//! A page takes a tab of the process with the fewest pages in progress, ties going round robin
//! (after the process picked last), so the [`BrowserSettings::tabs`] spread evenly over the
//! [`BrowserSettings::processes`] and even pages rendered one at a time take turns, each
//! through its process's proxy. Each
//! slot is locked on its own: a process being replaced after a crash holds up only the pages
//! that wait for it, and its idle tabs, which died with it, are the only ones thrown away.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::browser::BrowserProcess;
use super::limits::SizeWatch;
use super::tab::{self, Tab};
use super::{BrowserSettings, RenderError, RenderRequest};
use crate::page::PageSnapshot;
use crate::proxy::ProxyEndpoint;

/// Bound for the housekeeping steps between pages (blank a tab, close a tab).
const HOUSEKEEPING_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound for opening a tab; a healthy browser takes well under a second.
const TAB_OPEN_TIMEOUT: Duration = Duration::from_secs(8);

/// Renders pages in a pool of Chromium tabs. See the [module docs](super).
///
/// Dropped without [`BrowserPool::close`], it kills every browser's processes at once and
/// deletes their profile folders in the background, each once its processes have all exited.
pub struct BrowserPool {
    shared: Arc<Shared>,
}

struct Shared {
    settings: BrowserSettings,
    slots: Vec<Slot>,
    /// Pages in progress per slot, the tab checkout's measure; one lock so that two pages
    /// checking out at once do not both pick the same least busy slot.
    busy: Mutex<Busy>,
    permits: Semaphore,
    closed: AtomicBool,
    /// Browser processes launched so far: the `k`-th takes proxy `k` modulo their number.
    launches: AtomicUsize,
    stats: Counters,
}

/// Pages in progress per slot, and the slot picked last.
struct Busy {
    pages: Vec<usize>,
    last: usize,
}

impl Busy {
    /// The least busy slot, the first after the one picked last on a tie; counted as busy.
    fn pick(&mut self) -> usize {
        let count = self.pages.len();
        let index = (1..=count)
            .map(|offset| (self.last + offset) % count)
            .min_by_key(|&i| self.pages[i])
            .unwrap_or(0);
        self.pages[index] += 1;
        self.last = index;
        index
    }
}

/// One browser process of the pool and its idle tabs.
struct Slot {
    browser: tokio::sync::Mutex<BrowserSlot>,
    idle: Mutex<Vec<Tab>>,
}

#[derive(Default)]
struct BrowserSlot {
    process: Option<BrowserProcess>,
    /// The proxy `process` goes through; its tabs answer its challenges.
    proxy: Option<ProxyEndpoint>,
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
    /// Browser processes started (more than [`BrowserSettings::processes`] means some were
    /// replaced).
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

/// A running browser process of the pool, for monitoring and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserProcessInfo {
    /// Its slot in the pool, from 0 to [`BrowserSettings::processes`] - 1; a replacement takes
    /// the slot of the process it replaces.
    pub slot: usize,
    pub pid: u32,
    /// Its temporary `--user-data-dir`; every process of the browser names it on its command
    /// line, and it is deleted when the browser has exited.
    pub profile_dir: PathBuf,
    /// The proxy it goes through, if any.
    pub proxy: Option<String>,
}

impl BrowserPool {
    /// Starts every Chromium process at once (so a missing or broken browser is reported now,
    /// not on the first page). When one fails to start, those that did are closed again.
    pub async fn launch(mut settings: BrowserSettings) -> Result<Self, RenderError> {
        settings.tabs = settings.tabs.max(1);
        // A process without a tab to serve would only cost memory.
        settings.processes = settings.processes.clamp(1, settings.tabs);
        settings.recycle_after = settings.recycle_after.max(1);
        let processes = settings.processes;
        let shared = Arc::new(Shared {
            permits: Semaphore::new(settings.tabs),
            slots: (0..processes)
                .map(|_| Slot {
                    browser: tokio::sync::Mutex::new(BrowserSlot::default()),
                    idle: Mutex::new(Vec::new()),
                })
                .collect(),
            busy: Mutex::new(Busy {
                pages: vec![0; processes],
                // The first page goes to slot 0.
                last: processes - 1,
            }),
            settings,
            closed: AtomicBool::new(false),
            launches: AtomicUsize::new(0),
            stats: Counters::default(),
        });
        let pool = Self { shared };
        let started = futures_util::future::join_all(pool.shared.slots.iter().map(|pool_slot| {
            let pool = &pool;
            async move {
                pool.start_browser(&mut *pool_slot.browser.lock().await)
                    .await
            }
        }))
        .await;
        if let Some(error) = started.into_iter().find_map(Result::err) {
            pool.close().await;
            return Err(error);
        }
        Ok(pool)
    }

    /// The settings in force (`tabs`, `processes` and `recycle_after` at least 1, no more
    /// processes than tabs).
    pub fn settings(&self) -> &BrowserSettings {
        &self.shared.settings
    }

    /// Renders one page. At most [`BrowserSettings::tabs`] pages render at once; callers
    /// beyond that wait for a tab. A crash of the tab or the browser, or a browser killed for
    /// passing its memory limit, is retried once on a fresh tab (in a fresh browser if needed);
    /// a timeout or a response too large is not retried.
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
        let slot = guard.slot;
        let page = guard.page().clone();
        let lost = guard.browser_lost.clone();
        let over_memory = guard.over_memory.clone();
        let limit_bytes = shared.settings.memory_limit_bytes;
        // A browser killed for its memory is a page failure of its own, retried like a crash.
        let gone = |url: String| match over_memory.is_cancelled() {
            true => RenderError::Memory { url, limit_bytes },
            false => RenderError::BrowserCrashed { url },
        };
        let max_page_bytes = shared.settings.max_page_bytes;
        let size = SizeWatch::start(&page, max_page_bytes)
            .await
            .map_err(|source| RenderError::Cdp {
                url: request.url.to_string(),
                source,
            })?;
        if let Some(jar) = &shared.settings.jar {
            tab::share_cookies(&page, jar, &request.url)
                .await
                .map_err(|source| RenderError::Cdp {
                    url: request.url.to_string(),
                    source,
                })?;
        }
        let recorder = match &shared.settings.network {
            crate::replay::Network::Record(recorder) => Some(Arc::clone(recorder)),
            _ => None,
        };
        let url = request.url.to_string();
        // Past the deadline, the tab snapshots what it has (a partial page) within the grace.
        let result = tokio::select! {
            r = tokio::time::timeout_at(deadline + tab::SNAPSHOT_GRACE, tab::render(&page, request, deadline, screenshot, recorder)) => r,
            () = size.passed() => Ok(Err(RenderError::TooLarge { url: url.clone(), limit_bytes: max_page_bytes })),
            () = lost.cancelled() => Ok(Err(gone(url.clone()))),
        };
        let result = match result {
            Ok(Ok(rendered)) if rendered.0.partial.is_some() => {
                // Still loading or scrolling: never reused.
                shared.stats.pages_rendered.fetch_add(1, Ordering::Relaxed);
                drop(guard);
                return Ok(rendered);
            }
            Ok(Ok(rendered)) => {
                shared.stats.pages_rendered.fetch_add(1, Ordering::Relaxed);
                self.checkin(guard).await;
                return Ok(rendered);
            }
            Ok(Err(e @ RenderError::Status { .. })) => {
                self.checkin(guard).await;
                return Err(e);
            }
            Ok(Err(RenderError::Timeout { .. })) | Err(_) => RenderError::Timeout { url, timeout },
            Ok(Err(e)) => e,
        };
        // The tab is in an unknown state: never reuse it. A dead browser explains any error.
        drop(guard);
        if !self.browser_is_alive(slot).await {
            return Err(gone(request.url.to_string()));
        }
        Err(result)
    }

    /// An idle tab of the least busy browser process, or a new one. The process is replaced
    /// when it died, or when it cannot open a tab within [`TAB_OPEN_TIMEOUT`] (seen after
    /// renderer crashes); the other processes are left alone.
    async fn checkout(&self, deadline: Instant) -> Result<TabGuard, RenderError> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::SeqCst) {
            return Err(RenderError::Closed);
        }
        let index = lock(&shared.busy).pick();
        // From here on the guard owns the page's place in the slot's count.
        let mut guard = TabGuard {
            tab: None,
            slot: index,
            browser_lost: tokio_util::sync::CancellationToken::new(),
            over_memory: tokio_util::sync::CancellationToken::new(),
            shared: Arc::clone(shared),
        };
        let pool_slot = &shared.slots[index];
        let mut slot = pool_slot.browser.lock().await;
        let mut replace = !slot.process.as_mut().is_some_and(BrowserProcess::is_alive);
        loop {
            if replace {
                self.replace_browser(index, &mut slot).await?;
            }
            let generation = slot.generation;
            let reused = {
                let mut idle = lock(&pool_slot.idle);
                idle.retain(|t| t.generation == generation);
                idle.pop()
            };
            let process = slot.process.as_ref().ok_or(RenderError::Closed)?;
            let browser_lost = process.lost();
            let over_memory = process.over_memory();
            let tab = match reused {
                Some(tab) => tab,
                None => {
                    let browser = process.browser().ok_or(RenderError::Closed)?;
                    let open_by = deadline.min(Instant::now() + TAB_OPEN_TIMEOUT);
                    let opened = tokio::time::timeout_at(
                        open_by,
                        Tab::open(browser, &shared.settings, slot.proxy.as_ref(), generation),
                    )
                    .await;
                    match opened {
                        Ok(Ok(tab)) => {
                            shared.stats.tabs_opened.fetch_add(1, Ordering::Relaxed);
                            tab
                        }
                        Err(_) | Ok(Err(_)) if !replace && Instant::now() < deadline => {
                            tracing::warn!(
                                slot = index,
                                "chromium could not open a tab; starting a new one"
                            );
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
            guard.tab = Some(tab);
            guard.browser_lost = browser_lost;
            guard.over_memory = over_memory;
            return Ok(guard);
        }
    }

    /// Shuts the slot's process down, if any, and starts its replacement.
    async fn replace_browser(
        &self,
        index: usize,
        slot: &mut BrowserSlot,
    ) -> Result<(), RenderError> {
        if let Some(old) = slot.process.take() {
            tracing::warn!(slot = index, pid = old.pid(), "replacing chromium");
            old.shutdown().await;
        }
        // Its tabs died with it.
        lock(&self.shared.slots[index].idle).clear();
        self.start_browser(slot).await
    }

    /// Launches a process into the empty `slot`, through the next proxy in turn.
    async fn start_browser(&self, slot: &mut BrowserSlot) -> Result<(), RenderError> {
        let shared = &self.shared;
        let proxies = &shared.settings.proxies;
        let launch = shared.launches.fetch_add(1, Ordering::Relaxed);
        let proxy = (!proxies.is_empty()).then(|| proxies[launch % proxies.len()].clone());
        let process = BrowserProcess::launch(&shared.settings, proxy.as_ref()).await?;
        slot.process = Some(process);
        slot.proxy = proxy;
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
            lock(&shared.slots[guard.slot].idle).push(tab);
        } else {
            guard.tab = Some(tab);
            // Dropped: discarded.
        }
    }

    async fn browser_is_alive(&self, index: usize) -> bool {
        let mut slot = self.shared.slots[index].browser.lock().await;
        slot.process.as_mut().is_some_and(BrowserProcess::is_alive)
    }

    /// The browser process of the first slot, if one is running.
    pub async fn browser_process(&self) -> Option<BrowserProcessInfo> {
        self.browser_processes()
            .await
            .into_iter()
            .find(|info| info.slot == 0)
    }

    /// The browser processes, in slot order (waiting for a slot whose process is being
    /// replaced); a slot without a running process is left out.
    pub async fn browser_processes(&self) -> Vec<BrowserProcessInfo> {
        let mut infos = Vec::new();
        for (index, pool_slot) in self.shared.slots.iter().enumerate() {
            let slot = pool_slot.browser.lock().await;
            let Some(process) = slot.process.as_ref() else {
                continue;
            };
            if let (Some(pid), Some(profile_dir)) = (process.pid(), process.profile_dir()) {
                infos.push(BrowserProcessInfo {
                    slot: index,
                    pid,
                    profile_dir: profile_dir.to_owned(),
                    proxy: slot.proxy.as_ref().map(ToString::to_string),
                });
            }
        }
        infos
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

    /// Closes every browser process at once (`Browser.close`, then waits for the process;
    /// killed if it does not exit in time) and deletes their profile folders. No Chromium
    /// process is left afterwards.
    pub async fn close(self) {
        let shared = &self.shared;
        shared.closed.store(true, Ordering::SeqCst);
        shared.permits.close();
        futures_util::future::join_all(shared.slots.iter().map(|pool_slot| async {
            lock(&pool_slot.idle).clear();
            let process = pool_slot.browser.lock().await.process.take();
            if let Some(process) = process {
                process.shutdown().await;
            }
        }))
        .await;
    }
}

/// A checked-out tab. Dropped without being checked in (an error, a timeout, a cancelled
/// render), the tab is discarded: closed in the background, never reused.
struct TabGuard {
    tab: Option<Tab>,
    /// The slot of the tab's browser process; the guard counts as one of its pages in progress.
    slot: usize,
    browser_lost: tokio_util::sync::CancellationToken,
    /// Cancelled when the tab's browser passed its memory limit.
    over_memory: tokio_util::sync::CancellationToken,
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
        if let Some(busy) = lock(&self.shared.busy).pages.get_mut(self.slot) {
            *busy = busy.saturating_sub(1);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_go_to_the_least_busy_process_in_turns_on_a_tie() {
        let mut busy = Busy {
            pages: vec![0; 3],
            last: 2,
        };
        // One page at a time: each process in turn.
        let mut one_at_a_time = Vec::new();
        for _ in 0..4 {
            let index = busy.pick();
            one_at_a_time.push(index);
            busy.pages[index] -= 1;
        }
        assert_eq!(one_at_a_time, [0, 1, 2, 0]);
        // Pages at once: spread evenly, the least busy first.
        let at_once: Vec<usize> = (0..5).map(|_| busy.pick()).collect();
        assert_eq!(at_once, [1, 2, 0, 1, 2]);
        assert_eq!(busy.pages, [1, 2, 2]);
        busy.pages[2] -= 2;
        assert_eq!(busy.pick(), 2);
    }
}
