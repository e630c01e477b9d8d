//! `kind = "json_cursor"`: the tool pages a JSON API itself, checkpoints the cursor and the last
//! id with every page, falls back to the id when a saved cursor has expired, and fetches only
//! what is new on a later run.
//!
//! The fixture API lists photos newest first (descending ids), three per page, behind a bearer
//! token. Its cursors are opaque and signed, and expire after `TTL` ticks of a clock the test
//! moves (no sleeps); `before_id` resumes after an id. The same data is served as REST (GET,
//! `next_cursor`) and GraphQL-style (POST, `pageInfo`, errors in a 200 body). A request can be
//! held open so a run can be killed at a chosen page, and a chosen page can be answered with
//! broken JSON or a body of another shape.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::{get, post};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{
    BROWSER_PATIENCE, Background, PATIENCE, ServerRuntime, chromium_available, files_containing,
    json_lines, manifest_hashes, run, scrape, status_json, text,
};

/// Items per API page.
const PAGE: usize = 3;
/// Clock ticks a cursor stays valid.
const TTL: u64 = 10;
pub(crate) const TOKEN: &str = "Bearer s3cret-t0ken-never-stored";
pub(crate) const TOKEN_VAR: &str = "SCRAPE_CURSOR_TEST_TOKEN";
/// The password the login endpoint wants, from the environment.
const PASSWORD: &str = "pa55word-never-stored";
const PASSWORD_VAR: &str = "SCRAPE_CURSOR_TEST_PASSWORD";
/// Every token the login endpoint issues starts with this.
const ISSUED: &str = "issued-token-";
/// Ticks of the token clock an issued token stays valid.
const TOKEN_TTL: u64 = 10;
/// Nothing of these may be logged or stored.
const SECRETS: [&str; 3] = [TOKEN, PASSWORD, ISSUED];

/// How a chosen page is answered instead of the real one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Broken {
    NotJson,
    OtherShape,
}

#[derive(Default)]
struct Data {
    /// Item ids, newest (highest) first.
    ids: Vec<u64>,
    /// API requests in order: `first`, `cursor:ID`, `before:ID`, `expired:ID`.
    log: Vec<String>,
    /// Image requests by file name.
    images: BTreeMap<String, u64>,
    /// Image requests that carried the token.
    images_with_token: u64,
    /// Names of the cookies API requests carried.
    api_cookies: BTreeSet<String>,
    /// Names of the cookies image requests carried.
    image_cookies: BTreeSet<String>,
    /// Names of the cookies requests for the members' page carried.
    page_cookies: BTreeSet<String>,
    /// The log keys of the API requests the browser made (its `User-Agent` says Chrome).
    browser_log: Vec<String>,
    /// Tokens issued by the login endpoint, with the token clock's time then.
    issued: Vec<(String, u64)>,
    /// Requests to the login endpoint.
    logins: u64,
    /// How the login endpoint answers instead of issuing a token.
    login_refused: Option<StatusCode>,
    /// A request (by log key) answered only once released.
    hold: Option<String>,
    broken: Option<(String, Broken)>,
}

#[derive(Default)]
struct Api {
    data: Mutex<Data>,
    clock: AtomicU64,
    /// The clock issued tokens expire by, moved apart from the cursors'.
    token_clock: AtomicU64,
}

fn lock(api: &Api) -> MutexGuard<'_, Data> {
    api.data.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fixture API on `127.0.0.1:0`, on its own runtime so tests stay synchronous.
pub(crate) struct Server {
    /// Runs the server; shut down with it.
    _runtime: ServerRuntime,
    api: Arc<Api>,
    pub(crate) origin: String,
}

impl Server {
    /// Serves items `1..=count`.
    pub(crate) fn start(count: u64) -> Self {
        let api = Arc::new(Api::default());
        lock(&api).ids = (1..=count).rev().collect();
        let app = Router::new()
            .route("/api/photos", get(rest))
            .route("/graphql", post(graphql))
            .route("/auth/token", post(login))
            .route("/", get(members))
            .route("/feed", get(feed))
            .route("/img/{name}", get(image))
            .with_state(Arc::clone(&api));
        let (runtime, origin) = ServerRuntime::serve(2, app);
        Self {
            _runtime: runtime,
            api,
            origin,
        }
    }

    pub(crate) fn log(&self) -> Vec<String> {
        lock(&self.api).log.clone()
    }

    pub(crate) fn image_hits(&self) -> BTreeMap<String, u64> {
        lock(&self.api).images.clone()
    }

    fn browser_log(&self) -> Vec<String> {
        lock(&self.api).browser_log.clone()
    }

    fn page_cookies(&self) -> BTreeSet<String> {
        lock(&self.api).page_cookies.clone()
    }

    fn cookies_sent(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let data = lock(&self.api);
        (data.api_cookies.clone(), data.image_cookies.clone())
    }

    fn images_with_token(&self) -> u64 {
        lock(&self.api).images_with_token
    }

    pub(crate) fn hold(&self, key: &str) {
        lock(&self.api).hold = Some(key.to_owned());
    }

    pub(crate) fn release(&self) {
        lock(&self.api).hold = None;
    }

    fn break_page(&self, key: &str, how: Option<Broken>) {
        lock(&self.api).broken = how.map(|h| (key.to_owned(), h));
    }

    /// Adds items with the next ids at the head, as a site does when photos are posted.
    fn add_newest(&self, count: u64) {
        let mut data = lock(&self.api);
        let top = data.ids.first().copied().unwrap_or(0);
        for id in top + 1..=top + count {
            data.ids.insert(0, id);
        }
    }

    /// Moves the token clock past every token issued so far.
    fn expire_tokens(&self) {
        self.api.token_clock.fetch_add(TOKEN_TTL, Ordering::SeqCst);
    }

    fn logins(&self) -> u64 {
        lock(&self.api).logins
    }

