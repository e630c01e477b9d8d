//! `scrape urls`: what a job discovered, by state, read from its state database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use scrape::state::{Counters, State, live};

use crate::support::{
    Site, demo_profile_in, expected_demo_images, run, scrape, text, write_gallery,
};

/// `scrape urls --out OUT` plus `extra`.
fn urls(out: &Path, extra: &[&str]) -> Output {
    run(scrape().arg("urls").arg("--out").arg(out).args(extra))
}

/// The lines of a `scrape urls` that must have exited 0.
fn lines(output: &Output) -> Vec<String> {
    assert_eq!(output.status.code(), Some(0), "{}", text(output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The JSON lines of a `scrape urls --json` that must have exited 0, by URL; every URL once.
fn json_lines(output: &Output) -> BTreeMap<String, Value> {
    let lines = lines(output);
    let by_url: BTreeMap<String, Value> = lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("JSON lines");
            (v["url"].as_str().expect("a url").to_owned(), v)
        })
        .collect();
    assert_eq!(by_url.len(), lines.len(), "a URL listed twice");
    by_url
}

/// `scrape crawl` (or, with `download`, a whole run) of the demo profile from `origin` into `out`.
fn demo_job(dir: &Path, origin: &str, out: &Path, download: bool) {
    let profile = demo_profile_in(dir, "");
    let mut cmd = scrape();
    if !download {
        cmd.arg("crawl");
    }
    let output = run(cmd
        .args(["--progress", "off", "--profile"])
        .arg(&profile)
        .args(["--start", &format!("{origin}/gallery/"), "--out"])
        .arg(out));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn urls_after_a_crawl_lists_exactly_the_demo_images_as_pending() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let out = dir.path().join("out");
    demo_job(dir.path(), &site.origin, &out, false);
    assert_eq!(site.image_requests(), 0, "the crawl downloaded images");
    let expected: BTreeSet<String> = expected_demo_images(&site.origin).into_keys().collect();

    // Plain lines: `pending<TAB>URL`, each image once, nothing else.
    let pending = lines(&urls(&out, &["--state", "pending"]));
    let want: Vec<String> = expected.iter().map(|u| format!("pending\t{u}")).collect();
    assert_eq!(pending, want);
    // The default is every state; nothing was downloaded, so that is the same list.
    assert_eq!(lines(&urls(&out, &[])), want);
    assert_eq!(lines(&urls(&out, &["--state", "all"])), want);
    for state in ["stored", "failed", "duplicate"] {
        assert_eq!(
            lines(&urls(&out, &["--state", state])),
            Vec::<String>::new(),
            "--state {state}"
        );
    }

    let json = json_lines(&urls(&out, &["--state", "pending", "--json"]));
    assert_eq!(json.keys().cloned().collect::<BTreeSet<_>>(), expected);
    let gallery = format!("{}/gallery/", site.origin);
    for (url, line) in &json {
        assert_eq!(line["state"], "pending", "{line}");
        assert_eq!(line["rule"], "photos", "{line}");
        let page = line["page"].as_str().expect("a page");
        assert!(page.starts_with(&gallery), "{url} found on {page}");
        assert!(line["attribute"].is_string(), "{line}");
        assert!(line["metadata"].is_object(), "{line}");
        for absent in ["path", "sha256", "bytes", "class", "detail", "attempts"] {
            assert!(line.get(absent).is_none(), "{absent} in {line}");
        }
    }
    // The profile's metadata (`title = "@alt"`) came through for the images that have one.
    assert!(
        json.values().any(|l| l["metadata"]["title"].is_string()),
        "{json:?}"
    );
    // Listing fetched nothing.
    assert_eq!(site.image_requests(), 0);
}

#[test]
fn urls_after_a_full_run_gives_the_stored_files_with_their_hashes() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let out = dir.path().join("out");
    demo_job(dir.path(), &site.origin, &out, true);
    let expected = expected_demo_images(&site.origin);

    let stored = json_lines(&urls(&out, &["--state", "stored", "--json"]));
    let duplicates = json_lines(&urls(&out, &["--state", "duplicate", "--json"]));
    // Each content stored once: under its first URL, the other URLs are duplicates of it.
    let distinct: BTreeSet<&String> = expected.values().collect();
    assert_eq!(stored.len(), distinct.len());
    let listed: BTreeSet<String> = stored.keys().chain(duplicates.keys()).cloned().collect();
    assert_eq!(listed, expected.keys().cloned().collect::<BTreeSet<_>>());
    for (url, line) in stored.iter().chain(&duplicates) {
        let path = line["path"].as_str().expect("a path");
        let bytes = std::fs::read(out.join(path))
            .unwrap_or_else(|e| panic!("{url}: `{path}` does not exist: {e}"));
        assert_eq!(line["sha256"], expected[url], "{line}");
        assert_eq!(line["sha256"], sha256_hex(&bytes), "{line}");
        assert_eq!(line["bytes"], bytes.len(), "{line}");
        assert!(line.get("class").is_none(), "{line}");
    }
    for line in stored.values() {
        assert_eq!(line["state"], "stored", "{line}");
    }
    for line in duplicates.values() {
        assert_eq!(line["state"], "duplicate", "{line}");
    }
    assert_eq!(
        lines(&urls(&out, &["--state", "pending"])),
        Vec::<String>::new()
    );
    // Plain lines of every state: each URL once, with its state.
    let all: BTreeMap<String, String> = lines(&urls(&out, &[]))
        .iter()
        .map(|l| {
            let (state, url) = l.split_once('\t').expect("STATE<TAB>URL");
            (url.to_owned(), state.to_owned())
        })
        .collect();
    let want: BTreeMap<String, String> = stored
        .keys()
        .map(|u| (u.clone(), "stored".to_owned()))
        .chain(
            duplicates
                .keys()
                .map(|u| (u.clone(), "duplicate".to_owned())),
        )
        .collect();
    assert_eq!(all, want);
}

