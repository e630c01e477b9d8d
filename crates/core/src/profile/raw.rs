//! The profile as written: serde structures over TOML, with spans kept for diagnostics.
//!
//! Nothing here is checked beyond TOML types; `super::validate` turns a [`ProfileToml`] into a
//! [`super::Profile`]. Every table denies unknown keys so typos are reported, not ignored.
//!
//! The same structures derive the profile's JSON Schema ([`profile_schema`], `scrape schema`),
//! so editors validate exactly what this parser accepts. `Spanned` fields name their schema
//! type with `#[schemars(with = ...)]`; durations and sizes use the string forms of
//! [`super::units`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use toml::Spanned;

/// A whole profile file, as deserialized.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    rename = "Profile",
    title = "scrape site profile",
    description = "A site profile of `scrape`: where a site's pages start, how one page leads to the next, where the images are and how to download them. Reference: docs/profiles.md."
)]
pub struct ProfileToml {
    /// The profile's name: letters, digits, `-`, `_` and `.` only (it names the output folder).
    #[schemars(with = "String", regex(pattern = r"^\s*[A-Za-z0-9._-]+\s*$"))]
    pub name: Spanned<String>,
    /// Absolute `http://` or `https://` URLs where page chains start. A profile has `start`,
    /// `sitemap` or both.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>", length(min = 1))]
    pub start: Option<Spanned<Vec<Spanned<String>>>>,
    /// Sitemaps (sitemaps.org `<urlset>` or `<sitemapindex>`, gzipped or not) whose pages are
    /// crawled as single pages of the top-level rules; a site's `/robots.txt` URL stands for
    /// the sitemaps its `Sitemap:` lines name.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>", length(min = 1))]
    pub sitemap: Option<Spanned<Vec<Spanned<String>>>>,
    /// How pages are fetched: `static` (plain HTTP, default), `browser` (Chromium) or `auto`
    /// (plain HTTP, and the browser when that finds no image).
    #[serde(default)]
    #[schemars(with = "Option<RenderToml>")]
    pub render: Option<Spanned<RenderToml>>,
    /// How one page leads to the next.
    #[serde(default)]
    pub pagination: Option<PaginationToml>,
    /// How many pages are fetched or rendered at once, in all and per host.
    #[serde(default)]
    pub crawl: CrawlToml,
    /// Where the images are on each page: one rule per kind of image markup.
    #[serde(default)]
    pub images: Vec<ImageRuleToml>,
    /// Links on each page that lead to pages of another level (detail pages).
    #[serde(default)]
    pub follow: Vec<FollowToml>,
    /// Kinds of linked pages, by name, each with its own rules.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, LevelToml>")]
    pub levels: BTreeMap<Spanned<String>, LevelToml>,
    /// JSON responses the page fetches (browser rendering), and where the images are in them.
    #[serde(default)]
    pub api: Vec<ApiRuleToml>,
    /// How pages are rendered when `render` is `browser` or `auto`.
    #[serde(default)]
    pub browser: Option<BrowserToml>,
    /// Which of the found image URLs are kept.
    #[serde(default)]
    pub filters: FiltersToml,
    /// How images are downloaded, checked and stored.
    #[serde(default)]
    pub download: DownloadToml,
    /// What requests carry to say who is asking: cookies, a token.
    #[serde(default)]
    pub session: SessionToml,
    /// Where the profile's recording is and how a replay matches requests with it.
    #[serde(default)]
    pub replay: ReplayToml,
    /// The proxies that page, API and image requests and the browser go through.
    #[serde(default)]
    pub proxy: ProxyToml,
    /// What the site allows: robots.txt, opt-out signals, and who is asking.
    #[serde(default)]
    pub politeness: PolitenessToml,
}

/// `[politeness]`: robots.txt and the opt-out signals of pages and images (obeyed by default),
/// and a contact address for the `User-Agent`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Politeness")]
pub struct PolitenessToml {
    /// `obey` (default): pages and API requests that robots.txt disallows are not fetched, and
    /// its `Crawl-delay` paces the host; `ignore`: robots.txt is not read (a warning says so).
    #[schemars(with = "Option<RobotsToml>")]
    pub robots: Option<Spanned<RobotsToml>>,
    /// Directives in `X-Robots-Tag` (images) and `<meta name="robots">` (pages) that mean
    /// "do not take": `noai`, `noimageai`, `noindex`, `noimageindex` (default `["noai",
    /// "noimageai"]`; `[]` turns the check off).
    #[schemars(with = "Option<Vec<String>>")]
    pub opt_out: Option<Vec<Spanned<String>>>,
    /// How to reach whoever runs the crawl (`mailto:` or an `http(s)://` URL), appended to the
    /// `User-Agent` as `(+CONTACT)`.
    #[schemars(with = "Option<String>")]
    pub contact: Option<Spanned<String>>,
}

