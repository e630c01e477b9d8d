//! A HAR saved by Chromium itself replays. The test drives a real Chromium over CDP on its own
//! (not through scrape's renderer or recorder), visits a fixture site the way a person would,
//! builds the HAR from the browser's Network events the way DevTools' "Save all as HAR" does,
//! stops the site and runs `scrape test` on a copy of the site's profile with that recording.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::network::{
    AssociatedCookie, BlockPattern, EnableParams, EventLoadingFailed, EventLoadingFinished,
    EventRequestWillBeSent, EventRequestWillBeSentExtraInfo, EventResponseReceived,
    GetRequestPostDataParams, GetResponseBodyParams, Headers, ResourceTiming, Response,
    SetBlockedUrLsParams, SetCookieParams,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::{
    BROWSER_EXIT, Site, chromium_available, described, eventually, repo, run, scrape, text,
};

/// How long one recording may take, browser launch included.
const RECORDING_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a page's requests may take to settle after the visitor is done with it.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// After a page loads, the visitor follows the gallery's "Next" link (the script gives the
/// URL to go to, or null on the last page).
const FOLLOW_NEXT: &str = "document.querySelector('a.next')?.href ?? null";

/// The URLs of the resources the page fetched, as the page's Resource Timing lists them.
const RESOURCE_URLS: &str = "performance.getEntriesByType('resource').map((e) => e.name)";

/// The visitor scrolls an infinite gallery down until it ends and every image in it shows.
const SCROLL_TO_THE_END: &str = r#"(async () => {
  const deadline = Date.now() + 20000;
  const shown = () => [...document.images].every((i) => i.src.startsWith("data:") || i.complete);
  while (document.getElementById("sentinel") || !shown()) {
    if (Date.now() > deadline) throw new Error("the gallery did not end");
    window.scrollBy(0, window.innerHeight / 2);
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
})()"#;

/// The visitor clicks "Load more" until the list ends, one click per answer.
const LOAD_ALL: &str = r##"(async () => {
  const deadline = Date.now() + 20000;
  const items = () => document.querySelectorAll("#app li").length;
  const more = () => document.getElementById("more");
  const until = async (done) => {
    while (!done()) {
      if (Date.now() > deadline) throw new Error("the list did not grow");
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await until(() => items() > 0);
  while (more()) {
    const before = items();
    more().click();
    await until(() => items() > before);
  }
  return null;
})()"##;

#[test]
fn a_har_saved_by_chromium_replays_the_static_demo_gallery() {
    if !chromium_available("a_har_saved_by_chromium_replays_the_static_demo_gallery") {
        return;
    }
    let site = Site::serve("fixtures/demo-site");
    let origin = site.origin.clone();
    // The visitor arrives through a link that redirects, and blocks ads.
    let har = record_devtools_har(&origin, "/gallery/", FOLLOW_NEXT, true);
    drop(site);
    let entries = har["log"]["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["response"]["status"] == 307
            && e["response"]["redirectURL"]
                .as_str()
                .is_some_and(|u| u.ends_with("/gallery/"))),
        "the redirect is an entry of its own"
    );
    assert!(
        entries.iter().any(|e| e["response"]["status"] == 0
            && e["response"]["_error"].is_string()
            && e["request"]["url"]
                .as_str()
                .is_some_and(|u| u.contains("/img/ad-"))),
        "the blocked ad is an entry with status 0"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["_resourceType"] == "image"
                && e["response"]["content"]["encoding"] == "base64"),
        "images are kept as base64"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["request"]["cookies"][0]["name"] == "visitor"),
        "requests carry the visitor's cookie"
    );
    let pages = har["log"]["pages"].as_array().unwrap().len();
    assert_eq!(pages, 6, "one page per gallery page");
    // The replay starts where the visit did, at the redirect.
    let first = url::Url::parse(entries[0]["request"]["url"].as_str().unwrap()).unwrap();
    let redirector = first.origin().ascii_serialization();
    assert_ne!(redirector, origin);
    // The visit saw the static gallery only: the demo's albums (rendered in the browser) are
    // left out of the profile and of the expected images.
    replays_part_as_expected("demo", &har, &redirector, &origin, Some("/albums/"));
}