#[test]
fn urls_lists_failed_images_with_their_class_and_attempts() {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    write_gallery(
        &root,
        &[vec![
            "/img/fine-64x48.jpg".to_owned(),
            "/img/missing.webp".to_owned(),
        ]],
    );
    let site = Site::serve_dir(&root);
    let profile = dir.path().join("failures.toml");
    std::fs::write(
        &profile,
        "name = \"failures\"\nstart = [\"http://127.0.0.1:1/\"]\nrender = \"static\"\n\
         [[images]]\nselector = \".gallery figure img\"\n[download]\nretries = 1\n",
    )
    .expect("profile written");
    let out = dir.path().join("out");
    let output = run(scrape()
        .args(["--progress", "off", "--profile"])
        .arg(&profile)
        .args(["--start", &format!("{}/gallery/", site.origin), "--out"])
        .arg(&out));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));

    let missing = format!("{}/img/missing.webp", site.origin);
    let failed = json_lines(&urls(&out, &["--state", "failed", "--json"]));
    assert_eq!(failed.keys().collect::<Vec<_>>(), [&missing]);
    let line = &failed[&missing];
    assert_eq!(line["state"], "failed", "{line}");
    assert_eq!(line["class"], "http_404", "{line}");
    assert_eq!(line["attempts"], 1, "{line}");
    assert!(line["detail"].is_string(), "{line}");
    assert_eq!(line["page"], format!("{}/gallery/", site.origin), "{line}");
    assert!(line.get("path").is_none(), "{line}");
    assert_eq!(
        lines(&urls(&out, &[])),
        [
            format!("stored\t{}/img/fine-64x48.jpg", site.origin),
            format!("failed\t{missing}"),
        ],
        "URL order"
    );
}

/// Exit 2, nothing on stdout, and `says` on stderr.
fn assert_refused(output: &Output, says: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", text(output));
    assert!(output.stdout.is_empty(), "{}", text(output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(says),
        "expected `{says}`\n{}",
        text(output)
    );
}

#[test]
fn urls_of_a_folder_that_is_no_scrape_output_is_a_usage_error() {
    let dir = TempDir::new().expect("temporary folder");
    assert_refused(&urls(&dir.path().join("nowhere"), &[]), "is not a folder");
    assert_refused(&urls(dir.path(), &[]), "is not a scrape output folder");
    // A file where the database should be that is no database.
    std::fs::create_dir_all(dir.path().join(".scrape")).expect("folder");
    std::fs::write(dir.path().join(".scrape/state.redb"), b"not a database").expect("written");
    assert_refused(&urls(dir.path(), &[]), "is not a scrape output folder");
    assert_refused(
        &urls(dir.path(), &["--state", "lost"]),
        "invalid value 'lost'",
    );
}

#[test]
fn urls_while_another_process_holds_the_database_says_so() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let out = dir.path().join("out");
    demo_job(dir.path(), &site.origin, &out, false);
    // This test process holds the database as a running job would.
    let held = State::open_existing(&out).expect("the state opens");
    assert_refused(&urls(&out, &[]), "is in use by another scrape process");
    // A running job leaves a snapshot naming itself.
    let snapshot = live::LiveStatus {
        pid: 4242,
        profile: "demo".into(),
        started: 0,
        updated: 0,
        at_start: Counters::default(),
        counters: Counters::default(),
        chains: Vec::new(),
        hosts: Vec::new(),
    };
    live::write(&out, &snapshot).expect("snapshot written");
    assert_refused(&urls(&out, &[]), "is in use by a running scrape (pid 4242)");
    std::fs::remove_file(live::path_for(&out)).expect("snapshot removed");
    drop(held);
    assert_eq!(
        lines(&urls(&out, &["--state", "pending"])).len(),
        expected_demo_images(&site.origin).len()
    );
}
