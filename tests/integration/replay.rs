//! Record and replay: `scrape record` against fixture sites on loopback, replays with the
//! servers stopped, `scrape test` on every site profile's recording, broken recordings.

use std::path::{Path, PathBuf};

use crate::support::{
    ApiServer, Site, chromium_available, demo_profile_in, manifest_hashes, repo, run, scrape,
    stderr, text,
};

/// Records `profile` from `site` into `dir/site.har`; `extra` flags go to `scrape record`.
fn record(profile: &Path, origin: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let output = run(scrape()
        .args(["record", "--quiet", "--profile"])
        .arg(profile)
        .arg("--out")
        .arg(dir)
        .args(["--start", &format!("{origin}/gallery/")])
        .args(extra));
    assert!(output.status.success(), "{}", text(&output));
    dir.join("site.har")
}

#[test]
fn a_replay_with_the_server_stopped_gives_the_live_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = demo_profile_in(tmp.path(), "");
    let site = Site::serve("fixtures/demo-site");
    let origin = site.origin.clone();
    let live = tmp.path().join("live");
    let output = run(scrape()
        .args(["--quiet", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(&live)
        .args(["--start", &format!("{origin}/gallery/")]));
    assert!(output.status.success(), "{}", text(&output));
    let har = record(
        &profile,
        &origin,
        &tmp.path().join("rec"),
        &["--pages", "50", "--images", "keep"],
    );
    drop(site);

    let replayed = tmp.path().join("replayed");
    let output = run(scrape()
        .args(["--profile"])
        .arg(&profile)
        .arg("--replay")
        .arg(&har)
        .arg("--replay-strict")
        .arg("--out")
        .arg(&replayed)
        .args([
            "--start",
            &format!("{origin}/gallery/"),
            "--progress",
            "off",
        ]));
    assert!(output.status.success(), "{}", text(&output));
    let expected = manifest_hashes(&live);
    assert!(expected.len() > 40, "the live run stored the gallery");
    assert_eq!(manifest_hashes(&replayed), expected);
}

#[test]
fn a_replay_without_image_bodies_finds_the_images_and_downloads_none() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = demo_profile_in(tmp.path(), "");
    let site = Site::serve("fixtures/demo-site");
    let origin = site.origin.clone();
    let har = record(
        &profile,
        &origin,
        &tmp.path().join("rec"),
        &["--pages", "50"],
    );
    drop(site);
    let out = tmp.path().join("replayed");
    let output = run(scrape()
        .args(["run", "--profile"])
        .arg(&profile)
        .arg("--replay")
        .arg(&har)
        .arg("--replay-strict")
        .arg("--out")
        .arg(&out)
        .args([
            "--start",
            &format!("{origin}/gallery/"),
            "--progress",
            "off",
        ]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        stderr
            .contains("49 images found; the recording has no image bodies, so none was downloaded"),
        "{stderr}"
    );
    assert!(!stderr.contains("not in the recording"), "{stderr}");
    assert!(manifest_hashes(&out).is_empty());
}

#[test]
fn strict_replay_fails_on_an_unrecorded_request_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    // A chain ends where its recording ends, strict or not; a chain's first page that the
    // recording does not have is an unrecorded request, and named.
    let profile = tmp.path().join("pages.toml");
    std::fs::write(
        &profile,
        r#"name = "pages"
start = ["http://127.0.0.1:8080/gallery/"]
[pagination]
kind = "url_template"
template = "/gallery/page-{page}.html"
start = 2
[[images]]
selector = ".gallery figure img"
"#,
    )
    .unwrap();
    let site = Site::serve("fixtures/demo-site");
    let origin = site.origin.clone();
    let har = record(
        &profile,
        &origin,
        &tmp.path().join("rec"),
        &["--pages", "2"],
    );
    drop(site);
    let replay = |strict: bool, start: &str| {
        let out = format!("out-{strict}-{}", start.len());
        let mut cmd = scrape();
        cmd.args(["--profile"])
            .arg(&profile)
            .arg("--replay")
            .arg(&har)
            .arg("--out")
            .arg(tmp.path().join(out))
            .args(["--start", &format!("{origin}/gallery/")])
            .args(["--start", start, "--progress", "off"]);
        if strict {
            cmd.arg("--replay-strict");
        }
        run(&mut cmd)
    };
    for strict in [false, true] {
        let replayed = replay(strict, &format!("{origin}/gallery/"));
        assert_eq!(replayed.status.code(), Some(0), "{}", text(&replayed));
        assert!(
            stderr(&replayed).contains("ended (end of recording)"),
            "{}",
            text(&replayed)
        );
        assert!(!stderr(&replayed).contains("not in the recording"));
    }
    let elsewhere = origin.replace("127.0.0.1", "localhost");
    let strict = replay(true, &format!("{elsewhere}/gallery/"));
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));
    assert!(
        stderr(&strict).contains(&format!("GET {elsewhere}/gallery/page-2.html")),
        "{}",
        text(&strict)
    );
}