    /// Makes the login endpoint answer `status` (`None`: issue tokens again).
    fn refuse_logins(&self, status: Option<StatusCode>) {
        lock(&self.api).login_refused = status;
    }

    /// Moves the clock past every cursor issued so far.
    fn expire_cursors(&self) {
        self.api.clock.fetch_add(TTL, Ordering::SeqCst);
    }
}

fn image_name(id: u64) -> String {
    format!("cur-{id}-64x48.jpg")
}

fn signature(text: &str) -> String {
    hex::encode(&Sha256::digest(format!("fixture-secret:{text}"))[..8])
}

/// An opaque cursor: the last id served and when, signed.
fn cursor_for(last_id: u64, issued: u64) -> String {
    let text = format!("{last_id}.{issued}");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{text}.{}", signature(&text)))
}

/// Why a cursor is refused, or the id it continues after.
fn open_cursor(cursor: &str, now: u64) -> Result<u64, &'static str> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| "invalid")?;
    let text = String::from_utf8(bytes).map_err(|_| "invalid")?;
    let (signed, sig) = text.rsplit_once('.').ok_or("invalid")?;
    if signature(signed) != sig {
        return Err("invalid");
    }
    let (id, issued) = signed.split_once('.').ok_or("invalid")?;
    let (id, issued): (u64, u64) = (
        id.parse().map_err(|_| "invalid")?,
        issued.parse().map_err(|_| "invalid")?,
    );
    if now >= issued + TTL {
        return Err("expired");
    }
    Ok(id)
}

/// Where a request asks to continue.
enum Ask {
    First,
    Cursor(String),
    Before(u64),
}

/// What the API answers for one request, in a shape-neutral form.
enum Answer {
    Items {
        items: Vec<u64>,
        next: Option<String>,
    },
    Expired,
    Invalid,
    Unauthorized,
    Broken(Broken),
}

/// The names of the cookies a request carried.
fn cookie_names(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.split('=').next())
        .map(|name| name.trim().to_owned())
        .collect()
}

/// The page for `ask`, logged; waits while the request is held.
async fn answer(api: &Api, headers: &HeaderMap, ask: Ask) -> Answer {
    lock(api).api_cookies.extend(cookie_names(headers));
    if !authorized(api, headers) {
        lock(api).log.push("unauthorized".into());
        return Answer::Unauthorized;
    }
    let now = api.clock.load(Ordering::SeqCst);
    let after = match &ask {
        Ask::First => Ok(None),
        Ask::Before(id) => Ok(Some(*id)),
        Ask::Cursor(c) => open_cursor(c, now).map(Some),
    };
    let key = match (&ask, &after) {
        (Ask::First, _) => "first".to_owned(),
        (Ask::Before(id), _) => format!("before:{id}"),
        (Ask::Cursor(_), Ok(Some(id))) => format!("cursor:{id}"),
        (Ask::Cursor(c), Err("expired")) => {
            let id = String::from_utf8(
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(c)
                    .unwrap_or_default(),
            )
            .unwrap_or_default();
            format!("expired:{}", id.split('.').next().unwrap_or_default())
        }
        _ => "invalid".to_owned(),
    };
    lock(api).log.push(key.clone());
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if user_agent.contains("Chrome") {
        lock(api).browser_log.push(key.clone());
    }
    while lock(api).hold.as_deref() == Some(key.as_str()) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if let Some((broken, how)) = lock(api).broken.clone()
        && broken == key
    {
        return Answer::Broken(how);
    }
    let after = match after {
        Ok(after) => after,
        Err("expired") => return Answer::Expired,
        Err(_) => return Answer::Invalid,
    };
    let ids = lock(api).ids.clone();
    let rest: Vec<u64> = ids
        .into_iter()
        .filter(|id| after.is_none_or(|a| *id < a))
        .collect();
    let items: Vec<u64> = rest.iter().take(PAGE).copied().collect();
    let next = (rest.len() > PAGE).then(|| cursor_for(items[PAGE - 1], now));
    Answer::Items { items, next }
}

/// `GET /feed`: a page whose script lists the photos through the API, three more each time
/// the reader scrolls to the bottom.
async fn feed() -> Response {
    let page = r#"<!doctype html><html><body><div id="feed"></div><script>
let cursor = null, loading = false, done = false;
async function more() {
  if (loading || done) return;
  loading = true;
  const url = '/api/photos?limit=3' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
  const reply = await fetch(url, { headers: { Authorization: 'TOKEN' } });
  const page = await reply.json();
  for (const item of page.data.items) {
    const img = document.createElement('img');
    img.src = item.image;
    img.style = 'display:block;width:300px;height:600px';
    document.getElementById('feed').appendChild(img);
  }
  cursor = page.next_cursor;
  done = !cursor;
  loading = false;
}
addEventListener('scroll', () => {
  if (innerHeight + scrollY >= document.body.scrollHeight - 50) more();
});
more();
</script></body></html>"#;
    Response::builder()
        .header(header::CONTENT_TYPE, "text/html")
        .body(Body::from(page.replace("TOKEN", TOKEN)))
        .expect("response")
}