#[test]
fn a_har_saved_by_chromium_replays_the_infinite_gallery() {
    if !chromium_available("a_har_saved_by_chromium_replays_the_infinite_gallery") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let origin = site.origin.clone();
    let har = record_devtools_har(&origin, "/infinite/", SCROLL_TO_THE_END, false);
    drop(site);
    let entries = har["log"]["entries"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["_resourceType"] == "fetch"
            && e["_initiator"]["type"] == "script"
            && e["request"]["url"]
                .as_str()
                .is_some_and(|u| u.ends_with("/page-3.json"))),
        "the page's own fetches are recorded"
    );
    replays_as_expected("infinite", &har, &origin, &origin);
}

#[test]
fn a_har_saved_by_chromium_replays_the_posts_of_a_single_page_app() {
    if !chromium_available("a_har_saved_by_chromium_replays_the_posts_of_a_single_page_app") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let origin = site.origin.clone();
    let har = record_devtools_har(&origin, "/spa/", LOAD_ALL, false);
    drop(site);
    let posts: Vec<&Value> = har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["request"]["method"] == "POST")
        .collect();
    assert_eq!(posts.len(), 3, "one POST per page of items");
    assert_eq!(
        posts[1]["request"]["postData"]["text"],
        r#"{"cursor":"c2"}"#
    );
    replays_as_expected("spa", &har, &origin, &origin);
}

/// Runs `scrape test --update` (strict: every request the replay makes must be in the
/// recording) on a copy of site profile `name` whose start is on `start_origin`, with `har` as
/// its recording. It must pass and find the images of the committed expected file, moved to
/// `origin`: the same URLs, rules, attributes and metadata. (Pages are left out: a page the
/// visit reached through a redirect is named by the URL the crawl asked for.)
fn replays_as_expected(name: &str, har: &Value, start_origin: &str, origin: &str) {
    replays_part_as_expected(name, har, start_origin, origin, None);
}

/// [`replays_as_expected`], with the profile's start URL whose path is `left_out` removed and
/// the images of pages under that path left out of the expected ones.
fn replays_part_as_expected(
    name: &str,
    har: &Value,
    start_origin: &str,
    origin: &str,
    left_out: Option<&str>,
) {
    const COMMITTED_ORIGIN: &str = "http://127.0.0.1:8080";
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join(format!("site-profiles/{name}.toml"));
    let fixtures = tmp.path().join(format!("fixtures/{name}"));
    std::fs::create_dir_all(profile.parent().unwrap()).unwrap();
    std::fs::create_dir_all(&fixtures).unwrap();
    let source = std::fs::read_to_string(repo(&format!("site-profiles/{name}.toml"))).unwrap();
    let source = match left_out {
        Some(path) => source.replace(&format!(", \"{COMMITTED_ORIGIN}{path}\""), ""),
        None => source,
    };
    std::fs::write(&profile, source.replace(COMMITTED_ORIGIN, start_origin)).unwrap();
    let har_text = serde_json::to_string_pretty(har).unwrap();
    std::fs::write(fixtures.join("site.har"), har_text).unwrap();
    let output = run(scrape().arg("test").arg(&profile).arg("--update"));
    assert!(output.status.success(), "{}", text(&output));
    let images = |text: &str| {
        let mut images: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|image| {
                let page = url::Url::parse(image["page"].as_str().unwrap_or_default());
                left_out.is_none_or(|path| page.is_ok_and(|p| !p.path().starts_with(path)))
            })
            .map(|mut image| {
                image.as_object_mut().unwrap().remove("page");
                image
            })
            .collect();
        images.sort_by_key(Value::to_string);
        images
    };
    let committed = std::fs::read_to_string(repo(&format!("fixtures/{name}/expected.jsonl")));
    let expected = images(&committed.unwrap().replace(COMMITTED_ORIGIN, origin));
    let found = images(&std::fs::read_to_string(fixtures.join("expected.jsonl")).unwrap());
    assert!(!expected.is_empty());
    assert_eq!(found, expected);
}

