//! `scrape probe`: what a profile extracts from one page, as JSON lines on stdout: its images,
//! the links its `[[follow]]` rules take (with their level) and the next page.
//!
//! The page comes from the profile's own page source (plain HTTP, the browser, or `auto`'s
//! fallback), so probe shows what a run would find on it. `--level` applies a level's rules
//! instead of the start pages', as a run does to the pages a follow rule leads to.
//! `--screenshot`, `--save-html` and `--save-json` also save a PNG of the page as the browser
//! rendered it, its HTML and the JSON responses it fetched that the `[[api]]` rules match.
//!
//! For `json_cursor` profiles, the page is one API request (the first, the one after
//! `--cursor`, or page `--page` of a page-numbered API), made and read as a run makes and reads
//! it; with those flags, a browser profile's start page is rendered first, and the API
//! responses it fetched are listed.

use std::sync::Arc;

use anyhow::Context;
use scrape::analyze::analyze_page;
use scrape::engine::analyse::{markup_weight, reading_place};
use scrape::engine::source::PageSource;
use scrape::extract::{FollowLink, ImageCandidate, extract_json_images};
use scrape::fetch::api::ApiFetcher;
use scrape::fetch::{PageFailure, PageFetcher};
use scrape::net::session::Session;
use scrape::net::{HttpClient, error_chain};
use scrape::page::PageSnapshot;
use scrape::paginate::json_cursor::{self, ApiReading};
use scrape::paginate::{NextPage, PageNumberError, PagePosition, first_page, numbered_page};
use scrape::profile::{
    ApiPaging, FollowRule, JsonCursor, Pagination, Profile, RenderMode, did_you_mean,
    parse_http_url,
};
use scrape::redact::redact;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::load_profile;
use crate::cli::ProbeArgs;
use crate::{Outcome, UsageError};

pub async fn probe(args: &ProbeArgs, cancel: &CancellationToken) -> anyhow::Result<Outcome> {
    let mut profile = load_profile(&args.profile)?;
    let session =
        scrape::net::session::Session::start(&mut profile, scrape::net::session::EnvValues::Read)?;
    if let Some(level) = &args.level {
        if args.page.is_some() || args.cursor.is_some() {
            return Err(UsageError(format!(
                "--page and --cursor are for the start pages' chain; the pages of level `{level}` are not paginated"
            ))
            .into());
        }
        profile = level_rules(&profile, level)?;
    }
    let profile = Arc::new(profile);
    if let Pagination::JsonCursor(cursor) = &profile.pagination {
        return probe_api(args, &profile, cursor, &session, cancel).await;
    }
    if args.cursor.is_some() {
        return Err(
            UsageError("--cursor is only for kind = \"json_cursor\" profiles".into()).into(),
        );
    }
    let Some(url) = &args.url else {
        return Err(UsageError("--url is required: the page to probe".into()).into());
    };
    let url = parse_http_url(url).map_err(|m| UsageError(format!("--url: {m}")))?;
    // The chain's start is the profile's start on the probed site, so URL templates resolve as
    // in a run; the probed page takes the place of the page numbered `--page`.
    let start = profile
        .start
        .iter()
        .find(|s| s.origin() == url.origin())
        .cloned()
        .unwrap_or_else(|| url.clone());
    let mut position = match args.page {
        Some(page) => {
            numbered_page(&profile.pagination, &start, page).map_err(|e| page_refused(&e))?
        }
        None => first_page(&profile.pagination, &start),
    };
    position.url = url.to_string();
    if profile.render == RenderMode::Static {
        if args.screenshot.is_some() {
            return Err(UsageError(
                "--screenshot needs a profile that renders pages (render = \"browser\" or \"auto\"); \
                 a static profile's pages are never rendered"
                    .into(),
            )
            .into());
        }
        if args.save_json.is_some() {
            return Err(UsageError(
                "--save-json needs a profile that renders pages (render = \"browser\" or \"auto\"); \
                 a static profile's pages fetch no JSON"
                    .into(),
            )
            .into());
        }
    }
    let (snapshot, screenshot, way) = match &args.html {
        Some(file) => {
            let html = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read `{}`", file.display()))?;
            (
                PageSnapshot::html(url.clone(), html),
                None,
                "read from a file",
            )
        }
        None => {
            match fetch_page(args, &profile, &session, (&start, &position), &url, cancel).await? {
                Some(fetched) => fetched,
                None => return Ok(Outcome::Interrupted),
            }
        }
    };
    // Read within the run's budget, as a crawl reads it.
    let _place = reading_place("the page", markup_weight(&snapshot.html))
        .await
        .map_err(|failed| UsageError(failed.detail))?;
    let analysis = analyze_page(&profile, &start, &position, &snapshot);
    for (candidate, verdict) in &analysis.candidates {
        print_image(candidate, verdict.as_ref().err().map(|r| r.as_str()))?;
    }
    for link in &analysis.links {
        print_link(link, &profile.follow)?;
    }
    let next = match &analysis.next {
        NextPage::Fetch(p) => json!({ "kind": "next", "url": p.url }),
        NextPage::End(reason) => json!({ "kind": "end", "reason": reason.describe() }),
    };
    super::print_stdout(&format!("{next}\n"))?;
    save_outputs(args, &profile, None, &snapshot, screenshot.as_deref())?;
    let accepted = analysis.accepted().count();
    let rules = match &args.level {
        Some(level) => format!("level `{level}`'s rules"),
        None => "the start pages' rules".to_owned(),
    };
    eprintln!(
        "{accepted} image(s) accepted, {} rejected by filters, {} link(s) to follow ({rules}; page {way})",
        analysis.candidates.len() - accepted,
        analysis.links.len(),
    );
    Ok(Outcome::Done)
}

