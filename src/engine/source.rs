//! Where pages come from: plain HTTP, the Chromium pool, or plain HTTP first and the browser
//! when that finds nothing (`render = "auto"`).
//!
//! Either way the crawl gets a [`PageSnapshot`]. The mode is the profile's, or a level's for
//! pages reached through `[[follow]]` links, so one job may fetch some pages and render others;
//! only a `json_cursor` chain asks which mode it has (a rendered start page's API calls are
//! its first pages).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::analyse::{analyse, read_page};
use super::page::Fetched;
use crate::fetch::{PageFailure, PageFetcher};
use crate::net::walls::{Asked, Walls};
use crate::net::{Failure, FailureClass, Hosts, HttpClient};
use crate::page::{CapturedJson, PageSnapshot, Validators};
use crate::paginate::PagePosition;
use crate::profile::{PageWait, Profile, Rejection, RenderMode};
use crate::render::{
    Action, Blocking, BrowserPool, BrowserSettings, Dismiss, KnownImages, RenderError,
    RenderRequest, Wait,
};
use crate::replay::OutgoingRequest;
use crate::robots::{OptOutSource, may_opt_out};

/// Pages that opted out in a run, and the images found on them (not queued).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptedOutPages {
    /// Pages whose `<meta name="robots">` opted out.
    pub by_meta: u64,
    /// Pages whose response's `X-Robots-Tag` opted out.
    pub by_header: u64,
    pub images: u64,
}

impl OptedOutPages {
    /// The summary's line: `5 images not queued: 2 pages opt out (meta robots)`, or `None`
    /// when no page opted out.
    pub fn describe(&self) -> Option<String> {
        let sources = [
            (self.by_meta, OptOutSource::MetaRobots),
            (self.by_header, OptOutSource::XRobotsTag),
        ];
        let pages: Vec<String> = sources
            .iter()
            .filter(|(pages, _)| *pages > 0)
            .map(|(pages, source)| format!("{pages} pages opt out ({})", source.describe()))
            .collect();
        (!pages.is_empty())
            .then(|| format!("{} images not queued: {}", self.images, pages.join(", ")))
    }
}

/// Fetches the pages of one profile.
pub struct PageSource {
    fetcher: PageFetcher,
    browser: Option<Browser>,
    request: RenderRequest,
    /// Pages made by each way, for the summary.
    static_pages: AtomicU64,
    browser_pages: AtomicU64,
    /// Pages asked for only if they changed, and those the server said had not (`304`).
    conditional_pages: AtomicU64,
    unchanged_pages: AtomicU64,
    /// Pages whose meta robots opts out, pages whose `X-Robots-Tag` does, and the images
    /// found on them, not queued.
    opted_out_by_meta: AtomicU64,
    opted_out_by_header: AtomicU64,
    opted_out_images: AtomicU64,
    /// Sign-in walls and challenges met, by host; a host that showed one is paused.
    walls: Arc<Walls>,
}

impl PageSource {
    /// Starts what `profile` needs: the browser only for `browser` and `auto`; for a profile
    /// whose levels alone render in the browser, at its first such page (a missing Chromium is
    /// still an error here, before any page).
    pub async fn start(profile: &Profile, fetcher: PageFetcher) -> Result<Self, RenderError> {
        let settings = browser_settings(profile, fetcher.client());
        Self::start_with(profile, fetcher, settings).await
    }

    /// [`PageSource::start`] for pages that are looked at, not only read
    /// ([`PageSource::fetch_with_screenshot`]): the browser also loads images.
    pub async fn start_showing_images(
        profile: &Profile,
        fetcher: PageFetcher,
    ) -> Result<Self, RenderError> {
        let mut settings = browser_settings(profile, fetcher.client());
        settings.block.images = false;
        Self::start_with(profile, fetcher, settings).await
    }

