//! End to end, as a user runs it: the binary against the demo site (and small sites written by
//! the tests) on loopback, checking what lands in the output folder, what the site was asked
//! for, the exit codes and what `status` and `probe` print.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;
use tempfile::TempDir;

use crate::support::{
    PATIENCE, Setup, Site, chromium_available, demo_profile_in, expected_album_images,
    expected_demo_images, gallery_page, image_hits, json_lines, manifest, manifest_hashes,
    part_files, repo, run, scrape, status_json, stderr, stored_count, stored_files, text, url_list,
    write_gallery,
};

/// The site chrome every demo page carries and the profile must leave alone.
const CHROME: [&str; 5] = [
    "/img/logo-240x60.png",
    "/img/icon-home-24x24.png",
    "/img/ad-banner-728x90.gif",
    "/img/badge-88x31.gif",
    "/img/favicon-32x32.png",
];

/// One complete run of the demo profile, shared by the tests that only read its results: the
/// demo images are generated on request, and generating them in a debug build costs seconds.
struct DemoRun {
    site: Site,
    /// Holds the output folder; kept for the life of the test binary.
    _dir: TempDir,
    out: PathBuf,
    profile: PathBuf,
    /// Whether the albums (`/albums/`, rendered in the browser) were a start page too: with
    /// Chromium, as `scrape demo` runs it.
    albums: bool,
    output: Output,
    /// The site's hit counters right after the run.
    hits: BTreeMap<String, u64>,
}

impl DemoRun {
    /// The start flags beyond the gallery's.
    fn extra(&self) -> Vec<String> {
        match self.albums {
            true => vec!["--start".into(), format!("{}/albums/", self.site.origin)],
            false => Vec::new(),
        }
    }

    /// Every image the run must store: the gallery's and, rendered, the albums'.
    fn expected(&self) -> BTreeMap<String, String> {
        let mut expected = expected_demo_images(&self.site.origin);
        if self.albums {
            expected.extend(expected_album_images(&self.site.origin));
        }
        expected
    }
}

fn demo_run() -> &'static DemoRun {
    static RUN: OnceLock<DemoRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let site = Site::serve("fixtures/demo-site");
        // Under cargo's per-target temporary folder, not /tmp: a static is never dropped, and
        // `cargo clean` removes what is left.
        let dir = tempfile::Builder::new()
            .prefix("e2e-demo-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("temporary folder");
        let out = dir.path().join("out");
        let profile = demo_profile_in(dir.path(), "");
        let albums = chromium_available("the demo's albums");
        let albums_start = format!("{}/albums/", site.origin);
        let extra = match albums {
            true => vec!["--start", albums_start.as_str()],
            false => Vec::new(),
        };
        let output = run_profile(&profile, &site.origin, &out, &extra);
        let hits = site.hits();
        DemoRun {
            site,
            _dir: dir,
            out,
            profile,
            albums,
            output,
            hits,
        }
    })
}

/// Runs `profile` from `{origin}/gallery/` into `out`, progress off, plus `extra` flags.
fn run_profile(profile: &Path, origin: &str, out: &Path, extra: &[&str]) -> Output {
    run(scrape()
        .arg("--profile")
        .arg(profile)
        .args([
            "--start",
            &format!("{origin}/gallery/"),
            "--progress",
            "off",
        ])
        .arg("--out")
        .arg(out)
        .args(extra))
}

/// The path of a URL (no query), as the demo server counts hits.
fn path_of(url: &str) -> String {
    url::Url::parse(url).expect("a URL").path().to_owned()
}