/// `robots`: obey robots.txt or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "Robots")]
pub enum RobotsToml {
    Obey,
    Ignore,
}

/// `[proxy]`: the proxies requests go through, rotated; failing ones are benched for a while.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Proxy")]
pub struct ProxyToml {
    /// Proxy URLs: `http://host:port`, `https://`, `socks5://` or `socks5h://` (DNS through
    /// the proxy).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub urls: Vec<Spanned<String>>,
    /// A file of proxy URLs, one a line (`#` comments), relative to the profile file; read when
    /// the run starts.
    #[schemars(with = "Option<String>")]
    pub file: Option<Spanned<String>>,
    /// The user name for proxies whose URL has none; `env:NAME` reads a variable.
    #[schemars(with = "Option<String>")]
    pub username: Option<Spanned<String>>,
    /// The password that goes with `username`; `env:NAME` reads a variable.
    #[schemars(with = "Option<String>")]
    pub password: Option<Spanned<String>>,
    /// Failures in a row (connection, time-out, 407) before a proxy is benched (default 3).
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub max_failures: Option<Spanned<u64>>,
    /// How long a benched proxy rests before it is tried again (default `"60s"`).
    #[schemars(with = "Option<DurationText>")]
    pub cooldown: Option<Spanned<Quantity>>,
}

/// `[replay]`: where the profile's recording is and how recorded requests are matched.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Replay")]
pub struct ReplayToml {
    /// The HAR recording, relative to the profile file (default
    /// `../fixtures/<profile file stem>/site.har`).
    #[schemars(with = "Option<String>")]
    pub recording: Option<Spanned<String>>,
    /// Query parameters left out when matching, besides the built-in cache-busters.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub ignore_params: Vec<Spanned<String>>,
    /// Dotted JSON paths left out of request bodies when matching (`variables.requestId`).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub ignore_body_paths: Vec<Spanned<String>>,
    /// The query parameter naming a JSONP callback (default `callback`).
    #[schemars(with = "Option<String>")]
    pub jsonp_param: Option<Spanned<String>>,
    /// URL regexes: a request to a matching URL that is not in the recording gets a 404 and
    /// does not fail a strict replay (`scrape test`, `--replay-strict`).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub ignore: Vec<Spanned<String>>,
}

/// `[session]`: what requests carry to say who is asking.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Session")]
pub struct SessionToml {
    /// A Netscape-format cookies file, relative to the profile file, or `env:NAME` (a
    /// variable holding the file's text).
    #[schemars(with = "Option<String>")]
    pub cookies: Option<Spanned<String>>,
    /// A signed-in browser's storage state (the JSON of Playwright's `storageState`), relative
    /// to the profile file, or `env:NAME` (a variable holding the JSON).
    #[schemars(with = "Option<String>")]
    pub storage_state: Option<Spanned<String>>,
    /// `json_cursor`: a token from a login endpoint for the API requests.
    #[schemars(with = "Option<TokenToml>")]
    pub token: Option<Spanned<TokenToml>>,
    /// What a page looks like to a visitor the site does not let in.
    #[schemars(with = "Option<SignedOutToml>")]
    pub signed_out: Option<Spanned<SignedOutToml>>,
    /// A sign-in form the run fills and sends by itself.
    #[schemars(with = "Option<LoginToml>")]
    pub login: Option<Spanned<LoginToml>>,
}

