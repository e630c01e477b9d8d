//! Galleries behind a sign-in: a members' site whose pages need a session cookie, whose
//! sessions end after a number of pages, and whose sign-in form carries a CSRF field. A page
//! asked without a live session is redirected to the sign-in form; the run must take that for
//! a wall (class `login_required`), not for the end of the gallery, and go on from there once
//! the session is fresh.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use crate::support::{ServerRuntime, manifest, run, scrape, status_json, stderr};

/// The password the members' site takes.
pub const PASSWORD: &str = "open sesame";
/// The member name.
pub const MEMBER: &str = "ana";
/// The token a signed-in browser keeps in localStorage (`members-token`): with it (and the
/// cookie `welcomed` the welcome page sets by script), a page's script asks
/// `/members/api/extra/{n}` for one more picture, `/members/orig/{n}-x-48x32.jpg`.
const TOKEN: &str = "tk-5f2b";

/// A members' gallery on `127.0.0.1:0`: pages `/members/page/{n}` (`a.next` to the next),
/// each showing links `a.original` to pictures `/members/orig/{n}-{k}-48x32.jpg`, all for
/// signed-in visitors only; `/members/login` (GET: the form, POST: sign in). Rendered, a page
/// shows `#ready` once its script is done, and one more picture when localStorage holds
/// [`TOKEN`].
pub struct Members {
    pub shared: Shared,
    pub origin: String,
    _runtime: ServerRuntime,
}

#[derive(Clone)]
pub struct Shared {
    pages: u64,
    per_page: u64,
    /// Live sessions: id → pages it may still show.
    sessions: Arc<Mutex<HashMap<String, u64>>>,
    /// CSRF values handed out with the form.
    csrf: Arc<Mutex<HashSet<String>>>,
    /// Pages a session signed in through the form may show.
    pub login_pages: Arc<AtomicU64>,
    issued: Arc<AtomicU64>,
    /// Every request: method, path (with query), answer status.
    log: Arc<Mutex<Vec<(String, String, u16)>>>,
}

impl Members {
    pub fn serve(pages: u64, per_page: u64) -> Self {
        let shared = Shared {
            pages,
            per_page,
            sessions: Arc::default(),
            csrf: Arc::default(),
            login_pages: Arc::new(AtomicU64::new(u64::MAX)),
            issued: Arc::default(),
            log: Arc::default(),
        };
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let (runtime, origin) = ServerRuntime::serve(2, app);
        Self {
            shared,
            origin,
            _runtime: runtime,
        }
    }

    /// A new session that may show `pages` pages: its id.
    fn open_session(&self, pages: u64) -> String {
        self.shared.open_session(pages)
    }

    /// A Netscape cookies file in `dir` holding session `sid` for this site.
    fn cookies_file(&self, dir: &Path, sid: &str) -> PathBuf {
        let file = dir.join("cookies.txt");
        std::fs::write(
            &file,
            format!("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\t{sid}\n"),
        )
        .expect("cookies written");
        file
    }

    /// A storage state in `dir` (Playwright's JSON) holding session `sid` and, with `token`,
    /// the localStorage token of the site's origin; readable by its owner only.
    fn storage_state(&self, dir: &Path, sid: &str, token: bool) -> PathBuf {
        let file = dir.join("state.json");
        let items = match token {
            true => format!("[{{\"name\": \"members-token\", \"value\": \"{TOKEN}\"}}]"),
            false => "[]".to_owned(),
        };
        std::fs::write(
            &file,
            format!(
                "{{\"cookies\": [{{\"name\": \"sid\", \"value\": \"{sid}\", \"domain\": \"127.0.0.1\", \
                 \"path\": \"/\", \"expires\": -1, \"httpOnly\": true, \"secure\": false, \"sameSite\": \"Lax\"}}, \
                 {{\"name\": \"welcomed\", \"value\": \"1\", \"domain\": \"127.0.0.1\", \"path\": \"/\"}}],\n\
                 \"origins\": [{{\"origin\": \"{}\", \"localStorage\": {items}}}]}}",
                self.origin
            ),
        )
        .expect("state written");
        set_mode(&file, 0o600);
        file
    }

