//! The concurrent crawl: chains side by side, URL templates fetched ahead, per-host limits and
//! `Retry-After` for pages, and resume after a kill while many pages are in flight.
//!
//! The pages come from [`PageServer`], which delays every page, counts the requests in flight
//! and remembers when each page was asked for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use crate::support::{Background, PATIENCE, Setup, manifest, run, scrape, status_json, text};

/// Images on every gallery page.
const IMAGES_PER_PAGE: usize = 3;

/// What the page server was asked, and how.
#[derive(Default)]
struct Seen {
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// Page path → when each request for it arrived.
    requests: Mutex<BTreeMap<String, Vec<Instant>>>,
}

struct Site {
    /// Pages `/t/1.html` to `/t/{pages}.html` exist; so do pages past `gap` but not `gap` itself.
    pages: usize,
    gap: Option<usize>,
    /// The page that answers 429 with `Retry-After: 1` the first time it is asked for.
    busy: Option<usize>,
    delay: Duration,
    seen: Seen,
}

/// A gallery of numbered pages on `127.0.0.1:0`, each linking to the next and holding
/// [`IMAGES_PER_PAGE`] generated images, on a runtime of its own.
struct PageServer {
    runtime: tokio::runtime::Runtime,
    site: Arc<Site>,
    origin: String,
}

impl PageServer {
    fn start(pages: usize, delay: Duration, gap: Option<usize>, busy: Option<usize>) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let site = Arc::new(Site {
            pages,
            gap,
            busy,
            delay,
            seen: Seen::default(),
        });
        let app = Router::new()
            .route("/t/{page}", get(page))
            .route("/n/{page}", get(any_number))
            .route("/l/{page}", get(listing))
            .route("/d/{page}", get(detail))
            .route("/api/photos", get(numbered_get))
            .route("/api/graphql", axum::routing::post(numbered_post))
            .route("/img/{name}", get(image))
            .route("/hang/{page}", get(hang))
            .route("/tags", get(tags))
            .with_state(Arc::clone(&site));
        let origin = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            format!("http://{addr}")
        });
        Self {
            runtime,
            site,
            origin,
        }
    }

    fn most_in_flight(&self) -> usize {
        self.site.seen.most_in_flight.load(Ordering::SeqCst)
    }

    /// Page path → how many times it was requested.
    fn page_hits(&self) -> BTreeMap<String, usize> {
        let requests = self.site.seen.requests.lock().unwrap();
        requests.iter().map(|(p, t)| (p.clone(), t.len())).collect()
    }

    fn request_times(&self, path: &str) -> Vec<Instant> {
        let requests = self.site.seen.requests.lock().unwrap();
        requests.get(path).cloned().unwrap_or_default()
    }

    fn image_url(&self, page: usize, k: usize) -> String {
        format!("{}/img/t{page}-{k}-16x12.png", self.origin)
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        let runtime = std::mem::replace(
            &mut self.runtime,
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        );
        runtime.shutdown_background();
    }
}

async fn page(State(site): State<Arc<Site>>, UrlPath(name): UrlPath<String>) -> Response {
    let path = format!("/t/{name}");
    let seen = &site.seen;
    let first = {
        let mut requests = seen.requests.lock().unwrap();
        let times = requests.entry(path).or_default();
        times.push(Instant::now());
        times.len() == 1
    };
    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    seen.most_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(site.delay).await;
    seen.in_flight.fetch_sub(1, Ordering::SeqCst);
    let number = name
        .strip_suffix(".html")
        .and_then(|n| n.parse::<usize>().ok());
    let Some(number) = number.filter(|n| (1..=site.pages).contains(n) && Some(*n) != site.gap)
    else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if first && site.busy == Some(number) {
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response();
    }
    let images: String = (1..=IMAGES_PER_PAGE)
        .map(|k| format!("<img src=\"/img/t{number}-{k}-16x12.png\">"))
        .collect();
    let next = if number < site.pages {
        format!("<a class=\"next\" href=\"/t/{}.html\">next</a>", number + 1)
    } else {
        String::new()
    };
    Html(format!("<!DOCTYPE html><main>{images}</main>{next}")).into_response()
}