/// `[session.login]`: a sign-in form the run fills and sends before its first page, and again
/// when a page meets a sign-in wall.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Login")]
pub struct LoginToml {
    /// The page with the form, relative to the first start URL.
    #[schemars(with = "String")]
    pub url: Spanned<String>,
    /// The fields to fill, by name; every value `env:NAME` (never the value itself).
    #[schemars(with = "BTreeMap<String, String>")]
    pub fields: Spanned<BTreeMap<String, Spanned<String>>>,
    /// A CSS selector of the form (default: the first form with every field).
    #[schemars(with = "Option<String>")]
    pub form: Option<Spanned<String>>,
    /// The sign-in worked when a cookie by this name is set.
    #[schemars(with = "Option<String>")]
    pub success_cookie: Option<Spanned<String>>,
    /// The sign-in worked when the page it leads to shows this (a CSS selector).
    #[schemars(with = "Option<String>")]
    pub success_selector: Option<Spanned<String>>,
    /// The sign-in worked when the URL it leads to contains this.
    #[schemars(with = "Option<String>")]
    pub success_url: Option<Spanned<String>>,
}

/// `[session.signed_out]`: what tells a sign-in wall from a page on this site.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "SignedOut")]
pub struct SignedOutToml {
    /// A CSS selector of an element only a signed-out visitor sees.
    #[schemars(with = "Option<String>")]
    pub selector: Option<Spanned<String>>,
    /// Parts of the URLs a signed-out visitor is redirected to.
    #[schemars(with = "Option<Vec<String>>")]
    pub url: Option<Vec<Spanned<String>>>,
    /// HTTP statuses a signed-out visitor gets (400-599).
    #[schemars(with = "Option<Vec<u16>>")]
    pub status: Option<Vec<Spanned<i64>>>,
}

/// `[session.token]`: the request that gets a token for the API requests.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Token")]
pub struct TokenToml {
    /// The token endpoint, relative to the first start URL.
    #[schemars(with = "String")]
    pub url: Spanned<String>,
    /// `GET` or `POST` (default `POST` with a `body`, else `GET`).
    #[schemars(with = "Option<MethodToml>")]
    pub method: Option<Spanned<MethodToml>>,
    /// The JSON request body; string values `env:NAME` read a variable.
    #[schemars(with = "Option<String>")]
    pub body: Option<Spanned<String>>,
    /// Headers of the token request (`env:NAME` reads a variable).
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub headers: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// JSONPath of the token in the reply.
    #[schemars(with = "String")]
    pub token: Spanned<String>,
    /// The API request header that carries the token (default `Authorization`).
    #[schemars(with = "Option<String>")]
    pub header: Option<Spanned<String>>,
    /// The header's value, with `{token}` replaced (default `Bearer {token}`).
    #[schemars(with = "Option<String>")]
    pub format: Option<Spanned<String>>,
    /// Fetch a new token once the held one is this old.
    #[schemars(with = "Option<DurationText>")]
    pub refresh_after: Option<Spanned<Quantity>>,
}

/// `render = "static" | "browser" | "auto"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "Render")]
pub enum RenderToml {
    Static,
    Browser,
    Auto,
}