    /// The extra pictures a page shows to a browser holding the token.
    fn extras(&self) -> Vec<String> {
        (1..=self.shared.pages)
            .map(|n| format!("{}/members/orig/{n}-x-48x32.jpg", self.origin))
            .collect()
    }

    /// The pictures the gallery shows, as absolute URLs.
    pub fn pictures(&self) -> Vec<String> {
        (1..=self.shared.pages)
            .flat_map(|n| (1..=self.shared.per_page).map(move |k| (n, k)))
            .map(|(n, k)| format!("{}/members/orig/{n}-{k}-48x32.jpg", self.origin))
            .collect()
    }

    /// The requests so far: `METHOD path status`.
    pub fn log(&self) -> Vec<String> {
        self.shared
            .log
            .lock()
            .expect("log")
            .iter()
            .map(|(m, p, s)| format!("{m} {p} {s}"))
            .collect()
    }

    /// How often each path was asked for with a `2xx` answer.
    fn served(&self) -> BTreeMap<String, u64> {
        let mut served = BTreeMap::new();
        for (_, path, status) in self.shared.log.lock().expect("log").iter() {
            if (200..300).contains(status) {
                *served.entry(path.clone()).or_default() += 1;
            }
        }
        served
    }
}

impl Shared {
    fn open_session(&self, pages: u64) -> String {
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let sid = format!("s{n}x{:x}", n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        self.sessions
            .lock()
            .expect("sessions")
            .insert(sid.clone(), pages);
        sid
    }

    /// The live session `headers` carry, if any.
    fn session(&self, headers: &HeaderMap) -> Option<String> {
        let sid = cookie(headers, "sid")?;
        self.sessions
            .lock()
            .expect("sessions")
            .contains_key(&sid)
            .then_some(sid)
    }

    /// Takes one page from session `sid`: `false` once it has none left (it ends then).
    fn take_page(&self, sid: &str) -> bool {
        let mut sessions = self.sessions.lock().expect("sessions");
        match sessions.get_mut(sid) {
            Some(0) | None => {
                sessions.remove(sid);
                false
            }
            Some(left) => {
                *left -= 1;
                true
            }
        }
    }
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_owned())
}

async fn answer(State(shared): State<Shared>, request: Request) -> Response {
    let method = request.method().as_str().to_owned();
    let uri = request.uri().clone();
    let path = uri.path().to_owned();
    let headers = request.headers().clone();
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let response = route(&shared, &method, &path, uri.query(), &headers, &body);
    let full = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or(path);
    shared
        .log
        .lock()
        .expect("log")
        .push((method, full, response.status().as_u16()));
    response
}

fn route(
    shared: &Shared,
    method: &str,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let sign_in = |next: &str| {
        (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, format!("/members/login?next={next}"))],
        )
            .into_response()
    };
    match (method, path.strip_prefix("/members/")) {
        ("GET", Some("login")) => login_form(shared, None),
        ("POST", Some("login")) => {
            let form: HashMap<String, String> =
                url::form_urlencoded::parse(body).into_owned().collect();
            let csrf_ok = form
                .get("csrf")
                .is_some_and(|c| shared.csrf.lock().expect("csrf").remove(c));
            if !csrf_ok {
                return (StatusCode::FORBIDDEN, "the form has expired").into_response();
            }
            if form.get("user").map(String::as_str) != Some(MEMBER)
                || form.get("password").map(String::as_str) != Some(PASSWORD)
            {
                return login_form(shared, Some("wrong name or password"));
            }
            let sid = shared.open_session(shared.login_pages.load(Ordering::SeqCst));
            let next = query
                .and_then(|q| url::form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "next"))
                .map_or_else(|| "/members/welcome".to_owned(), |(_, v)| v.into_owned());
            (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, next),
                    (header::SET_COOKIE, format!("sid={sid}; Path=/; HttpOnly")),
                ],
            )
                .into_response()
        }
        ("GET", Some("welcome")) => match shared.session(headers) {
            // A signed-in browser keeps the API token in localStorage and a cookie the API
            // wants, both set by script.
            Some(_) => Html(format!(
                "<script>localStorage.setItem('members-token', '{TOKEN}'); \
                 document.cookie = 'welcomed=1; path=/'</script>\
                 <p class=\"account\">Signed in as ana</p>"
            ))
            .into_response(),
            None => sign_in(path),
        },
        ("GET", Some(rest)) if rest.starts_with("page/") => {
            let Some(n) = rest["page/".len()..]
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=shared.pages).contains(n))
            else {
                return StatusCode::NOT_FOUND.into_response();
            };
            match shared.session(headers) {
                Some(sid) if shared.take_page(&sid) => Html(page(shared, n)).into_response(),
                _ => sign_in(path),
            }
        }
        ("GET", Some(rest)) if rest.starts_with("api/extra/") => {
            let token = headers.get("x-token").and_then(|v| v.to_str().ok());
            let welcomed = cookie(headers, "welcomed").is_some_and(|v| v == "1");
            if shared.session(headers).is_none() || token != Some(TOKEN) || !welcomed {
                return (StatusCode::FORBIDDEN, "members only").into_response();
            }
            let n = &rest["api/extra/".len()..];
            (
                [(header::CONTENT_TYPE, "application/json")],
                format!("{{\"extra\": \"/members/orig/{n}-x-48x32.jpg\"}}"),
            )
                .into_response()
        }
        ("GET", Some(rest)) if rest.starts_with("orig/") => {
            if shared.session(headers).is_none() {
                return (StatusCode::FORBIDDEN, "members only").into_response();
            }
            match scrape::demo::image_for(&rest["orig/".len()..]) {
                Some((_, bytes)) => (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "image/jpeg")],
                    Body::from(bytes),
                )
                    .into_response(),
                None => StatusCode::NOT_FOUND.into_response(),
            }
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