/// `/tags`: one image, then [`TAGS`] empty elements (24 MB, under the byte limit of a page).
async fn tags() -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><main><img src=\"/img/tags-16x12.png\"></main>{}",
        "<i>".repeat(TAGS)
    ))
}

/// Elements of `/tags`: more than a page may have to be read.
const TAGS: usize = 8_000_000;

/// `/hang/{page}`: counted, and never answered.
async fn hang(State(site): State<Arc<Site>>, UrlPath(name): UrlPath<String>) -> Response {
    arrive(&site, format!("/hang/{name}")).await;
    std::future::pending::<Response>().await
}

/// Counts a request for `path` and waits out the site's delay.
async fn arrive(site: &Site, path: String) {
    site.seen
        .requests
        .lock()
        .unwrap()
        .entry(path)
        .or_default()
        .push(Instant::now());
    let now = site.seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    site.seen.most_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(site.delay).await;
    site.seen.in_flight.fetch_sub(1, Ordering::SeqCst);
}

/// `/n/{number}`: a page of one image for any 64-bit page number, the smallest and largest
/// included.
async fn any_number(State(site): State<Arc<Site>>, UrlPath(name): UrlPath<String>) -> Response {
    arrive(&site, format!("/n/{name}")).await;
    match name.parse::<i64>() {
        Ok(number) => Html(format!(
            "<!DOCTYPE html><main><img src=\"/img/n{}-16x12.png\"></main>",
            number.unsigned_abs()
        ))
        .into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Listing pages `/l/1.html` to `/l/{LISTINGS}.html`: [`THUMBS`] thumbnails each linking to a
/// photo's detail page, the last thumbnail of each page repeated as the first of the next.
const LISTINGS: usize = 3;
const THUMBS: usize = 4;

fn listing_photos(number: usize) -> std::ops::RangeInclusive<usize> {
    let first = (number - 1) * (THUMBS - 1) + 1;
    first..=first + THUMBS - 1
}

async fn listing(State(site): State<Arc<Site>>, UrlPath(name): UrlPath<String>) -> Response {
    arrive(&site, format!("/l/{name}")).await;
    let number = name
        .strip_suffix(".html")
        .and_then(|n| n.parse::<usize>().ok());
    let Some(number) = number.filter(|n| (1..=LISTINGS).contains(n)) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let thumbs: String = listing_photos(number)
        .map(|id| {
            format!(
                "<a class=\"thumb\" href=\"/d/{id}.html\" title=\"Photo {id}\"><img src=\"/img/thumb-{id}-8x6.png\"></a>"
            )
        })
        .collect();
    let next = if number < LISTINGS {
        format!("<a class=\"next\" href=\"/l/{}.html\">next</a>", number + 1)
    } else {
        String::new()
    };
    Html(format!(
        "<!DOCTYPE html><h1>Album</h1><main>{thumbs}</main>{next}"
    ))
    .into_response()
}

/// A photo's page: the full image, and a link to a related photo's page (`/d/{id}r.html`,
/// which links on to `/d/{id}rr.html`, ...).
async fn detail(State(site): State<Arc<Site>>, UrlPath(name): UrlPath<String>) -> Response {
    arrive(&site, format!("/d/{name}")).await;
    let Some(stem) = name.strip_suffix(".html") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    Html(format!(
        "<!DOCTYPE html><figure><img class=\"full\" src=\"/img/full-{stem}-16x12.png\"></figure><a class=\"related\" href=\"/d/{stem}r.html\">related</a>"
    ))
    .into_response()
}

/// Numbered API pages: [`API_PAGES`] pages of three photos each, then empty pages.
const API_PAGES: u64 = 3;

fn api_page(site: &Site, page: u64) -> Response {
    let _ = site;
    let items: Vec<serde_json::Value> = if (1..=API_PAGES).contains(&page) {
        (1..=3)
            .map(|k| serde_json::json!({ "src": format!("/img/api-{page}-{k}-16x12.png") }))
            .collect()
    } else {
        Vec::new()
    };
    let body = serde_json::json!({ "data": { "photos": items } }).to_string();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn numbered_get(State(site): State<Arc<Site>>, uri: axum::http::Uri) -> Response {
    let page = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("page="))
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    arrive(&site, format!("/api/photos?page={page}")).await;
    api_page(&site, page)
}

async fn numbered_post(State(site): State<Arc<Site>>, body: String) -> Response {
    let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let page = request["variables"]["page"].as_u64().unwrap_or(0);
    arrive(&site, format!("/api/graphql#page={page}")).await;
    api_page(&site, page)
}

async fn image(UrlPath(name): UrlPath<String>) -> Response {
    match tokio::task::spawn_blocking(move || scrape::demo::image_for(&name)).await {
        Ok(Some((_, bytes))) => ([(header::CONTENT_TYPE, "image/png")], bytes).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

fn write_profile(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("crawl.toml");
    let out = dir.join("out");
    let text = format!(
        "name = \"crawl\"\n{body}\n[[images]]\nselector = \"main img\"\n[download]\nout = \"{}\"\n",
        out.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The pages (paths) the state of `out` records as done: committed, never to be fetched
/// again.
fn committed_pages(out: &Path) -> BTreeSet<String> {
    let state = scrape::state::State::open_existing(out).expect("state after the kill opens");
    let mut done = BTreeSet::new();
    state
        .for_each_page(|url, record| {
            if record.status == scrape::state::PageStatus::Done {
                done.insert(url::Url::parse(url).expect("URL").path().to_owned());
            }
            Ok(())
        })
        .expect("page records");
    done
}

/// Checks that a rerun fetched again no page that was committed before the kill, and that
/// the kill came with some pages committed and some not.
fn assert_nothing_committed_fetched_again(
    committed: &BTreeSet<String>,
    hits: &BTreeMap<String, usize>,
) {
    assert!(!committed.is_empty(), "the kill came before any commit");
    let again: Vec<_> = hits
        .iter()
        .filter(|(path, n)| **n > 1 && committed.contains(path.as_str()))
        .collect();
    assert!(
        again.is_empty(),
        "pages committed before the kill were fetched again: {again:?}"
    );
}

/// Runs `scrape crawl` on `profile` in the background and kills it once a third of the
/// `pages` have been requested; the pages committed by then, and the command to run again.
fn crawl_killed_at_a_third(
    server: &PageServer,
    profile: &Path,
    pages: usize,
    dir: &Path,
) -> (BTreeSet<String>, std::process::Command) {
    let mut crawl = scrape();
    crawl
        .arg("crawl")
        .arg("--profile")
        .arg(profile)
        .args(["--progress", "off"]);
    let mut first = Background::spawn(&mut crawl, &dir.join("first.log"));
    first.wait_for(
        "a third of the pages requested",
        Duration::from_secs(60),
        || server.page_hits().len() >= pages / 3,
    );
    first.kill();
    (committed_pages(&dir.join("out")), crawl)
}

/// A profile walking the server's gallery by page number, six pages in flight.
fn template_profile(dir: &Path, server: &PageServer) -> std::path::PathBuf {
    write_profile(
        dir,
        &format!(
            "start = [\"{}/t/\"]\n[pagination]\nkind = \"url_template\"\ntemplate = \"/t/{{page}}.html\"\n[crawl]\nconcurrency = 6\nper_host = 6",
            server.origin
        ),
    )
}

#[test]
fn a_host_that_never_answers_its_pages_holds_up_no_other_host() {
    let silent = PageServer::start(1, Duration::ZERO, None, None);
    let healthy = PageServer::start(10, Duration::ZERO, None, None);
    let dir = tempfile::tempdir().unwrap();
    // More pages of the silent host than the crawl has places, listed first; its window (8 at
    // first) takes half of them.
    let mut starts: Vec<String> = (1..=40)
        .map(|n| format!("\"{}/hang/{n}\"", silent.origin))
        .collect();
    starts.extend((1..=10).map(|n| format!("\"{}/t/{n}.html\"", healthy.origin)));
    let profile = write_profile(
        dir.path(),
        &format!("start = [{}]\n[crawl]\nconcurrency = 16", starts.join(", ")),
    );
    let mut crawl = scrape();
    crawl
        .arg("crawl")
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]);
    let mut started = Background::spawn(&mut crawl, &dir.path().join("crawl.log"));
    // The silent host's pages wait a minute for a first byte, four times each: the healthy
    // host's pages are fetched meanwhile, not after.
    started.wait_for("every page of the healthy host", PATIENCE, || {
        let hits = healthy.page_hits();
        (1..=10).all(|n| hits.contains_key(&format!("/t/{n}.html")))
    });
    let asked = silent.page_hits().len();
    assert!(
        (1..=8).contains(&asked),
        "the silent host was asked for {asked} pages at once: one window of it"
    );
}

#[test]
fn a_page_of_millions_of_tags_fails_as_too_large_and_the_others_are_read() {
    let server = PageServer::start(1, Duration::ZERO, None, None);
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        &format!("start = [\"{0}/tags\", \"{0}/t/1.html\"]", server.origin),
    );
    let output = run(scrape()
        .arg("crawl")
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let state = scrape::state::State::open_existing(&dir.path().join("out")).unwrap();
    let page = |path: &str| {
        state
            .page(&format!("{}{path}", server.origin))
            .unwrap()
            .expect("a page record")
    };
    let heavy = page("/tags");
    assert_eq!(heavy.class.as_deref(), Some("too_large"), "{heavy:?}");
    assert!(
        heavy
            .error
            .as_deref()
            .is_some_and(|e| e.contains("4000000")),
        "{heavy:?}"
    );
    assert_eq!(page("/t/1.html").status, scrape::state::PageStatus::Done);
}

/// The image URLs the manifest lists.
fn stored_urls(out: &Path) -> BTreeSet<String> {
    manifest(out)
        .iter()
        .map(|line| line["url"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn independent_start_urls_are_crawled_side_by_side_within_the_per_host_limit() {
    let server = PageServer::start(24, Duration::from_millis(150), None, None);
    let dir = tempfile::tempdir().unwrap();
    let starts: Vec<String> = (1..=24)
        .map(|n| format!("\"{}/t/{n}.html\"", server.origin))
        .collect();
    let profile = write_profile(
        dir.path(),
        &format!(
            "start = [{}]\n[crawl]\nconcurrency = 8\nper_host = 4",
            starts.join(", ")
        ),
    );
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        server.most_in_flight(),
        4,
        "pages in flight to the one host: at most per_host, and the crawl keeps it busy"
    );
    let expected: BTreeSet<String> = (1..=24)
        .flat_map(|n| (1..=IMAGES_PER_PAGE).map(move |k| (n, k)))
        .map(|(n, k)| server.image_url(n, k))
        .collect();
    assert_eq!(stored_urls(&dir.path().join("out")), expected);
    assert!(server.page_hits().values().all(|hits| *hits == 1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.lines().filter(|l| l.contains("/t/")).count() <= 6,
        "the summary names a few chains, not all 24:\n{stderr}"
    );
}

#[test]
fn a_template_ends_at_the_last_page_number_and_asks_for_each_page_once() {
    let cases = [
        ("counting up", "start = 9223372036854775805", 3),
        (
            "counting down",
            "start = -9223372036854775806\nstep = -1",
            3,
        ),
        (
            "a step past the end",
            "start = 0\nstep = 4611686018427387904",
            2,
        ),
    ];
    for (name, numbering, pages) in cases {
        let server = PageServer::start(0, Duration::from_millis(20), None, None);
        let dir = tempfile::tempdir().unwrap();
        let profile = write_profile(
            dir.path(),
            &format!(
                "start = [\"{}/\"]\n[pagination]\nkind = \"url_template\"\ntemplate = \"/n/{{page}}\"\n{numbering}\n[crawl]\nconcurrency = 4\nper_host = 4",
                server.origin
            ),
        );
        let mut crawl = scrape();
        crawl
            .arg("crawl")
            .arg("--profile")
            .arg(&profile)
            .args(["--progress", "off"]);
        let (status, stderr) = Background::spawn(&mut crawl, &dir.path().join("crawl.log"))
            .wait(Duration::from_secs(60));
        assert!(status.success(), "{name}: {stderr}");
        let hits = server.page_hits();
        assert_eq!(hits.len(), pages, "{name}: {hits:?}");
        assert!(hits.values().all(|n| *n == 1), "{name}: {hits:?}");
        let status = status_json(&dir.path().join("out"));
        let chain = &status["chains"][0]["checkpoint"];
        assert_eq!(chain["end"], "LastPageNumber", "{name}: {status}");
        assert_eq!(chain["pages_done"], pages, "{name}: {status}");
    }
}

#[test]
fn a_template_window_stops_at_the_first_missing_page_and_keeps_nothing_past_it() {
    // Pages 1-7 exist, 8 is missing, 9-20 exist again: the chain ends at 8, and whatever the
    // window fetched past it is dropped.
    let server = PageServer::start(20, Duration::from_millis(100), Some(8), None);
    let dir = tempfile::tempdir().unwrap();
    let profile = template_profile(dir.path(), &server);
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert!(output.status.success(), "{}", text(&output));
    let expected: BTreeSet<String> = (1..=7)
        .flat_map(|n| (1..=IMAGES_PER_PAGE).map(move |k| (n, k)))
        .map(|(n, k)| server.image_url(n, k))
        .collect();
    assert_eq!(stored_urls(&dir.path().join("out")), expected);
    assert!(
        server.most_in_flight() > 1,
        "the template's pages are fetched ahead, not one by one"
    );
    let hits = server.page_hits();
    assert!(
        hits.keys().any(|p| p == "/t/9.html" || p == "/t/10.html"),
        "the window ran past the gap: {hits:?}"
    );
    let status = status_json(&dir.path().join("out"));
    let chain = &status["chains"][0]["checkpoint"];
    assert_eq!(chain["pages_done"], 7, "{status}");
    assert_eq!(chain["end"], "MissingPage", "{status}");
    assert_eq!(
        status["counters"]["pages_done"], 7,
        "the missing page that ended the chain is no page done: {status}"
    );
}

#[test]
fn a_listing_page_answering_429_is_asked_again_after_its_retry_after() {
    let server = PageServer::start(4, Duration::from_millis(10), None, Some(2));
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        &format!(
            "start = [\"{}/t/1.html\"]\n[pagination]\nkind = \"next_link\"\nselector = \"a.next\"",
            server.origin
        ),
    );
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert!(output.status.success(), "{}", text(&output));
    let times = server.request_times("/t/2.html");
    assert_eq!(times.len(), 2, "one 429, then the page");
    assert!(
        times[1] - times[0] >= Duration::from_millis(950),
        "asked again after {:?}, before its Retry-After of 1 s",
        times[1] - times[0]
    );
    assert_eq!(
        stored_urls(&dir.path().join("out")).len(),
        4 * IMAGES_PER_PAGE
    );
}

#[test]
fn a_crawl_killed_with_many_pages_in_flight_resumes_without_fetching_a_committed_page_again() {
    let pages = 60;
    let concurrency = 6;
    let server = PageServer::start(pages, Duration::from_millis(60), None, None);
    let dir = tempfile::tempdir().unwrap();
    let starts: Vec<String> = (1..=pages)
        .map(|n| format!("\"{}/t/{n}.html\"", server.origin))
        .collect();
    let profile = write_profile(
        dir.path(),
        &format!(
            "start = [{}]\n[crawl]\nconcurrency = {concurrency}\nper_host = {concurrency}",
            starts.join(", ")
        ),
    );
    let out = dir.path().join("out");
    let (committed, mut crawl) = crawl_killed_at_a_third(&server, &profile, pages, dir.path());
    assert!(committed.len() < pages, "the kill came after the end");
    let output = run(&mut crawl);
    assert!(output.status.success(), "{}", text(&output));
    let hits = server.page_hits();
    assert_eq!(hits.len(), pages, "every page was asked for");
    assert_nothing_committed_fetched_again(&committed, &hits);
    let status = status_json(&out);
    assert_eq!(status["counters"]["pages_done"], pages, "{status}");
    assert_eq!(status["pending"], pages * IMAGES_PER_PAGE, "{status}");
}

#[test]
fn a_template_chain_killed_inside_its_window_resumes_after_its_last_committed_page() {
    let pages = 60;
    let server = PageServer::start(pages, Duration::from_millis(60), None, None);
    let dir = tempfile::tempdir().unwrap();
    let profile = template_profile(dir.path(), &server);
    let out = dir.path().join("out");
    let (committed, mut crawl) = crawl_killed_at_a_third(&server, &profile, pages, dir.path());
    let prefix: BTreeSet<String> = (1..=committed.len())
        .map(|n| format!("/t/{n}.html"))
        .collect();
    assert_eq!(
        committed, prefix,
        "a chain commits in order: the pages fetched ahead in the window are not committed before those they follow"
    );
    assert!(committed.len() < pages, "the kill came after the end");
    let output = run(&mut crawl);
    assert!(output.status.success(), "{}", text(&output));
    let hits = server.page_hits();
    assert_nothing_committed_fetched_again(&committed, &hits);
    let status = status_json(&out);
    let chain = &status["chains"][0]["checkpoint"];
    assert_eq!(chain["pages_done"], pages, "none skipped: {status}");
    assert_eq!(chain["end"], "MissingPage", "{status}");
    assert_eq!(status["pending"], pages * IMAGES_PER_PAGE, "{status}");
}

/// A listing -> photo profile: the listing pages hold thumbnails only, each photo's page the
/// full image; `extra` goes at the end (more levels, `[crawl]`).
fn detail_profile(dir: &Path, origin: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("detail.toml");
    let text = format!(
        r#"name = "detail"
start = ["{origin}/l/1.html"]

[pagination]
kind = "next_link"
selector = "a.next"

[[follow]]
selector = "a.thumb"
level = "photo"
metadata = {{ title = "@title" }}

[levels.photo]
[[levels.photo.images]]
selector = "img.full"

[download]
out = "{}"
{extra}
"#,
        dir.join("out").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Every photo the listing pages link to.
fn photos() -> BTreeSet<usize> {
    (1..=LISTINGS).flat_map(listing_photos).collect()
}

#[test]
fn detail_pages_are_crawled_once_each_and_carry_the_listing_metadata() {
    let server = PageServer::start(0, Duration::from_millis(20), None, None);
    let dir = tempfile::tempdir().unwrap();
    let profile = detail_profile(dir.path(), &server.origin, "");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert!(output.status.success(), "{}", text(&output));
    let lines = manifest(&dir.path().join("out"));
    let found: BTreeMap<String, (String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["url"].as_str().unwrap().to_owned(),
                (
                    l["page"].as_str().unwrap().to_owned(),
                    l["metadata"]["title"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ),
            )
        })
        .collect();
    let expected: BTreeMap<String, (String, String)> = photos()
        .into_iter()
        .map(|id| {
            (
                format!("{}/img/full-{id}-16x12.png", server.origin),
                (
                    format!("{}/d/{id}.html", server.origin),
                    format!("Photo {id}"),
                ),
            )
        })
        .collect();
    assert_eq!(
        found, expected,
        "only the full images, each from its photo page"
    );
    let hits = server.page_hits();
    for id in photos() {
        assert_eq!(hits.get(&format!("/d/{id}.html")), Some(&1), "{hits:?}");
    }
    assert!(
        !hits.keys().any(|p| p.ends_with("r.html")),
        "the photo level has no follow rule: {hits:?}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("linked pages: {} done this run", photos().len())),
        "{stderr}"
    );
}

#[test]
fn a_template_over_listing_pages_that_only_link_to_photos_walks_every_listing() {
    let server = PageServer::start(0, Duration::from_millis(5), None, None);
    let dir = tempfile::tempdir().unwrap();
    let profile = detail_profile(dir.path(), &server.origin, "");
    let templated = std::fs::read_to_string(&profile).unwrap().replace(
        "kind = \"next_link\"\nselector = \"a.next\"",
        "kind = \"url_template\"\ntemplate = \"/l/{page}.html\"",
    );
    std::fs::write(&profile, templated).unwrap();
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert!(output.status.success(), "{}", text(&output));
    let expected: BTreeSet<String> = photos()
        .into_iter()
        .map(|id| format!("{}/img/full-{id}-16x12.png", server.origin))
        .collect();
    assert_eq!(
        stored_urls(&dir.path().join("out")),
        expected,
        "a listing page with links and no image of its own does not end the chain"
    );
    let status = status_json(&dir.path().join("out"));
    let chain = &status["chains"][0]["checkpoint"];
    assert_eq!(chain["pages_done"], LISTINGS, "{status}");
    assert_eq!(chain["end"], "MissingPage", "{status}");
}

#[test]
fn levels_chain_down_to_max_depth_and_no_further() {
    let server = PageServer::start(0, Duration::from_millis(5), None, None);
    let dir = tempfile::tempdir().unwrap();
    let related = "[[levels.photo.follow]]\nselector = \"a.related\"\nlevel = \"photo\"\n[crawl]\nmax_depth = 3\n";
    let profile = detail_profile(dir.path(), &server.origin, related);
    let output = run(scrape()
        .arg("crawl")
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert!(output.status.success(), "{}", text(&output));
    let hits = server.page_hits();
    for id in photos() {
        for (suffix, wanted) in [("", true), ("r", true), ("rr", true), ("rrr", false)] {
            assert_eq!(
                hits.contains_key(&format!("/d/{id}{suffix}.html")),
                wanted,
                "depth of /d/{id}{suffix}.html: {hits:?}"
            );
        }
    }
}

#[test]
fn a_crawl_with_detail_pages_killed_midway_resumes_to_the_clean_result() {
    let server = PageServer::start(0, Duration::from_millis(80), None, None);
    let dir = tempfile::tempdir().unwrap();
    let profile = detail_profile(
        dir.path(),
        &server.origin,
        "[crawl]\nconcurrency = 2\nper_host = 2\n",
    );
    let mut crawl = scrape();
    crawl
        .arg("crawl")
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]);
    let mut first = Background::spawn(&mut crawl, &dir.path().join("first.log"));
    first.wait_for(
        "some photo pages requested",
        Duration::from_secs(60),
        || {
            server
                .page_hits()
                .keys()
                .filter(|p| p.starts_with("/d/"))
                .count()
                >= 3
        },
    );
    first.kill();
    let committed = committed_pages(&dir.path().join("out"));
    let output = run(&mut crawl);
    assert!(output.status.success(), "{}", text(&output));
    let hits = server.page_hits();
    let photo_pages: BTreeSet<_> = hits
        .keys()
        .filter(|p| p.starts_with("/d/"))
        .cloned()
        .collect();
    let expected: BTreeSet<_> = photos().iter().map(|id| format!("/d/{id}.html")).collect();
    assert_eq!(photo_pages, expected);
    assert_nothing_committed_fetched_again(&committed, &hits);
    let status = status_json(&dir.path().join("out"));
    assert_eq!(status["pending"], photos().len(), "{status}");
}

#[test]
fn a_follow_rule_naming_an_unknown_level_is_reported_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let profile = detail_profile(dir.path(), "http://127.0.0.1:9", "");
    let text_of = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        text_of.replace("level = \"photo\"", "level = \"phot\""),
    )
    .unwrap();
    let output = run(scrape().arg("check").arg("--profile").arg(&profile));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = text_of
        .lines()
        .position(|l| l.starts_with("level = "))
        .unwrap()
        + 1;
    assert!(
        stderr.contains(&format!(
            "detail.toml:{line}:9: error: no level `phot` in `[levels]`"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean \"photo\"?"), "{stderr}");
    assert!(
        !stderr.contains("warning"),
        "the typo is the one problem: {stderr}"
    );
}

#[test]
fn numbered_api_pages_are_walked_by_page_number_in_the_url_and_in_a_post_body() {
    let server = PageServer::start(0, Duration::from_millis(5), None, None);
    let expected: BTreeSet<String> = (1..=API_PAGES)
        .flat_map(|page| (1..=3).map(move |k| (page, k)))
        .map(|(page, k)| format!("{}/img/api-{page}-{k}-16x12.png", server.origin))
        .collect();
    for (request, path) in [
        ("request = \"/api/photos?page={page}\"", "/api/photos?page="),
        (
            "request = \"/api/graphql\"\nmethod = \"POST\"\nbody = '{\"variables\": {\"page\": \"{page}\"}}'",
            "/api/graphql#page=",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("api.toml");
        std::fs::write(
            &profile,
            format!(
                "name = \"numbered\"\nstart = [\"{}/\"]\n[pagination]\nkind = \"json_cursor\"\n{request}\n[[api]]\nurl = \"/api/\"\nitems = \"$.data.photos[*]\"\nimage = \"$.src\"\n[download]\nout = \"{}\"\n",
                server.origin,
                dir.path().join("out").display()
            ),
        )
        .unwrap();
        let output = run(scrape()
            .arg("--profile")
            .arg(&profile)
            .args(["--progress", "off"]));
        assert!(output.status.success(), "{}", text(&output));
        assert_eq!(stored_urls(&dir.path().join("out")), expected, "{request}");
        let hits = server.page_hits();
        for page in 1..=API_PAGES + 1 {
            assert_eq!(
                hits.get(&format!("{path}{page}")),
                Some(&1),
                "{request}: {hits:?}"
            );
        }
        assert_eq!(
            hits.get(&format!("{path}{}", API_PAGES + 2)),
            None,
            "{request}: {hits:?}"
        );
        let status = status_json(&dir.path().join("out"));
        assert_eq!(
            status["chains"][0]["checkpoint"]["end"], "EmptyPage",
            "{status}"
        );
    }
}

#[test]
fn status_counts_the_linked_pages_still_queued_apart_from_the_pending_images() {
    let setup = Setup::with(
        |dir| {
            let root = dir.join("site");
            std::fs::create_dir_all(&root).expect("site folder");
            // Two of the three linked pages do not exist: they fail and stay queued.
            std::fs::write(
                root.join("list.html"),
                "<!doctype html><main><a class=\"detail\" href=\"/d1.html\">1</a>\
                 <a class=\"detail\" href=\"/d2.html\">2</a>\
                 <a class=\"detail\" href=\"/d3.html\">3</a></main>",
            )
            .expect("listing written");
            std::fs::write(root.join("d1.html"), "<!doctype html><p>no pictures</p>")
                .expect("detail written");
            crate::support::Site::serve_dir(&root)
        },
        |dir, site: &crate::support::Site| {
            let path = dir.join("links.toml");
            let profile = format!(
                "name = \"links\"\nstart = [\"{}/list.html\"]\n\n\
                 [[follow]]\nselector = \"a.detail\"\nlevel = \"detail\"\n\n\
                 [levels.detail]\n[[levels.detail.images]]\nselector = \"img\"\n\n\
                 [download]\nout = \"out\"\nretries = 0\n",
                site.origin
            );
            std::fs::write(&path, profile).expect("profile written");
            path
        },
    );
    let output = setup.run();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let status = status_json(&setup.out);
    assert_eq!(status["links_queued"], 2, "{status}");
    assert_eq!(status["links_queued_by_level"]["detail"], 2, "{status}");
    assert_eq!(status["pending"], 0, "{status}");
    assert_eq!(status["state"], "incomplete", "{status}");
    let output = run(scrape().arg("status").arg("--out").arg(&setup.out));
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains(
            "links     2 linked pages ([[follow]]) queued, not crawled yet (by level: detail 2)"
        ),
        "{said}"
    );
}