/// Launches Chromium with a fresh profile folder, records a visit that starts at `origin` +
/// `start` and goes on as `next` (a script run after each page loads, giving the URL to go to
/// or null), and returns the HAR. With `via_redirect`, the visit starts at a second server
/// that redirects to the site, and ad images are blocked. The browser is closed (or killed)
/// and its folder removed before this returns or panics.
fn record_devtools_har(origin: &str, start: &str, next: &str, via_redirect: bool) -> Value {
    crate::support::runtime(2).block_on(async {
        let first = if via_redirect {
            format!("{}{start}", redirector(origin).await)
        } else {
            format!("{origin}{start}")
        };
        let folder = tempfile::tempdir().unwrap();
        let (browser, mut handler) = Browser::launch(browser_config(folder.path()))
            .await
            .expect("chromium starts");
        let polling = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(e) = event {
                    eprintln!("cdp: {e}");
                }
            }
        });
        let browser = Arc::new(browser);
        let mut visit = tokio::spawn(visit(
            Arc::clone(&browser),
            first,
            next.to_owned(),
            via_redirect,
        ));
        let visited = tokio::time::timeout(RECORDING_TIMEOUT, &mut visit).await;
        if visited.is_err() {
            visit.abort();
            let _ = visit.await;
        }
        // The visit's task is over, so its handle on the browser is gone.
        let mut browser = Arc::try_unwrap(browser).ok();
        if let Some(browser) = browser.as_mut() {
            let closed = tokio::time::timeout(BROWSER_EXIT, async {
                let _ = browser.close().await;
                browser.wait().await
            })
            .await;
            if closed.is_err() {
                let _ = browser.kill().await;
            }
        }
        drop(browser);
        polling.abort();
        drop(folder);
        match visited {
            Ok(Ok(har)) => har,
            Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Ok(Err(e)) => panic!("the visit did not finish: {e}"),
            Err(_) => panic!("the visit took longer than {RECORDING_TIMEOUT:?}"),
        }
    })
}

/// Debian's Chromium as scrape launches it: headless, no GPU or QUIC, nothing fetched in the
/// background, no sandbox as root, and its own profile folder.
fn browser_config(folder: &Path) -> BrowserConfig {
    use std::os::unix::fs::MetadataExt;
    let executable = scrape::render::find_executable(None).unwrap();
    let mut builder = BrowserConfig::builder()
        .chrome_executable(executable)
        .user_data_dir(folder)
        .args([
            "disable-gpu",
            "disable-quic",
            "disable-component-update",
            "no-first-run",
        ]);
    if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        builder = builder.no_sandbox();
    }
    builder.build().unwrap()
}

