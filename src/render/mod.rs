//! Render: pages of JavaScript-heavy sites through Debian's Chromium, driven over CDP by
//! chromiumoxide, handed on as a [`PageSnapshot`] like the static [`crate::fetch`] stage does.
//!
//! One [`BrowserPool`] owns [`BrowserSettings::processes`] Chromium processes (a fresh
//! temporary profile and a proxy of its own each) and a pool of reusable tabs spread over
//! them, each tab in a window of its own, so every tab renders as the one in front (full frame
//! rate, timers and IntersectionObserver callbacks) however many render at once.
//! [`BrowserPool::render`] checks a tab out, navigates, waits ([`Wait`]), runs [`Action`]s
//! (scroll, click "load more" or "next", a script), captures JSON API responses
//! ([`RenderRequest::capture`]) and returns the rendered DOM, with the content of shadow roots
//! and same-origin frames in it. Images, media and fonts are blocked: this stage finds URLs,
//! the download stage fetches bytes.
//!
//! Failure handling: every page is bounded by [`BrowserSettings::page_timeout`]; a tab that
//! timed out or failed is discarded, not reused; a crashed tab or browser process is replaced (the
//! other processes carry on) and the page retried once. A response of the page bigger than
//! [`BrowserSettings::max_page_bytes`] (decoded) ends the page as too large, and a browser
//! whose process tree passes [`BrowserSettings::memory_limit_bytes`] is killed and replaced,
//! the page it was rendering retried once (see `limits`). [`BrowserPool::close`] leaves no Chromium process behind, and neither does
//! dropping the pool on an error path (the process tree is killed), nor `scrape` dying without
//! any cleanup (SIGKILL): the kernel kills the browser with its parent (`PR_SET_PDEATHSIG`), and
//! the next launch removes the temporary profile folders of `scrape` processes that are gone.
//!
//! ```no_run
//! # async fn demo() -> Result<(), scrape::render::RenderError> {
//! use scrape::render::{BrowserPool, BrowserSettings, RenderRequest, Wait, Action};
//! let pool = BrowserPool::launch(BrowserSettings::default()).await?;
//! let mut request = RenderRequest::new(url::Url::parse("http://127.0.0.1:8080/").unwrap());
//! request.actions.push(Action::scroll(20));
//! let snapshot = pool.render(&request).await?;
//! println!("{} bytes of HTML", snapshot.html.len());
//! pool.close().await;
//! # Ok(()) }
//! ```

mod browser;
mod capture;
mod intercept;
mod limits;
pub mod login;
mod navigate;
mod pool;
mod tab;

use crate::net::session::OriginStorage;
use crate::net::session::cookies::FileCookie;
use crate::page::CapturedJson;
use std::path::PathBuf;
use std::time::Duration;

pub use browser::{find_executable, processes_using};
pub use limits::{default_memory_limit, tree_memory_bytes};
pub use pool::{BrowserPool, BrowserProcessInfo, PoolStats};

#[cfg(doc)]
use crate::page::PageSnapshot;

