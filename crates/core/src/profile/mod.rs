//! Site profiles: TOML in, a checked [`Profile`] out, or diagnostics that point at the line.
//!
//! Pure: reading the file is the caller's job ([`load`] is the one convenience that does it).
//! A `Profile` holds compiled selectors, regexes and templates, so later stages cannot hold an
//! invalid one.

pub mod dataset;
mod diagnostic;
mod filter;
pub mod limits;
mod raw;
pub mod resize;
mod template;
mod units;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use dataset::{DatasetSettings, NearDuplicates, OutputFormat};
pub use diagnostic::{Diagnostic, Severity, did_you_mean};
pub use filter::{FilterError, Rejection, UrlFilter};
pub use raw::{ProfileToml, profile_schema};
pub use resize::{ResizeFormat, ResizeMode, ResizeSettings};
pub use template::{PathTemplate, PathValues, UrlTemplate, safe_segment};
pub use units::{MAX_DURATION, parse_bytes, parse_duration};
pub use validate::parse_http_url;

use crate::proxy::ProxyEndpoint;
use crate::redact::Secret;
use crate::verify::VerifyRules;

/// Which of a `srcset`'s candidates an `[[images]]` rule keeps (`pick`; see
/// [`crate::extract::srcset::pick_candidates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The single largest candidate.
    Largest,
    /// Every candidate, in attribute order.
    All,
    /// The first candidate in attribute order.
    First,
}

/// A checked site profile.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    /// Where chains start; empty for a profile of sitemaps alone.
    pub start: Vec<url::Url>,
    /// `sitemap`: sitemap files whose pages are crawled as single pages of the top-level
    /// rules; a `/robots.txt` URL stands for the sitemaps it names (see [`is_robots_txt`]).
    pub sitemap: Vec<url::Url>,
    pub render: RenderMode,
    pub pagination: Pagination,
    /// Pages per start URL at most; `None` for no limit.
    pub max_pages: Option<u64>,
    /// `stop_after_known` of a chain of pages (not `json_cursor`, whose walks count items):
    /// a chain that ended before is walked again from its first page, up to this many known
    /// pages in a row, then on from its old end. `None`: a chain that ended is done.
    pub refresh: Option<u64>,
    /// `[crawl]`: pages in flight.
    pub crawl: CrawlSettings,
    pub images: Vec<ImageRule>,
    /// `[[follow]]`: links on the start pages' chains that lead to pages of a level.
    pub follow: Vec<FollowRule>,
    /// `[levels]`: the rules of linked pages, by level name.
    pub levels: BTreeMap<String, Level>,
    /// JSON responses to capture in the browser and read images from.
    pub api: Vec<ApiRule>,
    /// How pages render in the browser (`render = "browser"` or `"auto"`).
    pub browser: BrowserProfile,
    pub filter: UrlFilter,
    pub download: DownloadSettings,
    pub session: SessionProfile,
    /// `[replay]`: the recording and how recorded requests are matched.
    pub replay: ReplaySettings,
}

/// Known pages in a row a refresh's head stops at when neither the profile nor `--refresh N`
/// says.
pub const REFRESH_PAGES: u64 = 2;
/// Known API items in a row a `json_cursor` refresh stops at likewise.
pub const REFRESH_ITEMS: u64 = 20;

impl Profile {
    /// The profile for a run that looks for what is new (`--refresh`): chains that ended are
    /// walked again up to `known` known pages (API items) in a row; `None` keeps the profile's
    /// `stop_after_known`, or the defaults ([`REFRESH_PAGES`], [`REFRESH_ITEMS`]).
    pub fn refreshing(mut self, known: Option<u64>) -> Self {
        match &mut self.pagination {
            Pagination::JsonCursor(cursor) => {
                let kept = cursor.stop_after_known.unwrap_or(REFRESH_ITEMS);
                cursor.stop_after_known = Some(known.unwrap_or(kept));
            }
            _ => self.refresh = Some(known.unwrap_or(self.refresh.unwrap_or(REFRESH_PAGES))),
        }
        self
    }
}