/// A server on another port that answers every request with a 307 to the same path on
/// `origin`; it lives as long as the current runtime.
async fn redirector(origin: &str) -> String {
    let target = origin.to_owned();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let to = format!("{target}{}", uri.path());
        async move { axum::response::Redirect::temporary(&to) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    at
}

/// One CDP event of the Network domain.
enum NetworkEvent {
    Sent(Arc<EventRequestWillBeSent>),
    SentExtra(Arc<EventRequestWillBeSentExtraInfo>),
    Received(Arc<EventResponseReceived>),
    Finished(Arc<EventLoadingFinished>),
    Failed(Arc<EventLoadingFailed>),
}

/// What the Network domain reported, as DevTools' network log keeps it.
#[derive(Default)]
struct NetworkLog {
    /// The page being visited, 1-based; requests belong to the page current when they start.
    page: usize,
    /// Every `requestWillBeSent` (one per redirect hop) with its page, in order.
    sent: Vec<(usize, Arc<EventRequestWillBeSent>)>,
    extra: HashMap<String, Vec<Arc<EventRequestWillBeSentExtraInfo>>>,
    received: HashMap<String, Arc<EventResponseReceived>>,
    finished: HashMap<String, Arc<EventLoadingFinished>>,
    failed: HashMap<String, Arc<EventLoadingFailed>>,
    /// `Network.getResponseBody`: text and whether it is base64.
    bodies: HashMap<String, (String, bool)>,
    post_data: HashMap<String, String>,
}

impl NetworkLog {
    fn add(&mut self, event: NetworkEvent) {
        match event {
            NetworkEvent::Sent(e) => self.sent.push((self.page, e)),
            NetworkEvent::SentExtra(e) => self
                .extra
                .entry(e.request_id.inner().clone())
                .or_default()
                .push(e),
            NetworkEvent::Received(e) => {
                self.received.insert(e.request_id.inner().clone(), e);
            }
            NetworkEvent::Finished(e) => {
                self.finished.insert(e.request_id.inner().clone(), e);
            }
            NetworkEvent::Failed(e) => {
                self.failed.insert(e.request_id.inner().clone(), e);
            }
        }
    }

    /// HTTP requests of `page` (by id): DevTools' HAR leaves out `data:` and other schemes.
    fn requests_of(&self, page: usize) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for (p, sent) in &self.sent {
            let id = sent.request_id.inner();
            if *p == page && sent.request.url.starts_with("http") && !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        ids
    }

    /// Whether `page` requested every URL of `resources` and all its requests have ended.
    fn settled(&self, page: usize, resources: &[String]) -> bool {
        let ids = self.requests_of(page);
        let urls: Vec<&str> = self
            .sent
            .iter()
            .filter(|(_, s)| ids.contains(s.request_id.inner()))
            .map(|(_, s)| s.request.url.as_str())
            .collect();
        resources.iter().all(|r| urls.contains(&r.as_str()))
            && ids
                .iter()
                .all(|id| self.finished.contains_key(id) || self.failed.contains_key(id))
    }

    /// What `page` still waits for, for a failure message.
    fn pending(&self, page: usize, resources: &[String]) -> String {
        let ids = self.requests_of(page);
        let (ended, open): (Vec<_>, Vec<_>) = self
            .sent
            .iter()
            .filter(|(_, s)| ids.contains(s.request_id.inner()))
            .partition(|(_, s)| {
                let id = s.request_id.inner();
                self.finished.contains_key(id) || self.failed.contains_key(id)
            });
        let seen: Vec<&str> = ended
            .iter()
            .chain(&open)
            .map(|(_, s)| s.request.url.as_str())
            .collect();
        let unseen: Vec<&String> = resources
            .iter()
            .filter(|r| !seen.contains(&r.as_str()))
            .collect();
        let open: Vec<&str> = open.iter().map(|(_, s)| s.request.url.as_str()).collect();
        format!("not requested yet: {unseen:?}; not ended: {open:?}")
    }
}

/// The visit: opens a tab, enables the Network domain, goes from page to page and keeps
/// bodies as each page settles; then builds the HAR.
async fn visit(browser: Arc<Browser>, first: String, next: String, block_ads: bool) -> Value {
    let page = browser.new_page("about:blank").await.unwrap();
    let log = Arc::new(Mutex::new(NetworkLog::default()));
    let events = futures_util::stream::select_all([
        listen(&page, NetworkEvent::Sent).await,
        listen(&page, NetworkEvent::SentExtra).await,
        listen(&page, NetworkEvent::Received).await,
        listen(&page, NetworkEvent::Finished).await,
        listen(&page, NetworkEvent::Failed).await,
    ]);
    let collecting = Arc::clone(&log);
    let collector = tokio::spawn(events.for_each(move |event| {
        collecting.lock().unwrap().add(event);
        std::future::ready(())
    }));
    page.execute(EnableParams {
        max_total_buffer_size: Some(200 << 20),
        max_resource_buffer_size: Some(20 << 20),
        max_post_data_size: Some(1 << 20),
        ..EnableParams::default()
    })
    .await
    .unwrap();
    if block_ads {
        page.execute(SetBlockedUrLsParams {
            url_patterns: Some(vec![BlockPattern::new("*://*:*/img/ad-*", true)]),
        })
        .await
        .unwrap();
    }
    let mut pages = Vec::new();
    let mut url = Some(first);
    while let Some(at) = url {
        let number = pages.len() + 1;
        log.lock().unwrap().page = number;
        let started = Instant::now();
        page.goto(at.as_str()).await.unwrap();
        if number == 1 {
            // A session the visitor already has, sent from the first page on.
            let landed = page.url().await.unwrap().unwrap();
            page.execute(
                SetCookieParams::builder()
                    .name("visitor")
                    .value("42")
                    .url(landed)
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
        }
        let on_load = started.elapsed().as_secs_f64() * 1000.0;
        url = evaluate(&page, &next).await.as_str().map(str::to_owned);
        // Every resource the page fetched is in the log once it settles, whatever order the
        // event streams delivered them in.
        let resources = evaluate(&page, RESOURCE_URLS).await;
        let resources: Vec<String> = serde_json::from_value(resources).unwrap();
        eventually(
            described(|| {
                let pending = log.lock().unwrap().pending(number, &resources);
                format!("page {number} to settle: {pending}")
            }),
            SETTLE_TIMEOUT,
            || log.lock().unwrap().settled(number, &resources),
        )
        .await;
        keep_bodies(&page, &log, number).await;
        let title = page.url().await.unwrap().unwrap_or_default();
        pages.push((title, on_load));
    }
    collector.abort();
    let log = log.lock().unwrap();
    devtools_har(&log, &pages)
}

/// A stream of one Network event, mapped into [`NetworkEvent`].
async fn listen<T>(
    page: &Page,
    wrap: fn(Arc<T>) -> NetworkEvent,
) -> futures_util::stream::BoxStream<'static, NetworkEvent>
where
    T: chromiumoxide::cdp::IntoEventKind + Unpin + Send + Sync + 'static,
{
    page.event_listener::<T>().await.unwrap().map(wrap).boxed()
}

async fn evaluate(page: &Page, expression: &str) -> Value {
    let params = EvaluateParams::builder()
        .expression(expression)
        .await_promise(true)
        .return_by_value(true)
        .build()
        .unwrap();
    let result = page.evaluate_expression(params).await.unwrap();
    result.value().cloned().unwrap_or(Value::Null)
}

/// `Network.getResponseBody` for the finished requests of `page`, and
/// `Network.getRequestPostData` for those with a body: what DevTools asks for when it saves.
async fn keep_bodies(page: &Page, log: &Mutex<NetworkLog>, number: usize) {
    let (finished, posted): (Vec<String>, Vec<String>) = {
        let log = log.lock().unwrap();
        let ids = log.requests_of(number);
        let finished = ids
            .iter()
            .filter(|id| log.finished.contains_key(*id))
            .cloned()
            .collect();
        let posted = log
            .sent
            .iter()
            .filter(|(p, s)| *p == number && s.request.has_post_data == Some(true))
            .map(|(_, s)| s.request_id.inner().clone())
            .collect();
        (finished, posted)
    };
    for id in finished {
        // Chromium keeps no body for some responses (a redirect, an empty 204): DevTools then
        // writes the content without `text`.
        if let Ok(body) = page.execute(GetResponseBodyParams::new(id.clone())).await {
            let body = (body.result.body.clone(), body.result.base64_encoded);
            log.lock().unwrap().bodies.insert(id, body);
        }
    }
    for id in posted {
        if let Ok(data) = page
            .execute(GetRequestPostDataParams::new(id.clone()))
            .await
        {
            let data = data.result.post_data.clone();
            log.lock().unwrap().post_data.insert(id, data);
        }
    }
}

/// The HAR DevTools writes for `log`: `pages` (URL and load time each), then one entry per
/// request and redirect hop, in the order they started.
fn devtools_har(log: &NetworkLog, pages: &[(String, f64)]) -> Value {
    let mut hops: BTreeMap<&str, Vec<&(usize, Arc<EventRequestWillBeSent>)>> = BTreeMap::new();
    for sent in &log.sent {
        hops.entry(sent.1.request_id.inner())
            .or_default()
            .push(sent);
    }
    let mut entries: Vec<(f64, Value)> = Vec::new();
    for (id, hops) in &hops {
        let extra = log.extra.get(*id);
        for (n, (page, sent)) in hops.iter().enumerate() {
            if !sent.request.url.starts_with("http") {
                continue;
            }
            let extra = extra.and_then(|e| e.get(n));
            let entry = match hops.get(n + 1) {
                // The next hop's event carries this hop's response.
                Some((_, next)) => entry(
                    *page,
                    sent,
                    extra,
                    next.redirect_response.as_ref(),
                    *next.timestamp.inner(),
                    None,
                    None,
                    None,
                ),
                None => {
                    let (end, error) = match (log.finished.get(*id), log.failed.get(*id)) {
                        (Some(f), _) => (*f.timestamp.inner(), None),
                        (None, Some(f)) => (*f.timestamp.inner(), Some(f.error_text.as_str())),
                        (None, None) => continue,
                    };
                    entry(
                        *page,
                        sent,
                        extra,
                        log.received.get(*id).map(|r| &r.response),
                        end,
                        log.bodies.get(*id),
                        log.post_data.get(*id),
                        error,
                    )
                }
            };
            entries.push((*sent.timestamp.inner(), entry));
        }
    }
    entries.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first_start = |page: usize| {
        log.sent
            .iter()
            .find(|(p, _)| *p == page)
            .map_or(0.0, |(_, s)| *s.wall_time.inner())
    };
    let pages: Vec<Value> = pages
        .iter()
        .enumerate()
        .map(|(i, (title, on_load))| {
            json!({
                "startedDateTime": iso_8601(first_start(i + 1)),
                "id": format!("page_{}", i + 1),
                "title": title,
                "pageTimings": { "onContentLoad": -1, "onLoad": on_load }
            })
        })
        .collect();
    with_js_numbers(json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "WebInspector", "version": "537.36" },
            "pages": pages,
            "entries": entries.into_iter().map(|(_, e)| e).collect::<Vec<_>>()
        }
    }))
}

