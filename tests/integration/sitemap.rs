//! Sitemaps as a source of pages: an index leads to sitemaps (gzipped or not) whose pages are
//! crawled by the top-level rules, images an image sitemap lists are stored without their page
//! being fetched, a sitemap that cannot be read fails alone (the others are crawled), and a
//! rerun fetches nothing it had.
//!
//! The site is a folder served by the demo server on `127.0.0.1:0`, which counts every request
//! by path; sitemaps name its origin, so they are written once it serves.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use scrape::state::{PageStatus, State};

use crate::support::{
    Setup, Site, assert_refused, json_lines, kill_when, manifest, run, text, write_changed,
};

/// A gallery page showing the generated images `names` (under `/img/`).
fn page(names: &[&str]) -> String {
    let imgs: String = names
        .iter()
        .map(|n| format!(r#"<img src="/img/{n}">"#))
        .collect();
    format!("<html><body><main>{imgs}</main></body></html>")
}

/// A `<urlset>` of `pages` (paths of `origin`), each with a `<lastmod>` and the images (paths)
/// the image extension lists for it.
fn urlset(origin: &str, pages: &[(&str, &[&str])]) -> String {
    let urls: String = pages
        .iter()
        .map(|(path, images)| {
            let images: String = images
                .iter()
                .map(|i| format!("<image:image><image:loc>{origin}{i}</image:loc></image:image>"))
                .collect();
            format!("<url><loc>{origin}{path}</loc><lastmod>2024-05-01</lastmod>{images}</url>")
        })
        .collect();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">{urls}</urlset>"#
    )
}

fn index(origin: &str, sitemaps: &[&str]) -> String {
    let entries: String = sitemaps
        .iter()
        .map(|s| format!("<sitemap><loc>{origin}{s}</loc></sitemap>"))
        .collect();
    format!(
        r#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>"#
    )
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// A site served from `dir/site`, empty until the profile's writer fills it.
fn site(dir: &Path) -> Site {
    let root = dir.join("site");
    std::fs::create_dir_all(&root).unwrap();
    Site::serve_dir(&root)
}

/// Writes `files` (path → bytes) into the served folder and a profile of `sitemaps` (paths of
/// the site) with `rules` into `dir`.
fn profile(
    dir: &Path,
    site: &Site,
    sitemaps: &[&str],
    rules: &str,
    files: Vec<(&str, Vec<u8>)>,
) -> PathBuf {
    for (path, bytes) in files {
        let file = dir.join("site").join(path.trim_start_matches('/'));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, bytes).unwrap();
    }
    let list: Vec<String> = sitemaps
        .iter()
        .map(|s| format!("\"{}{s}\"", site.origin))
        .collect();
    let path = dir.join("profile.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"sitemaps\"\nsitemap = [{}]\n{rules}",
            list.join(", ")
        ),
    )
    .unwrap();
    path
}

const IMAGE_RULES: &str = "[[images]]\nselector = \"main img\"\n";

/// The stored images: URL path → (page path, rule).
fn stored(setup: &Setup) -> BTreeMap<String, (String, String)> {
    let origin = &setup.site.origin;
    manifest(&setup.out)
        .into_iter()
        .map(|line| {
            let strip = |key: &str| {
                let value = line[key].as_str().unwrap_or_default();
                value
                    .strip_prefix(origin.as_str())
                    .unwrap_or(value)
                    .to_owned()
            };
            (strip("url"), (strip("page"), strip("rule")))
        })
        .collect()
}

/// `failures.jsonl`: URL path → (class, detail).
fn failures(setup: &Setup) -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(setup.out.join("failures.jsonl")).unwrap_or_default();
    let origin = &setup.site.origin;
    json_lines(&text)
        .into_iter()
        .map(|f| {
            let url = f["url"].as_str().unwrap_or_default();
            (
                url.strip_prefix(origin.as_str()).unwrap_or(url).to_owned(),
                (
                    f["class"].as_str().unwrap_or_default().to_owned(),
                    f["detail"].as_str().unwrap_or_default().to_owned(),
                ),
            )
        })
        .collect()
}