/// `[crawl]`, checked: how many pages are fetched or rendered at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrawlSettings {
    /// Pages in flight over all chains.
    pub concurrency: usize,
    /// Pages in flight to one host at most: the cap of the host's window.
    pub per_host: usize,
    /// Whether each host's window adapts (starts small, grows while the host answers well,
    /// shrinks when it complains) up to `per_host`, or stays at `per_host`.
    pub adaptive: bool,
    /// Page requests started per second to one host at most; `None` for no limit.
    pub per_host_rps: Option<f64>,
    /// Links followed from a start page at most.
    pub max_depth: u32,
}

/// `[[follow]]`, checked: which links of a page lead to pages of which level.
#[derive(Debug, Clone)]
pub struct FollowRule {
    pub selector: scraper::Selector,
    pub attribute: String,
    /// A key of [`Profile::levels`] (checked).
    pub level: String,
    pub allow: Option<regex::Regex>,
    /// Read from the link element, passed down to what the linked page yields.
    pub metadata: Vec<(String, MetadataSource)>,
}

impl FollowRule {
    /// The rule's CSS selector, as text (normalised by the parser: `a.thumb`, `a[href]`).
    pub fn selector_text(&self) -> String {
        cssparser::ToCss::to_css_string(&self.selector)
    }
}

/// `[levels.NAME]`, checked: the rules for pages reached through `[[follow]]` links.
#[derive(Debug, Clone)]
pub struct Level {
    pub render: RenderMode,
    pub images: Vec<ImageRule>,
    pub follow: Vec<FollowRule>,
}

/// Whether a `sitemap` entry is a site's robots.txt, standing for the sitemaps its `Sitemap:`
/// lines name.
pub fn is_robots_txt(url: &url::Url) -> bool {
    url.path() == "/robots.txt" && url.query().is_none()
}

impl Profile {
    /// The profile as it applies to pages of `level`: the level's render mode, image and
    /// follow rules, no pagination and no captured JSON rules; everything else (filters,
    /// browser, download) as the profile says. `None` for an unknown level.
    pub fn for_level(&self, level: &str) -> Option<Profile> {
        let rules = self.levels.get(level)?;
        Some(Profile {
            render: rules.render,
            pagination: Pagination::None,
            max_pages: None,
            images: rules.images.clone(),
            api: Vec::new(),
            follow: rules.follow.clone(),
            ..self.clone()
        })
    }

    /// Whether any page of the job renders in the browser.
    pub fn uses_browser(&self) -> bool {
        std::iter::once(self.render)
            .chain(self.levels.values().map(|l| l.render))
            .any(|r| r != RenderMode::Static)
    }
}

/// `[replay]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaySettings {
    /// The recording, relative to the profile file; `None`: `../fixtures/<profile file
    /// stem>/site.har` from the profile's folder.
    pub recording: Option<PathBuf>,
    /// Query parameters left out when matching (besides the built-in cache-busters).
    pub ignore_params: Vec<String>,
    /// Dotted JSON paths left out of request bodies when matching.
    pub ignore_body_paths: Vec<String>,
    /// The JSONP callback parameter.
    pub jsonp_param: String,
    /// URL regexes whose requests, when not in the recording, are not counted as unrecorded.
    pub ignore: Vec<String>,
}

impl ReplaySettings {
    /// Where the recording of the profile at `profile_path` is.
    pub fn recording_for(&self, profile_path: &Path) -> PathBuf {
        let folder = profile_path.parent().unwrap_or(Path::new("."));
        match &self.recording {
            Some(path) => folder.join(path),
            None => {
                let stem = profile_path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                // `site-profiles/x.toml` -> `fixtures/x/site.har`, without a `..` in the way.
                let repository = match folder.file_name() {
                    Some(_) => folder.parent().unwrap_or(Path::new(".")).to_owned(),
                    None => folder.join(".."),
                };
                repository.join("fixtures").join(stem).join("site.har")
            }
        }
    }
}