/// `[pagination]`: one flat table whose `kind` says which other keys apply.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Pagination")]
pub struct PaginationToml {
    /// The strategy: `none`, `next_link`, `url_template` or `json_cursor`.
    #[schemars(with = "PaginationKindToml")]
    pub kind: Spanned<PaginationKindToml>,
    /// `next_link`: CSS selector of the link (or element) to the next page.
    #[schemars(with = "Option<String>")]
    pub selector: Option<Spanned<String>>,
    /// `next_link`: the attribute holding the next page's URL (default `href`).
    #[schemars(with = "Option<String>")]
    pub attribute: Option<Spanned<String>>,
    /// `url_template`: a URL with a `{page}` placeholder.
    #[schemars(with = "Option<String>")]
    pub template: Option<Spanned<String>>,
    /// `url_template`: the first page number (default 1).
    #[schemars(with = "Option<i64>")]
    pub start: Option<Spanned<i64>>,
    /// `url_template`: added to the page number for the next page (default 1, not 0).
    #[schemars(with = "Option<i64>")]
    pub step: Option<Spanned<i64>>,
    /// `url_template`: the last page number fetched (default: no limit).
    #[schemars(with = "Option<i64>")]
    pub stop: Option<Spanned<i64>>,
    /// The most pages fetched per start URL, at least 1 (default: no limit).
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub max_pages: Option<Spanned<u64>>,
    /// `json_cursor`: the API URL, resolved against the start URL.
    #[schemars(with = "Option<String>")]
    pub request: Option<Spanned<String>>,
    /// `json_cursor`: `GET` (default) or `POST`.
    #[schemars(with = "Option<MethodToml>")]
    pub method: Option<Spanned<MethodToml>>,
    /// `json_cursor` with `POST`: the JSON request body, with a `{cursor}` placeholder.
    #[schemars(with = "Option<String>")]
    pub body: Option<Spanned<String>>,
    /// `json_cursor`: extra headers of the API requests (`env:NAME` reads a variable).
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub headers: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// `json_cursor`: JSONPath of the next page's cursor in each response.
    #[schemars(with = "Option<String>")]
    pub cursor: Option<Spanned<String>>,
    /// `json_cursor` with `GET`: the query parameter carrying the cursor (default `cursor`).
    #[schemars(with = "Option<String>")]
    pub cursor_param: Option<Spanned<String>>,
    /// `json_cursor`: JSONPath of a boolean; `false` ends the chain.
    #[schemars(with = "Option<String>")]
    pub has_more: Option<Spanned<String>>,
    /// `json_cursor`: how to resume by id when a cursor has expired.
    #[schemars(with = "Option<String>")]
    pub after_id: Option<Spanned<String>>,
    /// `json_cursor`: how the API lists its items by id (default `ascending`).
    #[schemars(with = "Option<OrderToml>")]
    pub order: Option<Spanned<OrderToml>>,
    /// `json_cursor`: HTTP statuses meaning a saved cursor has expired (default 400, 404, 410).
    #[schemars(with = "Option<Vec<u16>>")]
    pub expired_status: Option<Spanned<Vec<Spanned<u64>>>>,
    /// `json_cursor`: JSONPath that, when it matches a response, means the cursor has expired.
    #[schemars(with = "Option<String>")]
    pub expired_match: Option<Spanned<String>>,
    /// A chain that ended before is walked again from its first page and stops after this many
    /// known items in a row (at least 1): API items for `json_cursor` (newest first), pages
    /// (with no new image and no new link) for the other kinds, which then go on from their
    /// old end.
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub stop_after_known: Option<Spanned<u64>>,
    /// `json_cursor`, newest first: a later run stops at the page that reaches the newest id
    /// of the runs before.
    #[schemars(with = "Option<bool>")]
    pub stop_at_known_id: Option<Spanned<bool>>,
}

/// `method = "GET" | "POST"` for `kind = "json_cursor"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
#[schemars(rename = "Method")]
pub enum MethodToml {
    Get,
    Post,
}

/// `order = "ascending" | "descending"`: how an API lists its items by id.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "Order")]
pub enum OrderToml {
    Ascending,
    Descending,
}

/// `kind = "none" | "next_link" | "url_template" | "json_cursor"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "PaginationKind")]
pub enum PaginationKindToml {
    None,
    NextLink,
    UrlTemplate,
    JsonCursor,
}

/// One `[[images]]` rule.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ImageRule")]
pub struct ImageRuleToml {
    /// The rule's name, in `probe` output and the manifest (default `images[N]`).
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// CSS selector of the elements that hold images.
    #[schemars(with = "String")]
    pub selector: Spanned<String>,
    /// Attributes read for URLs, in order (default: lazy-loading attributes, `srcset`, `src`,
    /// `href`, `style`, ...).
    #[schemars(with = "Option<Vec<String>>", length(min = 1))]
    pub attributes: Option<Spanned<Vec<Spanned<String>>>>,
    /// Which candidates of a srcset to keep: `largest` (default), `first` or `all`.
    #[schemars(with = "Option<PickToml>")]
    pub pick: Option<Spanned<PickToml>>,
    /// Extra manifest fields: `@attribute` of the element, or `text`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub metadata: BTreeMap<String, Spanned<String>>,
    /// Where each image's caption comes from: `@attribute`, `text()`, or a CSS selector found
    /// near the image (e.g. `figcaption`). Default: `alt`, `title`, the enclosing figure's
    /// `figcaption`, `aria-label`.
    #[schemars(with = "Option<String>")]
    pub caption: Option<Spanned<String>>,
}

/// `[[follow]]`: links whose pages are crawled as pages of a level.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Follow")]
pub struct FollowToml {
    /// CSS selector of the link elements.
    #[schemars(with = "String")]
    pub selector: Spanned<String>,
    /// The attribute holding the link (default `href`).
    #[schemars(with = "Option<String>")]
    pub attribute: Option<Spanned<String>>,
    /// The level (a key of `[levels]`) whose rules apply to the linked pages.
    #[schemars(with = "String")]
    pub level: Spanned<String>,
    /// A regex the link's absolute URL must match to be followed (default: any).
    #[schemars(with = "Option<String>")]
    pub allow: Option<Spanned<String>>,
    /// Values read from the link element (`@attribute` or `text()`), passed down to the images
    /// found on the linked page and on the pages it leads to.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub metadata: BTreeMap<String, Spanned<String>>,
}