#[test]
fn sitemap_index_leads_to_a_plain_and_a_gzipped_sitemap_whose_pages_images_are_all_stored() {
    let setup = Setup::with(site, |dir, site| {
        let origin = site.origin.as_str();
        profile(
            dir,
            site,
            &["/sitemap_index.xml"],
            IMAGE_RULES,
            vec![
                (
                    "/sitemap_index.xml",
                    index(origin, &["/sitemaps/one.xml", "/sitemaps/two.xml.gz"]).into_bytes(),
                ),
                (
                    "/sitemaps/one.xml",
                    urlset(origin, &[("/p/1.html", &[]), ("/p/2.html", &[])]).into_bytes(),
                ),
                (
                    "/sitemaps/two.xml.gz",
                    gzip(urlset(origin, &[("/p/3.html", &[]), ("/p/1.html", &[])]).as_bytes()),
                ),
                ("/p/1.html", page(&["one-64x48.png"]).into_bytes()),
                (
                    "/p/2.html",
                    page(&["two-64x48.png", "three-64x48.jpg"]).into_bytes(),
                ),
                ("/p/3.html", page(&["four-64x48.gif"]).into_bytes()),
            ],
        )
    });
    let output = setup.run();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let expected: BTreeMap<String, (String, String)> = [
        ("/img/one-64x48.png", "/p/1.html"),
        ("/img/two-64x48.png", "/p/2.html"),
        ("/img/three-64x48.jpg", "/p/2.html"),
        ("/img/four-64x48.gif", "/p/3.html"),
    ]
    .into_iter()
    .map(|(image, page)| (image.to_owned(), (page.to_owned(), "images[0]".to_owned())))
    .collect();
    assert_eq!(stored(&setup), expected, "{}", text(&output));
    let hits = setup.site.hits();
    for path in [
        "/sitemap_index.xml",
        "/sitemaps/one.xml",
        "/sitemaps/two.xml.gz",
        "/p/1.html",
        "/p/2.html",
        "/p/3.html",
    ] {
        assert_eq!(hits.get(path), Some(&1), "{path} fetched once: {hits:?}");
    }
    assert!(
        text(&output).contains("3 read this run: 4 pages and 0 images listed"),
        "{}",
        text(&output)
    );

    let again = setup.run();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(
        setup.site.hits(),
        hits,
        "a rerun fetches no sitemap, page or image it had: {}",
        text(&again)
    );
    assert_eq!(stored(&setup), expected);
}

#[test]
fn sitemap_image_extension_images_are_stored_without_their_pages_being_fetched() {
    let setup = Setup::with(site, |dir, site| {
        let origin = site.origin.as_str();
        profile(
            dir,
            site,
            &["/robots.txt"],
            "",
            vec![
                (
                    "/robots.txt",
                    format!("User-agent: *\nDisallow: /private/\nSitemap: {origin}/images.xml\n")
                        .into_bytes(),
                ),
                (
                    "/images.xml",
                    urlset(
                        origin,
                        &[
                            ("/album/a.html", &["/img/a1-64x48.png", "/img/a2-64x48.png"]),
                            ("/album/b.html", &["/img/b1-64x48.jpg"]),
                        ],
                    )
                    .into_bytes(),
                ),
            ],
        )
    });
    let output = setup.run();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let expected: BTreeMap<String, (String, String)> = [
        ("/img/a1-64x48.png", "/album/a.html"),
        ("/img/a2-64x48.png", "/album/a.html"),
        ("/img/b1-64x48.jpg", "/album/b.html"),
    ]
    .into_iter()
    .map(|(image, page)| (image.to_owned(), (page.to_owned(), "sitemap".to_owned())))
    .collect();
    assert_eq!(stored(&setup), expected, "{}", text(&output));
    let hits = setup.site.hits();
    assert!(
        !hits.keys().any(|p| p.starts_with("/album/")),
        "a profile without page rules fetches no listed page: {hits:?}"
    );
    assert_eq!(hits.get("/images.xml"), Some(&1), "{hits:?}");
}