/// `GET /`: a members' page, whose photos only show with the `member` cookie.
async fn members(State(api): State<Arc<Api>>, headers: HeaderMap) -> Response {
    let names = cookie_names(&headers);
    let member = names.iter().any(|n| n == "member");
    lock(&api).page_cookies.extend(names);
    let photos: String = if member {
        (1..=3)
            .map(|id| format!("<img src=\"/img/{}\">", image_name(id)))
            .collect()
    } else {
        "<p>members only</p>".into()
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/html")
        .body(Body::from(format!(
            "<!doctype html><html><body>{photos}</body></html>"
        )))
        .expect("response")
}

/// The fixed token, or an issued one that has not expired.
fn authorized(api: &Api, headers: &HeaderMap) -> bool {
    let Some(sent) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    if sent == TOKEN {
        return true;
    }
    let now = api.token_clock.load(Ordering::SeqCst);
    lock(api)
        .issued
        .iter()
        .any(|(token, at)| sent == format!("Bearer {token}") && now < at + TOKEN_TTL)
}

/// `POST /auth/token` with `{"user": "archive", "password": ...}`: a new token.
async fn login(State(api): State<Arc<Api>>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut data = lock(&api);
    data.logins += 1;
    if let Some(status) = data.login_refused {
        return reply(status, json!({ "error": "try later" }).to_string());
    }
    if request != json!({ "user": "archive", "password": PASSWORD }) {
        return reply(
            StatusCode::UNAUTHORIZED,
            json!({ "error": "who?" }).to_string(),
        );
    }
    let token = format!(
        "{ISSUED}{}-{}",
        data.logins,
        signature(&data.logins.to_string())
    );
    data.issued
        .push((token.clone(), api.token_clock.load(Ordering::SeqCst)));
    reply(
        StatusCode::OK,
        json!({ "access_token": token, "token_type": "bearer" }).to_string(),
    )
}

fn item_json(id: u64) -> Value {
    json!({ "id": id, "title": format!("photo {id}"), "image": format!("/img/{}", image_name(id)) })
}

fn reply(status: StatusCode, body: String) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("response")
}

fn broken_body(how: Broken) -> String {
    match how {
        Broken::NotJson => "{\"data\": {\"items\": [".to_owned(),
        Broken::OtherShape => json!({ "results": [item_json(1)], "next_cursor": null }).to_string(),
    }
}

/// `GET /api/photos?cursor=...&before_id=...`
async fn rest(State(api): State<Arc<Api>>, uri: Uri, headers: HeaderMap) -> Response {
    let query: BTreeMap<String, String> =
        url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let ask = match (query.get("cursor"), query.get("before_id")) {
        (Some(c), _) => Ask::Cursor(c.clone()),
        (None, Some(id)) => Ask::Before(id.parse().unwrap_or(0)),
        (None, None) => Ask::First,
    };
    match answer(&api, &headers, ask).await {
        Answer::Items { items, next } => reply(
            StatusCode::OK,
            json!({ "data": { "items": items.into_iter().map(item_json).collect::<Vec<_>>() }, "next_cursor": next })
                .to_string(),
        ),
        Answer::Expired => reply(StatusCode::GONE, json!({ "error": "cursor_expired" }).to_string()),
        Answer::Invalid => reply(StatusCode::BAD_REQUEST, json!({ "error": "bad_cursor" }).to_string()),
        Answer::Unauthorized => reply(StatusCode::UNAUTHORIZED, "{}".into()),
        Answer::Broken(how) => reply(StatusCode::OK, broken_body(how)),
    }
}

/// `POST /graphql` with `{"query": ..., "variables": {"after": cursor, "before": id}}`.
async fn graphql(State(api): State<Arc<Api>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let variables = &request["variables"];
    let ask = match (variables["after"].as_str(), variables["before"].as_str()) {
        (Some(c), _) => Ask::Cursor(c.to_owned()),
        (None, Some(id)) => Ask::Before(id.parse().unwrap_or(0)),
        (None, None) => Ask::First,
    };
    let error = |code: &str| {
        reply(
            StatusCode::OK,
            json!({ "errors": [{ "message": code, "extensions": { "code": code } }], "data": null })
                .to_string(),
        )
    };
    match answer(&api, &headers, ask).await {
        Answer::Items { items, next } => reply(
            StatusCode::OK,
            json!({ "data": { "photos": {
                "edges": items.into_iter().map(|id| json!({ "node": item_json(id) })).collect::<Vec<_>>(),
                "pageInfo": { "hasNextPage": next.is_some(), "endCursor": next },
            } } })
            .to_string(),
        ),
        Answer::Expired => error("CURSOR_EXPIRED"),
        Answer::Invalid => error("BAD_CURSOR"),
        Answer::Unauthorized => reply(StatusCode::UNAUTHORIZED, "{}".into()),
        Answer::Broken(how) => reply(StatusCode::OK, broken_body(how)),
    }
}

async fn image(
    State(api): State<Arc<Api>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    {
        let mut data = lock(&api);
        *data.images.entry(name.clone()).or_default() += 1;
        if headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            == Some(TOKEN)
        {
            data.images_with_token += 1;
        }
        data.image_cookies.extend(cookie_names(&headers));
    }
    let bytes = tokio::task::spawn_blocking(move || scrape::demo::image_for(&name))
        .await
        .ok()
        .flatten();
    match bytes {
        Some((_, bytes)) => Response::builder()
            .header(header::CONTENT_TYPE, "image/jpeg")
            .body(Body::from(bytes))
            .expect("response"),
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::empty())
            .expect("response"),
    }
}

// ---------------------------------------------------------------------------------------------
// Profiles and runs

pub(crate) const REST: &str = r#"
[pagination]
kind = "json_cursor"
request = "/api/photos?limit=3"
headers = { Authorization = "env:SCRAPE_CURSOR_TEST_TOKEN" }
cursor = "$.next_cursor"
after_id = "before_id"
order = "descending"
stop_after_known = 2

[[api]]
name = "photos"
url = "/api/photos"
items = "$.data.items[*]"
image = "$.image"
id = "$.id"
metadata = { title = "$.title" }
"#;

const GRAPHQL: &str = r#"
[pagination]
kind = "json_cursor"
request = "/graphql"
method = "POST"
body = '{"query": "query($after: String, $before: String) { photos(after: $after, before: $before) { edges { node { id image } } pageInfo { endCursor hasNextPage } } }", "variables": {"after": "{cursor}", "before": "{after_id}"}}'
headers = { Authorization = "env:SCRAPE_CURSOR_TEST_TOKEN" }
cursor = "$.data.photos.pageInfo.endCursor"
has_more = "$.data.photos.pageInfo.hasNextPage"
after_id = "before"
order = "descending"
expired_match = "$.errors[?@.extensions.code == 'CURSOR_EXPIRED']"