/// `[levels.NAME]`: the rules for pages reached through `[[follow]]` links.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Level")]
pub struct LevelToml {
    /// How this level's pages are fetched (default: the profile's `render`).
    #[serde(default)]
    #[schemars(with = "Option<RenderToml>")]
    pub render: Option<Spanned<RenderToml>>,
    /// Where the images are on this level's pages.
    #[serde(default)]
    pub images: Vec<ImageRuleToml>,
    /// Links on this level's pages that lead further down (listing -> album -> photo).
    #[serde(default)]
    pub follow: Vec<FollowToml>,
}

/// `pick = "largest" | "all" | "first"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "Pick")]
pub enum PickToml {
    Largest,
    All,
    First,
}

/// `[filters]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Filters")]
pub struct FiltersToml {
    /// Regexes; a URL is kept only if one matches (default: everything allowed).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub allow: Vec<Spanned<String>>,
    /// Regexes; a URL matched by any is left out.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub deny: Vec<Spanned<String>>,
    /// Hosts (and their subdomains) whose images are kept (default: any host).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub domains: Vec<Spanned<String>>,
    /// File extensions of the URL path that are kept, without the dot (default: any).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub extensions: Vec<Spanned<String>>,
}

/// `[crawl]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Crawl")]
pub struct CrawlToml {
    /// Pages in flight at once over all chains (1 to 1024; default 32, or twice the browser's
    /// `tabs` when pages render in the browser).
    #[schemars(with = "Option<u64>", range(min = 1, max = 1024))]
    pub concurrency: Option<Spanned<u64>>,
    /// Pages in flight at once to one host at most (1 to 1024, default 32): the cap of each
    /// host's window.
    #[schemars(with = "Option<u64>", range(min = 1, max = 1024))]
    pub per_host: Option<Spanned<u64>>,
    /// Whether each host's window of pages in flight adapts (default `true`: starts at 8, grows
    /// while the host answers quickly, halves on 429, 503, time-outs and resets, never above
    /// `per_host`); `false` keeps `per_host` pages in flight whatever the host does.
    #[schemars(with = "Option<bool>")]
    pub adaptive: Option<Spanned<bool>>,
    /// The most page requests started per second to one host, at least 0.001 (default: no
    /// limit).
    #[schemars(with = "Option<f64>", range(min = 0.001))]
    pub per_host_rps: Option<Spanned<f64>>,
    /// Links followed from a start page at most, counting each level passed (1 to 16,
    /// default 4).
    #[schemars(with = "Option<u64>", range(min = 1, max = 16))]
    pub max_depth: Option<Spanned<u64>>,
}