#[test]
fn sitemap_malformed_or_oversized_fails_alone_and_the_other_sitemaps_are_crawled() {
    let setup = Setup::with(site, |dir, site| {
        let origin = site.origin.as_str();
        // Inflated, it weighs one byte more than a sitemap may.
        let mut huge = urlset(origin, &[]).into_bytes();
        huge.resize(50 * 1024 * 1024 + 1, b' ');
        profile(
            dir,
            site,
            &[
                "/good.xml",
                "/broken.xml",
                "/huge.xml.gz",
                "/error-page.xml",
            ],
            IMAGE_RULES,
            vec![
                (
                    "/good.xml",
                    urlset(origin, &[("/p/1.html", &[])]).into_bytes(),
                ),
                (
                    "/broken.xml",
                    format!("<urlset><url><loc>{origin}/p/2.html</loc></url>").into_bytes(),
                ),
                ("/huge.xml.gz", gzip(&huge)),
                (
                    "/error-page.xml",
                    b"<!DOCTYPE html><html><body>Service unavailable</body></html>".to_vec(),
                ),
                ("/p/1.html", page(&["one-64x48.png"]).into_bytes()),
                ("/p/2.html", page(&["two-64x48.png"]).into_bytes()),
            ],
        )
    });
    let output = setup.run();
    assert_eq!(
        output.status.code(),
        Some(1),
        "failures are reported: {}",
        text(&output)
    );
    assert_eq!(
        stored(&setup).into_keys().collect::<Vec<_>>(),
        ["/img/one-64x48.png"],
        "{}",
        text(&output)
    );
    let failed = failures(&setup);
    let class = |path: &str| failed.get(path).map(|(c, d)| (c.as_str(), d.as_str()));
    assert!(
        matches!(class("/broken.xml"), Some(("sitemap", d)) if d.contains("not well-formed XML")),
        "{failed:?}"
    );
    assert!(
        matches!(class("/huge.xml.gz"), Some(("too_large", d)) if d.contains("once inflated")),
        "{failed:?}"
    );
    assert!(
        matches!(class("/error-page.xml"), Some(("sitemap", d)) if d.contains("HTML page")),
        "{failed:?}"
    );
    assert!(
        text(&output).contains("3 failed (the next run retries them)"),
        "{}",
        text(&output)
    );
    assert!(!setup.site.hits().contains_key("/p/2.html"));

    // The next run asks again for what failed, and for nothing it had; what was stored stays.
    let before = setup.site.hits();
    let again = setup.run();
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let after = setup.site.hits();
    for path in ["/broken.xml", "/huge.xml.gz", "/error-page.xml"] {
        assert_eq!(after.get(path), Some(&2), "{path} is read again: {after:?}");
    }
    for path in ["/good.xml", "/p/1.html", "/img/one-64x48.png"] {
        assert_eq!(
            after.get(path),
            before.get(path),
            "{path} is not fetched again"
        );
    }
    assert_eq!(
        stored(&setup).into_keys().collect::<Vec<_>>(),
        ["/img/one-64x48.png"]
    );
}

#[test]
fn sitemap_run_killed_midway_resumes_without_fetching_a_sitemap_or_a_done_page_again() {
    const PAGES: usize = 60;
    let setup = Setup::with(site, |dir, site| {
        let origin = site.origin.as_str();
        let paths: Vec<String> = (0..PAGES).map(|n| format!("/p/{n}.html")).collect();
        let listed: Vec<(&str, &[&str])> = paths.iter().map(|p| (p.as_str(), &[][..])).collect();
        let mut files = vec![("/sitemap.xml", urlset(origin, &listed).into_bytes())];
        for (n, path) in paths.iter().enumerate() {
            let image = format!("p{n}-32x24.png");
            files.push((path.as_str(), page(&[image.as_str()]).into_bytes()));
        }
        // Paced, so the run is still going when it is killed.
        let rules = format!("{IMAGE_RULES}[crawl]\nconcurrency = 1\nper_host_rps = 40\n");
        profile(dir, site, &["/sitemap.xml"], &rules, files)
    });
    let page_hits = || {
        setup
            .site
            .hits()
            .keys()
            .filter(|p| p.starts_with("/p/"))
            .count()
    };
    kill_when(
        &setup,
        "pages of the sitemap fetched",
        Duration::from_secs(60),
        || page_hits() >= 5,
    );
    let killed_at = setup.site.hits();
    let mut done = BTreeSet::new();
    {
        let state = State::open_existing(&setup.out).expect("the state opens");
        state
            .for_each_page(|url, record| {
                if record.status == PageStatus::Done {
                    done.insert(url::Url::parse(url).expect("URL").path().to_owned());
                }
                Ok(())
            })
            .expect("page records");
    }
    assert!(
        done.contains("/sitemap.xml"),
        "pages are queued by the sitemap's commit: {done:?}"
    );
    assert!(done.len() < PAGES + 1, "killed midway: {done:?}");

    let output = setup.run();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(stored(&setup).len(), PAGES, "{}", text(&output));
    let hits = setup.site.hits();
    assert_eq!(hits.get("/sitemap.xml"), Some(&1), "read once: {hits:?}");
    for path in &done {
        assert_eq!(
            hits.get(path),
            killed_at.get(path),
            "{path}, done before the kill, is not fetched again"
        );
    }
    for n in 0..PAGES {
        let path = format!("/p/{n}.html");
        let count = hits.get(&path).copied().unwrap_or(0);
        assert!((1..=2).contains(&count), "{path} fetched {count} times");
    }
}