/// The profile as it applies to pages of `level` (see [`Profile::for_level`]); an unknown
/// level is a usage error that lists the levels there are.
fn level_rules(profile: &Profile, level: &str) -> Result<Profile, UsageError> {
    if let Some(rules) = profile.for_level(level) {
        return Ok(rules);
    }
    if profile.levels.is_empty() {
        return Err(UsageError(format!(
            "--level: no level `{level}`: the profile has no `[levels]`"
        )));
    }
    let names = profile.levels.keys().map(String::as_str);
    let hint = did_you_mean(level, names.clone())
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default();
    let known: Vec<_> = names.map(|name| format!("`{name}`")).collect();
    let message = format!(
        "--level: no level `{level}`{hint}; the profile's levels: {}",
        known.join(", ")
    );
    Err(UsageError(message))
}

/// The usage error for a `--page` that names no page of the profile's chains.
fn page_refused(error: &PageNumberError) -> UsageError {
    UsageError(match error {
        PageNumberError::NotNumbered => "--page is for numbered pages (`url_template`, or a `json_cursor` API with \"{page}\" or \"{offset}\"); this profile's pages are not numbered".to_owned(),
        PageNumberError::ByCursor => "--page is for APIs that number their pages; this one pages by cursor: give --cursor CURSOR (the cursor of a `next` line)".to_owned(),
        PageNumberError::NoSuchPage { .. } => format!("--page: {error}"),
    })
}