[[api]]
name = "graph"
url = "/graphql"
items = "$.data.photos.edges[*].node"
image = "$.image"
id = "$.id"
"#;

/// `REST` with a token from the login endpoint instead of a fixed header.
fn rest_with_login() -> String {
    let rest = REST.replace(
        "headers = { Authorization = \"env:SCRAPE_CURSOR_TEST_TOKEN\" }\n",
        "",
    );
    assert_ne!(rest, REST);
    format!(
        r#"{rest}
[session.token]
url = "/auth/token"
body = '{{"user": "archive", "password": "env:{PASSWORD_VAR}"}}'
token = "$.access_token"
refresh_after = "1h"
"#
    )
}

/// A server, a profile for it and an output folder.
type Setup = crate::support::Setup<Server>;

impl Setup {
    /// A server of `items` items and a profile for it, whose runs get the token and the password
    /// from the environment.
    fn new(items: u64, pagination: &str) -> Self {
        Self::with(
            |_| Server::start(items),
            |dir, server| {
                let profile = dir.join("api.toml");
                let text = format!(
                    "name = \"api\"\nstart = [\"{}/\"]\n{pagination}",
                    server.origin
                );
                std::fs::write(&profile, text).expect("profile written");
                profile
            },
        )
        .args(["--concurrency", "2"])
        .env(TOKEN_VAR, TOKEN)
        .env(PASSWORD_VAR, PASSWORD)
    }

    /// Starts a run whose third page's request (`cursor:5`) is held until
    /// [`Server::release`]; the run, once that request has come.
    fn start_held_at_the_third_page(&self) -> Background {
        self.site.hold("cursor:5");
        let mut run = self.spawn("first");
        run.wait_for("the third page's request", PATIENCE, || {
            self.site.log().len() >= 3
        });
        run
    }

    /// Manifest as image file name → sha256.
    fn stored(&self) -> BTreeMap<String, String> {
        manifest_hashes(&self.out)
            .into_iter()
            .map(|(url, sha)| (url.rsplit('/').next().unwrap_or_default().to_owned(), sha))
            .collect()
    }

    /// Proof that the token is in no file of the output folder.
    fn assert_secret_not_stored(&self) {
        for secret in SECRETS {
            let found = files_containing(&self.out, secret);
            assert!(found.is_empty(), "a secret is stored in {found:?}");
        }
    }
}

/// Image file name → sha256 of the bytes the server sends, for ids `ids`.
pub(crate) fn expected(ids: impl IntoIterator<Item = u64>) -> BTreeMap<String, String> {
    ids.into_iter()
        .map(|id| {
            let name = image_name(id);
            let (_, bytes) = scrape::demo::image_for(&name).expect("image name");
            (name, hex::encode(Sha256::digest(&bytes)))
        })
        .collect()
}