/// `[download]`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Download")]
pub struct DownloadToml {
    /// The output folder (default `downloads/<name>`), relative to the working directory.
    #[schemars(with = "Option<String>")]
    pub out: Option<Spanned<String>>,
    /// Where each image is stored in `out`; must contain `{sha256}` (default
    /// `{shard}/{sha256}.{ext}`).
    #[schemars(with = "Option<String>")]
    pub path: Option<Spanned<String>>,
    /// Downloads in flight at once, over all hosts (1 to 4096, default 256).
    #[schemars(with = "Option<u64>", range(min = 1, max = 4096))]
    pub concurrency: Option<Spanned<u64>>,
    /// Downloads in flight at once to one host at most (1 to 4096, default 256): the cap of
    /// each host's window.
    #[schemars(with = "Option<u64>", range(min = 1, max = 4096))]
    pub per_host: Option<Spanned<u64>>,
    /// Whether each host's window of downloads in flight adapts (default `true`: starts at 8,
    /// grows while the host answers quickly, halves on 429, 503, time-outs and resets, never
    /// above `per_host`); `false` keeps `per_host` downloads in flight whatever the host does.
    #[schemars(with = "Option<bool>")]
    pub adaptive: Option<Spanned<bool>>,
    /// How long to wait for a connection (default `"10s"`).
    #[schemars(with = "Option<DurationText>")]
    pub connect_timeout: Option<Spanned<Quantity>>,
    /// How long one whole request may take (default `"60s"`).
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Spanned<Quantity>>,
    /// How long an image download waits for the response headers (default `"30s"`).
    #[schemars(with = "Option<DurationText>")]
    pub first_byte_timeout: Option<Spanned<Quantity>>,
    /// Slowest transfer accepted, a size optionally followed by `/s` (default `"1KB/s"`; 0:
    /// any).
    #[schemars(with = "Option<SpeedQuantity>")]
    pub min_speed: Option<Spanned<Quantity>>,
    /// The most requests started per second to one host, at least 0.001 (default: no limit).
    #[schemars(with = "Option<f64>", range(min = 0.001))]
    pub per_host_rps: Option<Spanned<f64>>,
    /// Attempts after the first for transient failures (0 to 100, default 4).
    #[schemars(with = "Option<u64>", range(max = 100))]
    pub retries: Option<Spanned<u64>>,
    /// The `User-Agent` header of every request (default `scrape/<version>`).
    #[schemars(with = "Option<String>")]
    pub user_agent: Option<Spanned<String>>,
    /// Extra headers sent with every request (`env:NAME` reads a variable).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub headers: BTreeMap<String, Spanned<String>>,
    /// Largest image accepted (default `"100MB"`).
    #[schemars(with = "Option<SizeQuantity>")]
    pub max_bytes: Option<Spanned<Quantity>>,
    /// Image formats accepted, e.g. `["jpeg", "png"]` (default: every raster format).
    #[schemars(with = "Option<Vec<String>>")]
    pub formats: Option<Spanned<Vec<Spanned<String>>>>,
    /// Images narrower than this many pixels are failures (default 0).
    #[schemars(with = "Option<u64>")]
    pub min_width: Option<Spanned<u64>>,
    /// Images lower than this many pixels are failures (default 0).
    #[schemars(with = "Option<u64>")]
    pub min_height: Option<Spanned<u64>>,
    /// Largest width × height accepted, against decompression bombs (default 178956970).
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub max_pixels: Option<Spanned<u64>>,
    /// How images are laid out: `files` (default), `webdataset` (tar shards) or `parquet`
    /// (files and `images.parquet`).
    #[schemars(with = "Option<String>")]
    pub format: Option<Spanned<String>>,
    /// Samples per WebDataset shard (1 to 1000000, default 10000).
    #[schemars(with = "Option<u64>", range(min = 1, max = 1_000_000))]
    pub shard_size: Option<Spanned<u64>>,
    /// Parquet: the image bytes in an `image` column (default `false`).
    #[schemars(with = "Option<bool>")]
    pub parquet_images: Option<Spanned<bool>>,
    /// Perceptual hash (`phash`) of every stored image, and near-duplicate flags: an image
    /// whose hash is at most this many bits from an image stored before it is marked
    /// `near_duplicate_of` it (0 to 16; default: off, no image is decoded).
    #[schemars(with = "Option<u64>", range(max = 16))]
    pub near_duplicate_distance: Option<Spanned<u64>>,
    /// What becomes of a near-duplicate: `keep` (stored and flagged, the default) or `drop`
    /// (not stored; recorded as a duplicate of the earlier image).
    #[schemars(with = "Option<String>")]
    pub near_duplicates: Option<Spanned<String>>,
    /// Stored images resized for training sets (default: stored as downloaded).
    #[serde(default)]
    pub resize: Option<ResizeToml>,
}

/// `[download.resize]`: every stored image resized (after it is verified; the manifest keeps
/// the original's sha256 and size).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Resize")]
pub struct ResizeToml {
    /// The target side in pixels (1 to 16384).
    #[schemars(with = "u64", range(min = 1, max = 16384))]
    pub size: Spanned<u64>,
    /// `keep_ratio` (the longest side becomes `size`, the default), `center_crop` (the
    /// shortest side becomes `size` and the centre square is kept) or `border` (the longest
    /// side becomes `size`, on a `size` x `size` canvas of `border_color`).
    #[schemars(with = "Option<String>")]
    pub mode: Option<Spanned<String>>,
    /// `jpeg` (the default), `png`, `webp` (lossless) or `keep` (the format it came in).
    #[schemars(with = "Option<String>")]
    pub format: Option<Spanned<String>>,
    /// JPEG quality (1 to 100, default 95).
    #[schemars(with = "Option<u64>", range(min = 1, max = 100))]
    pub quality: Option<Spanned<u64>>,
    /// Pictures smaller than `size` are enlarged too (default `false`: never enlarged).
    #[schemars(with = "Option<bool>")]
    pub upscale: Option<Spanned<bool>>,
    /// The padding of `border`, `#rrggbb` (default `#000000`).
    #[schemars(with = "Option<String>")]
    pub border_color: Option<Spanned<String>>,
}