    async fn start_with(
        profile: &Profile,
        fetcher: PageFetcher,
        settings: BrowserSettings,
    ) -> Result<Self, RenderError> {
        let request = render_request(profile);
        let browser = match profile.uses_browser() {
            false => None,
            true => {
                let pool = tokio::sync::OnceCell::new();
                if profile.render == RenderMode::Static {
                    crate::render::find_executable(settings.executable.as_deref())?;
                } else {
                    let _ = pool.set(BrowserPool::launch(settings.clone()).await?);
                }
                Some(Browser { settings, pool })
            }
        };
        Ok(Self {
            fetcher,
            browser,
            request,
            static_pages: AtomicU64::new(0),
            browser_pages: AtomicU64::new(0),
            conditional_pages: AtomicU64::new(0),
            unchanged_pages: AtomicU64::new(0),
            opted_out_by_meta: AtomicU64::new(0),
            opted_out_by_header: AtomicU64::new(0),
            opted_out_images: AtomicU64::new(0),
            walls: Arc::new(Walls::of(profile)),
        })
    }

    /// Whether the run replays a recording that does not have the page at `url` (a chain's
    /// recording ended before it).
    pub fn is_past_recording(&self, url: &str) -> bool {
        url::Url::parse(url).is_ok_and(|url| {
            self.fetcher.client().is_past_recording(&OutgoingRequest {
                method: "GET".into(),
                url,
                headers: Vec::new(),
                body: None,
            })
        })
    }

    /// The fetcher of plain HTTP requests (robots.txt asked, host limits, retries).
    pub fn fetcher(&self) -> &PageFetcher {
        &self.fetcher
    }

    /// The per-host limits every page request takes its turn in.
    pub fn hosts(&self) -> &Arc<Hosts> {
        self.fetcher.hosts()
    }

    /// The page at `position` of the chain that began at `start`. A page whose `<meta
    /// name="robots">` or `X-Robots-Tag` opts out is counted here (its images are rejected by
    /// the analysis).
    pub async fn fetch(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        url: &url::Url,
        cancel: &CancellationToken,
    ) -> Result<PageSnapshot, PageFailure> {
        self.fetch_knowing(profile, start, position, url, None, cancel)
            .await
    }

    /// [`PageSource::fetch`] for a refresh that knows images of the page (`known`): rendered,
    /// its scrolling and clicking "load more" stop once they bring only those.
    pub async fn fetch_knowing(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        url: &url::Url,
        known: Option<Arc<KnownImages>>,
        cancel: &CancellationToken,
    ) -> Result<PageSnapshot, PageFailure> {
        self.admit(url).await?;
        let fetched = self
            .fetch_by_mode(profile, start, position, url, known.clone(), cancel)
            .await;
        let mut fetched = self.walled(url, fetched);
        // A sign-in wall the run could sign in past: the page once more.
        if is_wall(&fetched) && self.walls.renew(url).await {
            let again = self
                .fetch_by_mode(profile, start, position, url, known, cancel)
                .await;
            fetched = self.walled(url, again);
        }
        let snapshot = fetched?;
        self.count_opt_out(profile, start, position, &snapshot)
            .await;
        Ok(snapshot)
    }

    /// The page at `position`, as [`PageSource::fetch`] has it; with `validators`, asked over
    /// plain HTTP only if it changed: `None` when the server says it did not (`304`). A page
    /// the profile renders in the browser is fetched in full, whatever its validators: only
    /// plain requests are conditional.
    pub async fn fetch_if_changed(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        url: &url::Url,
        validators: &Validators,
        cancel: &CancellationToken,
    ) -> Result<Option<PageSnapshot>, PageFailure> {
        if profile.render == RenderMode::Browser {
            return self
                .fetch(profile, start, position, url, cancel)
                .await
                .map(Some);
        }
        self.admit(url).await?;
        self.conditional_pages.fetch_add(1, Ordering::Relaxed);
        let fetched = self
            .fetcher
            .fetch_if_changed(url, Some(validators), cancel)
            .await;
        let fetched = self.walled(url, fetched);
        if is_wall(&fetched) && self.walls.renew(url).await {
            return self
                .fetch(profile, start, position, url, cancel)
                .await
                .map(Some);
        }
        let Some(snapshot) = fetched? else {
            self.walls.let_in(url);
            self.unchanged_pages.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        };
        // The static look of `auto` changed: the page is read as any `auto` page is.
        let snapshot = match profile.render {
            RenderMode::Auto => match self.with_images(profile, start, position, snapshot).await? {
                Some(snapshot) => {
                    self.static_pages.fetch_add(1, Ordering::Relaxed);
                    snapshot
                }
                None => self.render(url, cancel, None, None).await?,
            },
            _ => {
                self.static_pages.fetch_add(1, Ordering::Relaxed);
                snapshot
            }
        };
        self.count_opt_out(profile, start, position, &snapshot)
            .await;
        Ok(Some(snapshot))
    }