#[test]
fn a_demo_run_stores_exactly_the_expected_images() {
    let demo = demo_run();
    let out = &demo.out;
    assert_eq!(demo.output.status.code(), Some(0), "{}", text(&demo.output));

    let expected = demo.expected();
    assert_eq!(manifest_hashes(out), expected, "manifest url → sha256");
    let lines = manifest(out);
    assert_eq!(lines.len(), expected.len(), "one manifest line per URL");

    // Every stored file is named by the hash of its bytes, and each content is stored once.
    let files = stored_files(out);
    for (path, sha256) in &files {
        let stem = Path::new(path).file_stem().and_then(|s| s.to_str());
        assert_eq!(stem, Some(sha256.as_str()), "`{path}` holds other bytes");
    }
    let distinct: BTreeSet<&String> = expected.values().collect();
    assert_eq!(
        files.values().collect::<BTreeSet<_>>(),
        distinct,
        "the stored files are the distinct expected contents"
    );
    assert_eq!(files.len(), distinct.len(), "no content stored twice");
    for line in &lines {
        let path = line["path"].as_str().expect("a path");
        assert_eq!(
            files.get(path),
            line["sha256"].as_str().map(str::to_owned).as_ref(),
            "manifest line points at its file: {line}"
        );
    }

    // The `?copy=1` URL has the bytes of page 1's first photo: listed, not stored again.
    let original = format!("{}/img/photo-p1-0-640x480.jpg", demo.site.origin);
    let copy = format!("{original}?copy=1");
    let line_of = |url: &str| {
        lines
            .iter()
            .find(|l| l["url"] == url)
            .unwrap_or_else(|| panic!("`{url}` in the manifest"))
    };
    assert_eq!(line_of(&copy)["duplicate"], true);
    assert_eq!(line_of(&original).get("duplicate"), None);
    assert_eq!(line_of(&copy)["path"], line_of(&original)["path"]);

    assert_eq!(part_files(out), Vec::<PathBuf>::new(), "no part file left");

    // Each expected URL was requested once; nothing else under /img/ (chrome, the smaller
    // srcset candidates) ever was.
    let mut wanted = BTreeMap::<String, u64>::new();
    for url in expected.keys() {
        *wanted.entry(path_of(url)).or_default() += 1;
    }
    assert_eq!(
        image_hits(demo.hits.clone()),
        wanted,
        "image requests by path"
    );
    for chrome in CHROME {
        assert_eq!(demo.hits.get(chrome), None, "`{chrome}` was requested");
    }

    let summary = stderr(&demo.output);
    let found = expected.len();
    assert!(
        summary.contains(&format!("{found} found, {} stored", found - 1))
            && summary.contains("1 duplicates"),
        "summary names stored and duplicates:\n{summary}"
    );
    if demo.albums {
        // The albums' photos came from the pages rendered in the browser, with the album's
        // title from the listing's link and the photo's from the rendered `<img>`.
        let albums = expected_album_images(&demo.site.origin);
        for line in lines
            .iter()
            .filter(|l| albums.contains_key(l["url"].as_str().unwrap_or("")))
        {
            let page = line["page"].as_str().expect("a page");
            assert!(
                page.contains("/albums/") && page.ends_with(".html"),
                "{line}"
            );
            assert_eq!(line["attribute"], "data-src", "{line}");
            assert!(line["metadata"]["album"].is_string(), "{line}");
            assert!(line["metadata"]["title"].is_string(), "{line}");
        }
        assert!(
            summary.contains("2 rendered in the browser"),
            "the summary says what was rendered:\n{summary}"
        );
    }
}