/// A number or a string with a unit (`"30s"`, `"50MB"`), interpreted by the field.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Quantity {
    Number(u64),
    Text(String),
}

/// One `[[api]]` rule: JSON responses the page fetches, and where the images are in them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ApiRule")]
pub struct ApiRuleToml {
    /// The rule's name, in `probe` output and the manifest (default `api[N]`).
    #[schemars(with = "Option<String>")]
    pub name: Option<Spanned<String>>,
    /// Regex matched against the URLs of the page's JSON responses.
    #[schemars(with = "String")]
    pub url: Spanned<String>,
    /// JSONPath of the items in a response.
    #[schemars(with = "String")]
    pub items: Spanned<String>,
    /// JSONPath, relative to each item, of its image URL.
    #[schemars(with = "String")]
    pub image: Spanned<String>,
    /// JSONPath, relative to each item, of its id (stored as `id` metadata).
    #[schemars(with = "Option<String>")]
    pub id: Option<Spanned<String>>,
    /// Extra manifest fields: name to JSONPath relative to each item.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub metadata: BTreeMap<String, Spanned<String>>,
    /// JSONPath, relative to each item, of its image's caption (default: none).
    #[schemars(with = "Option<String>")]
    pub caption: Option<Spanned<String>>,
    /// Rights fields (`license`, `creator`, `copyright_notice`, `acquire_license_page`,
    /// `credit_text`) to JSONPath relative to each item.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub rights: BTreeMap<String, Spanned<String>>,
}

/// `[browser]`: how pages are rendered when `render` is `browser` or `auto`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Browser")]
pub struct BrowserToml {
    /// The Chromium binary (default: `$SCRAPE_CHROMIUM`, then `chromium` on `PATH`).
    #[schemars(with = "Option<String>")]
    pub executable: Option<Spanned<String>>,
    /// Pages rendered at once: the tabs of all the browser processes together (1 to 64).
    #[schemars(with = "Option<u64>", range(min = 1, max = 64))]
    pub tabs: Option<Spanned<u64>>,
    /// Browser processes the tabs are spread over, each with its own proxy when there are
    /// several (1 to 16, default 1).
    #[schemars(with = "Option<u64>", range(min = 1, max = 16))]
    pub processes: Option<Spanned<u64>>,
    /// Pages a tab renders before it is replaced by a fresh one (at least 1).
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub recycle_after: Option<Spanned<u64>>,
    /// Also block stylesheets while rendering (faster; hides CSS background images).
    pub block_stylesheets: Option<bool>,
    /// The most memory one browser process may take with all its helpers (private resident
    /// memory of its process tree, e.g. `"2GiB"`); past it the browser is replaced and the page
    /// it was rendering is tried once more, then fails with the class `memory` (default: half
    /// of the machine's memory, shared by the `processes`, at least 1 GiB).
    #[schemars(with = "Option<SizeQuantity>")]
    pub memory_limit: Option<Spanned<Quantity>>,
    /// The most one page may take: load, waits, actions and snapshot (default `"60s"`).
    #[schemars(with = "Option<DurationText>")]
    pub page_timeout: Option<Spanned<Quantity>>,
    /// When a page counts as loaded: `network_idle` (default) or `load`.
    #[schemars(with = "Option<WaitToml>")]
    pub wait: Option<Spanned<WaitToml>>,
    /// Wait until an element matches this CSS selector, instead of `wait`.
    #[schemars(with = "Option<String>")]
    pub wait_for: Option<Spanned<String>>,
    /// A fixed pause after the page has loaded.
    #[schemars(with = "Option<DurationText>")]
    pub delay: Option<Spanned<Quantity>>,
    /// JavaScript run in the page after loading (a returned promise is awaited).
    #[schemars(with = "Option<String>")]
    pub script: Option<Spanned<String>>,
    /// CSS selectors of overlays' buttons to click away once the page is ready, before
    /// `click` and `scroll`: a consent banner's "Accept", a dialog's "Close". Each is clicked
    /// once, in order, if present and visible.
    #[schemars(with = "Option<Vec<String>>")]
    pub dismiss: Option<Vec<Spanned<String>>>,
    /// CSS selector of a "load more" button, clicked while it adds content.
    #[schemars(with = "Option<String>")]
    pub click: Option<Spanned<String>>,
    /// The most `click` clicks on one page (default 20).
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub max_clicks: Option<Spanned<u64>>,
    /// Infinite scroll: scroll to the bottom up to this many times while the page grows
    /// (default 0).
    #[schemars(with = "Option<u64>")]
    pub scroll: Option<Spanned<u64>>,
    /// After each click or scroll, wait up to this long for the page to settle (default `"2s"`).
    #[schemars(with = "Option<DurationText>")]
    pub settle: Option<Spanned<Quantity>>,
    /// CSS selector of the element that scrolls (a scroll container), instead of the window.
    #[schemars(with = "Option<String>")]
    pub scroll_element: Option<Spanned<String>>,
    /// Stop scrolling as soon as an element matches this CSS selector (an "end of results"
    /// marker).
    #[schemars(with = "Option<String>")]
    pub scroll_end: Option<Spanned<String>>,
}

