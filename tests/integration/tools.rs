//! Tools for profile authors: `scrape probe` (its screenshots, levels, follow links and API
//! pages) and `scrape new-profile`, against fixture sites and test servers on loopback.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tempfile::TempDir;

use crate::support::{
    ApiServer, ServerRuntime, Site, assert_refused, chromium_available, expected_demo_images,
    expected_images, infinite_paths, json_lines, manifest_hashes, repo, run, scrape,
    spa_image_paths, stderr, text,
};

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Width and height from a PNG's header.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.starts_with(PNG_MAGIC), "not a PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    (be(16), be(20))
}

/// The image URLs probe accepted, from its JSON lines.
fn accepted(stdout: &[u8]) -> BTreeSet<String> {
    json_lines(&String::from_utf8_lossy(stdout))
        .into_iter()
        .filter(|l| l["kind"] == "image" && l["accepted"] == true)
        .map(|l| l["url"].as_str().expect("url").to_owned())
        .collect()
}

fn probe_with_screenshot(site: &Site, shot: &Path, extra: &[&str]) -> std::process::Output {
    run(scrape()
        .arg("probe")
        .arg("--profile")
        .arg(repo("site-profiles/infinite.toml"))
        .args(["--url", &format!("{}/infinite/", site.origin)])
        .arg("--screenshot")
        .arg(shot)
        .args(extra))
}