fn login_form(shared: &Shared, error: Option<&str>) -> Response {
    let n = shared.issued.fetch_add(1, Ordering::SeqCst);
    let csrf = format!("c{n:x}");
    shared.csrf.lock().expect("csrf").insert(csrf.clone());
    let error = error.map_or_else(String::new, |e| format!("<p class=\"error\">{e}</p>"));
    Html(format!(
        "<!doctype html><html><head><title>Sign in</title></head><body>{error}\
         <form method=\"post\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input name=\"user\"><input type=\"password\" name=\"password\">\
         <button id=\"go\">Sign in</button></form></body></html>"
    ))
    .into_response()
}

/// Asks for the page's extra picture when localStorage holds the token, then shows `#ready`.
const EXTRA_SCRIPT: &str = r#"<script>
(async () => {
  const token = localStorage.getItem('members-token');
  if (token) {
    const reply = await fetch('/members/api/extra/{n}', { headers: { 'x-token': token } });
    if (reply.ok) {
      const a = document.createElement('a');
      a.className = 'original';
      a.href = (await reply.json()).extra;
      document.querySelector('main').appendChild(a);
    }
  }
  document.body.insertAdjacentHTML('beforeend', '<p id="ready">ready</p>');
})();
</script>"#;

fn page(shared: &Shared, n: u64) -> String {
    let links: String = (1..=shared.per_page)
        .map(|k| {
            format!(
                "<a class=\"original\" href=\"/members/orig/{n}-{k}-48x32.jpg\">\
                 <img src=\"/members/thumb/{n}-{k}.jpg\"></a>"
            )
        })
        .collect();
    let next = if n < shared.pages {
        format!(
            "<a class=\"next\" href=\"/members/page/{}\">Next</a>",
            n + 1
        )
    } else {
        String::new()
    };
    format!(
        "<!doctype html><html><head><title>Members, page {n}</title></head><body>\
         <header><a href=\"/members/account\">Account</a></header>\
         <main>{links}</main><nav>{next}</nav>{EXTRA_SCRIPT}</body></html>"
    )
    .replace("{n}", &n.to_string())
}

/// A profile for the members' gallery in `dir`: its chain from page 1 by `a.next`, the
/// originals linked by `a.original`; `session` goes at the end (a `[session]` table).
pub fn profile(dir: &Path, members: &Members, session: &str) -> PathBuf {
    profile_with(dir, members, "", session)
}

