//! Tools for profile authors: `scrape probe --screenshot` and `scrape new-profile`, against the
//! fixture sites served on loopback.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::support::{
    ApiServer, Site, chromium_available, expected_demo_images, expected_images, infinite_paths,
    json_lines, manifest_hashes, repo, run, scrape, spa_image_paths, text,
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
