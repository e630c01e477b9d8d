//! Record and replay: `scrape record` against fixture sites on loopback, replays with the
//! servers stopped, `scrape test` on every site profile's recording, broken recordings.

use std::path::{Path, PathBuf};

use crate::support::{Site, demo_profile_in, manifest_hashes, repo, run, scrape, text};

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
    // A page-number template ends at the first missing page, so a short recording still ends
    // the chain cleanly: only strictness makes the missing page an error.
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
    let replay = |strict: bool| {
        let mut cmd = scrape();
        cmd.args(["--profile"])
            .arg(&profile)
            .arg("--replay")
            .arg(&har)
            .arg("--out")
            .arg(tmp.path().join(format!("out-{strict}")))
            .args([
                "--start",
                &format!("{origin}/gallery/"),
                "--progress",
                "off",
            ]);
        if strict {
            cmd.arg("--replay-strict");
        }
        run(&mut cmd)
    };
    let lenient = replay(false);
    assert_eq!(lenient.status.code(), Some(0), "{}", text(&lenient));
    let strict = replay(true);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(
        stderr.contains(&format!("GET {origin}/gallery/page-4.html")),
        "{stderr}"
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
            "entry 1: `response.content.encoding` is `rot13`; expected `base64`",
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
    let changed = lines[0].replace("\"rule\":\"photos\"", "\"rule\":\"thumbnails\"");
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

/// `scrape test site-profiles/NAME.toml` on the committed recording.
fn site_profile_replays_as_expected(name: &str) {
    let output = run(scrape()
        .arg("test")
        .arg(repo(&format!("site-profiles/{name}.toml"))));
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(": ok ("), "{stderr}");
}

#[test]
fn demo_profile_replays_as_expected() {
    site_profile_replays_as_expected("demo");
}