/// [`profile`] with `top` (keys of the profile itself) before its tables.
fn profile_with(dir: &Path, members: &Members, top: &str, session: &str) -> PathBuf {
    let file = dir.join("members.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"members\"\nstart = [\"{}/members/page/1\"]\n{top}\n\
             [pagination]\nkind = \"next_link\"\nselector = \"a.next\"\n\n\
             [[images]]\nselector = \"a.original\"\nattributes = [\"href\"]\n\n{session}\n",
            members.origin
        ),
    )
    .expect("profile written");
    file
}

fn set_mode(file: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).expect("mode set");
}

fn run_profile(profile: &Path, out: &Path) -> std::process::Output {
    run(scrape()
        .arg("--profile")
        .arg(profile)
        .arg("--out")
        .arg(out)
        .arg("--progress")
        .arg("off"))
}

pub fn stored_urls(out: &Path) -> Vec<String> {
    let mut urls: Vec<String> = manifest(out)
        .iter()
        .filter_map(|line| line["url"].as_str().map(str::to_owned))
        .collect();
    urls.sort();
    urls
}

#[test]
fn a_session_that_ends_mid_chain_is_a_sign_in_wall_and_the_run_goes_on_from_it_after_a_fresh_one() {
    let members = Members::serve(5, 2);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let sid = members.open_session(2);
    let cookies = members.cookies_file(dir.path(), &sid);
    let profile = profile(
        dir.path(),
        &members,
        &format!("[session]\ncookies = \"{}\"\n", cookies.display()),
    );

    let first = run_profile(&profile, &out);

    let said = stderr(&first);
    assert_eq!(first.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "sign-in wall on {}",
            members.origin.trim_start_matches("http://")
        )),
        "{said}"
    );
    assert!(said.contains("redirected to the sign-in page"), "{said}");
    assert!(said.contains("sign in again"), "{said}");
    // The pictures of pages 1 and 2: stored, or (asked once the session had ended) pending.
    let stored = stored_urls(&out);
    assert!(
        stored
            .iter()
            .all(|url| members.pictures()[..4].contains(url)),
        "{stored:?}"
    );
    let status = status_json(&out);
    assert_eq!(status["state"], "incomplete", "{status}");
    assert_eq!(status["counters"]["pages_failed"], 1, "{status}");
    assert_eq!(status["walled_pages"], 1, "{status}");
    assert_eq!(
        status["counters"]["failed"], 0,
        "no picture failed: {status}"
    );
    assert_eq!(
        status["counters"]["images_found"], 4,
        "found on pages 1 and 2: {status}"
    );
    assert_eq!(status["pending"], 4 - stored.len(), "{status}");
    let failures = std::fs::read_to_string(out.join("failures.jsonl")).unwrap_or_default();
    assert!(
        failures.contains("login_required") && failures.contains("/members/page/3"),
        "{failures}"
    );

    let fresh = members.open_session(10);
    members.cookies_file(dir.path(), &fresh);
    let second = run_profile(&profile, &out);

    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert_eq!(stored_urls(&out), members.pictures());
    let served = members.served();
    for n in 1..=5 {
        assert_eq!(
            served.get(&format!("/members/page/{n}")),
            Some(&1),
            "page {n} is read once: {:?}",
            members.log()
        );
    }
    for picture in members.pictures() {
        let path = picture.trim_start_matches(&members.origin);
        assert_eq!(served.get(path), Some(&1), "{path}: {:?}", members.log());
    }
}

#[test]
fn a_saved_browser_state_signs_in_the_rendered_pages_and_the_downloads() {
    if !crate::support::chromium_available(
        "a_saved_browser_state_signs_in_the_rendered_pages_and_the_downloads",
    ) {
        return;
    }
    let members = Members::serve(3, 2);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let sid = members.open_session(100);
    let state = members.storage_state(dir.path(), &sid, true);
    // Relative to the profile's folder.
    let profile = profile_with(
        dir.path(),
        &members,
        "render = \"browser\"",
        "[browser]\nwait_for = \"#ready\"\n\n[session]\nstorage_state = \"state.json\"\n",
    );

    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .arg("--out")
        .arg(&out)
        .args(["--progress", "off"])
        .env("SCRAPE_LOG", "trace"));

    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    let mut expected = members.pictures();
    expected.extend(members.extras());
    expected.sort();
    assert_eq!(stored_urls(&out), expected, "{said}");
    for secret in [sid.as_str(), TOKEN] {
        assert!(!said.contains(secret), "`{secret}` is in the log:\n{said}");
    }
    assert!(!said.contains("can be read by other users"), "{said}");

    // The same state readable by everyone is used, with a warning.
    set_mode(&state, 0o644);
    let again = run_profile(&profile, &dir.path().join("again"));
    let said = stderr(&again);
    assert_eq!(again.status.code(), Some(0), "{said}");
    assert!(
        said.contains("state.json` can be read by other users of this machine"),
        "{said}"
    );
}