/// How the browser is launched and how its tabs behave.
#[derive(Debug, Clone)]
pub struct BrowserSettings {
    /// The Chromium binary. `None`: `$SCRAPE_CHROMIUM`, then `chromium`, `chromium-browser`,
    /// `google-chrome` on `PATH`. A browser is never downloaded.
    pub executable: Option<PathBuf>,
    /// Pages rendered at once (tabs in the pool, over all its processes). Default
    /// [`default_tabs`]: one per CPU core, at least 1 and at most 4; throughput saturates at
    /// 2-4 tabs on 2 cores while each tab costs memory (~30 MiB on a tiny page, far more on
    /// real sites).
    pub tabs: usize,
    /// Browser processes the tabs are spread over; each has its own temporary profile and
    /// takes its own proxy from [`BrowserSettings::proxies`]. At least 1.
    pub processes: usize,
    /// Pages a tab renders before it is closed and replaced by a fresh one, which bounds the
    /// memory a long-lived page's leaks can take. At least 1.
    pub recycle_after: u32,
    /// Resource kinds the browser does not load.
    pub block: Blocking,
    /// Upper bound for one page: navigation, wait, actions and snapshot together.
    pub page_timeout: Duration,
    /// Overrides the browser's `User-Agent`.
    pub user_agent: Option<String>,
    /// Extra request headers sent with every request of every tab.
    pub headers: Vec<(String, String)>,
    /// Cookies put into the browser's cookie store when a tab opens; the browser sends each
    /// where its domain, path and secure flag match.
    pub cookies: Vec<FileCookie>,
    /// localStorage items each origin's pages start with (a signed-in browser's storage
    /// state): put in before the page's own scripts run, where the page has none by that name.
    pub local_storage: Vec<OriginStorage>,
    /// The run's cookie jar: before a tab opens a page, the jar's cookies for the page's URL
    /// are put into the browser, so the run's own sign-in (at the start, or again mid-run)
    /// and cookies the sites set over plain HTTP reach rendered pages too.
    pub jar: Option<std::sync::Arc<reqwest::cookie::Jar>>,
    /// A window a person can see and use (`scrape login`); otherwise headless.
    pub window: bool,
    /// Live; recording documents, scripts, stylesheets and API responses; or answering every
    /// request from a recording (through the Fetch domain: nothing reaches the network).
    pub network: crate::replay::Network,
    /// The proxies of the browser processes: each process sends every request, loopback
    /// included, through one of them (the `k`-th process launched takes proxy `k` modulo their
    /// number, so a replacement takes the next one), and its tabs answer that proxy's
    /// challenges with its credentials. Empty: no proxy.
    pub proxies: Vec<crate::proxy::ProxyEndpoint>,
    /// The largest response a page may receive (its document, scripts, `fetch`/XHR answers),
    /// counted decoded, as the static fetch counts a page: a small gzip answer can unpack to
    /// gigabytes. Passing it ends the page as [`RenderError::TooLarge`].
    pub max_page_bytes: u64,
    /// The most private resident memory one browser process may take with all its helpers
    /// (renderers, GPU and utility processes). A browser past it is killed and replaced; the
    /// page it was rendering is tried once more in the new one, then fails as
    /// [`RenderError::Memory`].
    pub memory_limit_bytes: u64,
}

impl Default for BrowserSettings {
    fn default() -> Self {
        Self {
            executable: None,
            tabs: default_tabs(),
            processes: 1,
            recycle_after: 50,
            block: Blocking::default(),
            page_timeout: Duration::from_secs(30),
            user_agent: None,
            headers: Vec::new(),
            cookies: Vec::new(),
            local_storage: Vec::new(),
            jar: None,
            window: false,
            network: crate::replay::Network::Live,
            proxies: Vec::new(),
            max_page_bytes: crate::net::MAX_PAGE_BYTES as u64,
            memory_limit_bytes: default_memory_limit(1),
        }
    }
}

/// One tab per available CPU core, clamped to 1..=4: rendering is CPU-bound in the browser
/// (150-400 ms of CPU per page), so more tabs than cores only add memory.
pub fn default_tabs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 4)
}

/// Resource kinds the browser does not load.
///
/// Images, media and fonts are blocked by resource type in the Fetch domain, whatever their URL
/// (`/photo?id=1` as well as `.jpg`): images are answered with a 1x1 GIF so the page behaves as
/// if they loaded (no `onerror` fallbacks), media and fonts fail. Media and fonts with a known
/// file extension are blocked by URL pattern first (`Network.setBlockedURLs`, no round trip per
/// request). Stylesheets are blocked by URL pattern only; blocking them hides
/// `background-image` set in CSS files, hence off by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocking {
    pub images: bool,
    pub media: bool,
    pub fonts: bool,
    pub stylesheets: bool,
    /// Images, media and fonts are blocked by URL pattern only, with no Fetch stage: no round
    /// trip per request, but images without a known extension load and blocked ones fire
    /// `onerror`. It is there to measure what the Fetch stage costs (`bench/render.sh`).
    pub by_url_only: bool,
}

impl Default for Blocking {
    fn default() -> Self {
        Self {
            images: true,
            media: true,
            fonts: true,
            stylesheets: false,
            by_url_only: false,
        }
    }
}

impl Blocking {
    /// Nothing blocked.
    pub const NONE: Blocking = Blocking {
        images: false,
        media: false,
        fonts: false,
        stylesheets: false,
        by_url_only: false,
    };

    /// Image file extensions.
    pub(crate) const IMAGE_EXTENSIONS: [&'static str; 13] = [
        "jpg", "jpeg", "png", "gif", "webp", "avif", "bmp", "ico", "svg", "tif", "tiff", "jxl",
        "heic",
    ];