#[test]
fn sitemap_profiles_are_refused_with_redis_before_redis_is_asked() {
    let dir = tempfile::TempDir::new().unwrap();
    let profile = dir.path().join("p.toml");
    std::fs::write(
        &profile,
        "name = \"s\"\nsitemap = [\"http://127.0.0.1:9/sitemap.xml\"]\n",
    )
    .unwrap();
    let profile = profile.to_str().expect("UTF-8 path");
    let out = dir.path().join("out");
    let out = out.to_str().expect("UTF-8 path");
    // Nothing listens there: a refusal that asked Redis would say it cannot connect.
    let redis = "redis://127.0.0.1:9/0";
    for args in [
        vec!["enqueue", "--redis", redis, "--profile", profile],
        vec![
            "worker",
            "--redis",
            redis,
            "--profile",
            profile,
            "--out",
            out,
        ],
        vec!["--profile", profile, "--redis", redis, "--out", out],
    ] {
        let output = run(crate::support::scrape().args(&args));
        assert_refused(&output, &["`sitemap` is not supported with --redis"]);
    }
}

/// A `<urlset>` of `pages` (path, `<lastmod>`, the one image it shows), with the pages
/// themselves written into the served folder `root`.
fn dated_urlset(root: &Path, origin: &str, pages: &[(&str, &str, &str)]) -> String {
    let mut urls = String::new();
    for (path, lastmod, image) in pages {
        write_changed(
            &root.join(path.trim_start_matches('/')),
            page(&[image]).as_bytes(),
        );
        urls.push_str(&format!(
            "<url><loc>{origin}{path}</loc><lastmod>{lastmod}</lastmod></url>"
        ));
    }
    format!(r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>"#)
}

/// A `<sitemapindex>` of `sitemaps` (path, `<lastmod>`).
fn dated_index(origin: &str, sitemaps: &[(&str, &str)]) -> String {
    let entries: String = sitemaps
        .iter()
        .map(|(s, lastmod)| {
            format!("<sitemap><loc>{origin}{s}</loc><lastmod>{lastmod}</lastmod></sitemap>")
        })
        .collect();
    format!(
        r#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>"#
    )
}

#[test]
fn a_refresh_reads_the_sitemaps_again_and_fetches_only_pages_and_sitemaps_whose_lastmod_changed() {
    let setup = Setup::with(site, |dir, site| {
        profile(dir, site, &["/index.xml"], IMAGE_RULES, Vec::new())
    });
    let (root, origin) = (setup.dir.path().join("site"), setup.site.origin.as_str());
    let publish = |a: &[(&str, &str, &str)], a_date: &str| {
        let a = dated_urlset(&root, origin, a);
        write_changed(&root.join("a.xml"), a.as_bytes());
        let b = dated_urlset(&root, origin, &[("/p/3.html", "2024-05-01", "three.png")]);
        write_changed(&root.join("b.xml"), b.as_bytes());
        let index = dated_index(origin, &[("/a.xml", a_date), ("/b.xml", "2024-05-01")]);
        write_changed(&root.join("index.xml"), index.as_bytes());
    };
    publish(
        &[
            ("/p/1.html", "2024-05-01", "one.png"),
            ("/p/2.html", "2024-05-01", "two.png"),
        ],
        "2024-05-01",
    );
    let output = setup.run();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(stored(&setup).len(), 3);

    // Page 1 shows a new picture and is dated anew, a page is added; the index dates `a.xml`
    // anew, `b.xml` stays as it was.
    publish(
        &[
            ("/p/1.html", "2024-06-01", "one-more.png"),
            ("/p/2.html", "2024-05-01", "two.png"),
            ("/p/4.html", "2024-06-01", "four.png"),
        ],
        "2024-06-01",
    );
    let before = setup.site.hits();
    let refresh = setup
        .command()
        .arg("--refresh")
        .output()
        .expect("scrape runs");
    assert_eq!(refresh.status.code(), Some(0), "{}", text(&refresh));
    let mut asked: Vec<String> = setup
        .site
        .hits()
        .into_iter()
        .filter(|(path, n)| before.get(path) != Some(n))
        .map(|(path, _)| path)
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [
            "/a.xml",
            "/img/four.png",
            "/img/one-more.png",
            "/index.xml",
            "/p/1.html",
            "/p/4.html"
        ],
        "{}",
        text(&refresh)
    );
    let stored: BTreeSet<String> = stored(&setup).into_keys().collect();
    assert_eq!(
        stored,
        [
            "/img/four.png",
            "/img/one-more.png",
            "/img/one.png",
            "/img/three.png",
            "/img/two.png"
        ]
        .map(str::to_owned)
        .into(),
        "new pictures stored, and the ones before kept"
    );

    // Without --refresh, a finished job asks for nothing.
    let hits = setup.site.hits();
    let again = setup.run();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(setup.site.hits(), hits, "{}", text(&again));
}
