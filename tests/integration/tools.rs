//! Tools for profile authors: `scrape probe --screenshot` and `scrape new-profile`, against the
//! fixture sites served on loopback.

use std::collections::BTreeSet;
use std::path::Path;

use tempfile::TempDir;

use crate::support::{Site, chromium_available, expected_images, repo, run, scrape, text};

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Width and height from a PNG's header.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.starts_with(PNG_MAGIC), "not a PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    (be(16), be(20))
}

/// The image URLs probe accepted, from its JSON lines.
fn accepted(stdout: &[u8]) -> BTreeSet<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON lines"))
        .filter(|l| l["kind"] == "image" && l["accepted"] == true)
        .map(|l| l["url"].as_str().expect("url").to_owned())
        .collect()
}

fn infinite_paths() -> Vec<String> {
    (1..=3)
        .flat_map(|n| (1..=4).map(move |i| format!("/img/scroll-{n}-{i}-640x480.jpg")))
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