    /// Analyses `snapshot`, the page at `position` of the chain from `start`, as
    /// [`analyse`] does; a page that is a wall pauses its host, unless the run can sign in
    /// again: then the page is fetched and analysed once more.
    pub async fn analyse(
        &self,
        profile: Arc<Profile>,
        start: url::Url,
        position: PagePosition,
        snapshot: PageSnapshot,
        cancel: &CancellationToken,
    ) -> Fetched {
        let url = snapshot.url.clone();
        let requested = url::Url::parse(&position.url).unwrap_or(url);
        let again = (Arc::clone(&profile), start.clone(), position.clone());
        let analysed = self.analysed(
            &requested,
            analyse(profile, start, position, snapshot).await,
        );
        if !is_wall(&analysed) || !self.walls.renew(&requested).await {
            return analysed;
        }
        let (profile, start, position) = again;
        let snapshot = self
            .fetch(&profile, &start, &position, &requested, cancel)
            .await?;
        self.analysed(
            &requested,
            analyse(profile, start, position, snapshot).await,
        )
    }

    /// An analysed page: one that is no wall lets its host in; one that is pauses it.
    fn analysed(&self, requested: &url::Url, analysed: Fetched) -> Fetched {
        if analysed.is_ok() {
            self.walls.let_in(requested);
        }
        self.walled(requested, analysed)
    }

    /// The run's walls, to be shared with the download stage.
    pub fn walls(&self) -> &Arc<Walls> {
        &self.walls
    }

    /// The same source keeping its walls in `walls`, shared with the download stage.
    pub fn with_walls(mut self, walls: Arc<Walls>) -> Self {
        self.walls = walls;
        self
    }

    /// Whether the page at `url` may be asked for: not once its host showed a wall.
    async fn admit(&self, url: &url::Url) -> Result<(), PageFailure> {
        self.walls
            .admit(url, Asked::Page)
            .await
            .map_err(PageFailure::Failed)
    }

    /// `result`, the page at `url` fetched or analysed, its failure read for a wall.
    fn walled<T>(&self, url: &url::Url, result: Result<T, PageFailure>) -> Result<T, PageFailure> {
        match result {
            Err(PageFailure::Failed(failed)) => Err(PageFailure::Failed(self.walls.checked(
                url,
                Asked::Page,
                failed,
            ))),
            other => other,
        }
    }

    async fn fetch_by_mode(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        url: &url::Url,
        known: Option<Arc<KnownImages>>,
        cancel: &CancellationToken,
    ) -> Result<PageSnapshot, PageFailure> {
        // The profile's own mode, or a level's: one job may fetch some pages and render others.
        match profile.render {
            RenderMode::Static => self.fetch_static(url, cancel).await,
            RenderMode::Browser => self.render(url, cancel, None, known).await,
            RenderMode::Auto => {
                if let Some(snapshot) = self
                    .static_with_images(profile, start, position, url, cancel)
                    .await?
                {
                    self.static_pages.fetch_add(1, Ordering::Relaxed);
                    return Ok(snapshot);
                }
                tracing::debug!(page = %url, "no image in the static page; rendering it in the browser");
                self.render(url, cancel, None, known).await
            }
        }
    }