#[test]
fn malformed_and_truncated_recordings_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = demo_profile_in(tmp.path(), "");
    let good = std::fs::read_to_string(repo("fixtures/demo/site.har")).unwrap();
    let cases = [
        (
            "truncated.har",
            good[..good.len() / 2].to_owned(),
            "truncated",
        ),
        (
            "rot13.har",
            good.replacen(
                "\"mimeType\": \"text/html",
                "\"encoding\": \"rot13\", \"mimeType\": \"text/html",
                1,
            ),
            // Entry 1 is robots.txt; the first page is entry 2.
            "entry 2: `response.content.encoding` is `rot13`; expected `base64`",
        ),
        (
            "not-har.har",
            "{\"entries\": []}".to_owned(),
            "not a HAR file",
        ),
        (
            "garbage.har",
            "{\"log\": {\"entries\": [}}".to_owned(),
            "`:1:",
        ),
    ];
    for (name, content, message) in cases {
        let path = tmp.path().join(name);
        std::fs::write(&path, content).unwrap();
        let output = run(scrape()
            .args(["--profile"])
            .arg(&profile)
            .arg("--replay")
            .arg(&path)
            .arg("--out")
            .arg(tmp.path().join("out")));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {}", text(&output));
        assert!(stderr.contains(name), "{name}: {stderr}");
        assert!(stderr.contains(message), "{name}: {stderr}");
    }
}

#[test]
fn a_missing_recording_or_an_unwritable_record_folder_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = demo_profile_in(tmp.path(), "");
    let output = run(scrape().arg("test").arg(&profile));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("has no recording at"), "{stderr}");
    assert!(stderr.contains("scrape record --profile"), "{stderr}");

    // The folder is checked before the crawl: the site is never asked.
    let site = Site::serve("fixtures/demo-site");
    let blocked = tmp.path().join("a-file");
    std::fs::write(&blocked, "not a folder").unwrap();
    let output = run(scrape()
        .args(["record", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(blocked.join("rec"))
        .args(["--start", &format!("{}/gallery/", site.origin)]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot write recording"), "{stderr}");
    assert!(site.hits().is_empty(), "{:?}", site.hits());
}

/// A copy of a site profile and its recording in a temporary repository layout.
fn copy_profile(name: &str, root: &Path) -> PathBuf {
    std::fs::create_dir_all(root.join("site-profiles")).unwrap();
    std::fs::create_dir_all(root.join("fixtures").join(name)).unwrap();
    let profile = root.join(format!("site-profiles/{name}.toml"));
    std::fs::copy(repo(&format!("site-profiles/{name}.toml")), &profile).unwrap();
    for file in ["site.har", "expected.jsonl"] {
        std::fs::copy(
            repo(&format!("fixtures/{name}/{file}")),
            root.join(format!("fixtures/{name}/{file}")),
        )
        .unwrap();
    }
    profile
}

#[test]
fn scrape_test_fails_with_a_diff_after_the_expected_file_changes_and_update_fixes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = copy_profile("demo", tmp.path());
    let expected_path = tmp.path().join("fixtures/demo/expected.jsonl");
    let test = |update: bool| {
        let mut cmd = scrape();
        cmd.arg("test").arg(&profile);
        if update {
            cmd.arg("--update");
        }
        run(&mut cmd)
    };
    let output = test(false);
    assert!(output.status.success(), "{}", text(&output));

    let original = std::fs::read_to_string(&expected_path).unwrap();
    let mut lines: Vec<&str> = original.lines().collect();
    let dropped = lines.remove(0).to_owned();
    let changed = lines[0].replacen("\"rule\":\"", "\"rule\":\"renamed-", 1);
    let kept = lines[0].to_owned();
    lines[0] = &changed;
    std::fs::write(&expected_path, lines.join("\n") + "\n").unwrap();

    let output = test(false);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("+{dropped}")), "{stderr}");
    assert!(stderr.contains(&format!("-{changed}")), "{stderr}");
    assert!(stderr.contains(&format!("+{kept}")), "{stderr}");

    let output = test(true);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&expected_path).unwrap(), original);
    let output = test(false);
    assert!(output.status.success(), "{}", text(&output));
}