/// The page at `url` (`position` of the chain from `start`) from the profile's own page
/// source, so a browser profile is rendered (and an `auto` one falls back to the browser)
/// exactly as a run would; with a PNG of it when `--screenshot` asks, and how it was made.
/// `None` when the run was interrupted.
async fn fetch_page(
    args: &ProbeArgs,
    profile: &Arc<Profile>,
    session: &Session,
    (start, position): (&Url, &PagePosition),
    url: &Url,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<(PageSnapshot, Option<Vec<u8>>, &'static str)>> {
    let client = HttpClient::new(&profile.download, session, Default::default())
        .context("cannot build the HTTP client")?;
    let fetcher = PageFetcher::new(client, 1);
    let started = match args.screenshot {
        // The picture is for a person: the browser loads the images too.
        Some(_) => PageSource::start_showing_images(profile, fetcher).await,
        None => PageSource::start(profile, fetcher).await,
    };
    let source = started
        .map_err(|e| UsageError(format!("cannot start the browser: {}", error_chain(&e))))?;
    let fetched = match args.screenshot {
        Some(_) => source
            .fetch_with_screenshot(
                profile,
                start,
                position,
                url,
                cancel,
                args.screenshot_max_height,
            )
            .await
            .map(|(snapshot, png)| (snapshot, Some(png))),
        None => source
            .fetch(profile, start, position, url, cancel)
            .await
            .map(|snapshot| (snapshot, None)),
    };
    let way = match source.pages_by_way() {
        (_, 0) => "fetched over plain HTTP",
        _ => "rendered in the browser",
    };
    source.close().await;
    match fetched {
        Ok((snapshot, png)) => Ok(Some((snapshot, png, way))),
        Err(PageFailure::Missing(code)) => {
            Err(UsageError(format!("`{url}` answered HTTP {code}")).into())
        }
        Err(PageFailure::Failed(f)) => {
            Err(UsageError(format!("cannot fetch `{url}`: {}", f.detail)).into())
        }
        Err(PageFailure::Cancelled) => Ok(None),
    }
}

/// Writes what `--screenshot`, `--save-html` and `--save-json` ask for, from `snapshot` (and
/// its `png`). The JSON responses an `[[api]]` rule matches are listed on stdout, one
/// `{"kind": "captured"}` line each, when they are saved or when `walk` (a `json_cursor`
/// profile's, whose start page was rendered for this) is given; for a walk, each line says
/// whether the response is a request to its endpoint and the cursor it sent.
fn save_outputs(
    args: &ProbeArgs,
    profile: &Profile,
    walk: Option<(&JsonCursor, &Url)>,
    snapshot: &PageSnapshot,
    png: Option<&[u8]>,
) -> anyhow::Result<()> {
    if walk.is_some() || args.save_json.is_some() {
        if let Some(dir) = &args.save_json {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the folder `{}`", dir.display()))?;
        }
        // The walk's endpoint: its first request's URL, whose query may differ in the others.
        let walk = walk.map(|(cursor, start)| {
            let first = json_cursor::position(cursor, start, 1, 0, None, None);
            (cursor, json_cursor::request(cursor, start, &first).url)
        });
        let mut saved = 0;
        for captured in &snapshot.json {
            let Some(rule) = profile.api.iter().find(|r| r.url.is_match(&captured.url)) else {
                continue;
            };
            let mut line = json!({
                "kind": "captured",
                "url": Url::parse(&captured.url).map_or_else(|_| captured.url.clone(), |u| redact(&u)),
                "method": captured.method,
                "status": captured.status,
                "rule": rule.name,
                "items": rule.items.query(&captured.body).all().len(),
                "images": extract_json_images(&profile.api, std::slice::from_ref(captured)).len(),
            });
            if let Some((cursor, endpoint)) = &walk {
                let url = Url::parse(&captured.url)
                    .ok()
                    .filter(|url| json_cursor::same_endpoint(url, endpoint));
                line["walk"] = json!(url.is_some());
                if let Some(url) = url {
                    let sent =
                        json_cursor::sent_cursor(cursor, &url, captured.request_body.as_deref());
                    line["cursor"] = json!(sent);
                }
            }
            if let Some(dir) = &args.save_json {
                saved += 1;
                let path = dir.join(format!("{saved:03}.json"));
                let text = serde_json::to_string_pretty(&captured.body)
                    .context("cannot serialize a captured response")?;
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write `{}`", path.display()))?;
                line["file"] = json!(path.display().to_string());
            }
            super::print_stdout(&format!("{line}\n"))?;
        }
        if let Some(dir) = &args.save_json {
            eprintln!("json: {saved} response(s) saved to {}", dir.display());
        }
    }
    if let Some(path) = &args.save_html {
        std::fs::write(path, &snapshot.html)
            .with_context(|| format!("cannot write the HTML `{}`", path.display()))?;
        eprintln!("html: {} ({} bytes)", path.display(), snapshot.html.len());
    }
    if let (Some(path), Some(png)) = (&args.screenshot, png) {
        std::fs::write(path, png)
            .with_context(|| format!("cannot write the screenshot `{}`", path.display()))?;
        let size = imagesize::blob_size(png)
            .map(|s| format!(", {}x{} px", s.width, s.height))
            .unwrap_or_default();
        eprintln!("screenshot: {}{size}", path.display());
    }
    Ok(())
}

/// One `{"kind": "image"}` line; `rejected` says which filter refused it.
fn print_image(candidate: &ImageCandidate, rejected: Option<&str>) -> anyhow::Result<()> {
    let mut line = json!({
        "kind": "image",
        "url": candidate.url.as_str(),
        "rule": candidate.rule,
        "attribute": candidate.attribute,
        "accepted": rejected.is_none(),
    });
    if let Some(rejection) = rejected {
        line["rejected"] = json!(rejection);
    }
    if !candidate.metadata.is_empty() {
        line["metadata"] = json!(candidate.metadata);
    }
    super::print_stdout(&format!("{line}\n"))
}

/// One `{"kind": "link"}` line: a link `rules[link.rule]` takes, to a page of `link.level`.
fn print_link(link: &FollowLink, rules: &[FollowRule]) -> anyhow::Result<()> {
    let line = json!({
        "kind": "link",
        "url": link.url.as_str(),
        "rule": format!("follow[{}]", link.rule),
        "selector": rules.get(link.rule).map(FollowRule::selector_text),
        "level": link.level,
        "metadata": link.metadata,
    });
    super::print_stdout(&format!("{line}\n"))
}

/// `json_cursor` profiles: one API request (the first page, the page after `--cursor`, or
/// page `--page` of a page-numbered API), with the session's headers, cookies and token, read
/// as a run reads it. Prints the images, one `{"kind": "api"}` line (the request, its status,
/// the items, the ids) and the verdict: `next` (with the cursor or page), `end` (with the
/// reason), `expired` or `failed`. Stores nothing.
async fn probe_api(
    args: &ProbeArgs,
    profile: &Arc<Profile>,
    api: &JsonCursor,
    session: &Session,
    cancel: &CancellationToken,
) -> anyhow::Result<Outcome> {
    if args.html.is_some() {
        return Err(UsageError(
            "--html is not for json_cursor profiles: probe asks the API".into(),
        )
        .into());
    }
    if args.cursor.is_some() && matches!(api.paging, ApiPaging::Numbered { .. }) {
        return Err(UsageError(
            "--cursor is for APIs paged by cursor; this one numbers its pages (\"{page}\" or \"{offset}\"): give --page N"
                .into(),
        )
        .into());
    }
    let renders = args.screenshot.is_some() || args.save_html.is_some() || args.save_json.is_some();
    if renders && profile.render != RenderMode::Browser {
        return Err(UsageError(
            "--screenshot, --save-html and --save-json need render = \"browser\" for a json_cursor profile: \
             a static one renders no page, probe asks the API"
                .into(),
        )
        .into());
    }
    let start = match &args.url {
        Some(url) => parse_http_url(url).map_err(|m| UsageError(format!("--url: {m}")))?,
        // Invariant: a checked profile has at least one start URL.
        None => profile.start[0].clone(),
    };
    let asked = match args.page {
        Some(page) => {
            Some(numbered_page(&profile.pagination, &start, page).map_err(|e| page_refused(&e))?)
        }
        None => None,
    };
    if renders {
        // The start page, rendered as a run renders it before the walk: what it fetched.
        let first = first_page(&profile.pagination, &start);
        let Some((snapshot, png, _)) =
            fetch_page(args, profile, session, (&start, &first), &start, cancel).await?
        else {
            return Ok(Outcome::Interrupted);
        };
        save_outputs(
            args,
            profile,
            Some((api, &start)),
            &snapshot,
            png.as_deref(),
        )?;
        eprintln!(
            "the rendered start page fetched {} JSON response(s); then the API request probe makes itself",
            snapshot.json.len()
        );
    }
    let client = HttpClient::new(&profile.download, session, Default::default())
        .context("cannot build the HTTP client")?;
    let fetcher = ApiFetcher::new(
        client,
        1,
        std::sync::Arc::new(scrape::net::Hosts::unlimited()),
        &api.headers,
        session.token.clone(),
    );
    let asker = ApiAsker {
        fetcher: &fetcher,
        profile,
        api,
        start: &start,
        cancel,
    };
    let position = match (asked, &args.cursor) {
        (Some(page), _) if json_cursor::uses_offset(api) => match asker.offset_of(page).await? {
            Some(position) => position,
            None => return Ok(Outcome::Interrupted),
        },
        (Some(page), _) => page,
        (None, Some(cursor)) => {
            json_cursor::position(api, &start, 2, 1, Some(cursor.clone()), None)
        }
        (None, None) => first_page(&profile.pagination, &start),
    };
    let request = json_cursor::request(api, &start, &position);
    let shown = redact(&request.url);
    let Some((status, reading)) = asker.ask(&position, profile.max_pages).await? else {
        return Ok(Outcome::Interrupted);
    };
    let numbered = matches!(api.paging, ApiPaging::Numbered { .. });
    // Without `{offset}` in the requests, the count of items before a page means nothing.
    let offsets = json_cursor::uses_offset(api);
    let verdict = match reading {
        ApiReading::Expired { reason } => json!({ "kind": "expired", "reason": reason }),
        ApiReading::Failed(error) => {
            let failed =
                json!({ "kind": "failed", "request": shown, "status": status, "error": error });
            super::print_stdout(&format!("{failed}\n"))?;
            eprintln!("the API page cannot be read: {error}");
            return Ok(Outcome::DoneWithFailures);
        }
        ApiReading::Page(page) => {
            let mut accepted = 0;
            for candidate in &page.candidates {
                let verdict = profile.filter.check(&candidate.url);
                accepted += usize::from(verdict.is_ok());
                print_image(candidate, verdict.as_ref().err().map(|r| r.as_str()))?;
            }
            let mut line = json!({
                "kind": "api",
                "request": shown,
                "method": request.method.as_str(),
                "status": status,
                "items": page.items,
                "last_id": page.last_id,
                "newest_id": page.newest_id,
            });
            if let Some(body) = &request.body {
                line["body"] = json_body(body);
            }
            if numbered {
                line["page"] = json!(position.number);
            }
            if offsets {
                line["offset"] = json!(position.offset);
            }
            super::print_stdout(&format!("{line}\n"))?;
            eprintln!(
                "{} item(s), {accepted} image(s) accepted, {} rejected by filters",
                page.items,
                page.candidates.len() - accepted
            );
            match page.next {
                NextPage::Fetch(p) if numbered => {
                    // The request itself: a POST's page key (the URL with the page as its
                    // fragment) names no request.
                    let request = json_cursor::request(api, &start, &p);
                    let mut next =
                        json!({ "kind": "next", "page": p.number, "url": redact(&request.url) });
                    if let Some(body) = &request.body {
                        next["body"] = json_body(body);
                    }
                    if offsets {
                        next["offset"] = json!(p.offset);
                    }
                    next
                }
                NextPage::Fetch(p) => json!({ "kind": "next", "cursor": p.cursor, "url": p.url }),
                NextPage::End(reason) => json!({ "kind": "end", "reason": reason.describe() }),
            }
        }
    };
    super::print_stdout(&format!("{verdict}\n"))?;
    Ok(Outcome::Done)
}

/// A request body as JSON (the text, should it not be JSON).
fn json_body(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|_| json!(body))
}