pub(crate) fn count(log: &[String], key: &str) -> usize {
    log.iter().filter(|k| *k == key).count()
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(output.status.code(), Some(code), "{}", text(output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for secret in SECRETS {
        assert!(!stderr.contains(secret), "a secret is logged:\n{stderr}");
    }
}

/// The checkpoint of the only chain, from `scrape status --json`.
fn checkpoint(out: &Path) -> Value {
    status_json(out)["chains"][0]["checkpoint"].clone()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn a_clean_run_pages_by_cursor_and_stores_exactly_the_items_images() {
    let setup = Setup::new(10, REST);
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(setup.stored(), expected(1..=10));
    assert_eq!(
        setup.site.log(),
        ["first", "cursor:8", "cursor:5", "cursor:2"],
        "one request per page, each page once"
    );
    assert!(setup.site.image_hits().values().all(|n| *n == 1));
    let c = checkpoint(&setup.out);
    assert_eq!(c["end"], "NoCursor", "{c}");
    assert_eq!(
        (c["items_found"].as_u64(), c["last_id"].as_str()),
        (Some(10), Some("1")),
        "{c}"
    );
    let human = run(scrape().args(["status", "--out"]).arg(&setup.out));
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("10 items, last id `1`; ended (no next cursor)"),
        "{human}"
    );
    setup.assert_secret_not_stored();
}

#[test]
fn a_killed_run_resumes_with_the_saved_cursor_without_refetching_pages() {
    let setup = Setup::new(10, REST);
    let first = setup.start_held_at_the_third_page();
    first.kill();
    let saved = checkpoint(&setup.out);
    assert_eq!(saved["next"]["number"], 3, "{saved}");
    assert!(saved["next"]["cursor"].is_string(), "{saved}");
    setup.site.release();
    let output = setup.run();
    assert_exit(&output, 0);
    let log = setup.site.log();
    assert_eq!(
        log,
        ["first", "cursor:8", "cursor:5", "cursor:5", "cursor:2"]
    );
    assert_eq!(setup.stored(), expected(1..=10));
    assert!(
        setup.site.image_hits().values().all(|n| *n <= 2),
        "{:?}",
        setup.site.image_hits()
    );
    setup.assert_secret_not_stored();
}

#[test]
fn an_expired_cursor_resumes_after_the_last_id_with_nothing_lost_or_repeated() {
    let setup = Setup::new(10, REST);
    let first = setup.start_held_at_the_third_page();
    first.kill();
    setup.site.release();
    // A long pause: the saved cursor expires, and new photos push every page down.
    setup.site.expire_cursors();
    setup.site.add_newest(2);
    let output = setup.run();
    assert_exit(&output, 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the saved cursor has expired; resuming after the last id `5`"),
        "the fallback is reported:\n{stderr}"
    );
    let log = setup.site.log();
    assert_eq!(
        log[3..],
        ["expired:5", "before:5", "cursor:2"],
        "the second run: {log:?}"
    );
    // Exactly the photos of a clean run of the same listing: none skipped, none twice.
    assert_eq!(setup.stored(), expected(1..=10));
    let output = run(setup.command().arg("--fresh"));
    assert_exit(&output, 0);
    assert_eq!(
        setup.stored(),
        expected(1..=12),
        "a fresh run sees the new ones"
    );
}

#[test]
fn a_later_run_fetches_exactly_the_new_items() {
    let setup = Setup::new(10, REST);
    assert_exit(&setup.run(), 0);
    let before = setup.site.image_hits();
    setup.site.add_newest(4);
    let output = setup.run();
    assert_exit(&output, 0);
    let log = setup.site.log();
    assert_eq!(
        log[4..],
        ["first", "cursor:12"],
        "stops after two known items in a row: {log:?}"
    );
    let mut new = setup.site.image_hits();
    new.retain(|name, n| before.get(name) != Some(n));
    assert_eq!(
        new.keys().cloned().collect::<BTreeSet<_>>(),
        expected(11..=14).into_keys().collect(),
        "only the new photos are downloaded"
    );
    assert_eq!(setup.stored(), expected(1..=14));
    assert_eq!(checkpoint(&setup.out)["end"], "KnownItems");
}

#[test]
fn refresh_walks_a_finished_api_for_new_items_without_a_profile_key() {
    let profile = REST.replace("stop_after_known = 2\n", "");
    let setup = Setup::new(10, &profile);
    assert_exit(&setup.run(), 0);
    setup.site.add_newest(4);
    // Without it, a finished chain is done: nothing is asked for.
    assert_exit(&setup.run(), 0);
    assert_eq!(setup.site.log().len(), 4, "{:?}", setup.site.log());

    let mut refresh = setup.command();
    let output = run(refresh.args(["--refresh", "2"]));
    assert_exit(&output, 0);
    let log = setup.site.log();
    assert_eq!(log[4..], ["first", "cursor:12"], "{log:?}");
    assert_eq!(setup.stored(), expected(1..=14));
    assert_eq!(checkpoint(&setup.out)["end"], "KnownItems");
}

#[test]
fn broken_json_and_another_shape_fail_the_page_naming_the_jsonpath_and_lose_nothing() {
    let setup = Setup::new(10, REST);
    setup.site.break_page("cursor:5", Some(Broken::NotJson));
    let output = setup.run();
    assert_exit(&output, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not JSON"), "{stderr}");
    assert_eq!(
        setup.stored(),
        expected(5..=10),
        "the pages before are kept"
    );
    let failures = std::fs::read_to_string(setup.out.join("failures.jsonl")).expect("failures");
    assert!(
        failures.contains("\"kind\":\"page\"") && failures.contains("not JSON"),
        "{failures}"
    );

    setup.site.break_page("cursor:5", Some(Broken::OtherShape));
    let output = setup.run();
    assert_exit(&output, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("selects nothing") && stderr.contains("items"),
        "names the path that failed:\n{stderr}"
    );
    assert!(
        stderr.contains("`$.data.items` selects nothing in the response"),
        "{stderr}"
    );

    setup.site.break_page("cursor:5", None);
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(setup.stored(), expected(1..=10));
    let log = setup.site.log();
    assert_eq!(count(&log, "first") + count(&log, "cursor:8"), 2, "{log:?}");
}

#[test]
fn post_bodies_page_a_graphql_api_and_an_expired_cursor_falls_back_to_the_id() {
    let setup = Setup::new(10, GRAPHQL);
    let first = setup.start_held_at_the_third_page();
    first.kill();
    setup.site.release();
    setup.site.expire_cursors();
    let output = setup.run();
    assert_exit(&output, 0);
    let log = setup.site.log();
    assert_eq!(
        log,
        [
            "first",
            "cursor:8",
            "cursor:5",
            "expired:5",
            "before:5",
            "cursor:2"
        ]
    );
    assert_eq!(setup.stored(), expected(1..=10));
    assert_eq!(checkpoint(&setup.out)["end"], "NoMorePages");
    setup.assert_secret_not_stored();
}

#[test]
fn a_missing_environment_variable_stops_the_run_at_start_with_exit_2() {
    let setup = Setup::new(4, REST);
    let output = run(setup.command().env_remove(TOKEN_VAR));
    assert_exit(&output, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("environment variable `SCRAPE_CURSOR_TEST_TOKEN` (used by `[pagination] headers.Authorization`) is not set"),
        "{stderr}"
    );
    assert!(setup.site.log().is_empty(), "nothing is requested");
    assert!(
        !setup.out.join("failures.jsonl").exists(),
        "not a failed page"
    );
}

#[test]
fn download_headers_from_the_environment_reach_the_api_and_the_images() {
    let in_download = format!(
        "{}\n[download]\nheaders = {{ Authorization = \"env:{TOKEN_VAR}\" }}\n",
        REST.replace(
            "headers = { Authorization = \"env:SCRAPE_CURSOR_TEST_TOKEN\" }\n",
            ""
        )
    );
    assert!(
        !in_download
            .contains("\nheaders = { Authorization = \"env:SCRAPE_CURSOR_TEST_TOKEN\" }\ncursor")
    );
    let setup = Setup::new(7, &in_download);
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(setup.stored(), expected(1..=7));
    assert_eq!(setup.site.images_with_token(), 7);
    setup.assert_secret_not_stored();

    let output = run(setup.command().arg("--fresh").env_remove(TOKEN_VAR));
    assert_exit(&output, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("environment variable `SCRAPE_CURSOR_TEST_TOKEN` (used by `[download] headers.Authorization`) is not set"),
        "{stderr}"
    );
}

#[test]
fn cookies_from_a_cookies_file_go_where_their_domain_path_and_scheme_match() {
    let setup = Setup::new(
        4,
        &format!("{REST}\n[session]\ncookies = \"cookies.txt\"\n"),
    );
    // Relative to the profile's folder, not to where scrape runs. (Secure cookies are not
    // told apart here: loopback counts as a secure origin; the unit tests cover them.)
    std::fs::write(
        setup.dir.path().join("cookies.txt"),
        "# Netscape HTTP Cookie File\n\
         127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc123\n\
         #HttpOnly_127.0.0.1\tFALSE\t/api\tFALSE\t4102444800\tapi_only\tyes\n\
         127.0.0.1\tFALSE\t/img\tFALSE\t4102444800\timg_only\tyes\n\
         .other.test\tTRUE\t/\tFALSE\t0\telsewhere\tno\n\
         127.0.0.1\tFALSE\t/\tFALSE\t1000000000\texpired\tno\n",
    )
    .expect("cookies written");
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(setup.stored(), expected(1..=4));
    let (api, images) = setup.site.cookies_sent();
    let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(api, names(&["api_only", "session"]));
    assert_eq!(images, names(&["img_only", "session"]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("abc123"), "{stderr}");
    let found = files_containing(&setup.out, "abc123");
    assert!(
        found.is_empty(),
        "a cookie value is in the output: {found:?}"
    );
}

#[test]
fn a_broken_cookies_file_stops_the_run_naming_the_file_and_line() {
    let setup = Setup::new(
        4,
        &format!("{REST}\n[session]\ncookies = \"cookies.txt\"\n"),
    );
    let file = setup.dir.path().join("cookies.txt");
    std::fs::write(
        &file,
        "# cookies\n127.0.0.1\tFALSE\t/\tFALSE\t0\tok\tyes\n127.0.0.1 FALSE / FALSE 0 bad no\n",
    )
    .expect("cookies written");
    let output = setup.run();
    assert_exit(&output, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "cookies file `{}`, line 3: expected 7 tab-separated fields",
            file.display()
        )),
        "{stderr}"
    );
    assert!(setup.site.log().is_empty(), "nothing is requested");
    std::fs::remove_file(&file).expect("removed");
    let output = setup.run();
    assert_exit(&output, 2);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot read cookies file"),
        "{}",
        text(&output)
    );
}

#[test]
fn a_token_is_fetched_when_the_run_starts_and_sent_with_every_api_request() {
    let setup = Setup::new(7, &rest_with_login());
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(setup.stored(), expected(1..=7));
    assert_eq!(setup.site.logins(), 1);
    assert_eq!(setup.site.log(), ["first", "cursor:5", "cursor:2"]);
    assert_eq!(
        setup.site.images_with_token(),
        0,
        "the token is for the API"
    );
    setup.assert_secret_not_stored();

    let output = run(setup.command().arg("--fresh").env_remove(PASSWORD_VAR));
    assert_exit(&output, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("environment variable `SCRAPE_CURSOR_TEST_PASSWORD` (used by `[session.token] body`) is not set"),
        "{stderr}"
    );
    assert_eq!(setup.site.logins(), 1, "nothing is requested");
}

#[test]
fn a_token_that_expires_mid_run_is_fetched_again_once_and_the_crawl_completes() {
    let setup = Setup::new(10, &rest_with_login());
    let first = setup.start_held_at_the_third_page();
    setup.site.expire_tokens();
    setup.site.release();
    let (status, stderr) = first.wait(PATIENCE);
    assert_eq!(status.code(), Some(0), "{stderr}");
    for secret in SECRETS {
        assert!(!stderr.contains(secret), "a secret is logged:\n{stderr}");
    }
    assert_eq!(
        setup.site.log(),
        ["first", "cursor:8", "cursor:5", "unauthorized", "cursor:2"]
    );
    assert_eq!(setup.site.logins(), 2, "one new token");
    assert_eq!(setup.stored(), expected(1..=10));
    assert!(setup.site.image_hits().values().all(|n| *n == 1));
    setup.assert_secret_not_stored();
}

#[test]
fn a_failing_token_endpoint_fails_the_page_and_a_rerun_completes() {
    let setup = Setup::new(10, &rest_with_login());
    let first = setup.start_held_at_the_third_page();
    setup.site.expire_tokens();
    setup.site.refuse_logins(Some(StatusCode::FORBIDDEN));
    setup.site.release();
    let (status, stderr) = first.wait(PATIENCE);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the token request to `{}/auth/token` answered HTTP 403",
            setup.site.origin
        )),
        "{stderr}"
    );
    assert_eq!(
        setup.stored(),
        expected(2..=10),
        "the pages before are kept"
    );

    setup.site.refuse_logins(None);
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(setup.stored(), expected(1..=10));
    let log = setup.site.log();
    assert_eq!(
        log,
        ["first", "cursor:8", "cursor:5", "unauthorized", "cursor:2"],
        "the rerun continues with the saved cursor"
    );
    assert!(setup.site.image_hits().values().all(|n| *n == 1));
    setup.assert_secret_not_stored();
}