#[test]
fn a_second_run_fetches_nothing_and_changes_nothing() {
    let demo = demo_run();
    let dir = TempDir::new().expect("temporary folder");
    let out = dir.path().join("out");
    copy_tree(&demo.out, &out);
    let manifest_before = std::fs::read(out.join("manifest.jsonl")).expect("manifest");
    let files_before = stored_files(&out);
    let hits_before = demo.site.hits();

    let extra = demo.extra();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let output = run_profile(&demo.profile, &demo.site.origin, &out, &extra);

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    // Nor any album page, its script or its API: no page was rendered again.
    assert_eq!(
        demo.site.hits(),
        hits_before,
        "the second run requested something"
    );
    assert_eq!(
        std::fs::read(out.join("manifest.jsonl")).expect("manifest"),
        manifest_before
    );
    assert_eq!(stored_files(&out), files_before);
    assert!(
        stderr(&output).contains("0 this run"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn status_reports_the_counts_of_a_finished_run() {
    let demo = demo_run();
    let output = run(scrape().arg("status").arg("--out").arg(&demo.out));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    // With the albums: their listing and the two albums linked from it.
    let pages = if demo.albums { 9 } else { 6 };
    let found = demo.expected().len();
    for wanted in [
        format!("pages     {pages} done, 0 failed"),
        format!("images    {found} found: {} stored", found - 1),
        "1 duplicates, 0 failed, 0 pending".to_owned(),
        "complete".to_owned(),
    ] {
        assert!(
            stdout.contains(&wanted),
            "`{wanted}` missing from:\n{stdout}"
        );
    }
    assert!(!stdout.contains("incomplete"), "{stdout}");

    let json = status_json(&demo.out);
    let counters = &json["counters"];
    assert_eq!(json["profile"], "demo");
    assert_eq!(counters["pages_done"], pages);
    assert_eq!(counters["pages_failed"], 0);
    assert_eq!(counters["images_found"], found);
    assert_eq!(counters["stored"], found - 1);
    assert_eq!(counters["duplicates"], 1);
    assert_eq!(counters["failed"], 0);
    assert_eq!(json["pending"], 0);
    let chains = json["chains"].as_array().expect("chains");
    assert_eq!(chains.len(), 1 + usize::from(demo.albums), "{json}");
    let gallery = chains
        .iter()
        .find(|c| {
            c["start"]
                .as_str()
                .is_some_and(|s| s.ends_with("/gallery/"))
        })
        .expect("the gallery's chain");
    assert_eq!(gallery["checkpoint"]["next"], Value::Null, "{json}");
    assert_eq!(gallery["checkpoint"]["pages_done"], 6, "{json}");
}

#[test]
fn status_of_a_folder_that_never_ran_exits_2_and_says_so() {
    let dir = TempDir::new().expect("temporary folder");
    let output = run(scrape().arg("status").arg("--out").arg(dir.path()));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let message = stderr(&output);
    assert!(
        message.contains("nothing has run with this output folder"),
        "{message}"
    );
    assert!(
        !dir.path().join(".scrape").exists(),
        "status created a state folder"
    );
}

#[test]
fn fresh_forgets_progress_and_fetches_every_page_again() {
    let pages: Vec<Vec<String>> = (1..=3)
        .map(|p| {
            (0..2)
                .map(|i| format!("/img/fresh-p{p}-{i}-64x48.jpg"))
                .collect()
        })
        .collect();
    let setup = Setup::gallery(
        |root| write_gallery(root, &pages),
        |dir| demo_profile_in(dir, ""),
    );
    let (site, out) = (&setup.site, &setup.out);

    let first = setup.run();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let manifest_first = manifest_hashes(out);
    let files_first = stored_files(out);
    let status_first = status_json(out);
    let hits_first = site.hits();

    let fresh = run(setup.command().arg("--fresh"));
    assert_eq!(fresh.status.code(), Some(0), "{}", text(&fresh));
    let hits = site.hits();
    for number in 1..=pages.len() {
        let page = gallery_page(number);
        assert_eq!(
            hits.get(&page),
            Some(&2),
            "`{page}` fetched again: {hits:?}"
        );
    }
    for path in pages.iter().flatten() {
        assert_eq!(
            hits.get(path),
            Some(&(hits_first[path] + 1)),
            "`{path}` fetched again"
        );
    }
    // Started over: the counts are those of one run, not two.
    assert_eq!(status_json(out)["counters"], status_first["counters"]);
    assert_eq!(manifest_hashes(out), manifest_first);
    assert_eq!(stored_files(out), files_first);
    assert_eq!(part_files(out), Vec::<PathBuf>::new());
}

#[test]
fn fresh_is_refused_while_another_run_uses_the_folder() {
    let images: Vec<String> = (0..16)
        .map(|i| format!("/img/busy-{i}-480x360.jpg"))
        .collect();
    let setup = Setup::gallery(
        |root| write_gallery(root, std::slice::from_ref(&images)),
        |dir| demo_profile_in(dir, ""),
    )
    .args(["--concurrency", "1"]);
    let out = &setup.out;
    let mut busy = setup.spawn("first");
    busy.wait_for("2 images stored", PATIENCE, || stored_count(out) >= 2);

    let fresh = run(setup.command().arg("--fresh"));

    assert_eq!(fresh.status.code(), Some(2), "{}", text(&fresh));
    assert!(
        stderr(&fresh).contains("another scrape run is using"),
        "{}",
        text(&fresh)
    );
    // The run that owns the folder is undisturbed: its state, parts and results stay.
    let (status, first_stderr) = busy.wait(PATIENCE);
    assert_eq!(status.code(), Some(0), "{first_stderr}");
    let stored: BTreeSet<String> = manifest_hashes(out)
        .into_keys()
        .map(|u| path_of(&u))
        .collect();
    assert_eq!(stored, images.into_iter().collect());
    assert_eq!(status_json(out)["counters"]["stored"], 16);
}

/// The JSON lines `probe` printed.
fn probe_lines(output: &Output) -> Vec<Value> {
    json_lines(&String::from_utf8_lossy(&output.stdout))
}

#[test]
fn probe_prints_every_expected_image_of_a_page_with_its_rule_and_the_next_page() {
    let site = Site::serve("fixtures/demo-site");
    let url = format!("{}/gallery/", site.origin);
    let output = run(scrape()
        .args(["probe", "--profile"])
        .arg(repo("site-profiles/demo.toml"))
        .args(["--url", &url]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = probe_lines(&output);

    let images: BTreeMap<&str, (&str, &str)> = lines
        .iter()
        .filter(|l| l["kind"] == "image")
        .map(|l| {
            assert_eq!(l["accepted"], true, "{l}");
            (
                l["url"].as_str().expect("url"),
                (
                    l["rule"].as_str().expect("rule"),
                    l["attribute"].as_str().expect("attribute"),
                ),
            )
        })
        .collect();
    let page_one: BTreeSet<String> = expected_demo_images(&site.origin)
        .into_keys()
        .filter(|u| u.contains("photo-p1-") && !u.ends_with("?copy=1"))
        .collect();
    assert_eq!(
        images
            .keys()
            .map(|u| (*u).to_owned())
            .collect::<BTreeSet<_>>(),
        page_one
    );
    let attributes: BTreeSet<&str> = images.values().map(|(_, a)| *a).collect();
    assert!(
        images.values().all(|(rule, _)| *rule == "photos"),
        "{images:?}"
    );
    for attribute in [
        "src",
        "srcset",
        "data-src",
        "data-srcset",
        "data-lazy",
        "style",
    ] {
        assert!(
            attributes.contains(attribute),
            "no image found through `{attribute}`: {images:?}"
        );
    }
    let next: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "next").collect();
    assert_eq!(next.len(), 1, "one next line: {lines:?}");
    assert_eq!(
        next[0]["url"],
        format!("{}/gallery/page-2.html", site.origin)
    );
}

#[test]
fn probe_of_a_saved_page_prints_the_same_lines_without_the_network() {
    let site = Site::serve("fixtures/demo-site");
    let url = format!("{}/gallery/", site.origin);
    let probe = |html: Option<&Path>| {
        let mut cmd = scrape();
        cmd.args(["probe", "--profile"])
            .arg(repo("site-profiles/demo.toml"))
            .args(["--url", &url]);
        if let Some(html) = html {
            cmd.arg("--html").arg(html);
        }
        let output = run(&mut cmd);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        output
    };
    let fetched = probe(None);
    let hits = site.hits();
    let saved = probe(Some(&repo("fixtures/demo-site/gallery/index.html")));
    assert_eq!(site.hits(), hits, "probe --html used the network");
    assert_eq!(probe_lines(&saved), probe_lines(&fetched));
    assert!(probe_lines(&saved).len() > 1);
}

#[test]
fn failed_images_are_recorded_by_class_and_shown_by_status() {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    write_gallery(
        &root,
        &[vec![
            "/img/fine-64x48.jpg".to_owned(),
            "/img/missing.webp".to_owned(),
            "/about.html".to_owned(),
        ]],
    );
    std::fs::write(
        root.join("about.html"),
        "<!doctype html><p>not a picture</p>\n",
    )
    .expect("page written");
    let site = Site::serve_dir(&root);
    // The demo profile without its extension filter, which would keep `.html` out.
    let profile = dir.path().join("failures.toml");
    std::fs::write(
        &profile,
        r#"name = "failures"
start = ["http://127.0.0.1:1/"]
render = "static"

[[images]]
selector = ".gallery figure img"

[download]
retries = 1
"#,
    )
    .expect("profile written");
    let out = dir.path().join("out");

    let output = run_profile(&profile, &site.origin, &out, &[]);

    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let failures: BTreeMap<String, String> = std::fs::read_to_string(out.join("failures.jsonl"))
        .expect("failures.jsonl")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("JSON line");
            (
                path_of(v["url"].as_str().expect("url")),
                v["class"].as_str().expect("class").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        failures,
        BTreeMap::from([
            ("/img/missing.webp".to_owned(), "http_404".to_owned()),
            ("/about.html".to_owned(), "not_an_image".to_owned()),
        ])
    );
    assert_eq!(
        manifest_hashes(&out)
            .keys()
            .map(|u| path_of(u))
            .collect::<Vec<_>>(),
        ["/img/fine-64x48.jpg"]
    );
    assert_eq!(part_files(&out), Vec::<PathBuf>::new());

    let json = status_json(&out);
    assert_eq!(json["counters"]["failed"], 2, "{json}");
    assert_eq!(json["counters"]["stored"], 1, "{json}");
    assert_eq!(
        json["failures"],
        serde_json::json!({ "http_404": 1, "not_an_image": 1 })
    );
    let status = run(scrape().arg("status").arg("--out").arg(&out));
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        stdout.contains("failures  http_404 1, not_an_image 1"),
        "{stdout}"
    );
    assert!(stdout.contains("2 failed"), "{stdout}");
}

/// Copies a folder tree (files and folders only).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("folder created");
    for entry in std::fs::read_dir(from).expect("readable folder") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("file copied");
        }
    }
}