/// `[session]`, checked: what requests carry to say who is asking.
#[derive(Debug, Clone, Default)]
pub struct SessionProfile {
    /// A Netscape cookies file; its cookies go with page, API and image requests.
    pub cookies: Option<SessionFile>,
    /// A signed-in browser's storage state (Playwright's JSON): its cookies go with every
    /// request, its origins' localStorage into the browser's pages.
    pub storage_state: Option<SessionFile>,
    /// A token for the API requests of `kind = "json_cursor"`.
    pub token: Option<TokenRequest>,
    /// `[session.login]`: how the run signs in by itself, before its first page and again
    /// when a page meets a sign-in wall.
    pub login: Option<LoginSteps>,
    /// `[session.signed_out]`: what a page looks like to a visitor the site does not let in,
    /// beyond what every run watches for (see `wall`).
    pub signed_out: SignedOut,
}

/// `[session.login]`, checked: a sign-in form to fill and send.
#[derive(Debug, Clone)]
pub struct LoginSteps {
    /// The page with the form, relative to the first start URL (an absolute URL replaces it).
    pub url: String,
    /// The fields to fill, by name: every value from the environment (read into a literal
    /// when the run starts).
    pub fields: Vec<(String, HeaderSource)>,
    /// The form to fill; `None`: the first holding a field of every name in `fields`.
    pub form: Option<CssRule>,
    pub success: LoginSuccess,
}

impl LoginSteps {
    /// The sign-in page of a run that starts at `start`.
    pub fn page(&self, start: &url::Url) -> url::Url {
        start.join(&self.url).unwrap_or_else(|_| start.clone())
    }
}

/// What says a sign-in worked: each one given must hold. None given: the page it led to does
/// not ask for a password again.
#[derive(Debug, Clone, Default)]
pub struct LoginSuccess {
    /// A cookie by this name is set.
    pub cookie: Option<String>,
    /// The page it led to shows this.
    pub selector: Option<CssRule>,
    /// The URL it led to contains this.
    pub url: Option<String>,
}

/// `[session.signed_out]`, checked: what tells a wall from a page on this site.
#[derive(Debug, Clone, Default)]
pub struct SignedOut {
    /// An element only a signed-out visitor sees (a sign-in form, a "join to see more" banner).
    pub selector: Option<CssRule>,
    /// Parts of the URLs a signed-out visitor is redirected to.
    pub url: Vec<String>,
    /// HTTP statuses a signed-out visitor gets.
    pub status: Vec<u16>,
}

/// A CSS selector and the text it was written as, for messages.
#[derive(Debug, Clone)]
pub struct CssRule {
    pub selector: scraper::Selector,
    pub text: String,
}

impl CssRule {
    /// `text` as a selector, within the limits of every profile selector.
    pub fn parse(text: &str) -> Result<Self, String> {
        limits::css_selector(text).map(|selector| Self {
            selector,
            text: text.to_owned(),
        })
    }
}

/// `[session.token]`, checked: how to get a token and how to send it.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// Relative to the first start URL (an absolute URL replaces it).
    pub url: String,
    pub method: ApiMethod,
    /// JSON; string values `"env:NAME"` are read from the environment when the run starts.
    /// It may hold a literal password: never printed.
    pub body: Option<Secret<serde_json::Value>>,
    pub headers: Vec<(String, HeaderSource)>,
    /// Where the token is in the reply.
    pub token: serde_json_path::JsonPath,
    /// The header that carries the token.
    pub header: String,
    /// The header's value, with `{token}` replaced by the token.
    pub format: String,
    /// A token older than this is fetched again before the next request.
    pub refresh_after: Option<Duration>,
}

impl TokenRequest {
    /// The token endpoint of a run that starts at `start`.
    pub fn endpoint(&self, start: &url::Url) -> url::Url {
        start.join(&self.url).unwrap_or_else(|_| start.clone())
    }
}

/// Where a session file's text (cookies, a storage state) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionFile {
    /// A file; [`load`] makes a relative path relative to the profile file's folder.
    File(PathBuf),
    /// `"env:NAME"`: environment variable `NAME` holds the file's text.
    Env(String),
}