#[test]
fn a_newest_first_feed_stops_at_the_newest_id_of_the_previous_run() {
    let by_id = REST.replace("stop_after_known = 2", "stop_at_known_id = true");
    assert_ne!(by_id, REST);
    let setup = Setup::new(10, &by_id);
    assert_exit(&setup.run(), 0);
    assert_eq!(checkpoint(&setup.out)["newest_id"], "10");
    let before = setup.site.image_hits();

    // Four new photos: the walk reads 14 13 12, then 11 10 9 and stops at 10.
    setup.site.add_newest(4);
    let output = setup.run();
    assert_exit(&output, 0);
    let log = setup.site.log();
    assert_eq!(log[4..], ["first", "cursor:12"], "{log:?}");
    let mut new = setup.site.image_hits();
    new.retain(|name, n| before.get(name) != Some(n));
    assert_eq!(
        new.keys().cloned().collect::<BTreeSet<_>>(),
        expected(11..=14).into_keys().collect(),
        "only the new photos are downloaded"
    );
    assert_eq!(setup.stored(), expected(1..=14));
    let c = checkpoint(&setup.out);
    assert_eq!(
        (c["end"].as_str(), c["newest_id"].as_str()),
        (Some("KnownId"), Some("14")),
        "{c}"
    );

    // Two more: the first page already holds 14, so the walk ends there.
    setup.site.add_newest(2);
    assert_exit(&setup.run(), 0);
    let log = setup.site.log();
    assert_eq!(log[6..], ["first"], "{log:?}");
    assert_eq!(setup.stored(), expected(1..=16));

    // Nothing new: one request, nothing fetched.
    let hits = setup.site.image_hits();
    assert_exit(&setup.run(), 0);
    assert_eq!(setup.site.log()[7..], ["first"]);
    assert_eq!(setup.site.image_hits(), hits);
}

