//! Browser profiles end to end, as a user runs them: the binary with the profiles of
//! `site-profiles/` against the JavaScript fixture sites (`fixtures/js-sites`, plus the tests'
//! [`ApiServer`] for the single-page app's POST API) on loopback. Each run must store exactly the
//! expected images, say how its pages were made, and fetch each image once: the browser blocks
//! images while rendering, so every image request the site sees is the download stage's.
//!
//! Also: `render = "auto"`, a browser job killed (SIGKILL) or interrupted (SIGINT) and resumed,
//! with no Chromium of the stopped run left running, and `check` and `probe` on the profiles.
//!
//! Needs Chromium: without it these tests print why and pass, unless `CI` is set.

use scrape::render::processes_using;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::support::{
    ApiServer, BROWSER_EXIT, BROWSER_PATIENCE, Background, CleanRun, ENDLESS_PAGE, HEAP_PAGE,
    Setup, Site, Stop, chromium_available, expected_demo_images, expected_images, image_hits,
    infinite_paths, json_lines, manifest, manifest_hashes, repo, resume_and_compare, run, scrape,
    spa_image_paths, status_json, stored_count, stored_files, text, wait_until, write_gallery_with,
};

/// A profile of `site-profiles/`.
fn profile(name: &str) -> PathBuf {
    repo(&format!("site-profiles/{name}.toml"))
}

/// A copy of `site-profiles/NAME.toml` in `dir` with `render` set to `mode`.
fn profile_rendering(dir: &Path, name: &str, mode: &str) -> PathBuf {
    let source = std::fs::read_to_string(profile(name)).expect("profile");
    let line = source
        .lines()
        .find(|l| l.starts_with("render = "))
        .expect("the profile sets `render`");
    let path = dir.join(format!("{name}-{mode}.toml"));
    std::fs::write(&path, source.replace(line, &format!("render = \"{mode}\"")))
        .expect("profile written");
    path
}