/// Asks a `json_cursor` API for pages of the chain from `start`, as a run asks them.
struct ApiAsker<'a> {
    fetcher: &'a ApiFetcher,
    profile: &'a Profile,
    api: &'a JsonCursor,
    start: &'a Url,
    cancel: &'a CancellationToken,
}

impl ApiAsker<'_> {
    /// The reply to the request for `position`, with its status, read with `max_pages` as the
    /// chain's limit; an answer that is no page of the API is a usage error. `None` when
    /// interrupted.
    async fn ask(
        &self,
        position: &PagePosition,
        max_pages: Option<u64>,
    ) -> anyhow::Result<Option<(u16, ApiReading)>> {
        let request = json_cursor::request(self.api, self.start, position);
        let shown = redact(&request.url);
        let response = match self.fetcher.fetch(&request, self.cancel).await {
            Ok(response) => response,
            Err(PageFailure::Cancelled) => return Ok(None),
            Err(PageFailure::Missing(code)) => {
                return Err(UsageError(format!("`{shown}` answered HTTP {code}")).into());
            }
            Err(PageFailure::Failed(f)) => {
                return Err(UsageError(format!("cannot fetch `{shown}`: {}", f.detail)).into());
            }
        };
        let _place = reading_place("the API answer", response.body.len() / 8)
            .await
            .map_err(|failed| UsageError(failed.detail))?;
        let reading = json_cursor::read(
            self.api,
            &self.profile.api,
            max_pages,
            self.start,
            position,
            json_cursor::Reply {
                url: &response.url,
                status: response.status,
                body: &response.body,
            },
        );
        Ok(Some((response.status, reading)))
    }

    /// `page` with its `{offset}`: the items of the pages before it, which are asked for one
    /// after the other from the first, as a run walks them. A chain that ends before `page`
    /// is a usage error. `None` when interrupted.
    async fn offset_of(&self, page: PagePosition) -> anyhow::Result<Option<PagePosition>> {
        let mut at = first_page(&self.profile.pagination, self.start);
        let first = at.number;
        while at.number < page.number {
            // Not the profile's `max_pages`: the page asked for is shown even past it.
            let Some((_, reading)) = self.ask(&at, None).await? else {
                return Ok(None);
            };
            let problem = match reading {
                ApiReading::Page(read) => match read.next {
                    NextPage::Fetch(next) => {
                        at = next;
                        continue;
                    }
                    NextPage::End(reason) => format!(
                        "the API's pages end at page {} ({})",
                        at.number,
                        reason.describe()
                    ),
                },
                ApiReading::Expired { reason } => {
                    format!("page {} says it has expired ({reason})", at.number)
                }
                ApiReading::Failed(error) => {
                    format!("page {} cannot be read: {error}", at.number)
                }
            };
            return Err(UsageError(format!(
                "--page `{}`: its offset is the items of the pages before it, and {problem}",
                page.number
            ))
            .into());
        }
        if at.number > first {
            eprintln!(
                "asked pages {first} to {} for the offset of page {}: {} item(s) before it",
                at.number - 1,
                at.number,
                at.offset
            );
        }
        Ok(Some(at))
    }
}
