//! Proxies, as a user runs them: downloads and pages through a forward HTTP proxy written here
//! (and a SOCKS5 one), a dead proxy benched without costing an image, credentials from the
//! environment that reach the proxy and nowhere else, and a browser profile rendered through
//! the proxy.

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine;
use tempfile::TempDir;

use crate::support::{
    Proxy, Site, chromium_available, download_list, expected_images, files_containing, manifest,
    manifest_hashes, repo, run, scrape, stderr, text, url_list,
};

/// A port nothing listens on: bound, then closed.
fn dead_proxy() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    format!("http://{addr}")
}

/// Image paths of the tests' URL lists.
fn image_paths(count: usize) -> Vec<String> {
    (1..=count)
        .map(|i| format!("/img/proxied-{i}-64x48.jpg"))
        .collect()
}

#[test]
fn a_list_is_downloaded_through_the_proxy_only() {
    let site = Site::serve("fixtures/demo-site");
    let proxy = Proxy::http(None);
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(5);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");

    let output = run(&mut download_list(&list, &out, &["--proxy", &proxy.url()]));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(
        manifest_hashes(&out),
        expected_images(&site.origin, &paths),
        "manifest url → sha256"
    );
    assert_eq!(manifest(&out).len(), paths.len(), "one line per URL");
    let once: BTreeMap<String, u64> = paths.iter().map(|p| (p.clone(), 1)).collect();
    assert_eq!(proxy.paths(), once, "every image once, through the proxy");
    assert_eq!(
        site.image_requests(),
        paths.len() as u64,
        "the site saw the proxy's requests and no other"
    );
}

#[test]
fn a_dead_proxy_is_benched_and_costs_no_image() {
    let site = Site::serve("fixtures/demo-site");
    let proxy = Proxy::http(None);
    let dead = dead_proxy();
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(8);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");

    // One download at a time, so the dead proxy's turns are exactly countable; no retries, so
    // an image that lost a turn to the dead proxy would be a failure.
    let output = run(&mut download_list(
        &list,
        &out,
        &[
            "-v",
            "--proxy",
            &dead,
            "--proxy",
            &proxy.url(),
            "--concurrency",
            "1",
            "--retries",
            "0",
        ],
    ));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest_hashes(&out), expected_images(&site.origin, &paths));
    let failures = std::fs::read_to_string(out.join("failures.jsonl")).unwrap_or_default();
    assert_eq!(failures, "", "no image failed");
    assert_eq!(
        proxy.forwarded(),
        paths.len(),
        "every image through the live proxy"
    );
    let log = stderr(&output);
    let shown = dead.trim_start_matches("http://");
    let attempts = log
        .lines()
        .filter(|l| l.contains(&format!("proxy http://{shown} ")))
        .count();
    assert_eq!(
        attempts, 3,
        "the dead proxy is tried max_failures times:\n{log}"
    );
    assert!(
        log.contains(&format!("proxy http://{shown} benched")),
        "{log}"
    );
}

#[test]
fn credentials_from_the_environment_reach_the_proxy_and_nothing_else() {
    const SECRET: &str = "s3cret-proxy-word";
    let site = Site::serve("fixtures/demo-site");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("scraper:{SECRET}"));
    let proxy = Proxy::http(Some(&basic));
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(3);
    let list = url_list(dir.path(), &site.origin, &paths);
    let profile = dir.path().join("proxied.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"proxied\"\nstart = [\"http://127.0.0.1:1/\"]\n[[images]]\nselector = \"img\"\n\
             [proxy]\nurls = [\"{}\"]\nusername = \"scraper\"\npassword = \"env:TEST_PROXY_PASSWORD\"\n",
            proxy.url()
        ),
    )
    .expect("profile written");
    let out = dir.path().join("out");

    let without = run(download_list(&list, &out, &["--profile"])
        .arg(&profile)
        .env_remove("TEST_PROXY_PASSWORD"));
    assert_eq!(without.status.code(), Some(2), "{}", text(&without));
    assert!(
        stderr(&without).contains("TEST_PROXY_PASSWORD"),
        "{}",
        text(&without)
    );
    assert_eq!((proxy.forwarded(), proxy.refused()), (0, 0), "no request");
    assert_eq!(site.image_requests(), 0);

    let output = run(download_list(&list, &out, &["-v", "--profile"])
        .arg(&profile)
        .env("TEST_PROXY_PASSWORD", SECRET));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest_hashes(&out), expected_images(&site.origin, &paths));
    let expected = Some(format!("Basic {basic}"));
    assert_eq!(proxy.authorizations(), vec![expected; paths.len()]);
    assert_eq!(proxy.refused(), 0);
    let all = format!(
        "{}{}",
        stderr(&output),
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(!all.contains(SECRET) && !all.contains(&basic), "{all}");
    assert_eq!(files_containing(&out, SECRET), Vec::<PathBuf>::new());
    assert_eq!(files_containing(&out, &basic), Vec::<PathBuf>::new());
}