/// How pages are fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderMode {
    /// Plain HTTP and an HTML parser.
    Static,
    /// Headless Chromium: scripts run, lazy images load, JSON responses are captured.
    Browser,
    /// Plain HTTP first; the browser for pages where that finds no image.
    Auto,
}

/// `[browser]`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowserProfile {
    /// The Chromium binary; `None`: `$SCRAPE_CHROMIUM`, then `chromium` on `PATH`.
    pub executable: Option<PathBuf>,
    /// Pages rendered at once, over all the browser processes.
    pub tabs: usize,
    /// Browser processes the tabs are spread over.
    pub processes: usize,
    /// Pages a tab renders before it is replaced by a fresh one.
    pub recycle_after: u32,
    pub block_stylesheets: bool,
    /// The most private resident memory one browser process tree may take; `None`: a default
    /// the I/O side computes from the machine's memory.
    pub memory_limit_bytes: Option<u64>,
    pub page_timeout: Duration,
    pub wait: PageWait,
    /// A CSS selector that must match before the page counts as loaded.
    pub wait_for: Option<String>,
    /// A fixed pause after loading.
    pub delay: Option<Duration>,
    /// JavaScript run after loading.
    pub script: Option<String>,
    /// Clicked away once each, if present, after the page is ready and before `click` and
    /// `scroll` (consent banners).
    pub dismiss: Vec<String>,
    /// Clicked while present and adding content ("load more"), up to `max_clicks` times.
    pub click: Option<String>,
    pub max_clicks: u32,
    /// Scrolls to the bottom at most this many times, until nothing new appears (0: none).
    pub scroll: u32,
    /// After each click or scroll: wait until the page stops changing, at most this long.
    pub settle: Duration,
    /// The element that scrolls (CSS selector); `None`: the window.
    pub scroll_element: Option<String>,
    /// Scrolling stops once an element matches this CSS selector.
    pub scroll_end: Option<String>,
}

/// When a page counts as loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageWait {
    /// The `load` event.
    Load,
    /// No network request for 500 ms after `load`.
    NetworkIdle,
}

/// One `[[api]]` rule, checked.
#[derive(Debug, Clone)]
pub struct ApiRule {
    pub name: String,
    /// Matches the URLs of the responses to read.
    pub url: regex::Regex,
    pub items: serde_json_path::JsonPath,
    /// Relative to each item.
    pub image: serde_json_path::JsonPath,
    pub id: Option<serde_json_path::JsonPath>,
    pub metadata: Vec<(String, serde_json_path::JsonPath)>,
    /// Relative to each item: its image's caption.
    pub caption: Option<serde_json_path::JsonPath>,
    /// Relative to each item: rights fields (see [`crate::extract::rights`]).
    pub rights: Vec<(String, serde_json_path::JsonPath)>,
}

/// How one page leads to the next.
#[derive(Debug, Clone)]
pub enum Pagination {
    /// Only the start pages.
    None,
    /// Follow the first element matching `selector`, reading `attribute` (usually `href`).
    NextLink {
        selector: scraper::Selector,
        attribute: String,
    },
    /// Page numbers: `start`, `start + step`, ... up to `stop`; ends at an empty or missing page.
    UrlTemplate {
        template: UrlTemplate,
        start: i64,
        step: i64,
        stop: Option<i64>,
    },
    /// A JSON API called by the tool itself, paged by an opaque cursor, resumable by id.
    JsonCursor(Box<JsonCursor>),
}