/// `source` without its `[browser]` table, so a test can write its own (the demo profile's is
/// for its albums, which the scripted gallery does not have).
fn without_browser_table(source: &str) -> String {
    let mut kept = String::new();
    let mut in_browser = false;
    for line in source.lines() {
        if line.starts_with('[') {
            in_browser = line.trim() == "[browser]";
        }
        if !in_browser {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// One request per expected image URL, counted by path (the servers count without the query),
/// nothing else under `/img/`.
fn once_each(expected: &BTreeMap<String, String>) -> BTreeMap<String, u64> {
    let mut requests = BTreeMap::new();
    for url in expected.keys() {
        let path = url::Url::parse(url).expect("URL").path().to_owned();
        *requests.entry(path).or_default() += 1;
    }
    requests
}

/// The summary line of a run that rendered `rendered` pages and fetched `plain` over HTTP.
fn pages_line(plain: u64, rendered: u64) -> String {
    format!("pages: {plain} over plain HTTP, {rendered} rendered in the browser")
}

/// Checks a finished run: exit 0, exactly `expected` in the manifest and on disk, the pages
/// summary line, and one request per image.
fn assert_run(
    output: &Output,
    out: &Path,
    expected: &BTreeMap<String, String>,
    pages: &str,
    image_requests: BTreeMap<String, u64>,
) {
    assert_eq!(output.status.code(), Some(0), "{}", text(output));
    assert_eq!(manifest_hashes(out), *expected, "manifest url → sha256");
    assert_eq!(manifest(out).len(), expected.len(), "one line per URL");
    let stored: BTreeSet<String> = stored_files(out).into_values().collect();
    assert_eq!(
        stored,
        expected.values().cloned().collect::<BTreeSet<_>>(),
        "stored files"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(pages), "no `{pages}` in:\n{stderr}");
    assert_eq!(
        image_requests,
        once_each(expected),
        "image requests by path: the browser let an image through, or one was fetched twice"
    );
}

/// Runs the profile `profile` writes into the test's folder (or names) from `start` into a new
/// output folder, and checks the run with [`assert_run`], the image requests read from `hits`
/// after it; the setup, for further checks.
fn run_checked(
    profile: impl FnOnce(&Path) -> PathBuf,
    start: &str,
    expected: &BTreeMap<String, String>,
    pages: &str,
    hits: impl FnOnce() -> BTreeMap<String, u64>,
) -> Setup<()> {
    let setup = Setup::with(|_| (), |dir, ()| profile(dir)).args(["--start", start]);
    let output = setup.run();
    assert_run(&output, &setup.out, expected, pages, image_hits(hits()));
    setup
}

fn background_paths() -> Vec<String> {
    [
        "/img/bg-tile-1-200x150.jpg",
        "/img/bg-tile-2-200x150.jpg",
        "/img/bg-tile-3-200x150.jpg",
        "/img/bg-hero-1200x400.jpg",
        "/img/plain-100x100.jpg?v=2",
    ]
    .map(str::to_owned)
    .to_vec()
}

#[test]
fn infinite_profile_stores_every_scrolled_image_once() {
    if !chromium_available("infinite_profile_stores_every_scrolled_image_once") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let setup = run_checked(
        |_| profile("infinite"),
        &format!("{}/infinite/", site.origin),
        &expected_images(&site.origin, &infinite_paths()),
        &pages_line(0, 1),
        || site.hits(),
    );
    let titles: BTreeSet<String> = manifest(&setup.out)
        .iter()
        .map(|l| {
            l["metadata"]["title"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(titles.contains("Picture 3.4"), "{titles:?}");
}

#[test]
fn backgrounds_profile_stores_script_set_backgrounds_and_the_blocked_image() {
    if !chromium_available(
        "backgrounds_profile_stores_script_set_backgrounds_and_the_blocked_image",
    ) {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    run_checked(
        |_| profile("backgrounds"),
        &format!("{}/background/", site.origin),
        &expected_images(&site.origin, &background_paths()),
        &pages_line(0, 1),
        || site.hits(),
    );
}

#[test]
fn spa_profile_stores_the_images_of_json_answers_to_posts() {
    if !chromium_available("spa_profile_stores_the_images_of_json_answers_to_posts") {
        return;
    }
    let api = ApiServer::serve();
    let setup = run_checked(
        |_| profile("spa"),
        &format!("{}/spa/", api.origin()),
        &expected_images(&api.origin(), &spa_image_paths()),
        &pages_line(0, 1),
        || api.hits(),
    );
    // The first load and two clicks: every page of the API, once.
    assert_eq!(
        api.hits().get("/spa/api/items"),
        Some(&3),
        "{:?}",
        api.hits()
    );
    let line = manifest(&setup.out)
        .into_iter()
        .find(|l| l["url"] == format!("{}/img/spa-8-800x600.jpg", api.origin()))
        .expect("the last item");
    assert_eq!(line["rule"], "items", "{line}");
    assert_eq!(line["metadata"]["title"], "Item 8", "{line}");
}

#[test]
fn auto_takes_plain_http_for_every_page_of_the_static_demo_gallery() {
    if !chromium_available("auto_takes_plain_http_for_every_page_of_the_static_demo_gallery") {
        return;
    }
    let site = Site::serve("fixtures/demo-site");
    run_checked(
        |dir| profile_rendering(dir, "demo", "auto"),
        &format!("{}/gallery/", site.origin),
        &expected_demo_images(&site.origin),
        &pages_line(6, 0),
        || site.hits(),
    );
}

#[test]
fn auto_falls_back_to_the_browser_on_the_infinite_gallery() {
    if !chromium_available("auto_falls_back_to_the_browser_on_the_infinite_gallery") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    run_checked(
        |dir| profile_rendering(dir, "infinite", "auto"),
        &format!("{}/infinite/", site.origin),
        &expected_images(&site.origin, &infinite_paths()),
        &pages_line(0, 1),
        || site.hits(),
    );
    // Fetched once over plain HTTP (no image there), then rendered.
    assert_eq!(site.hits().get("/infinite/"), Some(&2), "{:?}", site.hits());
}

#[test]
fn check_passes_on_the_browser_profiles() {
    let output = run(scrape()
        .args(["check", "--profile"])
        .args(["infinite", "backgrounds", "spa"].map(profile)));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let all = text(&output);
    assert!(
        !all.contains("error") && !all.contains("warning"),
        "diagnostics on a shipped profile:\n{all}"
    );
}

#[test]
fn probe_renders_a_browser_profile_and_lists_every_image() {
    if !chromium_available("probe_renders_a_browser_profile_and_lists_every_image") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let output = run(scrape()
        .arg("probe")
        .arg("--profile")
        .arg(profile("infinite"))
        .args(["--url", &format!("{}/infinite/", site.origin)]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = json_lines(&String::from_utf8_lossy(&output.stdout));
    let accepted: BTreeSet<String> = lines
        .iter()
        .filter(|l| l["kind"] == "image" && l["accepted"] == true)
        .map(|l| l["url"].as_str().expect("url").to_owned())
        .collect();
    let expected: BTreeSet<String> = expected_images(&site.origin, &infinite_paths())
        .into_keys()
        .collect();
    assert_eq!(accepted, expected, "{}", text(&output));
    assert_eq!(
        lines.last().map(|l| l["kind"].clone()),
        Some(serde_json::json!("end"))
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("12 image(s) accepted") && stderr.contains("rendered in the browser"),
        "{stderr}"
    );
    // Probe downloads nothing, and the browser loaded no image.
    assert_eq!(image_hits(site.hits()), BTreeMap::new());
}

// Stopping a browser job and resuming it.

/// Pages of the site the stop-and-resume tests write.
const PAGES: usize = 12;

/// Writes a gallery whose images exist only once its script has run: `/gallery/` and
/// `/gallery/page-N.html`, linked by `a.next`, page `p` holding two 480x360 photos.
fn write_scripted_gallery(root: &Path) {
    write_gallery_with(root, &vec![Vec::new(); PAGES], |page| {
        format!(
            "\n<script>\n\
             for (const i of [0, 1]) {{\n\
               const figure = document.createElement(\"figure\");\n\
               const img = document.createElement(\"img\");\n\
               img.src = `/img/s-p{page}-${{i}}-480x360.jpg`;\n\
               figure.appendChild(img);\n\
               document.querySelector(\".gallery\").appendChild(figure);\n\
             }}\n</script>"
        )
    });
}

/// The demo profile, rendered in the browser, with `browser` added to its `[browser]` table.
fn scripted_profile(dir: &Path, browser: &str) -> PathBuf {
    let path = profile_rendering(dir, "demo", "browser");
    let source = without_browser_table(&std::fs::read_to_string(&path).expect("profile"));
    std::fs::write(
        &path,
        format!("{source}\n[browser]\nwait_for = \".gallery img\"\n{browser}"),
    )
    .expect("profile written");
    path
}

/// A scripted gallery served on loopback and an output folder, one download at a time; with
/// `browser` added to the profile's `[browser]` table.
fn scripted(browser: &str) -> Setup {
    Setup::gallery(write_scripted_gallery, |dir| scripted_profile(dir, browser))
        .args(["--concurrency", "1"])
}

/// A browser job never stopped, of the same site served elsewhere.
fn clean_run() -> &'static CleanRun {
    static CLEAN: OnceLock<CleanRun> = OnceLock::new();
    CLEAN.get_or_init(|| {
        let setup = scripted("");
        let clean = CleanRun::of(&setup);
        let stderr = &clean.stderr;
        assert!(stderr.contains(&pages_line(0, PAGES as u64)), "{stderr}");
        let manifest = &clean.manifest;
        assert_eq!(manifest.len(), 2 * PAGES, "{manifest:?}");
        clean
    })
}

/// The Chromium of the `scrape` process `pid`: its profile folder (named for `pid` by
/// `src/render`) and the processes using it, once the browser runs.
fn chromium_of(pid: u32) -> (PathBuf, Vec<u32>) {
    let prefix = format!("scrape-chromium-{pid}-");
    let mut found = None;
    wait_until("the browser of the run", BROWSER_PATIENCE, || {
        found = std::fs::read_dir(std::env::temp_dir())
            .expect("temporary folder")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .filter(|dir| !processes_using(dir).is_empty());
        found.is_some()
    });
    let dir = found.expect("found");
    let processes = processes_using(&dir);
    (dir, processes)
}

/// Starts a job and waits until it has stored a few images while its browser still renders
/// (the last page not yet asked for); the job and its browser.
fn start_and_wait_for_images(setup: &Setup, name: &str) -> (Background, PathBuf, Vec<u32>) {
    clean_run();
    let mut job = setup.spawn(name);
    let (profile_dir, browser) = chromium_of(job.child.id());
    let last = format!("/gallery/page-{PAGES}.html");
    job.wait_for("3 images stored", BROWSER_PATIENCE, || {
        stored_count(&setup.out) >= 3
    });
    let browser_now = processes_using(&profile_dir);
    assert!(
        !setup.site.hits().contains_key(&last) && !browser_now.is_empty(),
        "the crawl ended before 3 images were stored: the stop would not catch the browser"
    );
    assert!(
        browser_now.contains(&browser[0]),
        "the browser was replaced"
    );
    (job, profile_dir, browser_now)
}

#[test]
fn a_browser_job_killed_mid_run_leaves_no_chromium_and_resumes_to_the_clean_result() {
    if !chromium_available(
        "a_browser_job_killed_mid_run_leaves_no_chromium_and_resumes_to_the_clean_result",
    ) {
        return;
    }
    let setup = scripted("");
    let (job, profile_dir, browser) = start_and_wait_for_images(&setup, "killed");
    job.kill();
    let stop = Stop::of(&setup);
    // The killed run cleans nothing up: the kernel kills its browser, whose helpers follow.
    wait_until(
        format!("the Chromium of the killed run ({browser:?}) to exit"),
        BROWSER_EXIT,
        || processes_using(&profile_dir).is_empty(),
    );

    resume_and_compare(&setup, clean_run(), PAGES, &[stop]);
    // The rerun removed the profile folder the killed run could not.
    assert!(
        !profile_dir.exists(),
        "`{}` left behind after the rerun",
        profile_dir.display()
    );
}

#[test]
fn ctrl_c_stops_a_browser_job_with_130_closes_chromium_and_a_rerun_completes() {
    if !chromium_available(
        "ctrl_c_stops_a_browser_job_with_130_closes_chromium_and_a_rerun_completes",
    ) {
        return;
    }
    let setup = scripted("");
    let (job, profile_dir, _) = start_and_wait_for_images(&setup, "interrupted");
    job.interrupt();
    let (status, stderr) = job.wait(BROWSER_PATIENCE);
    assert_eq!(status.code(), Some(130), "{status:?}\n{stderr}");
    let stop = Stop::of(&setup);
    // Closed in order before the exit (its last helpers may take a moment to be reaped), its
    // profile folder removed.
    wait_until("no Chromium of the interrupted run", BROWSER_EXIT, || {
        processes_using(&profile_dir).is_empty()
    });
    assert!(
        !profile_dir.exists(),
        "`{}` left behind",
        profile_dir.display()
    );
    resume_and_compare(&setup, clean_run(), PAGES, &[stop]);
}

// A browser job over two browser processes.

/// The profile folders of the `scrape` process `pid` whose browser runs now.
fn running_chromium_folders(pid: u32) -> BTreeSet<PathBuf> {
    let prefix = format!("scrape-chromium-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .expect("temporary folder")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .filter(|dir| !processes_using(dir).is_empty())
        .collect()
}

/// The browser process using `profile_dir` that `scrape` (`parent`) started itself.
fn main_browser_process(profile_dir: &Path, parent: u32) -> u32 {
    let parent_of = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid ...`
        let after = &stat[stat.rfind(')')? + 1..];
        after.split_whitespace().nth(1)?.parse::<u32>().ok()
    };
    let found: Vec<u32> = processes_using(profile_dir)
        .into_iter()
        .filter(|&pid| parent_of(pid) == Some(parent))
        .collect();
    assert_eq!(found.len(), 1, "{}: {found:?}", profile_dir.display());
    found[0]
}

#[test]
fn a_browser_job_over_two_processes_stores_what_one_process_does() {
    if !chromium_available("a_browser_job_over_two_processes_stores_what_one_process_does") {
        return;
    }
    let clean = clean_run();
    let setup = scripted("processes = 2\n");
    let mut job = setup.spawn("two-processes");
    let pid = job.child.id();
    let mut folders = BTreeSet::new();
    job.wait_for("two browser processes", BROWSER_PATIENCE, || {
        folders = running_chromium_folders(pid);
        folders.len() == 2
    });
    let (status, stderr) = job.wait(BROWSER_PATIENCE);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&pages_line(0, PAGES as u64)), "{stderr}");
    clean.assert_same(&setup);
    wait_until("no Chromium of the run", BROWSER_EXIT, || {
        folders
            .iter()
            .all(|f| processes_using(f).is_empty() && !f.exists())
    });
}

#[test]
fn a_killed_browser_process_is_replaced_alone_and_the_job_completes() {
    if !chromium_available("a_killed_browser_process_is_replaced_alone_and_the_job_completes") {
        return;
    }
    clean_run();
    let setup = scripted("processes = 2\n");
    let mut job = setup.spawn("one-process-killed");
    let pid = job.child.id();
    let mut started = Vec::new();
    job.wait_for("two browser processes", BROWSER_PATIENCE, || {
        started = running_chromium_folders(pid).into_iter().collect();
        started.len() == 2
    });
    let kept = main_browser_process(&started[0], pid);
    let killed = main_browser_process(&started[1], pid);
    job.wait_for("3 images stored", BROWSER_PATIENCE, || {
        stored_count(&setup.out) >= 3
    });
    let last = format!("/gallery/page-{PAGES}.html");
    assert!(
        !setup.site.hits().contains_key(&last),
        "the crawl ended before 3 images were stored: the kill would not catch the browser"
    );
    let sent = run(Command::new("kill").args(["-KILL", &killed.to_string()]));
    assert!(sent.status.success(), "{}", text(&sent));
    // The processes take turns on pages: a later page brings up the replacement.
    let mut replacement = None;
    job.wait_for("a replacement browser process", BROWSER_PATIENCE, || {
        replacement = running_chromium_folders(pid)
            .into_iter()
            .find(|f| !started.contains(f));
        replacement.is_some()
    });
    assert!(
        processes_using(&started[0]).contains(&kept),
        "the browser process that was not killed was replaced"
    );
    let (status, stderr) = job.wait(BROWSER_PATIENCE);
    assert_eq!(status.code(), Some(0), "{stderr}");
    clean_run().assert_same(&setup);
    let status = status_json(&setup.out);
    assert_eq!(status["counters"]["pages_done"], PAGES, "{status}");
    assert_eq!(status["counters"]["failed"], 0, "{status}");
    let folders: Vec<PathBuf> = started.into_iter().chain(replacement).collect();
    wait_until("no Chromium of the run", BROWSER_EXIT, || {
        folders
            .iter()
            .all(|f| processes_using(f).is_empty() && !f.exists())
    });
}

/// A gallery page that starts two downloads once loaded: a blob saved through a link with
/// `download`, and a file through a link with `download`.
const DOWNLOADING_PAGE: &str = r#"<!doctype html><html><body>
<div class="gallery"><figure><img src="/img/kept-64x48.jpg"></figure></div>
<a id="blob" download="page-chose-this-name.txt">blob</a>
<a id="file" href="/payload.bin" download>file</a>
<script>
  const blob = new Blob(["written by the page"], { type: "text/plain" });
  const link = document.getElementById("blob");
  link.href = URL.createObjectURL(blob);
  link.click();
  document.getElementById("file").click();
</script></body></html>"#;

#[test]
fn a_page_that_starts_downloads_leaves_no_file_anywhere() {
    if !chromium_available("a_page_that_starts_downloads_leaves_no_file_anywhere") {
        return;
    }
    let setup = Setup::gallery(
        |root| {
            std::fs::create_dir_all(root.join("gallery")).expect("site folder");
            std::fs::write(root.join("gallery/index.html"), DOWNLOADING_PAGE).expect("page");
            std::fs::write(root.join("payload.bin"), vec![0x5a; 64 * 1024]).expect("payload");
        },
        |dir| {
            let path = dir.join("downloads.toml");
            std::fs::write(
                &path,
                "name = \"downloads\"\nstart = [\"http://127.0.0.1:9/\"]\nrender = \"browser\"\n\n\
                 [browser]\ndelay = \"2s\"\n\n[[images]]\nselector = \".gallery img\"\n",
            )
            .expect("profile written");
            path
        },
    );
    // Chromium saves downloads to ~/Downloads; its own settings and caches go to the XDG
    // folders, kept apart so that HOME must stay empty.
    let home = setup.dir.path().join("home");
    let xdg = setup.dir.path().join("xdg");
    std::fs::create_dir(&home).expect("home folder");
    let output = run(setup
        .command()
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", xdg.join("config"))
        .env("XDG_CACHE_HOME", xdg.join("cache")));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let saved = crate::support::files_under(&home);
    assert!(saved.is_empty(), "files written under HOME: {saved:?}");
    let site = setup.dir.path().join("site");
    let downloaded: Vec<PathBuf> = crate::support::files_under(setup.dir.path())
        .into_iter()
        .filter(|f| !f.starts_with(&site))
        .filter(|f| {
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            name.contains("page-chose-this-name") || name.contains("payload")
        })
        .collect();
    assert!(downloaded.is_empty(), "downloads saved: {downloaded:?}");
    assert_eq!(stored_count(&setup.out), 1);
}

#[test]
fn a_page_out_of_time_keeps_its_images_fails_as_partial_and_is_retried_by_the_next_run() {
    if !chromium_available(
        "a_page_out_of_time_keeps_its_images_fails_as_partial_and_is_retried_by_the_next_run",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("site");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("endless.html"), ENDLESS_PAGE).unwrap();
    let site = Site::serve_dir(&root);
    let profile = tmp.path().join("endless.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"endless\"\nstart = [\"{}/endless.html\"]\nrender = \"browser\"\n\
             [browser]\npage_timeout = \"6s\"\nscroll = 10000\nsettle = \"300ms\"\n\
             [[images]]\nselector = \"#g img\"\n[download]\nout = \"{}\"\n",
            site.origin,
            tmp.path().join("out").display()
        ),
    )
    .unwrap();
    let run_once = || {
        run(scrape()
            .arg("--profile")
            .arg(&profile)
            .args(["--progress", "off", "-v"]))
    };
    let first = run_once();
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    let out = tmp.path().join("out");
    let stored = manifest(&out).len();
    assert!(
        stored > 3,
        "the images rendered by the deadline are stored: {stored}"
    );
    let failures = std::fs::read_to_string(out.join("failures.jsonl")).unwrap();
    assert!(
        failures.contains("\"kind\":\"page\"") && failures.contains("\"class\":\"partial\""),
        "{failures}"
    );
    assert!(
        text(&first).contains("rendered in part"),
        "{}",
        text(&first)
    );

    let second = run_once();
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert!(
        site.hits().get("/endless.html").copied().unwrap_or(0) >= 2,
        "the partial page is rendered again: {:?}",
        site.hits()
    );
    // The downloader's requests: every request but the browser's. Now and then (about one run
    // in ten under load) the browser itself loads the one image a still-scrolling partial page
    // adds as it is left, which no snapshot lists: the rendering's gap, not a second download.
    let browser = image_hits(site.browser_hits());
    let downloads: BTreeMap<String, u64> = image_hits(site.hits())
        .into_iter()
        .map(|(path, n)| {
            let by_browser = browser.get(&path).copied().unwrap_or(0);
            (path, n - by_browser)
        })
        .collect();
    assert!(
        downloads.values().all(|&n| n <= 1),
        "no image is downloaded twice: {downloads:?}\nfirst run:\n{}\nsecond run:\n{}",
        text(&first),
        text(&second)
    );
    assert!(
        browser.values().sum::<u64>() <= 2,
        "the browser loads no image itself, but for one per partial page as it is left: {browser:?}"
    );
}

#[test]
fn a_page_taking_the_browser_past_its_memory_limit_fails_as_memory_and_the_job_goes_on() {
    if !chromium_available(
        "a_page_taking_the_browser_past_its_memory_limit_fails_as_memory_and_the_job_goes_on",
    ) {
        return;
    }
    let setup = Setup::with(
        |dir| {
            let root = dir.join("site");
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("heap.html"), HEAP_PAGE).unwrap();
            std::fs::write(
                root.join("fine.html"),
                "<!doctype html><div class=\"gallery\"><img src=\"/img/fine-40x30.jpg\"></div>\
                 <p id=\"ready\">ready</p>",
            )
            .unwrap();
            Site::serve_dir(&root)
        },
        |dir, site| {
            let path = dir.join("heap.toml");
            std::fs::write(
                &path,
                format!(
                    "name = \"heap\"\nstart = [\"{0}/heap.html\", \"{0}/fine.html\"]\n\
                     render = \"browser\"\n[browser]\ntabs = 1\nwait_for = \"#ready\"\n\
                     page_timeout = \"40s\"\nmemory_limit = \"640MiB\"\n\
                     [[images]]\nselector = \".gallery img\"\n",
                    site.origin
                ),
            )
            .unwrap();
            path
        },
    );
    let output = setup.run();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let failures = std::fs::read_to_string(setup.out.join("failures.jsonl")).unwrap();
    let failures = json_lines(&failures);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["kind"], "page", "{failures:?}");
    assert_eq!(failures[0]["class"], "memory", "{failures:?}");
    assert!(
        failures[0]["url"].as_str().unwrap().ends_with("/heap.html"),
        "{failures:?}"
    );
    // Rendered twice (the second time in a fresh browser), then the job went on.
    assert_eq!(
        setup.site.hits().get("/heap.html"),
        Some(&2),
        "{:?}",
        setup.site.hits()
    );
    let stored: Vec<String> = manifest(&setup.out)
        .iter()
        .map(|line| line["url"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        stored,
        [format!("{}/img/fine-40x30.jpg", setup.site.origin)],
        "{}",
        text(&output)
    );
    assert!(text(&output).contains("memory limit"), "{}", text(&output));
}