#[test]
fn a_socks5_proxy_carries_the_downloads() {
    let site = Site::serve("fixtures/demo-site");
    let proxy = Proxy::socks5();
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(3);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");

    let output = run(&mut download_list(&list, &out, &["--proxy", &proxy.url()]));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest_hashes(&out), expected_images(&site.origin, &paths));
    assert!(proxy.forwarded() >= 1, "no connection through the proxy");
    assert_eq!(site.image_requests(), paths.len() as u64);
}

#[test]
fn a_browser_profile_renders_through_an_authenticated_proxy() {
    if !chromium_available("a_browser_profile_renders_through_an_authenticated_proxy") {
        return;
    }
    const SECRET: &str = "browser-proxy-word";
    let site = Site::serve("fixtures/js-sites");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("scraper:{SECRET}"));
    let proxy = Proxy::http(Some(&basic));
    let dir = TempDir::new().expect("temporary folder");
    let source =
        std::fs::read_to_string(repo("site-profiles/infinite.toml")).expect("infinite profile");
    let profile = dir.path().join("infinite.toml");
    std::fs::write(
        &profile,
        format!(
            "{source}\n[proxy]\nurls = [\"{}\"]\nusername = \"env:TEST_PROXY_USER\"\n\
             password = \"env:TEST_PROXY_PASSWORD\"\n",
            proxy.url()
        ),
    )
    .expect("profile written");
    let out = dir.path().join("out");
    let start = format!("{}/infinite/", site.origin);

    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--start", &start, "--progress", "off", "-v", "--out"])
        .arg(&out)
        .env("TEST_PROXY_USER", "scraper")
        .env("TEST_PROXY_PASSWORD", SECRET));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let paths: Vec<String> = (1..=3)
        .flat_map(|n| (1..=4).map(move |i| format!("/img/scroll-{n}-{i}-640x480.jpg")))
        .collect();
    assert_eq!(manifest_hashes(&out), expected_images(&site.origin, &paths));
    let seen = proxy.paths();
    assert!(
        seen.get("/infinite/").is_some_and(|&n| n >= 1),
        "the browser's page request did not go through the proxy: {seen:?}"
    );
    let page_requests = site.hits().get("/infinite/").copied().unwrap_or(0);
    assert_eq!(
        seen.get("/infinite/").copied(),
        Some(page_requests),
        "every page request the site saw came through the proxy"
    );
    for path in &paths {
        assert_eq!(seen.get(path), Some(&1), "{path}: {seen:?}");
    }
    let all = format!(
        "{}{}",
        stderr(&output),
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(!all.contains(SECRET) && !all.contains(&basic), "{all}");
    assert_eq!(files_containing(&out, SECRET), Vec::<PathBuf>::new());
}