    /// Counts `snapshot`'s images when its `<meta name="robots">` or its response's
    /// `X-Robots-Tag` opts out, for the summary. Only pages that mention a watched directive
    /// at all, or were answered with an `X-Robots-Tag`, are analysed for it.
    async fn count_opt_out(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        snapshot: &PageSnapshot,
    ) {
        let watched = &profile.download.politeness.opt_out;
        if watched.is_empty()
            || (snapshot.robots_tags.is_empty() && !may_opt_out(&snapshot.html, watched))
        {
            return;
        }
        // Too heavy to read, the page fails when it is analysed for its images.
        let counted = read_page(
            Arc::clone(profile),
            start.clone(),
            position.clone(),
            snapshot.clone(),
            |analysis| {
                let images = analysis
                    .candidates
                    .iter()
                    .filter(|(_, verdict)| matches!(verdict, Err(Rejection::OptedOut(_))))
                    .count() as u64;
                analysis.opted_out.map(|opt_out| (opt_out, images))
            },
        )
        .await;
        if let Ok(Some((opt_out, images))) = counted {
            let source = opt_out.source.describe();
            tracing::warn!(page = %snapshot.url, directive = %opt_out.directive, images, "the page opts out with {source}: its images are not queued");
            let pages = match opt_out.source {
                OptOutSource::MetaRobots => &self.opted_out_by_meta,
                OptOutSource::XRobotsTag => &self.opted_out_by_header,
            };
            pages.fetch_add(1, Ordering::Relaxed);
            self.opted_out_images.fetch_add(images, Ordering::Relaxed);
        }
    }

    async fn fetch_static(
        &self,
        url: &url::Url,
        cancel: &CancellationToken,
    ) -> Result<PageSnapshot, PageFailure> {
        let snapshot = self.fetcher.fetch(url, cancel).await?;
        self.static_pages.fetch_add(1, Ordering::Relaxed);
        Ok(snapshot)
    }

    /// Renders `url` in the browser and sends each JSON response the page fetches that the
    /// profile's `[[api]]` rules capture to `captured` as soon as it is read, while the page is
    /// still rendering (the snapshot holds them all as well).
    pub async fn render_capturing(
        &self,
        url: &url::Url,
        cancel: &CancellationToken,
        captured: UnboundedSender<CapturedJson>,
    ) -> Result<PageSnapshot, PageFailure> {
        self.render(url, cancel, Some(captured), None).await
    }

    async fn render(
        &self,
        url: &url::Url,
        cancel: &CancellationToken,
        captured: Option<UnboundedSender<CapturedJson>>,
        known: Option<Arc<KnownImages>>,
    ) -> Result<PageSnapshot, PageFailure> {
        self.fetcher.robots_allow(url).await?;
        let pool = self.pool().await?;
        let mut request = self.request.clone();
        request.url = url.clone();
        request.captured = captured;
        request.known = known;
        // A render takes its host's turn like a plain request: `[crawl] per_host` holds for
        // rendered pages too.
        let host = self.fetcher.hosts().get(url);
        let (turn, rendered) = tokio::select! {
            r = async {
                let turn = host.acquire().await;
                (turn, pool.render(&request).await)
            } => r,
            () = cancel.cancelled() => return Err(PageFailure::Cancelled),
        };
        if rendered.is_ok() {
            turn.succeeded();
        }
        let snapshot = rendered.map_err(render_failure)?;
        self.browser_pages.fetch_add(1, Ordering::Relaxed);
        Ok(snapshot)
    }

    /// The plain-HTTP page at `url` when the profile's rules accept an image in it (`auto`).
    async fn static_with_images(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        url: &url::Url,
        cancel: &CancellationToken,
    ) -> Result<Option<PageSnapshot>, PageFailure> {
        let snapshot = self.fetcher.fetch(url, cancel).await?;
        self.with_images(profile, start, position, snapshot).await
    }

    /// `snapshot`, fetched over plain HTTP, when the profile's rules accept an image in it.
    async fn with_images(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        snapshot: PageSnapshot,
    ) -> Result<Option<PageSnapshot>, PageFailure> {
        // A page that opts out is the page: rendering it would not change its meta.
        let found = read_page(
            Arc::clone(profile),
            start.clone(),
            position.clone(),
            snapshot.clone(),
            |analysis| analysis.accepted().count() > 0 || analysis.opted_out.is_some(),
        )
        .await
        .map_err(PageFailure::Failed)?;
        Ok(found.then_some(snapshot))
    }

    /// The browser pool, launched now if this is the first page to render.
    async fn pool(&self) -> Result<&BrowserPool, PageFailure> {
        let Some(browser) = &self.browser else {
            return Err(PageFailure::Failed(Failure::new(
                FailureClass::Other,
                "no browser was started",
            )));
        };
        browser
            .pool
            .get_or_try_init(|| BrowserPool::launch(browser.settings.clone()))
            .await
            .map_err(|e| {
                PageFailure::Failed(Failure::new(
                    FailureClass::Other,
                    crate::net::error_chain(&e),
                ))
            })
    }