/// `kind = "json_cursor"`, checked: how to call the API and read its paging fields. The items
/// and images of each response come from the `[[api]]` rules.
#[derive(Debug, Clone)]
pub struct JsonCursor {
    /// The API URL, relative to each start URL (an absolute URL replaces it).
    pub request: String,
    pub method: ApiMethod,
    /// For `POST`: the JSON body; string values `"{cursor}"` and `"{after_id}"` are replaced,
    /// and `"{page}"` and `"{offset}"` by numbers.
    pub body: Option<serde_json::Value>,
    /// Extra request headers; values may come from the environment.
    pub headers: Vec<(String, HeaderSource)>,
    /// How one request leads to the next: a cursor from the response, or a page number.
    pub paging: ApiPaging,
    /// For `GET`: the query parameter that carries the cursor.
    pub cursor_param: String,
    /// A boolean in the response; `false` ends the chain.
    pub has_more: Option<serde_json_path::JsonPath>,
    /// The query parameter (or, for `POST`, the body placeholder) that resumes after an id.
    pub after_id: Option<String>,
    pub order: IdOrder,
    /// Statuses that mean the cursor sent has expired.
    pub expired_status: Vec<u16>,
    /// Selects something in a response whose cursor has expired.
    pub expired_match: Option<serde_json_path::JsonPath>,
    /// Incremental runs: stop after this many consecutive already-known items.
    pub stop_after_known: Option<u64>,
    /// Incremental runs of a newest-first API: stop at the first page that reaches the newest
    /// id committed by the walks before.
    pub stop_at_known_id: bool,
}

/// How the requests of an API chain follow one another.
#[derive(Debug, Clone)]
pub enum ApiPaging {
    /// Each response names the next cursor (at this path); the next request carries it.
    Cursor(serde_json_path::JsonPath),
    /// `request` or `body` carries `{page}` (numbers from `first`, one more per page) and/or
    /// `{offset}` (items read before this page); the chain ends at an empty page.
    Numbered { first: i64 },
}

/// The HTTP method of API requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiMethod {
    Get,
    Post,
}

impl ApiMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
        }
    }
}

/// How an API lists items by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdOrder {
    /// Oldest first: `after_id` asks for greater ids, new items appear at the end.
    Ascending,
    /// Newest first: the parameter (`max_id`, `before`) asks for smaller ids, new items appear
    /// at the head.
    Descending,
}

/// Where a header value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderSource {
    /// Written in the profile.
    /// May be a secret: never printed.
    Literal(Secret),
    /// `"env:NAME"`: read from environment variable `NAME` when the run starts.
    Env(String),
}

impl HeaderSource {
    /// The value, once known: `env:` values are read into literals when a run starts
    /// (`session::resolve_env`), so everything that sends requests sees only literals.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Self::Literal(v) => Some(v.expose()),
            Self::Env(_) => None,
        }
    }
}

/// One `[[images]]` rule: which elements, which of their attributes, which srcset candidates.
#[derive(Debug, Clone)]
pub struct ImageRule {
    /// Shown in `probe` output and stored with each image.
    pub name: String,
    pub selector: scraper::Selector,
    /// Tried in order; the first source that yields a URL wins.
    pub sources: Vec<ImageSource>,
    pub pick: Pick,
    /// Manifest field name and where its value comes from.
    pub metadata: Vec<(String, MetadataSource)>,
    /// Where each image's caption comes from; `None`: the default order (see
    /// [`crate::extract`]).
    pub caption: Option<CaptionSource>,
}

/// The rights fields an `[[api]]` rule's `rights` may name, as the manifest names them.
pub const RIGHTS_FIELDS: [&str; 5] = [
    "license",
    "creator",
    "copyright_notice",
    "acquire_license_page",
    "credit_text",
];

/// Where a rule says its images' captions come from.
#[derive(Debug, Clone)]
pub enum CaptionSource {
    /// `"@alt"`, `"text()"`: read from the matched element, as metadata is.
    Element(MetadataSource),
    /// A CSS selector: the text of its first match in the image's nearest ancestor (four
    /// levels up at most) that has one, such as the `figcaption` of its `<figure>`.
    Near(scraper::Selector),
}