#[test]
fn a_broken_storage_state_stops_the_run_before_any_request_naming_the_cookie_not_its_value() {
    let members = Members::serve(2, 1);
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state.json");
    std::fs::write(
        &state,
        r#"{"cookies": [{"name": "sid", "value": "v4lue-0f-s1d", "domain": "members example"}]}"#,
    )
    .expect("state written");
    set_mode(&state, 0o600);
    let profile = profile(
        dir.path(),
        &members,
        "[session]\nstorage_state = \"state.json\"\n",
    );

    let output = run_profile(&profile, &dir.path().join("out"));

    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(
        said.contains("state.json`: cookie 1 (`sid`): `members example` is not a domain name"),
        "{said}"
    );
    assert!(!said.contains("v4lue-0f-s1d"), "{said}");
    assert_eq!(members.log(), Vec::<String>::new());
}

/// The profile's `[session.login]` for the members' site, its values in `M_USER` and `M_PASS`.
pub const LOGIN: &str = "[session.login]\nurl = \"/members/login\"\n\
    fields = { user = \"env:M_USER\", password = \"env:M_PASS\" }\n\
    success_selector = \".account\"\n";

fn run_with_login(profile: &Path, out: &Path, password: &str) -> std::process::Output {
    run(scrape()
        .arg("--profile")
        .arg(profile)
        .arg("--out")
        .arg(out)
        .args(["--progress", "off"])
        .env("M_USER", MEMBER)
        .env("M_PASS", password)
        .env("SCRAPE_LOG", "trace"))
}

#[test]
fn the_run_signs_in_through_the_form_and_again_each_time_the_site_signs_it_out() {
    let members = Members::serve(5, 2);
    // Each sign-in is good for two pages: five pages take three.
    members.shared.login_pages.store(2, Ordering::SeqCst);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let profile = profile(dir.path(), &members, LOGIN);

    let output = run_with_login(&profile, &out, PASSWORD);

    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert_eq!(stored_urls(&out), members.pictures());
    let log = members.log();
    let sign_ins = log
        .iter()
        .filter(|l| l.starts_with("POST /members/login"))
        .count();
    assert!((3..=4).contains(&sign_ins), "{log:?}");
    assert_eq!(
        log[0], "GET /members/login 200",
        "signed in before the first page: {log:?}"
    );
    let served = members.served();
    for picture in members.pictures() {
        let path = picture.trim_start_matches(&members.origin);
        assert_eq!(served.get(path), Some(&1), "{path}: {log:?}");
    }
    assert!(said.contains("signed in again"), "{said}");
    for secret in [PASSWORD, "open+sesame"] {
        assert!(!said.contains(secret), "`{secret}` is in the log");
    }
}

#[test]
fn rendered_pages_carry_the_runs_own_sign_in_and_each_fresh_one() {
    if !crate::support::chromium_available(
        "rendered_pages_carry_the_runs_own_sign_in_and_each_fresh_one",
    ) {
        return;
    }
    let members = Members::serve(5, 2);
    members.shared.login_pages.store(2, Ordering::SeqCst);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let profile = profile_with(
        dir.path(),
        &members,
        "render = \"browser\"",
        &format!("[browser]\nwait_for = \"#ready\"\n\n{LOGIN}"),
    );

    let output = run_with_login(&profile, &out, PASSWORD);

    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert_eq!(stored_urls(&out), members.pictures());
    let log = members.log();
    let sign_ins = log
        .iter()
        .filter(|l| l.starts_with("POST /members/login"))
        .count();
    assert!((3..=4).contains(&sign_ins), "{log:?}");
    for n in 1..=5 {
        let page = format!("GET /members/page/{n} 200");
        assert!(log.contains(&page), "page {n} rendered signed in: {log:?}");
    }
    assert!(!said.contains(PASSWORD), "the password is in the log");
}