    /// [`PageSource::fetch`], plus a PNG of the page rendered in the browser (at most
    /// `max_height` CSS pixels tall). An `auto` profile whose plain page has images uses that
    /// page, as a run would, and renders it only for the picture. Needs the browser.
    pub async fn fetch_with_screenshot(
        &self,
        profile: &Arc<Profile>,
        start: &url::Url,
        position: &PagePosition,
        url: &url::Url,
        cancel: &CancellationToken,
        max_height: u32,
    ) -> Result<(PageSnapshot, Vec<u8>), PageFailure> {
        let plain = match profile.render {
            RenderMode::Auto => {
                self.static_with_images(profile, start, position, url, cancel)
                    .await?
            }
            RenderMode::Static | RenderMode::Browser => None,
        };
        let pool = self.pool().await?;
        let mut request = self.request.clone();
        request.url = url.clone();
        let rendered = tokio::select! {
            r = pool.render_with_screenshot(&request, max_height) => r,
            () = cancel.cancelled() => return Err(PageFailure::Cancelled),
        };
        let (snapshot, png) = rendered.map_err(render_failure)?;
        match plain {
            Some(plain) => {
                self.static_pages.fetch_add(1, Ordering::Relaxed);
                Ok((plain, png))
            }
            None => {
                self.browser_pages.fetch_add(1, Ordering::Relaxed);
                Ok((snapshot, png))
            }
        }
    }

    /// Pages fetched over plain HTTP and rendered in the browser, in this run.
    pub fn pages_by_way(&self) -> (u64, u64) {
        (
            self.static_pages.load(Ordering::Relaxed),
            self.browser_pages.load(Ordering::Relaxed),
        )
    }

    /// Pages asked for only if they changed in this run, and those unchanged (`304`).
    pub fn pages_checked(&self) -> (u64, u64) {
        (
            self.conditional_pages.load(Ordering::Relaxed),
            self.unchanged_pages.load(Ordering::Relaxed),
        )
    }

    /// The pages that opted out in this run, by meta robots and by `X-Robots-Tag`.
    pub fn opted_out(&self) -> OptedOutPages {
        OptedOutPages {
            by_meta: self.opted_out_by_meta.load(Ordering::Relaxed),
            by_header: self.opted_out_by_header.load(Ordering::Relaxed),
            images: self.opted_out_images.load(Ordering::Relaxed),
        }
    }

    /// Shuts the browser down (no Chromium process outlives this).
    pub async fn close(self) {
        if let Some(pool) = self.browser.and_then(|b| b.pool.into_inner()) {
            pool.close().await;
        }
    }
}

/// Whether `result` failed as a wall (a sign-in wall or a bot challenge).
fn is_wall<T>(result: &Result<T, PageFailure>) -> bool {
    matches!(
        result,
        Err(PageFailure::Failed(failed))
            if matches!(failed.class, FailureClass::LoginRequired | FailureClass::Blocked)
    )
}

/// The browser pool of a source, and the settings it is launched with when it is needed.
struct Browser {
    settings: BrowserSettings,
    pool: tokio::sync::OnceCell<BrowserPool>,
}

/// A render error as a page failure: a document answered 404 or 410 is missing (as a plain
/// fetch says), another status is that status's class, `timeout` when the page ran out of
/// time (or a browser command did, e.g. a navigation to a server slower than the deadline), `too_large` for a response past the page size limit, `memory` when the browser passed
/// its memory limit (again, after the pool's retry), else `other`.
fn render_failure(error: RenderError) -> PageFailure {
    let class = match error {
        RenderError::Status {
            status: status @ (404 | 410),
            ..
        } => return PageFailure::Missing(status),
        RenderError::Status { status, .. } => FailureClass::Http(status),
        RenderError::Timeout { .. }
        | RenderError::Cdp {
            source: chromiumoxide::error::CdpError::Timeout,
            ..
        } => FailureClass::Timeout,
        RenderError::TooLarge { .. } => FailureClass::TooLarge,
        RenderError::Memory { .. } => FailureClass::Memory,
        _ => FailureClass::Other,
    };
    PageFailure::Failed(Failure::new(class, crate::net::error_chain(&error)))
}