/// Where an element keeps its image URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    /// An attribute holding one URL (`src`, `data-src`, `data-lazy`, `data-original`, `href`, ...).
    Url(String),
    /// An attribute holding a srcset (`srcset`, `data-srcset`, any name ending in `srcset`).
    Srcset(String),
    /// The enclosing (or matched) `<picture>` as a whole: its `<source>`s and `<img>`, each read
    /// with the rule's other sources, `pick` choosing among all their candidates.
    Picture,
    /// `background-image` in the inline `style` attribute.
    Style,
}

impl ImageSource {
    /// The name used in profiles and in `probe` output.
    pub fn name(&self) -> &str {
        match self {
            Self::Url(a) | Self::Srcset(a) => a,
            Self::Picture => "picture",
            Self::Style => "style",
        }
    }
}

/// Where a metadata value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataSource {
    /// `"@alt"`: an attribute of the matched element.
    Attribute(String),
    /// `"text()"`: the matched element's text, whitespace collapsed.
    Text,
}

/// `[download]`, checked.
#[derive(Debug, Clone)]
pub struct DownloadSettings {
    /// Output folder; relative paths are relative to the working directory.
    pub out: PathBuf,
    pub path: PathTemplate,
    /// Downloads in flight over all hosts.
    pub concurrency: usize,
    /// Downloads in flight to one host at most: the cap of the host's window.
    pub per_host: usize,
    /// Whether each host's window adapts up to `per_host`, or stays at `per_host`.
    pub adaptive: bool,
    pub connect_timeout: Duration,
    /// The whole download, headers to last byte.
    pub timeout: Duration,
    /// Until the response headers arrive.
    pub first_byte_timeout: Duration,
    /// Slowest transfer accepted, in bytes per second over a 10-second window (0: any speed).
    pub min_speed_bytes: u64,
    /// Request starts per second per host at most (`None`: no limit beyond `per_host`).
    pub per_host_rps: Option<f64>,
    /// Attempts after the first, for transient failures.
    pub retries: u32,
    pub user_agent: String,
    /// Sent with every request (pages, API calls, images); values may come from the
    /// environment.
    pub headers: Vec<(String, HeaderSource)>,
    pub max_bytes: u64,
    pub verify: VerifyRules,
    /// `[proxy]`: the proxies every request goes through (kept with the HTTP settings, so
    /// `--proxy` and URL-list jobs get them too).
    pub proxy: ProxySettings,
    /// `[politeness]`: robots.txt and opt-out signals (kept with the HTTP settings, so URL-list
    /// jobs obey the image opt-outs too).
    pub politeness: Politeness,
    /// `format`, `shard_size`, `parquet_images`: the dataset layout.
    pub dataset: DatasetSettings,
}

/// `[politeness]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Politeness {
    pub robots: RobotsMode,
    /// Lowercase directives that opt a page's or an image's content out.
    pub opt_out: Vec<String>,
    /// Appended to the `User-Agent` as `(+CONTACT)`.
    pub contact: Option<String>,
}

/// Whether robots.txt is read and obeyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RobotsMode {
    Obey,
    Ignore,
}

/// The opt-out directives understood in `X-Robots-Tag` and `<meta name="robots">`.
pub const OPT_OUT_DIRECTIVES: &[&str] = &["noai", "noimageai", "noindex", "noimageindex"];

impl Default for Politeness {
    fn default() -> Self {
        Self {
            robots: RobotsMode::Obey,
            opt_out: vec!["noai".into(), "noimageai".into()],
            contact: None,
        }
    }
}

impl Politeness {
    /// The `User-Agent` sent: `user_agent`, with the contact appended when there is one.
    pub fn user_agent(&self, user_agent: &str) -> String {
        match &self.contact {
            Some(contact) => format!("{user_agent} (+{contact})"),
            None => user_agent.to_owned(),
        }
    }
}

/// The product token robots.txt groups and per-crawler opt-outs are matched against: the
/// leading letters, `-` and `_` of `user_agent`, lowercased (`scrape` for the default one).
pub fn agent_token(user_agent: &str) -> String {
    match crate::robots::product_token(user_agent) {
        token if token.is_empty() || token == "*" => "scrape".into(),
        token => token,
    }
}

