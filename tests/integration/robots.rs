//! robots.txt and opt-out signals, obeyed by default: pages robots.txt disallows are never
//! requested (and fail with class `robots`), `Crawl-delay` spaces requests, a missing robots.txt
//! allows everything and an unavailable one disallows everything; images whose `X-Robots-Tag`
//! opts out, or whose origin's `/.well-known/tdmrep.json` reserves them, are not stored (class
//! `opted_out`), and a page whose meta robots opts out has its images not queued.
//!
//! Each fixture origin is an axum server on `127.0.0.1:0` that answers from a table of paths
//! and records every request it gets, so the tests assert what was never asked for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;

use crate::support::{ServerRuntime, json_lines, manifest, run, scrape, status_json, text};

/// One canned answer.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type", "text/plain".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    /// A gallery page showing `images` (paths), with a `<meta name="robots">` when given.
    fn page(images: &[&str], meta: Option<&str>) -> Self {
        let meta = meta.map_or(String::new(), |m| {
            format!(r#"<meta name="robots" content="{m}">"#)
        });
        let imgs: String = images
            .iter()
            .map(|i| format!(r#"<img src="{i}">"#))
            .collect();
        Self {
            status: 200,
            headers: vec![("content-type", "text/html".into())],
            body: format!("<html><head>{meta}</head><body><main>{imgs}</main></body></html>")
                .into_bytes(),
        }
    }

    /// A generated image (see `scrape::demo::image_for`) sent with `headers`.
    fn image(headers: &[(&'static str, &str)]) -> Self {
        Self {
            status: 200,
            headers: headers.iter().map(|(n, v)| (*n, (*v).to_owned())).collect(),
            body: Vec::new(),
        }
    }

    fn redirect(to: &str) -> Self {
        Self {
            status: 301,
            headers: vec![("location", to.to_owned())],
            body: Vec::new(),
        }
    }
}

struct Site {
    routes: BTreeMap<String, Reply>,
    /// Every request: path and query, and when it came.
    log: Mutex<Vec<(String, Instant)>>,
}

/// One origin of the fixture, on its own runtime.
struct Origin {
    _runtime: ServerRuntime,
    site: Arc<Site>,
    url: String,
}

impl Origin {
    fn start(routes: &[(&str, Reply)]) -> Self {
        let site = Arc::new(Site {
            routes: routes
                .iter()
                .map(|(p, r)| ((*p).to_owned(), r.clone()))
                .collect(),
            log: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(answer).with_state(Arc::clone(&site));
        let (runtime, url) = ServerRuntime::serve(1, app);
        Self {
            _runtime: runtime,
            site,
            url,
        }
    }

    /// Paths (with query) requested, in order.
    fn requested(&self) -> Vec<String> {
        let log = self.site.log.lock().unwrap();
        log.iter().map(|(p, _)| p.clone()).collect()
    }

    fn times(&self, path: &str) -> Vec<Instant> {
        let log = self.site.log.lock().unwrap();
        log.iter()
            .filter(|(p, _)| p == path)
            .map(|(_, t)| *t)
            .collect()
    }

    fn count(&self, path: &str) -> usize {
        self.requested().iter().filter(|p| *p == path).count()
    }
}

async fn answer(State(site): State<Arc<Site>>, uri: Uri) -> Response {
    let target = uri
        .path_and_query()
        .map_or(uri.path().to_owned(), |p| p.as_str().to_owned());
    site.log
        .lock()
        .unwrap()
        .push((target.clone(), Instant::now()));
    let Some(reply) = site.routes.get(&target).cloned() else {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("not found"))
            .expect("response");
    };
    let mut body = reply.body;
    let mut builder = Response::builder().status(reply.status);
    if let Some(name) = target.strip_prefix("/img/") {
        let name = name.to_owned();
        if let Ok(Some((_, bytes))) =
            tokio::task::spawn_blocking(move || scrape::demo::image_for(&name)).await
        {
            body = bytes;
            builder = builder.header("content-type", "image/png");
        }
    }
    for (name, value) in reply.headers {
        builder = builder.header(name, value);
    }
    builder.body(Body::from(body)).expect("response")
}

/// A profile crawling `starts` (one chain each) into `dir/out`.
fn write_profile(dir: &Path, starts: &[String], extra: &str) -> PathBuf {
    let path = dir.join("robots.toml");
    let starts: Vec<String> = starts.iter().map(|s| format!("\"{s}\"")).collect();
    let text = format!(
        "name = \"robots\"\nstart = [{}]\n[[images]]\nselector = \"main img\"\n[download]\nout = \"{}\"\n{extra}",
        starts.join(", "),
        dir.join("out").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `failures.jsonl`: URL → (class, detail).
fn failures(out: &Path) -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(out.join("failures.jsonl")).unwrap_or_default();
    json_lines(&text)
        .into_iter()
        .map(|f| {
            (
                f["url"].as_str().unwrap_or_default().to_owned(),
                (
                    f["class"].as_str().unwrap_or_default().to_owned(),
                    f["detail"].as_str().unwrap_or_default().to_owned(),
                ),
            )
        })
        .collect()
}

const ROBOTS: &str = "\
# Several groups: ours, another crawler's and everyone else's.
User-agent: otherbot
Disallow: /

User-agent: scrape
Disallow: /private/
Allow: /private/open/
Disallow: /*.cgi$
Crawl-delay: 0.4

User-agent: *
Disallow: /
";

/// The site whose robots.txt has a group for `scrape`, and pages that it allows or not.
fn gallery() -> Origin {
    Origin::start(&[
        ("/robots.txt", Reply::text(200, ROBOTS)),
        ("/gallery", Reply::page(&["/img/g1.png"], None)),
        ("/private/secret", Reply::page(&["/img/p1.png"], None)),
        ("/private/open/photos", Reply::page(&["/img/o1.png"], None)),
        ("/search.cgi", Reply::page(&["/img/s1.png"], None)),
        ("/search.cgi?q=cats", Reply::page(&["/img/s2.png"], None)),
        ("/img/g1.png", Reply::image(&[])),
        ("/img/o1.png", Reply::image(&[])),
        ("/img/s2.png", Reply::image(&[])),
        ("/img/p1.png", Reply::image(&[])),
        ("/img/s1.png", Reply::image(&[])),
    ])
}

fn gallery_starts(site: &Origin) -> Vec<String> {
    [
        "/gallery",
        "/private/secret",
        "/private/open/photos",
        "/search.cgi",
        "/search.cgi?q=cats",
    ]
    .iter()
    .map(|p| format!("{}{p}", site.url))
    .collect()
}

#[test]
fn pages_robots_txt_disallows_are_never_requested_and_fail_as_robots() {
    let site = gallery();
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &gallery_starts(&site), "");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));

    let requested = site.requested();
    for never in [
        "/private/secret",
        "/search.cgi",
        "/img/p1.png",
        "/img/s1.png",
    ] {
        assert!(
            !requested.iter().any(|p| p == never),
            "{never} was requested: {requested:?}"
        );
    }
    for fetched in ["/gallery", "/private/open/photos", "/search.cgi?q=cats"] {
        assert_eq!(site.count(fetched), 1, "{fetched}: {requested:?}");
    }
    assert_eq!(site.count("/robots.txt"), 1, "{requested:?}");
    assert_eq!(requested[0], "/robots.txt", "asked before any page");

    let out = dir.path().join("out");
    let failed = failures(&out);
    for page in ["/private/secret", "/search.cgi"] {
        let (class, detail) = &failed[&format!("{}{page}", site.url)];
        assert_eq!(class, "robots", "{page}: {detail}");
        assert!(detail.contains("robots.txt disallows"), "{detail}");
        assert!(detail.contains("`scrape`"), "{detail}");
    }
    assert_eq!(manifest(&out).len(), 3);
    let said = text(&output);
    assert!(
        said.contains("2 disallowed by robots.txt"),
        "the summary says it: {said}"
    );
    let status = status_json(&out);
    assert_eq!(status["counters"]["pages_robots"], 2, "{status}");

    // Crawl-delay: 0.4 spaces the starts of requests to the host.
    let mut starts: Vec<Instant> = ["/gallery", "/private/open/photos", "/search.cgi?q=cats"]
        .iter()
        .flat_map(|p| site.times(p))
        .collect();
    starts.sort();
    for pair in starts.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= Duration::from_millis(350), "pages {gap:?} apart");
    }

    // A rerun within the day reads robots.txt from the state, not from the site.
    let again = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert_eq!(site.count("/robots.txt"), 1, "{:?}", site.requested());
    assert_eq!(site.count("/private/secret"), 0);
}

#[test]
fn robots_ignore_fetches_every_page_with_a_warning() {
    let site = gallery();
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &gallery_starts(&site), "");
    let output = run(scrape().arg("--profile").arg(&profile).args([
        "--progress",
        "off",
        "--robots",
        "ignore",
    ]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("robots.txt is ignored"),
        "{}",
        text(&output)
    );
    assert_eq!(site.count("/robots.txt"), 0);
    assert_eq!(site.count("/private/secret"), 1);
    assert_eq!(manifest(&dir.path().join("out")).len(), 5);

    // The same from the profile.
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(
        dir.path(),
        &gallery_starts(&site),
        "[politeness]\nrobots = \"ignore\"\n",
    );
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(site.count("/private/secret"), 2);
}

#[test]
fn missing_robots_txt_allows_all_and_an_unavailable_one_disallows_all() {
    let missing = Origin::start(&[("/page", Reply::page(&["/img/m.png"], None))]);
    let broken = Origin::start(&[
        ("/robots.txt", Reply::text(503, "busy")),
        ("/page", Reply::page(&["/img/b.png"], None)),
    ]);
    let moved = Origin::start(&[
        ("/robots.txt", Reply::redirect("/policies/robots.txt")),
        (
            "/policies/robots.txt",
            Reply::text(200, "user-agent: *\ndisallow: /secret\n"),
        ),
        ("/secret", Reply::page(&["/img/x.png"], None)),
        ("/open", Reply::page(&["/img/y.png"], None)),
    ]);
    // Nothing listens on this port once the listener is dropped.
    let unreachable = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let starts = vec![
        format!("{}/page", missing.url),
        format!("{}/page", broken.url),
        format!("{}/secret", moved.url),
        format!("{}/open", moved.url),
        format!("{unreachable}/page"),
    ];
    let profile = write_profile(dir.path(), &starts, "");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));

    assert_eq!(missing.requested()[..2], ["/robots.txt", "/page"]);
    assert_eq!(broken.requested(), ["/robots.txt"], "a 503 disallows all");
    let moved_requests = moved.requested();
    assert!(moved_requests.contains(&"/policies/robots.txt".to_owned()));
    assert!(moved_requests.contains(&"/open".to_owned()));
    assert!(!moved_requests.contains(&"/secret".to_owned()));

    let failed = failures(&dir.path().join("out"));
    let (class, detail) = &failed[&format!("{}/page", broken.url)];
    assert_eq!(class, "robots");
    assert!(detail.contains("cannot be read (HTTP 503)"), "{detail}");
    let (class, detail) = &failed[&format!("{unreachable}/page")];
    assert_eq!(class, "robots", "unreachable disallows all: {detail}");
    assert_eq!(failed[&format!("{}/secret", moved.url)].0, "robots");
}

#[test]
fn images_and_pages_that_opt_out_are_not_stored() {
    let site = Origin::start(&[
        (
            "/gallery",
            Reply::page(
                &[
                    "/img/plain.png",
                    "/img/noai.png",
                    "/img/other.png",
                    "/img/ours.png",
                ],
                None,
            ),
        ),
        (
            "/members",
            Reply::page(&["/img/m1.png", "/img/m2.png"], Some("noai, noimageai")),
        ),
        ("/img/plain.png", Reply::image(&[])),
        ("/img/noai.png", Reply::image(&[("x-robots-tag", "noai")])),
        (
            "/img/other.png",
            Reply::image(&[("x-robots-tag", "otherbot: noai")]),
        ),
        (
            "/img/ours.png",
            Reply::image(&[
                ("x-robots-tag", "noindex"),
                ("x-robots-tag", "scrape: noimageai"),
            ]),
        ),
        ("/img/m1.png", Reply::image(&[])),
        ("/img/m2.png", Reply::image(&[])),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let starts = vec![
        format!("{}/gallery", site.url),
        format!("{}/members", site.url),
    ];
    let profile = write_profile(dir.path(), &starts, "");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));

    let out = dir.path().join("out");
    let stored: BTreeSet<String> = manifest(&out)
        .iter()
        .filter_map(|m| m["url"].as_str().map(str::to_owned))
        .collect();
    let expected: BTreeSet<String> = ["/img/plain.png", "/img/other.png"]
        .iter()
        .map(|p| format!("{}{p}", site.url))
        .collect();
    assert_eq!(stored, expected);
    let failed = failures(&out);
    assert_eq!(
        failed[&format!("{}/img/noai.png", site.url)],
        ("opted_out".to_owned(), "X-Robots-Tag: noai".to_owned())
    );
    assert_eq!(
        failed[&format!("{}/img/ours.png", site.url)],
        ("opted_out".to_owned(), "X-Robots-Tag: noimageai".to_owned())
    );
    let requested = site.requested();
    assert!(
        !requested.iter().any(|p| p.starts_with("/img/m")),
        "the members' page opts out: {requested:?}"
    );
    let said = text(&output);
    assert!(
        said.contains("2 images not queued: 1 pages opt out (meta robots)"),
        "{said}"
    );

    // With no directive watched, everything is taken.
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &starts, "[politeness]\nopt_out = []\n");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest(&dir.path().join("out")).len(), 6);
}

#[test]
fn a_page_answered_with_an_opting_out_x_robots_tag_has_its_images_not_queued() {
    a_page_with_an_opting_out_x_robots_tag("static");
}

#[test]
fn a_rendered_page_answered_with_an_opting_out_x_robots_tag_has_its_images_not_queued() {
    if crate::support::chromium_available(
        "a_rendered_page_answered_with_an_opting_out_x_robots_tag_has_its_images_not_queued",
    ) {
        a_page_with_an_opting_out_x_robots_tag("browser");
    }
}

/// Three pages, one image each, crawled with `render` = `mode`: one answered with
/// `X-Robots-Tag: noai, noimageai`, one with an `X-Robots-Tag` for another crawler, one with
/// meta robots `noai`. Only the image of the other crawler's page is stored.
fn a_page_with_an_opting_out_x_robots_tag(mode: &str) {
    let mut header_page = Reply::page(&["/img/h.png"], None);
    header_page
        .headers
        .push(("x-robots-tag", "noai, noimageai".to_owned()));
    let mut other_crawler = Reply::page(&["/img/o.png"], None);
    other_crawler
        .headers
        .push(("x-robots-tag", "otherbot: noai".to_owned()));
    let site = Origin::start(&[
        ("/header", header_page),
        ("/other", other_crawler),
        ("/meta", Reply::page(&["/img/m.png"], Some("noai"))),
        ("/img/h.png", Reply::image(&[])),
        ("/img/o.png", Reply::image(&[])),
        ("/img/m.png", Reply::image(&[])),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let starts: Vec<String> = ["/header", "/other", "/meta"]
        .iter()
        .map(|p| format!("{}{p}", site.url))
        .collect();
    let profile = write_profile(dir.path(), &starts, "");
    let source = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        source.replacen("start = ", &format!("render = \"{mode}\"\nstart = "), 1),
    )
    .unwrap();
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(0), "{mode}: {}", text(&output));
    let stored: Vec<String> = manifest(&dir.path().join("out"))
        .iter()
        .filter_map(|m| m["url"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(stored, [format!("{}/img/o.png", site.url)], "{mode}");
    let requested = site.requested();
    assert!(
        !requested
            .iter()
            .any(|p| p == "/img/h.png" || p == "/img/m.png"),
        "{mode}: {requested:?}"
    );
    let said = text(&output);
    assert!(
        said.contains(
            "2 images not queued: 1 pages opt out (meta robots), 1 pages opt out (X-Robots-Tag)"
        ),
        "{mode}: {said}"
    );
    assert!(
        said.contains("the page opts out with X-Robots-Tag"),
        "{mode}: {said}"
    );
}

#[test]
fn api_requests_robots_txt_disallows_are_never_sent() {
    let site = Origin::start(&[
        (
            "/robots.txt",
            Reply::text(200, "user-agent: scrape\ndisallow: /api/private\n"),
        ),
        (
            "/api/photos",
            Reply {
                status: 200,
                headers: vec![("content-type", "application/json".into())],
                body: br#"{"items": [{"src": "/img/api1.png"}], "next": null}"#.to_vec(),
            },
        ),
        ("/img/api1.png", Reply::image(&[])),
    ]);
    let api = |request: &str| {
        format!(
            "[pagination]\nkind = \"json_cursor\"\nrequest = \"{request}\"\ncursor = \"$.next\"\n\
             [[api]]\nurl = \"/api/\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\n"
        )
    };
    let write_api_profile = |dir: &Path, request: &str| {
        let path = dir.join("api.toml");
        let text = format!(
            "name = \"api\"\nstart = [\"{}/\"]\n{}[download]\nout = \"{}\"\n",
            site.url,
            api(request),
            dir.join("out").display()
        );
        std::fs::write(&path, text).unwrap();
        path
    };

    // A run of the API walk starting at `request`: its folder and what it printed.
    let run_api = |request: &str| {
        let dir = tempfile::tempdir().unwrap();
        let profile = write_api_profile(dir.path(), request);
        let output = run(scrape()
            .arg("--profile")
            .arg(&profile)
            .args(["--progress", "off"]));
        (dir, output)
    };

    let (dir, output) = run_api("/api/private/photos");
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert_eq!(site.requested(), ["/robots.txt"]);
    let failed = failures(&dir.path().join("out"));
    let (class, _) = &failed[&format!("{}/api/private/photos", site.url)];
    assert_eq!(class, "robots");

    let (dir, output) = run_api("/api/photos");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(site.count("/api/photos"), 1);
    assert_eq!(manifest(&dir.path().join("out")).len(), 1);
}

#[test]
fn an_origins_tdmrep_file_opts_out_the_images_it_reserves_and_is_asked_once() {
    let tdmrep = r#"[
        {"location": "/img/free/*", "tdm-reservation": 0},
        {"location": "/img/*-kept.png", "tdm-reservation": 1, "tdm-policy": "https://a.test/policy.json"}
    ]"#;
    let mut licensed = Reply::image(&[]);
    licensed.headers.push((
        "link",
        r#"</img/a.png>; rel="alternate", <https://creativecommons.org/licenses/by/4.0/>; rel="license""#
            .to_owned(),
    ));
    let site = Origin::start(&[
        (
            "/gallery",
            Reply::page(
                &[
                    "/img/a.png",
                    "/img/b-kept.png",
                    "/img/c-kept.png",
                    "/img/free/d-kept.png",
                ],
                None,
            ),
        ),
        ("/.well-known/tdmrep.json", Reply::text(200, tdmrep)),
        ("/img/a.png", licensed),
        ("/img/b-kept.png", Reply::image(&[])),
        ("/img/c-kept.png", Reply::image(&[])),
        ("/img/free/d-kept.png", Reply::image(&[])),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let starts = vec![format!("{}/gallery", site.url)];
    let profile = write_profile(dir.path(), &starts, "");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));

    let out = dir.path().join("out");
    let stored: BTreeMap<String, serde_json::Value> = manifest(&out)
        .into_iter()
        .map(|m| (m["url"].as_str().unwrap_or_default().to_owned(), m))
        .collect();
    let url = |path: &str| format!("{}{path}", site.url);
    assert_eq!(
        stored.keys().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([url("/img/a.png"), url("/img/free/d-kept.png")])
    );
    assert_eq!(
        stored[&url("/img/a.png")]["rights"],
        serde_json::json!({"license": {
            "value": "https://creativecommons.org/licenses/by/4.0/",
            "from": "link header"
        }})
    );
    let failed = failures(&out);
    for path in ["/img/b-kept.png", "/img/c-kept.png"] {
        assert_eq!(
            failed[&url(path)],
            (
                "opted_out".to_owned(),
                "/.well-known/tdmrep.json reserves mining rights on `/img/*-kept.png` (tdm-policy: https://a.test/policy.json)".to_owned()
            )
        );
    }
    let requested = site.requested();
    assert_eq!(site.count("/.well-known/tdmrep.json"), 1, "{requested:?}");
    assert!(
        !requested
            .iter()
            .any(|p| p.contains("-kept") && !p.contains("free")),
        "reserved images are never asked for: {requested:?}"
    );

    // With no opt-out watched, the file is not asked for and every image is taken.
    let dir = tempfile::tempdir().unwrap();
    let before = site.count("/.well-known/tdmrep.json");
    let profile = write_profile(dir.path(), &starts, "[politeness]\nopt_out = []\n");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest(&dir.path().join("out")).len(), 4);
    assert_eq!(site.count("/.well-known/tdmrep.json"), before);
}