/// The JSON lines `probe` printed.
fn probe_lines(output: &Output) -> Vec<Value> {
    json_lines(&String::from_utf8_lossy(&output.stdout))
}

#[test]
fn probe_makes_the_first_api_request_and_prints_items_images_and_the_next_cursor() {
    let setup = Setup::new(5, &rest_with_login());
    let probe = |extra: &[&str]| {
        let mut cmd = scrape();
        cmd.args(["probe", "--profile"])
            .arg(&setup.profile)
            .args(extra)
            .env(PASSWORD_VAR, PASSWORD);
        run(&mut cmd)
    };
    let output = probe(&[]);
    assert_exit(&output, 0);
    let lines = probe_lines(&output);
    let images: Vec<&str> = lines
        .iter()
        .filter(|l| l["kind"] == "image")
        .map(|l| l["url"].as_str().unwrap_or_default())
        .collect();
    let origin = &setup.site.origin;
    assert_eq!(
        images,
        [5, 4, 3].map(|id| format!("{origin}/img/{}", image_name(id)))
    );
    let page = lines
        .iter()
        .find(|l| l["kind"] == "api")
        .expect("an api line");
    assert_eq!(
        (
            page["items"].as_u64(),
            page["last_id"].as_str(),
            page["newest_id"].as_str()
        ),
        (Some(3), Some("3"), Some("5")),
        "{page}"
    );
    let next = lines.last().expect("lines");
    assert_eq!(next["kind"], "next", "{next}");
    let cursor = next["cursor"].as_str().expect("a cursor").to_owned();
    assert_eq!(setup.site.log(), ["first"]);
    assert_eq!(setup.site.logins(), 1, "the token is fetched for probe too");

    // The given cursor: the last page, and the end.
    let output = probe(&["--cursor", &cursor]);
    assert_exit(&output, 0);
    let lines = probe_lines(&output);
    let images = lines.iter().filter(|l| l["kind"] == "image").count();
    assert_eq!(images, 2);
    assert_eq!(lines.last().expect("lines")["kind"], "end");
    assert_eq!(setup.site.log(), ["first", "cursor:3"]);

    // An expired one says so.
    setup.site.expire_cursors();
    let output = probe(&["--cursor", &cursor]);
    assert_exit(&output, 0);
    let lines = probe_lines(&output);
    assert_eq!(lines.last().expect("lines")["kind"], "expired", "{lines:?}");
    assert!(!setup.out.exists(), "probe stores nothing");
}

#[test]
fn cookies_reach_pages_rendered_in_the_browser() {
    if !chromium_available("cookies_reach_pages_rendered_in_the_browser") {
        return;
    }
    let setup = Setup::new(
        3,
        "render = \"browser\"\n[[images]]\nselector = \"img\"\n[session]\ncookies = \"cookies.txt\"\n",
    );
    std::fs::write(
        setup.dir.path().join("cookies.txt"),
        "127.0.0.1\tFALSE\t/\tFALSE\t0\tmember\tyes\n\
         127.0.0.1\tFALSE\t/api\tFALSE\t0\tapi_only\tyes\n",
    )
    .expect("cookies written");
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(
        setup.site.page_cookies(),
        BTreeSet::from(["member".to_owned()])
    );
    assert_eq!(setup.stored(), expected(1..=3), "{}", text(&output));
}

/// Ten items and a profile that renders the feed page, which pages the API itself as it is
/// scrolled (once); runs start there.
fn rendered_feed() -> Setup {
    rendered_feed_scrolling(1)
}

/// [`rendered_feed`], scrolled up to `scrolls` times.
fn rendered_feed_scrolling(scrolls: u32) -> Setup {
    let browser = format!(
        "render = \"browser\"\n{REST}\n[browser]\nwait = \"network_idle\"\nscroll = {scrolls}\nsettle = \"2s\"\n"
    );
    let setup = Setup::new(10, &browser);
    let start = format!("{}/feed", setup.site.origin);
    setup.args(["--start", &start])
}

#[test]
fn the_pages_a_rendered_page_fetches_drive_the_chain_and_direct_requests_finish_it() {
    if !chromium_available(
        "the_pages_a_rendered_page_fetches_drive_the_chain_and_direct_requests_finish_it",
    ) {
        return;
    }
    let setup = rendered_feed();
    let output = setup.run();
    assert_exit(&output, 0);
    let log = setup.site.log();
    let by_browser = setup.site.browser_log();
    assert_eq!(
        by_browser,
        ["first", "cursor:8"],
        "the page loads one page, and one more on the scroll: {log:?}"
    );
    assert_eq!(
        log,
        ["first", "cursor:8", "cursor:5", "cursor:2"],
        "then the tool asks for the rest itself, each page once"
    );
    assert_eq!(setup.stored(), expected(1..=10));
    assert!(setup.site.image_hits().values().all(|n| *n == 1));
    let c = checkpoint(&setup.out);
    assert_eq!(
        (
            c["pages_done"].as_u64(),
            c["items_found"].as_u64(),
            c["last_id"].as_str()
        ),
        (Some(4), Some(10), Some("1")),
        "{c}"
    );
    setup.assert_secret_not_stored();
}