/// `wait = "load" | "network_idle"`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(rename = "Wait")]
pub enum WaitToml {
    Load,
    NetworkIdle,
}

/// A number with its unit in one group (`"500ms"`, `"1.5s"`); the pattern of the schema's
/// duration and size strings ([`super::units`]).
const NUMBER: &str = r"(\d+\.?\d*|\.\d+)";

/// Schema of a duration string: `"500ms"`, `"30s"`, `"1m30s"` ([`super::parse_duration`]).
struct DurationText;

impl JsonSchema for DurationText {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A duration: a number and a unit (ms, s, m or min, h), several summed: \"500ms\", \"30s\", \"1m30s\". A bare number is an error.",
            "pattern": format!(r"^\s*({NUMBER}\s*(ms|s|min|m|h)\s*)+$"),
            "examples": ["500ms", "30s", "1m30s"],
        })
    }
}

/// The unit part of a size string, as [`super::parse_bytes`] reads it (any case).
const SIZE_UNIT: &str = r"([bB]|[kKmMgG][iI]?[bB])?";

/// Schema of a size: bytes as an integer, or a string with a unit ([`super::parse_bytes`]).
struct SizeQuantity;

impl JsonSchema for SizeQuantity {
    fn schema_name() -> Cow<'static, str> {
        "Size".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A size: a number of bytes, or a string with a unit (B, KB, MB, GB, KiB, MiB, GiB, any case): \"50MB\", \"512 KiB\".",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": format!(r"^\s*{NUMBER}\s*{SIZE_UNIT}\s*$") },
            ],
            "examples": ["50MB", "512 KiB", 1048576],
        })
    }
}

/// Schema of a speed: a size, optionally followed by `/s`.
struct SpeedQuantity;

impl JsonSchema for SpeedQuantity {
    fn schema_name() -> Cow<'static, str> {
        "Speed".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A speed: a size per second, e.g. \"50KB/s\"; 0 accepts any speed.",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": format!(r"^\s*{NUMBER}\s*{SIZE_UNIT}\s*(/s)?$") },
            ],
            "examples": ["1KB/s", "50KB/s", 0],
        })
    }
}

/// The JSON Schema (draft 2020-12) of profile files, derived from the structures above.
pub fn profile_schema() -> serde_json::Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<ProfileToml>()
        .to_value();
    without_null(&mut schema);
    schema
}

/// Removes the `null` alternatives schemars gives `Option` fields: TOML has no null, an
/// optional key is one that is absent.
fn without_null(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let Value::Object(map) = schema else { return };
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let single = types.remove(0);
            map.insert("type".into(), single);
        }
    }
    if let Some(Value::Array(alternatives)) = map.get_mut("anyOf") {
        alternatives.retain(|a| a.get("type").is_none_or(|t| t != "null"));
        if alternatives.len() == 1 && alternatives[0].get("$ref").is_some() {
            let single = alternatives.remove(0);
            map.remove("anyOf");
            if let Value::Object(inner) = single {
                map.extend(inner);
            }
        }
    }
    for value in map.values_mut() {
        match value {
            Value::Array(items) => items.iter_mut().for_each(without_null),
            other => without_null(other),
        }
    }
}