#[test]
fn a_proxy_file_is_read_at_the_start_and_a_bad_line_is_named() {
    let site = Site::serve("fixtures/demo-site");
    let proxy = Proxy::http(None);
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(2);
    let list = url_list(dir.path(), &site.origin, &paths);
    let profile = dir.path().join("listed.toml");
    std::fs::write(
        &profile,
        "name = \"listed\"\nstart = [\"http://127.0.0.1:1/\"]\n[[images]]\nselector = \"img\"\n\
         [proxy]\nfile = \"proxies.txt\"\n",
    )
    .expect("profile written");
    let proxies = dir.path().join("proxies.txt");
    let out = dir.path().join("out");

    std::fs::write(
        &proxies,
        format!("# ours\n{}\nproxy.example\n", proxy.url()),
    )
    .expect("list written");
    let bad = run(download_list(&list, &out, &["--profile"]).arg(&profile));
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(stderr(&bad).contains("proxies.txt:3:"), "{}", text(&bad));
    assert_eq!(site.image_requests(), 0, "nothing fetched");

    std::fs::write(&proxies, format!("# ours\n{}  # the test's\n", proxy.url()))
        .expect("list written");
    let output = run(download_list(&list, &out, &["--profile"]).arg(&profile));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(
        proxy.forwarded(),
        paths.len(),
        "the listed proxy carried the images"
    );
}

#[test]
fn a_recording_made_through_a_proxy_holds_no_credentials_and_its_replay_needs_no_proxy() {
    const SECRET: &str = "record-proxy-word";
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    crate::support::write_gallery(
        &root,
        &[vec![
            "/img/rec-1-64x48.jpg".to_owned(),
            "/img/rec-2-64x48.jpg".to_owned(),
        ]],
    );
    let site = Site::serve_dir(&root);
    let origin = site.origin.clone();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("scraper:{SECRET}"));
    let proxy = Proxy::http(Some(&basic));
    let profile = dir.path().join("recorded.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"recorded\"\nstart = [\"http://127.0.0.1:1/\"]\n\
             [[images]]\nselector = \".gallery figure img\"\n\
             [proxy]\nurls = [\"{}\"]\nusername = \"scraper\"\npassword = \"env:TEST_PROXY_PASSWORD\"\n",
            proxy.url()
        ),
    )
    .expect("profile written");
    let start = format!("{origin}/gallery/");
    let rec = dir.path().join("rec");
    let recorded = run(scrape()
        .args(["record", "--quiet", "--images", "keep", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(&rec)
        .args(["--start", &start])
        .env("TEST_PROXY_PASSWORD", SECRET));
    assert!(recorded.status.success(), "{}", text(&recorded));
    assert!(
        proxy.forwarded() >= 3,
        "page and images went through the proxy"
    );
    assert_eq!(files_containing(&rec, SECRET), Vec::<PathBuf>::new());
    assert_eq!(files_containing(&rec, &basic), Vec::<PathBuf>::new());
    drop(site);
    drop(proxy);

    let out = dir.path().join("replayed");
    let output = run(scrape()
        .arg("--profile")
        .arg(&profile)
        .arg("--replay")
        .arg(rec.join("site.har"))
        .args([
            "--replay-strict",
            "--progress",
            "off",
            "--start",
            &start,
            "--out",
        ])
        .arg(&out)
        .env_remove("TEST_PROXY_PASSWORD"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let paths = [
        "/img/rec-1-64x48.jpg".to_owned(),
        "/img/rec-2-64x48.jpg".to_owned(),
    ];
    assert_eq!(manifest_hashes(&out), expected_images(&origin, &paths));
}

#[test]
fn a_browser_profile_with_a_socks_login_is_refused_before_any_page() {
    if !chromium_available("a_browser_profile_with_a_socks_login_is_refused_before_any_page") {
        return;
    }
    let site = Site::serve("fixtures/js-sites");
    let dir = TempDir::new().expect("temporary folder");
    let output = run(scrape()
        .args(["--progress", "off", "--profile"])
        .arg(repo("site-profiles/infinite.toml"))
        .args(["--start", &format!("{}/infinite/", site.origin)])
        .args(["--proxy", "socks5://user:pa55word@127.0.0.1:1", "--out"])
        .arg(dir.path().join("out")));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot log in to SOCKS proxy `socks5://127.0.0.1:1`"),
        "{stderr}"
    );
    assert!(!stderr.contains("pa55word"), "{stderr}");
    assert!(site.hits().is_empty(), "{:?}", site.hits());
}