/// The browser settings of `profile`'s pages, rendered through `client`'s network.
pub fn browser_settings(profile: &Profile, client: &HttpClient) -> BrowserSettings {
    let b = &profile.browser;
    let (cookies, local_storage) = crate::net::session::browser_session(&profile.session);
    BrowserSettings {
        executable: b.executable.clone(),
        tabs: b.tabs,
        processes: b.processes,
        recycle_after: b.recycle_after,
        block: Blocking {
            stylesheets: b.block_stylesheets,
            ..Blocking::default()
        },
        page_timeout: b.page_timeout,
        user_agent: None,
        headers: profile
            .download
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), value.literal()?.to_owned())))
            .collect(),
        cookies,
        local_storage,
        jar: client.jar().cloned(),
        window: false,
        network: client.network().clone(),
        proxies: client.browser_proxies(),
        max_page_bytes: crate::net::MAX_PAGE_BYTES as u64,
        memory_limit_bytes: b
            .memory_limit_bytes
            .unwrap_or_else(|| crate::render::default_memory_limit(b.processes)),
    }
}

/// The profile's `[browser]` wait and actions, and its `[[api]]` URLs to capture.
fn render_request(profile: &Profile) -> RenderRequest {
    let b = &profile.browser;
    let wait = match (&b.wait_for, b.wait) {
        (Some(css), _) => Wait::Selector { css: css.clone() },
        (None, PageWait::NetworkIdle) => Wait::NetworkIdle,
        (None, PageWait::Load) => Wait::Delay(Duration::ZERO),
    };
    let mut actions = Vec::new();
    if let Some(delay) = b.delay.filter(|d| !d.is_zero()) {
        actions.push(Action::Script(format!(
            "new Promise(done => setTimeout(done, {}))",
            delay.as_millis()
        )));
    }
    if let Some(script) = &b.script {
        actions.push(Action::Script(script.clone()));
    }
    if let Some(selector) = &b.click {
        actions.push(Action::Click {
            selector: selector.clone(),
            max_clicks: b.max_clicks,
            settle: b.settle,
        });
    }
    if b.scroll > 0 {
        actions.push(Action::Scroll {
            max_scrolls: b.scroll,
            settle: b.settle,
            element: b.scroll_element.clone(),
            end: b.scroll_end.clone(),
        });
    }
    let mut request = RenderRequest::new(
        profile
            .start
            .first()
            .cloned()
            .unwrap_or_else(|| url::Url::parse("about:blank").expect("valid URL")),
    );
    request.wait = wait;
    request.dismiss = Dismiss {
        selectors: b.dismiss.clone(),
        settle: b.settle,
    };
    request.actions = actions;
    request.capture = profile.api.iter().map(|rule| rule.url.clone()).collect();
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_of(error: RenderError) -> Option<String> {
        match render_failure(error) {
            PageFailure::Failed(failure) => Some(failure.class.name()),
            _ => None,
        }
    }

    #[test]
    fn render_errors_keep_their_failure_classes() {
        let url = || "http://127.0.0.1/p".to_owned();
        let too_large = RenderError::TooLarge {
            url: url(),
            limit_bytes: 32 << 20,
        };
        assert_eq!(class_of(too_large).as_deref(), Some("too_large"));
        let memory = RenderError::Memory {
            url: url(),
            limit_bytes: 1 << 30,
        };
        assert_eq!(class_of(memory).as_deref(), Some("memory"));
        let timeout = RenderError::Timeout {
            url: url(),
            timeout: Duration::from_secs(1),
        };
        assert_eq!(class_of(timeout).as_deref(), Some("timeout"));
        let command_timeout = RenderError::Cdp {
            url: url(),
            source: chromiumoxide::error::CdpError::Timeout,
        };
        assert_eq!(class_of(command_timeout).as_deref(), Some("timeout"));
        assert!(matches!(
            render_failure(RenderError::Status {
                url: url(),
                status: 404
            }),
            PageFailure::Missing(404)
        ));
    }
}