#[test]
fn pages_a_rendered_page_fetched_past_max_pages_are_taken_and_none_is_asked_for() {
    if !chromium_available(
        "pages_a_rendered_page_fetched_past_max_pages_are_taken_and_none_is_asked_for",
    ) {
        return;
    }
    let browser = format!(
        "render = \"browser\"\n{}\n[browser]\nwait = \"network_idle\"\nscroll = 1\nsettle = \"2s\"\n",
        REST.replace("stop_after_known = 2", "max_pages = 1")
    );
    let setup = Setup::new(10, &browser);
    let start = format!("{}/feed", setup.site.origin);
    let setup = setup.args(["--start", &start]);
    let output = setup.run();
    assert_exit(&output, 0);
    assert_eq!(
        setup.site.log(),
        ["first", "cursor:8"],
        "the two pages the page fetched, and no request of the tool's own"
    );
    assert_eq!(setup.stored(), expected(5..=10));
    let status = status_json(&setup.out);
    let c = &status["chains"][0]["checkpoint"];
    assert_eq!(
        (
            status["counters"]["pages_done"].as_u64(),
            c["pages_done"].as_u64(),
            c["end"].as_str()
        ),
        (Some(2), Some(2), Some("MaxPages")),
        "{status}"
    );
    // A finished chain stays finished.
    let again = setup.run();
    assert_exit(&again, 0);
    assert_eq!(setup.site.log().len(), 2, "{:?}", setup.site.log());
}

#[test]
fn api_pages_a_rendered_page_fetches_are_committed_as_they_arrive_and_survive_a_kill() {
    if !chromium_available(
        "api_pages_a_rendered_page_fetches_are_committed_as_they_arrive_and_survive_a_kill",
    ) {
        return;
    }
    // The page would scroll through the whole feed, but its third API request is held: the
    // render never ends, and the first run is killed while it goes on.
    let setup = rendered_feed_scrolling(10);
    setup.site.hold("cursor:5");
    let mut first = setup.spawn("first");
    first.wait_for(
        "the two pages the page fetched, committed during the render",
        BROWSER_PATIENCE,
        || {
            setup.site.browser_log().len() >= 3
                && checkpoint(&setup.out)["pages_done"].as_u64() == Some(2)
        },
    );
    first.kill();
    let saved = checkpoint(&setup.out);
    assert_eq!(
        (saved["pages_done"].as_u64(), saved["items_found"].as_u64()),
        (Some(2), Some(6)),
        "read from the database after the kill: {saved}"
    );
    setup.site.release();
    let output = setup.run();
    assert_exit(&output, 0);
    let log = setup.site.log();
    assert_eq!(
        log,
        ["first", "cursor:8", "cursor:5", "cursor:5", "cursor:2"],
        "the held request of the killed render, then the rest asked directly, each once: {log:?}"
    );
    assert_eq!(setup.site.browser_log(), ["first", "cursor:8", "cursor:5"]);
    assert_eq!(setup.stored(), expected(1..=10));
    assert!(setup.site.image_hits().values().all(|n| *n == 1));
}

#[test]
fn a_browser_driven_chain_resumes_with_direct_requests_and_the_id_fallback() {
    if !chromium_available(
        "a_browser_driven_chain_resumes_with_direct_requests_and_the_id_fallback",
    ) {
        return;
    }
    let setup = rendered_feed();
    setup.site.hold("cursor:5");
    let mut first = setup.spawn("first");
    first.wait_for("the first direct request", BROWSER_PATIENCE, || {
        setup.site.log().len() >= 3
    });
    first.kill();
    let saved = checkpoint(&setup.out);
    assert_eq!(
        saved["pages_done"], 2,
        "the two pages the browser fetched: {saved}"
    );
    setup.site.release();
    // A long pause: the cursor the page was given has expired.
    setup.site.expire_cursors();
    let output = setup.run();
    assert_exit(&output, 0);
    let log = setup.site.log();
    assert_eq!(
        log[3..],
        ["expired:5", "before:5", "cursor:2"],
        "no second render; the saved cursor, then the last id: {log:?}"
    );
    assert_eq!(setup.site.browser_log(), ["first", "cursor:8"]);
    assert_eq!(setup.stored(), expected(1..=10));
}

#[test]
fn no_configured_secret_appears_in_the_log_at_any_level() {
    let setup = Setup::new(
        4,
        &format!(
            "{}\n[session]\ncookies = \"cookies.txt\"\n",
            rest_with_login()
        ),
    );
    const COOKIE_VALUES: [&str; 2] = ["ck-COOKIE-a1b2c3", "ck-COOKIE2-d4e5f6"];
    std::fs::write(
        setup.dir.path().join("cookies.txt"),
        format!(
            "127.0.0.1\tFALSE\t/\tFALSE\t0\tsessionid\t{}\n\
             #HttpOnly_127.0.0.1\tFALSE\t/api\tFALSE\t4102444800\tauth\t{}\n",
            COOKIE_VALUES[0], COOKIE_VALUES[1]
        ),
    )
    .expect("cookies written");
    let levels: [(&[&str], Option<&str>); 4] = [
        (&["-v"], None),
        (&["-vv"], None),
        (&["-v", "--log-format", "json"], None),
        (&[], Some("trace")),
    ];
    for (flags, env) in levels {
        let mut command = setup.command();
        command.arg("--fresh").args(flags);
        if let Some(filter) = env {
            command.env("SCRAPE_LOG", filter);
        }
        let output = run(&mut command);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{flags:?}\n{}",
            text(&output)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        for secret in SECRETS.iter().chain(&COOKIE_VALUES) {
            assert!(
                !stderr.contains(secret),
                "`{secret}` is logged with {flags:?} {env:?}"
            );
        }
    }
}