/// `scrape test site-profiles/NAME.toml` on the committed recording; no secret is needed.
fn site_profile_replays_as_expected(name: &str) {
    let output = run(scrape()
        .arg("test")
        .arg(repo(&format!("site-profiles/{name}.toml")))
        .env_remove(PHOTOS_SECRET));
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(": ok ("), "{stderr}");
}

/// Every profile of `site-profiles/` comes with a recording, an expected file and a test below.
#[test]
fn every_site_profile_has_a_recording_and_a_replay_test() {
    let tests = include_str!("replay.rs");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(repo("site-profiles")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            for file in ["site.har", "expected.jsonl"] {
                let fixture = repo(&format!("fixtures/{name}/{file}"));
                assert!(
                    fixture.is_file(),
                    "{} has no {}",
                    path.display(),
                    fixture.display()
                );
            }
            let test = format!("site_profile_replays_as_expected(\"{name}\")");
            assert!(tests.contains(&test), "no test runs {test}");
            names.push(name);
        }
    }
    assert!(names.len() >= 5, "{names:?}");
}

#[test]
fn demo_profile_replays_as_expected() {
    site_profile_replays_as_expected("demo");
}

#[test]
fn infinite_profile_replays_as_expected() {
    if chromium_available("infinite_profile_replays_as_expected") {
        site_profile_replays_as_expected("infinite");
    }
}

#[test]
fn spa_profile_replays_as_expected() {
    if chromium_available("spa_profile_replays_as_expected") {
        site_profile_replays_as_expected("spa");
    }
}

#[test]
fn api_profile_replays_as_expected() {
    site_profile_replays_as_expected("api");
}

/// The variable `site-profiles/api.toml` reads its login secret from.
const PHOTOS_SECRET: &str = "PHOTOS_SECRET";