    /// File extensions blocked by URL pattern; image extensions only with `images_by_url`
    /// (a URL-blocked image fires `onerror`, so images go to the Fetch stage instead, unless
    /// the tab cannot have one).
    fn extensions(&self, images_by_url: bool) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.images && images_by_url {
            out.extend(Self::IMAGE_EXTENSIONS);
        }
        if self.media {
            out.extend([
                "mp4", "webm", "m4v", "mov", "mkv", "ogv", "mp3", "m4a", "ogg", "oga", "opus",
                "wav", "flac", "aac", "m3u8", "mpd", "ts",
            ]);
        }
        if self.fonts {
            out.extend(["woff", "woff2", "ttf", "otf", "eot"]);
        }
        if self.stylesheets {
            out.push("css");
        }
        out
    }

    /// URLPattern strings (the syntax of CDP's `BlockPattern`): each extension in lower and
    /// upper case, with and without a query string. Image extensions only with
    /// `images_by_url`.
    pub fn url_patterns(&self, images_by_url: bool) -> Vec<String> {
        let mut patterns = Vec::new();
        for ext in self.extensions(images_by_url) {
            for ext in [ext.to_owned(), ext.to_ascii_uppercase()] {
                patterns.push(format!("*://*:*/*.{ext}"));
                patterns.push(format!("*://*:*/*.{ext}?*"));
            }
        }
        patterns
    }
}

/// What "the page is ready" means, checked after the `load` event. Each is bounded by the
/// page's deadline ([`BrowserSettings::page_timeout`]); missing it is a [`RenderError::Timeout`].
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    /// No request in flight for 500 ms (Chromium's `networkIdle` lifecycle event).
    NetworkIdle,
    /// An element matching the CSS selector exists.
    Selector { css: String },
    /// A fixed delay.
    Delay(Duration),
}

/// Something done to the page after the wait and before the snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Scroll as a person does (of the window, or of the scroll container `element`): a screen
    /// at a time, each step held until the page's observers have run and the requests they
    /// started are answered, so lazy content between the first and the last screen mounts. At
    /// the bottom, wait up to `settle` for more (the page grows, or a request starts and is
    /// answered); each batch that comes is a round, at most `max_scrolls`. The end is decided
    /// by new content (distinct image URLs ever shown, the most elements, the height) with the
    /// network quiet, never by rows mounted again, so a virtualized list ends by "no growth".
    /// A page that reacts to nothing (no IntersectionObserver, scroll listener or lazy
    /// element) goes to the bottom at once and ends as soon as it is quiet. Stops early when an
    /// element matches `end`, or when the page's time is up. Why it stopped is logged.
    Scroll {
        max_scrolls: u32,
        settle: Duration,
        element: Option<String>,
        end: Option<String>,
    },
    /// Click the first element matching `selector` (in the document or a shadow root) while
    /// each click brings new content: new image URLs (a carousel's next slide, even one that
    /// replaces the last) or more elements than the page ever had ("load more"). Stops when a
    /// click brings nothing new (a slide came back), the element is gone, hidden or disabled
    /// (`disabled`, `aria-disabled="true"`), after `max_clicks`, or when the page's time is up.
    /// Each click is a real one: mouse events at the element's centre once it is scrolled into
    /// view, or `el.click()` when it has no box or another element covers that point.
    Click {
        selector: String,
        max_clicks: u32,
        settle: Duration,
    },
    /// JavaScript evaluated in the page; a returned promise is awaited.
    Script(String),
}

impl Action {
    /// [`Action::Scroll`] with a 2 s settle.
    pub fn scroll(max_scrolls: u32) -> Self {
        Action::Scroll {
            max_scrolls,
            settle: Duration::from_secs(2),
            element: None,
            end: None,
        }
    }

    /// [`Action::Click`] with a 2 s settle.
    pub fn click(selector: impl Into<String>, max_clicks: u32) -> Self {
        Action::Click {
            selector: selector.into(),
            max_clicks,
            settle: Duration::from_secs(2),
        }
    }
}

/// Overlays clicked away once the page is ready, before the actions: a consent banner's
/// "Accept", a newsletter dialog's "Close".
#[derive(Debug, Clone, PartialEq)]
pub struct Dismiss {
    /// CSS selectors, each clicked once, in order, if an element matches, is visible and is
    /// enabled (the same real click as [`Action::Click`]). With [`Wait::Selector`], the wait
    /// also ends when one of them matches, and goes on for its own selector after them.
    pub selectors: Vec<String>,
    /// After each click, how long to wait at most for the page to change.
    pub settle: Duration,
}