#[test]
fn probe_screenshot_saves_a_png_of_the_whole_rendered_page() {
    if !chromium_available("probe_screenshot_saves_a_png_of_the_whole_rendered_page") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let dir = TempDir::new().expect("temporary folder");
    let shot = dir.path().join("infinite.png");
    let output = probe_with_screenshot(&site, &shot, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    // Probe still prints what it prints without the picture.
    let expected: BTreeSet<String> = expected_images(&site.origin, &infinite_paths())
        .into_keys()
        .collect();
    assert_eq!(accepted(&output.stdout), expected, "{}", text(&output));
    let (width, height) = png_size(&std::fs::read(&shot).expect("the screenshot was written"));
    // Twelve 320 px items after scrolling: the whole page, far taller than the viewport.
    assert!((400..=4000).contains(&width), "width {width}");
    assert!((12 * 320..=10_000).contains(&height), "height {height}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("{width}x{height} px")), "{stderr}");
    // The browser loaded the images for the picture.
    assert!(
        site.hits().keys().any(|p| p.starts_with("/img/scroll-")),
        "{:?}",
        site.hits()
    );

    let capped = dir.path().join("capped.png");
    let output = probe_with_screenshot(&site, &capped, &["--screenshot-max-height", "900"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let (_, height) = png_size(&std::fs::read(&capped).expect("the screenshot was written"));
    assert_eq!(height, 900);
}

#[test]
fn probe_screenshot_of_a_static_profile_is_a_usage_error() {
    let dir = TempDir::new().expect("temporary folder");
    let shot = dir.path().join("demo.png");
    let output = run(scrape()
        .arg("probe")
        .arg("--profile")
        .arg(repo("site-profiles/demo.toml"))
        .args(["--url", "http://127.0.0.1:9/gallery/", "--screenshot"])
        .arg(&shot));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("--screenshot needs a profile that renders"),
        "{}",
        text(&output)
    );
    assert!(!shot.exists());
}

#[test]
fn probe_of_a_browser_json_cursor_profile_saves_the_rendered_start_page_and_its_api_pages() {
    if !chromium_available(
        "probe_of_a_browser_json_cursor_profile_saves_the_rendered_start_page_and_its_api_pages",
    ) {
        return;
    }
    let server = ApiServer::serve();
    let dir = TempDir::new().expect("temporary folder");
    let profile = crate::support::rendered_spa_walk(dir.path(), &server.origin(), "");
    let (shot, html, json) = (
        dir.path().join("spa.png"),
        dir.path().join("spa.html"),
        dir.path().join("json"),
    );
    let output = run(scrape()
        .arg("probe")
        .arg("--profile")
        .arg(&profile)
        .arg("--screenshot")
        .arg(&shot)
        .arg("--save-html")
        .arg(&html)
        .arg("--save-json")
        .arg(&json));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    // The three POSTs the page sent as "Load more" was clicked, each with its cursor.
    let captured: Vec<_> = lines.iter().filter(|l| l["kind"] == "captured").collect();
    let listed: Vec<_> = captured
        .iter()
        .map(|l| {
            (
                l["walk"].clone(),
                l["cursor"].clone(),
                l["items"].clone(),
                l["images"].clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (true.into(), serde_json::Value::Null, 3.into(), 3.into()),
            (true.into(), "c2".into(), 3.into(), 3.into()),
            (true.into(), "c3".into(), 2.into(), 2.into()),
        ],
        "{}",
        text(&output)
    );
    for (n, line) in captured.iter().enumerate() {
        let file = json.join(format!("{:03}.json", n + 1));
        assert_eq!(line["file"], file.display().to_string());
        let body: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("saved")).expect("JSON");
        assert_eq!(
            body["items"].as_array().map(Vec::len),
            line["items"].as_u64().map(|n| n as usize)
        );
    }
    // The DOM after the clicks: every item's title.
    let saved = std::fs::read_to_string(&html).expect("the HTML was written");
    assert_eq!(saved.matches("<li>").count(), 8, "{saved}");
    let (width, height) = png_size(&std::fs::read(&shot).expect("the screenshot was written"));
    assert!(width > 0 && height > 0);
    // Then the normal report: the first API request, made by probe itself.
    let kinds: Vec<_> = lines
        .iter()
        .map(|l| l["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "image").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(kinds[kinds.len() - 2..], ["api", "next"], "{kinds:?}");
    assert_eq!(lines.last().expect("a verdict")["cursor"], "c2");
}

#[test]
fn probe_saves_the_json_a_rendered_page_fetched_and_refuses_it_for_a_static_profile() {
    if !chromium_available(
        "probe_saves_the_json_a_rendered_page_fetched_and_refuses_it_for_a_static_profile",
    ) {
        return;
    }
    let server = ApiServer::serve();
    let dir = TempDir::new().expect("temporary folder");
    let (html, json) = (dir.path().join("spa.html"), dir.path().join("json"));
    let output = run(scrape()
        .arg("probe")
        .arg("--profile")
        .arg(repo("site-profiles/spa.toml"))
        .args(["--url", &format!("{}/spa/", server.origin())])
        .arg("--save-html")
        .arg(&html)
        .arg("--save-json")
        .arg(&json));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    let captured = lines.iter().filter(|l| l["kind"] == "captured").count();
    assert_eq!(captured, 3, "{}", text(&output));
    assert!(json.join("003.json").exists() && !json.join("004.json").exists());
    assert!(
        lines.iter().all(|l| l.get("walk").is_none()),
        "no walk in a click profile"
    );
    assert!(
        std::fs::read_to_string(&html)
            .expect("written")
            .contains("Item 8")
    );

    for (profile, flag) in [
        (repo("site-profiles/demo.toml"), "--save-json"),
        (repo("site-profiles/api.toml"), "--save-html"),
    ] {
        let target = dir.path().join("refused");
        let output = run(scrape()
            .arg("probe")
            .arg("--profile")
            .arg(&profile)
            .args(["--url", "http://127.0.0.1:9/gallery/", flag])
            .arg(&target)
            .env("PHOTOS_SECRET", "unused"));
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("need"),
            "{}",
            text(&output)
        );
        assert!(!target.exists());
    }
}

/// A listing page on loopback whose thumbnails link to detail pages, and a profile whose
/// `[[follow]]` rule leads there, to level `detail`. The site, the listing's URL and the
/// profile.
fn listing_with_details(dir: &Path) -> (Site, String, PathBuf) {
    let root = dir.join("site");
    std::fs::create_dir_all(root.join("d")).expect("site folder");
    let thumbs: String = (1..=2)
        .map(|id| {
            format!(r#"<a class="thumb" href="/d/{id}.html" title="Photo {id}"><img src="/img/t{id}-8x6.png"></a>"#)
        })
        .collect();
    std::fs::write(
        root.join("list.html"),
        format!(r#"<!DOCTYPE html><main>{thumbs}</main><a href="/about.html">about</a>"#),
    )
    .expect("listing");
    std::fs::write(
        root.join("d/1.html"),
        r#"<!DOCTYPE html><main><img src="/img/t9-8x6.png"></main><figure><img class="full" src="/img/full-1-16x12.png"></figure>"#,
    )
    .expect("detail page");
    let site = Site::serve_dir(&root);
    let profile = dir.join("levels.toml");
    std::fs::write(
        &profile,
        format!(
            r#"name = "levels"
start = ["{origin}/list.html"]

[[images]]
selector = "main img"

[[follow]]
selector = "a.thumb"
level = "detail"
metadata = {{ title = "@title" }}

[levels.detail]
[[levels.detail.images]]
name = "full"
selector = "figure img.full"
"#,
            origin = site.origin
        ),
    )
    .expect("profile");
    let listing = format!("{}/list.html", site.origin);
    (site, listing, profile)
}

fn probe(profile: &Path, extra: &[&str]) -> std::process::Output {
    run(scrape()
        .arg("probe")
        .arg("--profile")
        .arg(profile)
        .args(extra))
}

#[test]
fn probe_lists_the_links_a_follow_rule_takes_with_their_level_and_metadata() {
    let dir = TempDir::new().expect("temporary folder");
    let (site, listing, profile) = listing_with_details(dir.path());
    let output = probe(&profile, &["--url", &listing]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    let links: Vec<_> = lines.iter().filter(|l| l["kind"] == "link").collect();
    let expected: Vec<_> = (1..=2)
        .map(|id| {
            serde_json::json!({
                "kind": "link",
                "url": format!("{}/d/{id}.html", site.origin),
                "rule": "follow[0]",
                "selector": "a.thumb",
                "level": "detail",
                "metadata": { "title": format!("Photo {id}") },
            })
        })
        .collect();
    assert_eq!(
        links,
        expected.iter().collect::<Vec<_>>(),
        "{}",
        text(&output)
    );
    // The images of the listing's own rules are still there, and the verdict comes last.
    assert_eq!(accepted(&output.stdout).len(), 2, "{}", text(&output));
    assert_eq!(lines.last().map(|l| l["kind"].clone()), Some("end".into()));
    assert!(
        stderr(&output).contains("2 link(s) to follow"),
        "{}",
        text(&output)
    );
}

#[test]
fn probe_level_applies_the_levels_rules_to_a_detail_page() {
    let dir = TempDir::new().expect("temporary folder");
    let (site, _, profile) = listing_with_details(dir.path());
    let detail = format!("{}/d/1.html", site.origin);
    let output = probe(&profile, &["--url", &detail, "--level", "detail"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    let images: Vec<_> = lines
        .iter()
        .filter(|l| l["kind"] == "image")
        .map(|l| {
            (
                l["url"].as_str().unwrap_or_default(),
                l["rule"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    // Only the level's rule: the start pages' `main img` would take the other image.
    assert_eq!(
        images,
        [(
            format!("{}/img/full-1-16x12.png", site.origin).as_str(),
            "full"
        )],
        "{}",
        text(&output)
    );
    assert!(
        lines.iter().all(|l| l["kind"] != "link"),
        "{}",
        text(&output)
    );
    assert!(site.hits().contains_key("/d/1.html"), "{:?}", site.hits());

    // Without --level, the start pages' rules apply to the same page.
    let output = probe(&profile, &["--url", &detail]);
    assert_eq!(
        accepted(&output.stdout),
        BTreeSet::from([format!("{}/img/t9-8x6.png", site.origin)]),
        "{}",
        text(&output)
    );
}

#[test]
fn probe_level_refuses_an_unknown_level_naming_the_levels_there_are() {
    let dir = TempDir::new().expect("temporary folder");
    let (site, listing, profile) = listing_with_details(dir.path());
    let output = probe(&profile, &["--url", &listing, "--level", "nope"]);
    assert_refused(
        &output,
        &["no level `nope`", "the profile's levels: `detail`"],
    );
    assert!(output.stdout.is_empty(), "{}", text(&output));
    let output = probe(
        &profile,
        &["--url", &listing, "--level", "detail", "--page", "2"],
    );
    assert_refused(&output, &["level `detail` are not paginated"]);
    assert!(site.hits().is_empty(), "nothing fetched: {:?}", site.hits());
}

/// A page-numbered API on loopback: `POST /api/graphql` answers `{"variables": {"page": N}}`
/// with two photos of page N for N up to [`PagedApi::PAGES`], none after; `GET
/// /api/photos?offset=K&limit=L` lists photos K+1 to K+L of `2 * PAGES`. Every request is
/// logged, as `page=N` or `offset=K`.
struct PagedApi {
    origin: String,
    log: Arc<Mutex<Vec<String>>>,
    _runtime: ServerRuntime,
}

impl PagedApi {
    const PAGES: u64 = 20;

    fn serve() -> Self {
        use axum::Router;
        use axum::extract::State;
        use axum::http::{HeaderName, Uri, header};
        use axum::routing::{get, post};

        type Log = Arc<Mutex<Vec<String>>>;
        type Reply = ([(HeaderName, &'static str); 1], String);

        fn photos(ids: impl Iterator<Item = u64>) -> Reply {
            let items: Vec<_> = ids
                .map(|id| serde_json::json!({ "src": format!("/img/api-{id}-16x12.png") }))
                .collect();
            let body = serde_json::json!({ "data": { "photos": items } }).to_string();
            ([(header::CONTENT_TYPE, "application/json")], body)
        }
        async fn by_page(State(log): State<Log>, body: String) -> Reply {
            let sent: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let page = sent["variables"]["page"].as_u64().unwrap_or(0);
            log.lock().unwrap().push(format!("page={page}"));
            // Two photos a page; past the last page, none.
            let last = 2 * page.min(PagedApi::PAGES);
            photos((2 * page).saturating_sub(1).max(1)..=last)
        }
        async fn by_offset(State(log): State<Log>, uri: Uri) -> Reply {
            let query: BTreeMap<String, u64> = uri
                .query()
                .unwrap_or_default()
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .filter_map(|(name, value)| Some((name.to_owned(), value.parse().ok()?)))
                .collect();
            let (offset, limit) = (query["offset"], query["limit"]);
            log.lock().unwrap().push(format!("offset={offset}"));
            photos(offset + 1..=(offset + limit).min(2 * PagedApi::PAGES))
        }

        let runtime = ServerRuntime::new(1);
        let log = Log::default();
        let app = Router::new()
            .route("/api/graphql", post(by_page))
            .route("/api/photos", get(by_offset))
            .with_state(Arc::clone(&log));
        let origin = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a loopback port");
            let addr = listener.local_addr().expect("its address");
            tokio::spawn(async move { axum::serve(listener, app).await });
            format!("http://{addr}")
        });
        Self {
            origin,
            log,
            _runtime: runtime,
        }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// A profile of the API in `dir`: `pagination` is the request's part of `[pagination]`.
    fn profile(&self, dir: &Path, pagination: &str) -> PathBuf {
        let path = dir.join("paged.toml");
        std::fs::write(
            &path,
            format!(
                r#"name = "paged"
start = ["{}/"]

[pagination]
kind = "json_cursor"
{pagination}

[[api]]
url = "/api/"
items = "$.data.photos[*]"
image = "$.src"
"#,
                self.origin
            ),
        )
        .expect("profile");
        path
    }

    fn image(&self, id: u64) -> String {
        format!("{}/img/api-{id}-16x12.png", self.origin)
    }
}

#[test]
fn probe_page_asks_a_page_numbered_post_api_for_that_page() {
    let api = PagedApi::serve();
    let dir = TempDir::new().expect("temporary folder");
    let profile = api.profile(
        dir.path(),
        "request = \"/api/graphql\"\nmethod = \"POST\"\nbody = '{\"variables\": {\"page\": \"{page}\"}}'",
    );
    let output = probe(&profile, &["--page", "15"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(api.log(), ["page=15"], "one request, for page 15");
    assert_eq!(
        accepted(&output.stdout),
        BTreeSet::from([api.image(29), api.image(30)]),
        "{}",
        text(&output)
    );
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    let page = lines
        .iter()
        .find(|l| l["kind"] == "api")
        .expect("an api line");
    assert_eq!(
        (
            &page["page"],
            &page["items"],
            &page["body"]["variables"]["page"]
        ),
        (&15.into(), &2.into(), &15.into()),
        "{page}"
    );
    let next = lines.last().expect("lines");
    assert_eq!(
        (&next["kind"], &next["page"]),
        (&"next".into(), &16.into()),
        "{next}"
    );
    assert_eq!(
        (&next["url"], &next["body"]["variables"]["page"]),
        (&format!("{}/api/graphql", api.origin).into(), &16.into()),
        "{next}"
    );
    // No `{offset}` in the request: no offset to show.
    assert!(
        page.get("offset").is_none() && next.get("offset").is_none(),
        "{next}"
    );

    // Page 21 is past the last: empty, and the end.
    let output = probe(&profile, &["--page", "21"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(
        lines.last().map(|l| l["reason"].clone()),
        Some("empty page".into())
    );

    let asked = api.log().len();
    for (args, said) in [
        (
            ["--page", "0"],
            "--page: no page `0`: the pages are numbered from 1",
        ),
        (["--page", "x"], "`x` is not a page number"),
        (
            ["--cursor", "5"],
            "this one numbers its pages (\"{page}\" or \"{offset}\"): give --page N",
        ),
    ] {
        assert_refused(&probe(&profile, &args), &[said]);
    }
    assert_eq!(api.log().len(), asked, "refused before asking");
}

#[test]
fn probe_page_of_an_offset_api_counts_the_items_of_the_pages_before_it() {
    let api = PagedApi::serve();
    let dir = TempDir::new().expect("temporary folder");
    let profile = api.profile(
        dir.path(),
        "request = \"/api/photos?offset={offset}&limit=3\"",
    );
    let output = probe(&profile, &["--page", "4"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(api.log(), ["offset=0", "offset=3", "offset=6", "offset=9"]);
    assert_eq!(
        accepted(&output.stdout),
        (10..=12).map(|id| api.image(id)).collect::<BTreeSet<_>>(),
        "{}",
        text(&output)
    );
    assert!(
        stderr(&output).contains("9 item(s) before it"),
        "{}",
        text(&output)
    );
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    let page = lines
        .iter()
        .find(|l| l["kind"] == "api")
        .expect("an api line");
    assert_eq!(
        (&page["page"], &page["offset"]),
        (&4.into(), &9.into()),
        "{page}"
    );
    let next = lines.last().expect("lines");
    assert_eq!(
        (&next["page"], &next["offset"]),
        (&5.into(), &12.into()),
        "{next}"
    );

    // Past the last page, the pages before it say where the chain ends.
    let output = probe(&profile, &["--page", "20"]);
    assert_refused(
        &output,
        &["--page `20`", "the API's pages end at page 15 (empty page)"],
    );
}

#[test]
fn probe_page_of_a_cursor_api_names_the_cursor_flag() {
    let dir = TempDir::new().expect("temporary folder");
    let profile = dir.path().join("cursor.toml");
    std::fs::write(
        &profile,
        "name = \"c\"\nstart = [\"http://127.0.0.1:9/\"]\n[pagination]\nkind = \"json_cursor\"\nrequest = \"/api\"\ncursor = \"$.next\"\n[[api]]\nurl = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\n",
    )
    .expect("profile");
    let output = probe(&profile, &["--page", "3"]);
    assert_refused(&output, &["this one pages by cursor: give --cursor"]);
}

/// `scrape new-profile URL --out DIR/NAME.toml` plus `extra`; the draft's text.
fn draft(url: &str, dir: &Path, name: &str, extra: &[&str]) -> (PathBuf, String) {
    let path = dir.join(format!("{name}.toml"));
    let output = run(scrape()
        .args(["new-profile", url, "--out"])
        .arg(&path)
        .args(extra));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let toml = std::fs::read_to_string(&path).expect("the draft was written");
    let check = run(scrape().args(["check", "--profile"]).arg(&path));
    assert_eq!(check.status.code(), Some(0), "{}\n{toml}", text(&check));
    assert!(
        !text(&check).contains("warning"),
        "the draft has warnings:\n{}\n{toml}",
        text(&check)
    );
    (path, toml)
}

/// Runs `profile` to completion into `DIR/out`; the manifest's URLs and hashes.
fn run_draft(profile: &Path, dir: &Path) -> BTreeMap<String, String> {
    let out = dir.join("out");
    let output = run(scrape()
        .arg("--profile")
        .arg(profile)
        .arg("--out")
        .arg(&out)
        .args(["--progress", "off"]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    manifest_hashes(&out)
}

#[test]
fn new_profile_drafts_the_demo_gallery_as_a_static_profile_that_finds_every_image() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let (path, toml) = draft(
        &format!("{}/gallery/", site.origin),
        dir.path(),
        "demo",
        &[],
    );
    assert!(toml.contains("render = \"static\""), "{toml}");
    assert!(toml.contains("kind = \"next_link\""), "{toml}");
    // Every page of the gallery, every image, and not the logo, icons, ad or badge.
    assert_eq!(
        run_draft(&path, dir.path()),
        expected_demo_images(&site.origin),
        "{toml}"
    );
}

#[test]
fn new_profile_drafts_the_infinite_gallery_with_scrolling_and_finds_every_image() {
    if !chromium_available(
        "new_profile_drafts_the_infinite_gallery_with_scrolling_and_finds_every_image",
    ) {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let dir = TempDir::new().expect("temporary folder");
    let (path, toml) = draft(
        &format!("{}/infinite/", site.origin),
        dir.path(),
        "infinite",
        &[],
    );
    assert!(toml.contains("render = \"browser\""), "{toml}");
    assert!(toml.contains("scroll = "), "{toml}");
    assert!(toml.contains("[[api]]"), "{toml}");
    assert_eq!(
        run_draft(&path, dir.path()),
        expected_images(&site.origin, &infinite_paths()),
        "{toml}"
    );
}

#[test]
fn new_profile_drafts_api_rules_and_a_click_for_the_single_page_app() {
    if !chromium_available("new_profile_drafts_api_rules_and_a_click_for_the_single_page_app") {
        return;
    }
    let api = ApiServer::serve();
    let dir = TempDir::new().expect("temporary folder");
    let (path, toml) = draft(&format!("{}/spa/", api.origin()), dir.path(), "spa", &[]);
    assert!(toml.contains("click = \"#more\""), "{toml}");
    assert!(toml.contains("image = \"$.image.url\""), "{toml}");
    assert_eq!(
        run_draft(&path, dir.path()),
        expected_images(&api.origin(), &spa_image_paths()),
        "{toml}"
    );
}

#[test]
fn new_profile_finds_the_repeated_background_tiles() {
    if !chromium_available("new_profile_finds_the_repeated_background_tiles") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let dir = TempDir::new().expect("temporary folder");
    let (path, toml) = draft(
        &format!("{}/background/", site.origin),
        dir.path(),
        "bg",
        &[],
    );
    assert!(toml.contains("render = \"browser\""), "{toml}");
    // The three repeated tiles are the gallery; the one-off banner and plain image (2 of the 5
    // images the hand-written profile takes) are not drafted.
    let tiles: Vec<String> = (1..=3)
        .map(|i| format!("/img/bg-tile-{i}-200x150.jpg"))
        .collect();
    assert_eq!(
        run_draft(&path, dir.path()),
        expected_images(&site.origin, &tiles),
        "{toml}"
    );
}

#[test]
fn new_profile_refuses_to_overwrite_without_force() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, "# hand-written\n").unwrap();
    let url = format!("{}/gallery/", site.origin);
    let output = run(scrape()
        .args(["new-profile", &url, "--render", "static", "--out"])
        .arg(&path));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("--force"), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# hand-written\n");
    let output = run(scrape()
        .args([
            "new-profile",
            &url,
            "--render",
            "static",
            "--force",
            "--out",
        ])
        .arg(&path));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("[[images]]")
    );
}

#[test]
fn new_profile_without_out_prints_the_draft() {
    let site = Site::serve("fixtures/demo-site");
    let output = run(scrape().args([
        "new-profile",
        &format!("{}/gallery/", site.origin),
        "--render",
        "static",
    ]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let toml = String::from_utf8_lossy(&output.stdout);
    assert!(scrape::profile::check(&toml).profile.is_some(), "{toml}");
    assert!(toml.contains(".gallery figure img"), "{toml}");
}

#[test]
fn new_profile_finds_a_bem_next_class_and_a_bare_next_link() {
    let dir = TempDir::new().expect("temporary folder");
    let figures = r#"<div class="g"><figure><img src="/p/1.jpg"></figure><figure><img src="/p/2.jpg"></figure><figure><img src="/p/3.jpg"></figure></div>"#;
    for (name, link) in [
        (
            "bem",
            r#"<p><a class="pagination__next" href="other.html">Next</a></p>"#,
        ),
        ("bare", r#"<p><a href="other.html">Next</a></p>"#),
    ] {
        std::fs::write(
            dir.path().join(format!("{name}.html")),
            format!("<!doctype html><html><body>{figures}{link}</body></html>"),
        )
        .unwrap();
    }
    let site = Site::serve_dir(dir.path());
    for (name, selector) in [
        ("bem", "a.pagination__next"),
        ("bare", "p > a:last-of-type"),
    ] {
        let url = format!("{}/{name}.html", site.origin);
        let (_, toml) = draft(&url, dir.path(), name, &["--render", "static"]);
        assert!(toml.contains("kind = \"next_link\""), "{toml}");
        assert!(
            toml.contains(&format!("selector = \"{selector}\"")),
            "{toml}"
        );
    }
}

#[test]
fn new_profile_checks_wait_for_and_page_timeout_like_the_keys_they_mirror() {
    for (flag, value, message) in [
        (
            "--page-timeout",
            "0s",
            "--page-timeout: a duration of zero would end every page at once",
        ),
        ("--page-timeout", "30", "--page-timeout:"),
        (
            "--wait-for",
            "div[",
            "--wait-for: invalid CSS selector `div[`",
        ),
    ] {
        let output = run(scrape().args(["new-profile", "http://127.0.0.1:9/", flag, value]));
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        assert!(text(&output).contains(message), "{}", text(&output));
    }
}

/// A gallery page: a fixed cookie banner, thumbnails linking to detail pages of the site, and
/// an "Add content" button that adds one more.
fn gallery_page_with_extras() -> String {
    let figures: String = (1..=4)
        .map(|i| {
            format!(
                r#"<figure><a class="thumb" href="/photo/{i}.html"><img src="/img/t-{i}-64x64.jpg" alt="{i}"></a></figure>"#
            )
        })
        .collect();
    format!(
        r#"<!doctype html><html><body>
<div id="cookie-banner" style="position:fixed;bottom:0;left:0;right:0">We use cookies <button class="accept">Accept all</button></div>
<section class="gallery">{figures}</section>
<button id="add" type="button">Add content</button>
<script>
document.getElementById("add").onclick = () => {{
  const g = document.querySelector(".gallery");
  const n = g.children.length + 1;
  g.insertAdjacentHTML("beforeend", `<figure><a class="thumb" href="/photo/${{n}}.html"><img src="/img/t-${{n}}-64x64.jpg" alt="${{n}}"></a></figure>`);
}};
</script></body></html>"#
    )
}

#[test]
fn new_profile_names_each_draft_after_its_page_with_an_output_folder_of_its_own() {
    let dir = TempDir::new().expect("temporary folder");
    for page in ["cats", "dogs"] {
        std::fs::write(
            dir.path().join(format!("{page}.html")),
            gallery_page_with_extras(),
        )
        .unwrap();
    }
    let site = Site::serve_dir(dir.path());
    let url = format!("{}/cats.html", site.origin);
    let output = run(scrape().args(["new-profile", &url, "--render", "static"]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(", 1 image rule(s),"), "{}", text(&output));
    assert!(
        stderr.contains("output folder: downloads/127-0-0-1-cats"),
        "{}",
        text(&output)
    );
    let mut outs = BTreeSet::new();
    for page in ["cats", "dogs"] {
        let url = format!("{}/{page}.html", site.origin);
        let (_, toml) = draft(&url, dir.path(), page, &["--render", "static"]);
        let name = format!("127-0-0-1-{page}");
        assert!(toml.contains(&format!("name = \"{name}\"")), "{toml}");
        let out = format!(
            "[download]\n# A folder of this draft's own, named like it.\nout = \"downloads/{name}\""
        );
        assert!(toml.contains(&out), "{toml}");
        outs.insert(name);
        // The thumbnails' detail pages, proposed for the author to finish.
        assert!(
            toml.contains("# [[follow]]\n# selector = \".gallery figure a.thumb\""),
            "{toml}"
        );
    }
    assert_eq!(outs.len(), 2);
}

#[test]
fn new_profile_proposes_a_dismiss_a_follow_and_an_add_content_click() {
    if !chromium_available("new_profile_proposes_a_dismiss_a_follow_and_an_add_content_click") {
        return;
    }
    let dir = TempDir::new().expect("temporary folder");
    std::fs::write(dir.path().join("cats.html"), gallery_page_with_extras()).unwrap();
    let site = Site::serve_dir(dir.path());
    let url = format!("{}/cats.html", site.origin);
    let (path, toml) = draft(&url, dir.path(), "cats", &[]);
    assert!(toml.contains("render = \"browser\""), "{toml}");
    assert!(toml.contains("dismiss = [\"button.accept\"]"), "{toml}");
    assert!(toml.contains("click = \"#add\""), "{toml}");
    assert!(toml.contains("# [[follow]]"), "{toml}");
    assert!(
        toml.contains("out = \"downloads/127-0-0-1-cats\""),
        "{toml}"
    );
    // The drafted profile runs: the four thumbnails and the ones "Add content" adds.
    let found = run_draft(&path, dir.path());
    assert!(found.len() > 4, "{found:?}\n{toml}");
}