/// One entry: the request of `sent` and `response` (none when it failed before one came),
/// ending at monotonic time `end`.
#[allow(clippy::too_many_arguments)]
fn entry(
    page: usize,
    sent: &EventRequestWillBeSent,
    extra: Option<&Arc<EventRequestWillBeSentExtraInfo>>,
    response: Option<&Response>,
    end: f64,
    body: Option<&(String, bool)>,
    post_data: Option<&String>,
    error: Option<&str>,
) -> Value {
    let request = &sent.request;
    let url = url::Url::parse(&request.url).unwrap();
    // DevTools shows the headers that went on the wire (cookies included) when it has them.
    let request_headers = header_list(extra.map_or(&request.headers, |e| &e.headers));
    let cookies: Vec<Value> = extra
        .map(|e| e.associated_cookies.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|c| c.blocked_reasons.is_empty())
        .map(cookie)
        .collect();
    let mut har_request = json!({
        "method": request.method,
        "url": request.url,
        "httpVersion": http_version(response),
        "headers": request_headers,
        "queryString": url.query_pairs()
            .map(|(name, value)| json!({ "name": name, "value": value }))
            .collect::<Vec<_>>(),
        "cookies": cookies,
        "headersSize": -1,
        "bodySize": post_data.map_or(0, String::len),
    });
    if let Some(text) = post_data {
        let mime = header(&request.headers, "content-type").unwrap_or_default();
        har_request["postData"] = json!({ "mimeType": mime, "text": text });
    }
    let (timings, time) = timings(
        *sent.timestamp.inner(),
        response.and_then(|r| r.timing.as_ref()),
        end,
    );
    let har_response = match response {
        Some(r) => {
            let mut content = json!({
                "size": 0,
                "mimeType": if r.mime_type.is_empty() { "x-unknown" } else { &r.mime_type },
            });
            if let Some((text, base64)) = body {
                content["size"] = json!(if *base64 {
                    base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .map_or(0, |b| b.len())
                } else {
                    text.len()
                });
                content["text"] = json!(text);
                if *base64 {
                    content["encoding"] = json!("base64");
                }
            }
            json!({
                "status": r.status,
                "statusText": r.status_text,
                "httpVersion": http_version(Some(r)),
                "headers": header_list(&r.headers),
                "cookies": [],
                "content": content,
                "redirectURL": header(&r.headers, "location").unwrap_or_default(),
                "headersSize": -1,
                "bodySize": -1,
                "_transferSize": r.encoded_data_length,
                "_error": error,
            })
        }
        None => json!({
            "status": 0,
            "statusText": "",
            "httpVersion": "",
            "headers": [],
            "cookies": [],
            "content": { "size": 0, "mimeType": "x-unknown" },
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": 0,
            "_transferSize": 0,
            "_error": error,
        }),
    };
    let resource_type = serde_json::to_value(&sent.r#type)
        .ok()
        .and_then(|t| t.as_str().map(str::to_ascii_lowercase))
        .unwrap_or_else(|| "other".to_owned());
    let connection = response.map(|r| number(r.connection_id).to_string());
    json!({
        "_connectionId": connection.clone().unwrap_or_default(),
        "_initiator": serde_json::to_value(&sent.initiator).unwrap(),
        "_priority": serde_json::to_value(&request.initial_priority).unwrap(),
        "_resourceType": resource_type,
        "cache": {},
        "connection": connection,
        "pageref": format!("page_{page}"),
        "request": har_request,
        "response": har_response,
        "serverIPAddress": response
            .and_then(|r| r.remote_ip_address.as_deref())
            .unwrap_or_default()
            .trim_matches(['[', ']']),
        "startedDateTime": iso_8601(*sent.wall_time.inner()),
        "time": time,
        "timings": timings,
    })
}

/// DevTools' timings from Chromium's `ResourceTiming` (milliseconds after `requestTime`),
/// and their sum; without one (blocked, failed early), all the time is `blocked`.
fn timings(started: f64, timing: Option<&ResourceTiming>, end: f64) -> (Value, f64) {
    let Some(t) = timing else {
        let blocked = (end - started) * 1000.0;
        let timings = json!({
            "blocked": blocked, "dns": -1, "ssl": -1, "connect": -1, "send": 0, "wait": 0,
            "receive": 0, "_blocked_queueing": blocked,
        });
        return (timings, blocked);
    };
    let phase = |from: f64, to: f64| if to >= 0.0 { to - from } else { -1.0 };
    let queued = ((t.request_time - started) * 1000.0).max(0.0);
    let blocked_start = [t.dns_start, t.connect_start, t.send_start]
        .into_iter()
        .filter(|v| *v >= 0.0)
        .fold(f64::INFINITY, f64::min);
    let blocked = queued
        + if blocked_start.is_finite() {
            blocked_start
        } else {
            0.0
        };
    let dns = phase(t.dns_start, t.dns_end);
    let connect = phase(t.connect_start, t.connect_end);
    let ssl = if t.ssl_end > 0.0 {
        t.ssl_end - t.ssl_start
    } else {
        -1.0
    };
    let send = (t.send_end - t.send_start).max(0.0);
    let wait = t.receive_headers_end - t.send_end;
    let receive = ((end - t.request_time) * 1000.0 - t.receive_headers_end).max(0.0);
    let time = blocked + dns.max(0.0) + connect.max(0.0) + send + wait + receive;
    let timings = json!({
        "blocked": blocked, "dns": dns, "ssl": ssl, "connect": connect, "send": send,
        "wait": wait, "receive": receive, "_blocked_queueing": queued,
    });
    (timings, time)
}

/// CDP's header object as HAR's list; Chromium joins repeated headers with newlines.
fn header_list(headers: &Headers) -> Vec<Value> {
    let Some(map) = headers.inner().as_object() else {
        return Vec::new();
    };
    let mut list = Vec::new();
    for (name, value) in map {
        for value in value.as_str().unwrap_or_default().split('\n') {
            list.push(json!({ "name": name, "value": value }));
        }
    }
    list
}

fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .inner()
        .as_object()?
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

/// `http/1.1` as DevTools writes it; nothing for a request that got no response.
fn http_version(response: Option<&Response>) -> String {
    match response.and_then(|r| r.protocol.as_deref()) {
        Some("http/1.1") => "HTTP/1.1".to_owned(),
        Some("h2") => "http/2.0".to_owned(),
        Some(other) => other.to_owned(),
        None => String::new(),
    }
}

fn cookie(associated: &AssociatedCookie) -> Value {
    let c = &associated.cookie;
    json!({
        "name": c.name,
        "value": c.value,
        "path": c.path,
        "domain": c.domain,
        "expires": if c.session { Value::Null } else { json!(iso_8601(c.expires)) },
        "httpOnly": c.http_only,
        "secure": c.secure,
    })
}

/// `value` with its numbers as JavaScript writes them (CDP's numbers are all `f64` here).
fn with_js_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map_or(Value::Number(n), number),
        Value::Array(items) => Value::Array(items.into_iter().map(with_js_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, with_js_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A number as JavaScript writes it: integers without a fraction.
fn number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        json!(value as i64)
    } else {
        json!(value)
    }
}

/// Seconds since the epoch as `Date.prototype.toJSON` writes them:
/// `2026-11-30T13:32:22.123Z`.
fn iso_8601(seconds: f64) -> String {
    scrape::replay::iso_8601(std::time::UNIX_EPOCH + Duration::from_secs_f64(seconds.max(0.0)))
}