/// One page to render.
#[derive(Debug, Clone)]
pub struct RenderRequest {
    pub url: url::Url,
    pub wait: Wait,
    /// Clicked away after the wait, before the actions.
    pub dismiss: Dismiss,
    pub actions: Vec<Action>,
    /// `fetch`/XHR responses (GET, POST, ...) whose URL matches one of these and whose body is
    /// JSON are returned in [`PageSnapshot::json`].
    pub capture: Vec<regex::Regex>,
    /// Where each captured response also goes as soon as its body is read, while the page is
    /// still rendering: a caller that commits them as they come loses none of them to a kill
    /// or a render that fails later.
    pub captured: Option<tokio::sync::mpsc::UnboundedSender<CapturedJson>>,
    /// On a refresh: the images the job knows on this page, so scrolling and clicking "load
    /// more" stop once they bring only those.
    pub known: Option<std::sync::Arc<KnownImages>>,
}

/// The image URLs a job knows on one page, and after how many rounds (scroll rounds, clicks)
/// in a row that bring only these a refresh stops loading more of the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownImages {
    pub urls: Vec<String>,
    pub rounds: u32,
}

impl RenderRequest {
    /// `url`, waiting for network idle, nothing to dismiss, no actions, no capture.
    pub fn new(url: url::Url) -> Self {
        Self {
            url,
            wait: Wait::NetworkIdle,
            dismiss: Dismiss {
                selectors: Vec::new(),
                settle: Duration::from_secs(2),
            },
            actions: Vec::new(),
            capture: Vec::new(),
            captured: None,
            known: None,
        }
    }
}

/// Why a page could not be rendered, or the browser not started.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(
        "no Chromium found (looked for {}); install it with `apt-get install chromium` or set SCRAPE_CHROMIUM to its path",
        searched.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
    )]
    BrowserNotFound { searched: Vec<String> },
    #[error(
        "chromium cannot log in to SOCKS proxy `{proxy}`: use an http:// or https:// proxy for pages rendered in the browser"
    )]
    SocksLogin { proxy: String },
    #[error("could not start Chromium `{}`", executable.display())]
    Launch {
        executable: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("page `{url}` did not finish within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("the tab rendering `{url}` crashed")]
    TabCrashed { url: String },
    #[error("the browser exited while rendering `{url}`")]
    BrowserCrashed { url: String },
    #[error("page `{url}` answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("navigation to `{url}` failed: {reason}")]
    Navigation { url: String, reason: String },
    #[error("a response of page `{url}` passed {limit_bytes} bytes")]
    TooLarge { url: String, limit_bytes: u64 },
    #[error(
        "the browser rendering `{url}` passed its memory limit of {} MiB (`[browser] memory_limit`)",
        limit_bytes >> 20
    )]
    Memory { url: String, limit_bytes: u64 },
    #[error("script on `{url}` failed: {message}")]
    Script { url: String, message: String },
    #[error("signing in at `{url}` did not work: {message}")]
    SignIn { url: String, message: String },
    #[error("browser protocol error on `{url}`")]
    Cdp {
        url: String,
        #[source]
        source: chromiumoxide::error::CdpError,
    },
    #[error("the browser pool is closed")]
    Closed,
}

impl RenderError {
    /// A crash worth one retry on a fresh tab (and browser, if it died or was killed for its
    /// memory).
    fn is_crash(&self) -> bool {
        matches!(
            self,
            RenderError::TabCrashed { .. }
                | RenderError::BrowserCrashed { .. }
                | RenderError::Memory { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_patterns_cover_queries_and_upper_case() {
        let patterns = Blocking::default().url_patterns(true);
        assert!(patterns.contains(&"*://*:*/*.jpg".to_owned()));
        assert!(patterns.contains(&"*://*:*/*.JPG?*".to_owned()));
        assert!(patterns.contains(&"*://*:*/*.woff2".to_owned()));
        assert!(!patterns.iter().any(|p| p.ends_with(".css")));
        assert!(Blocking::NONE.url_patterns(true).is_empty());
    }

    #[test]
    fn images_are_left_out_of_the_url_patterns_when_the_fetch_stage_blocks_them() {
        let patterns = Blocking::default().url_patterns(false);
        assert!(!patterns.iter().any(|p| p.contains(".jpg")), "{patterns:?}");
        assert!(patterns.contains(&"*://*:*/*.mp4".to_owned()));
    }

    #[test]
    fn default_tabs_stay_between_one_and_four() {
        assert!((1..=4).contains(&default_tabs()));
    }

    #[test]
    fn browser_not_found_says_how_to_install() {
        let e = RenderError::BrowserNotFound {
            searched: vec!["/nope/chromium".into()],
        };
        let msg = e.to_string();
        assert!(msg.contains("`/nope/chromium`"), "{msg}");
        assert!(msg.contains("apt-get install chromium"), "{msg}");
        assert!(msg.contains("SCRAPE_CHROMIUM"), "{msg}");
    }
}