/// `[proxy]`, checked: the proxies and how failing ones are benched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySettings {
    /// The proxies; empty: requests go straight to the sites.
    pub endpoints: Vec<ProxyEndpoint>,
    /// A file of more proxies, read into `endpoints` when the run starts
    /// (`session::resolve_env`); [`load`] makes it relative to the profile file's folder.
    pub file: Option<PathBuf>,
    /// The user name and password of proxies whose URL has none; `env:` values are read when
    /// the run starts.
    pub username: Option<HeaderSource>,
    pub password: Option<HeaderSource>,
    /// Failures in a row before a proxy is benched.
    pub max_failures: u32,
    /// How long a benched proxy rests.
    pub cooldown: Duration,
}

impl Default for ProxySettings {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            file: None,
            username: None,
            password: None,
            max_failures: 3,
            cooldown: Duration::from_secs(60),
        }
    }
}

/// The default `User-Agent`: honest about what is asking.
pub const DEFAULT_USER_AGENT: &str = concat!("scrape/", env!("CARGO_PKG_VERSION"));

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("profile `{path}` is larger than {max_bytes} bytes: not a profile")]
    TooLarge { path: PathBuf, max_bytes: u64 },
    /// The profile has errors; `rendered` holds every diagnostic, ready to print (the message
    /// itself does not repeat them, so printing both shows each diagnostic once).
    #[error("profile `{path}` has {errors} error(s)")]
    Invalid {
        path: PathBuf,
        errors: usize,
        rendered: String,
    },
}

/// The result of checking a profile's text: the profile when it has no errors, and every
/// diagnostic (warnings included).
pub struct Checked {
    pub profile: Option<Profile>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks profile `source`; relative output folders are kept as written.
pub fn check(source: &str) -> Checked {
    validate::check(source)
}

/// The largest profile file read: far above any real profile, and a bound on what a wrong path
/// (a device, a huge file) can make the reader hold.
pub const MAX_PROFILE_BYTES: u64 = 1 << 20;

/// The text of the profile file at `path`, read with a bound: at most [`MAX_PROFILE_BYTES`].
pub fn read_source(path: &Path) -> Result<String, ProfileError> {
    use std::io::Read;
    let read_error = |source| ProfileError::Read {
        path: path.to_owned(),
        source,
    };
    let mut source = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_PROFILE_BYTES + 1).read_to_string(&mut source))
        .map_err(read_error)?;
    if source.len() as u64 > MAX_PROFILE_BYTES {
        return Err(ProfileError::TooLarge {
            path: path.to_owned(),
            max_bytes: MAX_PROFILE_BYTES,
        });
    }
    Ok(source)
}

/// Reads and checks the profile at `path`, rendering errors as `path:line:col: message`.
pub fn load(path: &Path) -> Result<(Profile, Vec<String>), ProfileError> {
    let source = read_source(path)?;
    let shown = path.display().to_string();
    let checked = check(&source);
    let render = |d: &Diagnostic| d.render(&shown, &source).to_string();
    match checked.profile {
        Some(mut profile) => {
            let session = &mut profile.session;
            for source in [&mut session.cookies, &mut session.storage_state] {
                if let Some(SessionFile::File(file)) = source
                    && file.is_relative()
                {
                    *file = path.parent().unwrap_or(Path::new("")).join(&*file);
                }
            }
            if let Some(file) = &mut profile.download.proxy.file
                && file.is_relative()
            {
                *file = path.parent().unwrap_or(Path::new("")).join(&*file);
            }
            Ok((profile, checked.diagnostics.iter().map(render).collect()))
        }
        None => Err(ProfileError::Invalid {
            path: path.to_owned(),
            errors: checked.diagnostics.iter().filter(|d| d.is_error()).count(),
            rendered: checked.diagnostics.iter().map(render).collect(),
        }),
    }
}

impl DownloadSettings {
    /// The settings a profile without a `[download]` table gets, for job `name`.
    pub fn defaults_for(name: &str) -> Self {
        validate::default_download(name)
    }
}