#[test]
fn a_recorded_login_keeps_no_secret_or_token_and_replays_without_them() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = repo("site-profiles/api.toml");
    let site = Site::serve("fixtures/js-sites");
    let start = format!("{}/photos/", site.origin);
    let live = tmp.path().join("live");
    let output = run(scrape()
        .args(["--quiet", "--progress", "off", "--profile"])
        .arg(&profile)
        .args(["--start", &start, "--out"])
        .arg(&live)
        .env(PHOTOS_SECRET, scrape::demo::api::CLIENT_SECRET));
    assert!(output.status.success(), "{}", text(&output));
    let live_images = manifest_hashes(&live);
    assert_eq!(live_images.len(), scrape::demo::api::PHOTOS as usize);

    let output = run(scrape()
        .args(["record", "--quiet", "--images", "keep", "--profile"])
        .arg(&profile)
        .args(["--start", &start, "--out"])
        .arg(tmp.path())
        .env(PHOTOS_SECRET, scrape::demo::api::CLIENT_SECRET));
    assert!(output.status.success(), "{}", text(&output));
    drop(site);
    let har = std::fs::read_to_string(tmp.path().join("site.har")).unwrap();
    assert!(
        !har.contains(scrape::demo::api::CLIENT_SECRET),
        "the secret was recorded"
    );
    // The demo's tokens are `demo-<n>-<hex>`.
    let token = regex::Regex::new(r"demo-\d+-[0-9a-f]+").unwrap();
    assert!(
        !token.is_match(&har),
        "a token was recorded: {:?}",
        token.find(&har)
    );
    assert!(har.contains(r#"access_token\":\"[redacted]\""#), "{har}");

    let replayed = tmp.path().join("replayed");
    let output = run(scrape()
        .args([
            "--quiet",
            "--progress",
            "off",
            "--replay-strict",
            "--profile",
        ])
        .arg(&profile)
        .args(["--start", &start, "--out"])
        .arg(&replayed)
        .arg("--replay")
        .arg(tmp.path().join("site.har"))
        .env_remove(PHOTOS_SECRET));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(manifest_hashes(&replayed), live_images);
}

#[test]
fn backgrounds_profile_replays_as_expected() {
    if chromium_available("backgrounds_profile_replays_as_expected") {
        site_profile_replays_as_expected("backgrounds");
    }
}

/// Runs `profile` live from `origin` + `start`, records it with image bodies, stops the server
/// (by dropping `server`) and replays: the manifests must be the same.
fn browser_replay_matches_live<S>(profile: &str, start: &str, origin: &str, server: S) {
    let tmp = tempfile::tempdir().unwrap();
    let profile = repo(&format!("site-profiles/{profile}.toml"));
    let start = format!("{origin}{start}");
    let live = tmp.path().join("live");
    let output = run(scrape()
        .args(["--profile"])
        .arg(&profile)
        .args(["--start", &start, "--progress", "off", "--out"])
        .arg(&live));
    assert!(output.status.success(), "{}", text(&output));
    let rec = tmp.path().join("rec");
    let recorded = run(scrape()
        .args(["record", "-v", "--images", "keep", "--profile"])
        .arg(&profile)
        .args(["--start", &start, "--out"])
        .arg(&rec));
    assert!(recorded.status.success(), "{}", text(&recorded));
    drop(server);

    let replayed = tmp.path().join("replayed");
    let output = run(scrape()
        .args(["-v", "--profile"])
        .arg(&profile)
        .arg("--replay")
        .arg(rec.join("site.har"))
        .args([
            "--replay-strict",
            "--start",
            &start,
            "--progress",
            "off",
            "--out",
        ])
        .arg(&replayed));
    assert!(output.status.success(), "{}", text(&output));
    let expected = manifest_hashes(&live);
    assert!(!expected.is_empty(), "the live run stored images");
    assert_eq!(
        manifest_hashes(&replayed),
        expected,
        "the recording:\n{}\nthe replay:\n{}",
        text(&recorded),
        text(&output)
    );
}

#[test]
fn a_browser_replay_with_the_server_stopped_gives_the_live_manifest() {
    if !chromium_available("a_browser_replay_with_the_server_stopped_gives_the_live_manifest") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let origin = site.origin.clone();
    browser_replay_matches_live("infinite", "/infinite/", &origin, site);
}

#[test]
fn load_more_posts_replay_in_recorded_order() {
    if !chromium_available("load_more_posts_replay_in_recorded_order") {
        return;
    }
    // The SPA's "Load more" POSTs differ only by cursor, and its images come only from the
    // JSON answers: a wrong or repeated answer changes the manifest.
    let server = ApiServer::serve();
    let origin = server.origin();
    browser_replay_matches_live("spa", "/spa/", &origin, server);
}

/// The pages done by the job in `out`: the counter and the chain's checkpoint.
fn pages_done(out: &Path) -> (u64, u64) {
    let status = crate::support::status_json(out);
    (
        status["counters"]["pages_done"].as_u64().unwrap(),
        status["chains"][0]["checkpoint"]["pages_done"]
            .as_u64()
            .unwrap(),
    )
}

#[test]
fn a_recording_counts_every_api_page_the_rendered_page_fetched_as_its_replay_and_a_run_do() {
    if !chromium_available(
        "a_recording_counts_every_api_page_the_rendered_page_fetched_as_its_replay_and_a_run_do",
    ) {
        return;
    }
    // The page clicks through all three API pages whatever `--pages` says: they are all in the
    // recording, so the recording's summary counts them, as its replay does.
    let tmp = tempfile::tempdir().unwrap();
    let server = ApiServer::serve();
    let profile = crate::support::rendered_spa_walk(tmp.path(), &server.origin(), "");
    let rec = tmp.path().join("rec");
    let recorded = run(scrape()
        .args(["record", "--pages", "1", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(&rec));
    assert!(recorded.status.success(), "{}", text(&recorded));
    let har: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rec.join("site.har")).unwrap()).unwrap();
    let api_pages = har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["request"]["method"] == "POST")
        .count();
    assert_eq!(api_pages, 3, "{har}");
    assert!(
        stderr(&recorded).contains("(3 pages, 8 images found)"),
        "{}",
        text(&recorded)
    );

    // A live run under `max_pages = 1` takes the same pages: summary, counter, checkpoint and
    // the pages table (one page per cursor) agree.
    let live = tmp.path().join("live");
    // A profile file of its own: the replay below runs the recorded profile, without the limit.
    let limited_dir = tmp.path().join("limited");
    std::fs::create_dir(&limited_dir).unwrap();
    let limited =
        crate::support::rendered_spa_walk(&limited_dir, &server.origin(), "max_pages = 1");
    let output = run(scrape()
        .arg("--profile")
        .arg(&limited)
        .args(["--progress", "off", "--out"])
        .arg(&live));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        stderr(&output).contains("pages     3 done, 0 failed"),
        "{}",
        text(&output)
    );
    assert_eq!(pages_done(&live), (3, 3));
    let pages: std::collections::BTreeSet<String> = crate::support::manifest(&live)
        .iter()
        .map(|image| image["page"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    drop(server);

    let replayed = tmp.path().join("replayed");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .arg("--replay")
        .arg(rec.join("site.har"))
        .args(["--replay-strict", "--progress", "off", "--out"])
        .arg(&replayed));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(pages_done(&replayed), (3, 3), "{}", text(&output));
}