#[test]
fn a_wrong_password_stops_the_run_before_any_page_and_stores_nothing() {
    let members = Members::serve(2, 1);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let profile = profile(dir.path(), &members, LOGIN);

    let output = run_with_login(&profile, &out, "not it");

    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!(
            "signing in at `{}/members/login` did not work",
            members.origin
        )) && said.contains("a wrong name or password?"),
        "{said}"
    );
    assert!(!said.contains("not it"), "{said}");
    assert_eq!(
        members.log(),
        ["GET /members/login 200", "POST /members/login 200"]
    );
    assert_eq!(stored_urls(&out), Vec::<String>::new());
}

#[test]
fn scrape_login_headless_saves_a_private_state_that_the_next_rendered_run_signs_in_with() {
    if !crate::support::chromium_available(
        "scrape_login_headless_saves_a_private_state_that_the_next_rendered_run_signs_in_with",
    ) {
        return;
    }
    let members = Members::serve(2, 2);
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = profile_with(
        dir.path(),
        &members,
        "render = \"browser\"",
        &format!(
            "[browser]\nwait_for = \"#ready\"\n\n[session]\nstorage_state = \"state.json\"\n\n{LOGIN}"
        ),
    );

    let login = run(scrape()
        .args(["login", "--headless", "--profile"])
        .arg(&profile)
        .env("M_USER", MEMBER)
        .env("M_PASS", PASSWORD)
        .env("SCRAPE_LOG", "trace"));

    let said = stderr(&login);
    assert_eq!(login.status.code(), Some(0), "{said}");
    assert!(
        said.contains("signed in: 2 cookies and 1 localStorage items saved to"),
        "the session's cookie and the one set by script: {said}"
    );
    for secret in [PASSWORD, TOKEN] {
        assert!(!said.contains(secret), "`{secret}` is in the log");
    }
    let state_file = dir.path().join("state.json");
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(&state_file)
            .expect("state written")
            .permissions()
            .mode()
    };
    assert_eq!(mode & 0o777, 0o600);
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state_file).unwrap()).expect("state is JSON");
    let names: Vec<&str> = state["cookies"]
        .as_array()
        .expect("cookies")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        names.contains(&"sid") && names.contains(&"welcomed"),
        "{state}"
    );
    assert_eq!(
        state["origins"][0]["origin"],
        members.origin.as_str(),
        "{state}"
    );
    assert_eq!(
        state["origins"][0]["localStorage"][0]["value"], TOKEN,
        "{state}"
    );

    // The next run renders its pages signed in: the token shows the extra pictures.
    let out = dir.path().join("out");
    let output = run_with_login(&profile, &out, PASSWORD);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let mut expected = members.pictures();
    expected.extend(members.extras());
    expected.sort();
    assert_eq!(stored_urls(&out), expected);
}

#[test]
fn scrape_login_with_a_wrong_password_fails_and_writes_no_state() {
    if !crate::support::chromium_available(
        "scrape_login_with_a_wrong_password_fails_and_writes_no_state",
    ) {
        return;
    }
    let members = Members::serve(1, 1);
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = profile(
        dir.path(),
        &members,
        &format!(
            "[browser]\npage_timeout = \"3s\"\n\n[session]\nstorage_state = \"state.json\"\n\n{LOGIN}"
        ),
    );

    let login = run(scrape()
        .args(["login", "--headless", "--profile"])
        .arg(&profile)
        .env("M_USER", MEMBER)
        .env("M_PASS", "not it"));

    let said = stderr(&login);
    assert_eq!(login.status.code(), Some(1), "{said}");
    assert!(
        said.contains("did not work") && said.contains("a wrong name or password?"),
        "{said}"
    );
    assert!(!dir.path().join("state.json").exists());

    let windowed = run(scrape()
        .args(["login", "--profile"])
        .arg(&profile)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY"));
    assert_eq!(windowed.status.code(), Some(2), "{}", stderr(&windowed));
    assert!(
        stderr(&windowed).contains("no display"),
        "{}",
        stderr(&windowed)
    );
}