#[test]
fn crawl_queues_the_images_without_fetching_them_and_download_fetches_them_later() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let profile = demo_profile_in(dir.path(), "");
    let out = dir.path().join("out");
    let expected = expected_demo_images(&site.origin);

    let output = run(scrape()
        .args(["crawl", "--progress", "off", "--profile"])
        .arg(&profile)
        .args(["--start", &format!("{}/gallery/", site.origin), "--out"])
        .arg(&out));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        stderr(&output).contains("scrape download --out"),
        "{}",
        text(&output)
    );
    assert_eq!(site.image_requests(), 0, "{:?}", site.hits());
    let status = status_json(&out);
    assert_eq!(status["pending"], expected.len(), "{status}");
    assert_eq!(stored_count(&out), 0);

    // A profile's queue is downloaded with the profile's settings, so it must be given.
    let output = run(scrape()
        .args(["download", "--progress", "off", "--out"])
        .arg(&out));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        stderr(&output).contains("--profile FILE"),
        "{}",
        text(&output)
    );
    assert_eq!(site.image_requests(), 0);

    let output = run(scrape()
        .args(["download", "--progress", "off", "--out"])
        .arg(&out)
        .arg("--profile")
        .arg(&profile));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest_hashes(&out), expected);
    assert_eq!(
        site.image_requests(),
        expected.len() as u64,
        "{:?}",
        site.hits()
    );
    assert_eq!(status_json(&out)["pending"], 0);
}

#[test]
fn a_rerun_of_a_finished_list_reports_what_the_first_run_read() {
    let dir = TempDir::new().expect("temporary folder");
    let site = Site::serve("fixtures/demo-site");
    // 700 lines, past the first batches of the import (256, then 512), 100 of them repeats.
    let mut paths: Vec<String> = (1..=600)
        .map(|i| format!("/img/listed-{i}-8x8.png"))
        .collect();
    paths.extend((1..=100).map(|i| format!("/img/listed-{i}-8x8.png")));
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");
    let source = |output: &Output| {
        text(output)
            .lines()
            .find(|l| l.trim_start().starts_with("source"))
            .map(|l| l.trim().to_owned())
            .unwrap_or_else(|| panic!("a source line in:\n{}", text(output)))
    };
    let runs: Vec<String> = (0..2)
        .map(|_| {
            let output = run(&mut crate::support::download_list(&list, &out, &[]));
            assert_eq!(output.status.code(), Some(0), "{}", text(&output));
            source(&output)
        })
        .collect();
    assert!(
        runs[0].ends_with("700 lines read: 600 URLs, 100 duplicates"),
        "{}",
        runs[0]
    );
    assert_eq!(runs[1], runs[0], "the rerun reads the list's checkpoint");
}