/// Records requests through the run's HTTP client against a loopback API, stops it, and
/// replays them changed the ways real pages change them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_matches_changed_cache_busters_reordered_queries_and_graphql_bodies() {
    use std::sync::Arc;

    use axum::Router;
    use axum::extract::RawQuery;
    use axum::routing::{get, post};
    use scrape::net::HttpClient;
    use scrape::net::session::Session;
    use scrape::profile::DownloadSettings;
    use scrape::replay::matching::MatchRules;
    use scrape::replay::{Network, Recorder, Replayer};

    let app = Router::new()
        .route(
            "/api",
            get(|RawQuery(query): RawQuery| async move {
                format!("query {}", query.unwrap_or_default())
            }),
        )
        .route(
            "/graphql",
            post(|body: String| async move {
                let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                format!("after {}", request["variables"]["after"])
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    // reqwest is built without a default crypto provider; the binary installs ring at start.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = DownloadSettings::defaults_for("seam");
    let recorder = Arc::new(Recorder::new());
    let client = HttpClient::new(
        &settings,
        &Session::default(),
        Network::Record(Arc::clone(&recorder)),
    )
    .unwrap();
    let body_of = |client: HttpClient, request: reqwest::RequestBuilder| async move {
        let response = client.send(request).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let url = |path: &str| url::Url::parse(&format!("{origin}{path}")).unwrap();
    let graphql = |body: &str| {
        client
            .post(url("/graphql"))
            .header("content-type", "application/json")
            .body(body.to_owned())
    };
    let recorded = [
        body_of(
            client.clone(),
            client.get(url("/api?page=2&sort=new&_=1700000000001")),
        )
        .await,
        body_of(
            client.clone(),
            graphql(r#"{"query":"q","variables":{"after":"c2","requestId":"r1"}}"#),
        )
        .await,
        body_of(
            client.clone(),
            graphql(r#"{"query":"q","variables":{"after":"c3","requestId":"r2"}}"#),
        )
        .await,
    ];
    assert_eq!(
        recorded[0],
        (200, "query page=2&sort=new&_=1700000000001".to_owned())
    );
    server.abort();
    let _ = server.await;

    let rules = MatchRules {
        ignore_body_paths: vec![MatchRules::body_path("variables.requestId")],
        ..MatchRules::default()
    };
    let replayer = Arc::new(Replayer::new(recorder.har(), rules));
    let client = HttpClient::new(
        &settings,
        &Session::default(),
        Network::Replay(Arc::clone(&replayer)),
    )
    .unwrap();
    let graphql = |body: &str| {
        client
            .post(url("/graphql"))
            .header("content-type", "application/json")
            .body(body.to_owned())
    };
    // Another cache-buster value, the parameters in another order.
    assert_eq!(
        body_of(
            client.clone(),
            client.get(url("/api?_=1800000000000&sort=new&page=2"))
        )
        .await,
        recorded[0]
    );
    // The same variables in another key order, another request id.
    assert_eq!(
        body_of(
            client.clone(),
            graphql(r#"{"variables":{"requestId":"x9","after":"c3"},"query":"q"}"#)
        )
        .await,
        recorded[2]
    );
    assert_eq!(
        body_of(
            client.clone(),
            graphql(r#"{ "variables": { "after": "c2" }, "query": "q" }"#)
        )
        .await,
        recorded[1]
    );
    assert!(
        replayer.unmatched().is_empty(),
        "{:?}",
        replayer.unmatched()
    );
    // Another page is not in the recording.
    let (status, _) = body_of(client.clone(), client.get(url("/api?page=3&sort=new"))).await;
    assert_eq!(status, 404);
    assert_eq!(
        replayer.unmatched(),
        [format!("GET {origin}/api?page=3&sort=new")]
    );
}

/// A recording of one page, written by hand: `https://www.example.test/` answers with a
/// `set-cookie` header of two lines (as HAR files join repeated headers) and one image.
fn multiline_recording(dir: &Path) -> PathBuf {
    let page = r#"<!doctype html><div class="g"><img src="/photo.jpg"></div>"#;
    let har = serde_json::json!({ "log": { "version": "1.2", "creator": { "name": "hand", "version": "1" },
        "entries": [{
            "startedDateTime": "2026-12-01T00:00:00.000Z", "time": 0.0,
            "request": { "method": "GET", "url": "https://www.example.test/", "httpVersion": "HTTP/1.1",
                "cookies": [], "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0 },
            "response": { "status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "cookies": [],
                "headers": [
                    { "name": "content-type", "value": "text/html" },
                    { "name": "set-cookie", "value": "a=1; Path=/\nb=2; Path=/" }
                ],
                "content": { "size": page.len(), "mimeType": "text/html", "text": page },
                "redirectURL": "", "headersSize": -1, "bodySize": -1 },
            "cache": {}, "timings": { "send": 0, "wait": 0, "receive": 0 }
        }]
    }});
    let path = dir.join("site.har");
    std::fs::write(&path, har.to_string()).unwrap();
    path
}

#[test]
fn a_browser_replay_answers_multiline_headers_and_fails_on_a_start_page_not_recorded() {
    if !chromium_available(
        "a_browser_replay_answers_multiline_headers_and_fails_on_a_start_page_not_recorded",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let har = multiline_recording(tmp.path());
    let profile = tmp.path().join("p.toml");
    std::fs::write(
        &profile,
        "name = \"multiline\"\nstart = [\"https://www.example.test/\"]\nrender = \"browser\"\n[browser]\npage_timeout = \"20s\"\n[[images]]\nselector = \".g img\"\n",
    )
    .unwrap();
    let replay = |out: &str, start: &str| {
        let started = std::time::Instant::now();
        let output = run(scrape()
            .arg("--profile")
            .arg(&profile)
            .arg("--replay")
            .arg(&har)
            .arg("--out")
            .arg(tmp.path().join(out))
            .args(["--start", start, "--progress", "off"]));
        (output, started.elapsed())
    };
    let (output, took) = replay("out", "https://www.example.test/");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("1 images found"), "{stderr}");
    assert!(!stderr.contains("not in the recording"), "{stderr}");

    let (output, _) = replay("missing", "https://www.example.test/missing");
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let failures = std::fs::read_to_string(tmp.path().join("missing/failures.jsonl")).unwrap();
    assert!(failures.contains("\"class\":\"http_404\""), "{failures}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("GET https://www.example.test/missing"),
        "{stderr}"
    );
}

/// A port on loopback where nothing listens (bound, then closed).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `scrape test PROFILE` (`--update` first when asked).
fn scrape_test(profile: &Path, update: bool) -> std::process::Output {
    let mut cmd = scrape();
    cmd.arg("test").arg(profile);
    if update {
        cmd.arg("--update");
    }
    run(&mut cmd)
}

#[test]
fn a_request_that_failed_while_recording_replays_as_a_failure_and_ignore_forgives_a_missing_one() {
    if !chromium_available(
        "a_request_that_failed_while_recording_replays_as_a_failure_and_ignore_forgives_a_missing_one",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let site_dir = tmp.path().join("site");
    std::fs::create_dir_all(site_dir.join("g")).unwrap();
    let dead = format!("http://127.0.0.1:{}/style.css", closed_port());
    std::fs::write(
        site_dir.join("g/index.html"),
        format!(
            r#"<!doctype html><html><head><link rel="stylesheet" href="{dead}"></head><body><div class="g"><img src="/p/1.jpg"><img src="/p/2.jpg"></div></body></html>"#
        ),
    )
    .unwrap();
    let site = Site::serve_dir(&site_dir);
    let origin = site.origin.clone();
    let write_profile = |extra: &str| {
        let profile = tmp.path().join("p.toml");
        std::fs::write(
            &profile,
            format!(
                "name = \"dead-style\"\nstart = [\"{}/g/\"]\nrender = \"browser\"\n[browser]\npage_timeout = \"20s\"\n[[images]]\nselector = \".g img\"\n[replay]\nrecording = \"rec/site.har\"\n{extra}",
                origin
            ),
        )
        .unwrap();
        profile
    };
    let profile = write_profile("");
    let recorded = run(scrape()
        .args(["record", "--quiet", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(tmp.path().join("rec")));
    assert!(recorded.status.success(), "{}", text(&recorded));
    drop(site);
    let har_path = tmp.path().join("rec/site.har");
    let mut har: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&har_path).unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array_mut().unwrap();
    let failed = entries
        .iter()
        .position(|e| e["request"]["url"] == dead.as_str())
        .expect("the failed stylesheet is in the recording");
    assert_eq!(entries[failed]["response"]["status"], 0);
    assert!(entries[failed]["response"]["_error"].is_string());

    let update = scrape_test(&profile, true);
    assert!(update.status.success(), "{}", text(&update));
    let fresh = scrape_test(&profile, false);
    assert!(fresh.status.success(), "{}", text(&fresh));
    assert!(stderr(&fresh).contains("ok (2 images"), "{}", text(&fresh));

    // Without its entry, the stylesheet is an unrecorded request: strictness fails...
    entries.remove(failed);
    std::fs::write(&har_path, har.to_string()).unwrap();
    let missing = scrape_test(&profile, false);
    assert_eq!(missing.status.code(), Some(1), "{}", text(&missing));
    assert!(
        stderr(&missing).contains(&format!("GET {dead}")),
        "{}",
        text(&missing)
    );
    // ...unless `[replay] ignore` says it does not matter.
    let profile = write_profile("ignore = ['/style\\.css$']\n");
    let ignored = scrape_test(&profile, false);
    assert!(ignored.status.success(), "{}", text(&ignored));
}

/// Records `--pages 2` of a copy of site profile `name` (whose own `max_pages` is larger) from
/// `site_root`, then checks that the recording tests clean: `scrape test --update` and `scrape
/// test` pass, a replay's summary says the chain ended at the end of the recording. Then, with
/// the first request gone from the recording, `--update` fails and leaves the expected file
/// as it was.
fn a_short_recording_ends_its_chain_and_update_never_writes_a_failed_replay(
    name: &str,
    site_root: &str,
    start: &str,
) {
    const COMMITTED_ORIGIN: &str = "http://127.0.0.1:8080";
    let tmp = tempfile::tempdir().unwrap();
    let site = Site::serve(site_root);
    let profile = tmp.path().join(format!("site-profiles/{name}.toml"));
    let recording = tmp.path().join(format!("fixtures/{name}"));
    std::fs::create_dir_all(profile.parent().unwrap()).unwrap();
    let source = std::fs::read_to_string(repo(&format!("site-profiles/{name}.toml"))).unwrap();
    std::fs::write(&profile, source.replace(COMMITTED_ORIGIN, &site.origin)).unwrap();
    let recorded = run(scrape()
        .args(["record", "--quiet", "--pages", "2", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(&recording)
        .env(PHOTOS_SECRET, scrape::demo::api::CLIENT_SECRET));
    assert!(recorded.status.success(), "{}", text(&recorded));
    drop(site);

    let update = scrape_test(&profile, true);
    assert!(update.status.success(), "{}", text(&update));
    let expected_path = recording.join("expected.jsonl");
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    assert!(expected.lines().count() > 3, "{expected}");
    // The chain's pages: the demo's album pages are a level reached from its second start
    // URL, not pages of the chain.
    let pages: std::collections::BTreeSet<String> = crate::support::json_lines(&expected)
        .iter()
        .map(|image| image["page"].as_str().unwrap().to_owned())
        .filter(|page| !page.contains("/albums/"))
        .collect();
    assert_eq!(pages.len(), 2, "{pages:?}");
    let again = scrape_test(&profile, false);
    assert!(again.status.success(), "{}", text(&again));

    let replay = run(scrape()
        .args(["--progress", "off", "--replay-strict", "--profile"])
        .arg(&profile)
        .arg("--replay")
        .arg(recording.join("site.har"))
        .arg("--out")
        .arg(tmp.path().join("replayed"))
        .env_remove(PHOTOS_SECRET));
    assert!(replay.status.success(), "{}", text(&replay));
    assert!(
        stderr(&replay).contains("ended (end of recording)"),
        "{}",
        text(&replay)
    );

    // A replay that fails never becomes the expected file.
    let har_path = recording.join("site.har");
    let mut har: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&har_path).unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array_mut().unwrap();
    let first_page = entries
        .iter()
        .position(|e| {
            e["request"]["url"]
                .as_str()
                .is_some_and(|u| u.contains(start) && e["response"]["status"] == 200)
        })
        .expect("the first page is recorded");
    entries.remove(first_page);
    std::fs::write(&har_path, har.to_string()).unwrap();
    let failed = scrape_test(&profile, true);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed));
    assert!(
        stderr(&failed).contains("is left as it was"),
        "{}",
        text(&failed)
    );
    assert_eq!(std::fs::read_to_string(&expected_path).unwrap(), expected);
}

#[test]
fn a_next_link_recording_of_two_pages_tests_clean_under_a_larger_max_pages() {
    a_short_recording_ends_its_chain_and_update_never_writes_a_failed_replay(
        "demo",
        "fixtures/demo-site",
        "/gallery/",
    );
}

#[test]
fn a_json_cursor_recording_of_two_pages_tests_clean_under_a_larger_max_pages() {
    a_short_recording_ends_its_chain_and_update_never_writes_a_failed_replay(
        "api",
        "fixtures/js-sites",
        "/api/photos",
    );
}

#[test]
fn a_page_that_failed_while_recording_fails_again_in_a_static_replay_and_is_not_unrecorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}/gallery/", closed_port());
    let profile = tmp.path().join("p.toml");
    std::fs::write(
        &profile,
        format!("name = \"dead\"\nstart = [\"{dead}\"]\n[politeness]\nrobots = \"ignore\"\n[download]\nretries = 0\n[[images]]\nselector = \"img\"\n"),
    )
    .unwrap();
    let recorded = run(scrape()
        .args(["record", "--quiet", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(tmp.path().join("rec")));
    assert_eq!(recorded.status.code(), Some(1), "{}", text(&recorded));
    let har = std::fs::read_to_string(tmp.path().join("rec/site.har")).unwrap();
    assert!(har.contains("\"_error\""), "{har}");

    let replayed = run(scrape()
        .args(["--progress", "off", "--replay-strict", "--profile"])
        .arg(&profile)
        .arg("--replay")
        .arg(tmp.path().join("rec/site.har"))
        .arg("--out")
        .arg(tmp.path().join("out")));
    assert_eq!(replayed.status.code(), Some(1), "{}", text(&replayed));
    assert!(
        !stderr(&replayed).contains("not in the recording"),
        "{}",
        text(&replayed)
    );
    let failures = std::fs::read_to_string(tmp.path().join("out/failures.jsonl")).unwrap();
    assert!(failures.contains("failed while recording"), "{failures}");
}
