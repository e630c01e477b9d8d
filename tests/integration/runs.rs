//! Runs are numbered: every image carries the run that found it (`run`, `found_at` in the
//! manifest and in `scrape urls --json`), each run lists the images it added in
//! `runs/NNNNN.jsonl`, `scrape urls --new` lists the last run's, and the summary and
//! `scrape status` count them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use tempfile::TempDir;

use crate::support::{
    PATIENCE, Setup, Site, demo_profile_in, download_list, json_lines, kill_when, manifest, run,
    scrape, status_json, stderr, stored_count, text, url_list, write_gallery,
};

/// The lines of `runs/NNNNN.jsonl` in `out`; panics if it is not there.
fn run_list(out: &Path, number: u32) -> Vec<Value> {
    let path = out.join("runs").join(format!("{number:05}.jsonl"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
    json_lines(&text)
}

/// The `url` of each line.
fn urls_of(lines: &[Value]) -> BTreeSet<String> {
    lines
        .iter()
        .map(|l| l["url"].as_str().expect("a url").to_owned())
        .collect()
}

/// `scrape urls --out OUT` plus `extra`, which must exit 0: its stdout lines.
fn urls(out: &Path, extra: &[&str]) -> Vec<String> {
    let output = run(scrape().arg("urls").arg("--out").arg(out).args(extra));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn absolute(origin: &str, paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| format!("{origin}{p}")).collect()
}

fn assert_done(output: &Output) {
    assert_eq!(output.status.code(), Some(0), "{}", text(output));
}

#[test]
fn a_url_list_run_again_longer_lists_exactly_the_new_images_as_run_2() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let out = dir.path().join("out");
    let first: Vec<String> = [
        "/img/n-a-64x48.jpg",
        "/img/n-b-64x48.jpg",
        "/img/n-c-64x48.png",
    ]
    .map(str::to_owned)
    .to_vec();
    let list = url_list(dir.path(), &site.origin, &first);
    let output = run(&mut download_list(&list, &out, &[]));
    assert_done(&output);
    assert!(
        stderr(&output).contains("3 new images stored by run 1 (listed in runs/00001.jsonl)"),
        "{}",
        text(&output)
    );
    let one = run_list(&out, 1);
    let first_urls: Vec<&str> = first.iter().map(String::as_str).collect();
    assert_eq!(urls_of(&one), absolute(&site.origin, &first_urls));
    let started_1 = one[0]["found_at"].as_str().expect("found_at").to_owned();
    assert!(started_1.ends_with('Z'), "{started_1}");

    // The list grows by two images and one URL with the bytes of one stored already.
    let added = [
        "/img/n-d-64x48.jpg",
        "/img/n-e-64x48.gif",
        "/img/n-a-64x48.jpeg",
    ];
    let mut longer = first.clone();
    longer.extend(added.map(str::to_owned));
    let list = url_list(dir.path(), &site.origin, &longer);
    let output = run(&mut download_list(&list, &out, &[]));
    assert_done(&output);
    assert!(
        stderr(&output)
            .contains("3 new images stored by run 2 (listed in runs/00002.jsonl), 3 found by it"),
        "{}",
        text(&output)
    );

    let new = absolute(&site.origin, &added);
    let two = run_list(&out, 2);
    assert_eq!(two.len(), 3, "{two:?}");
    assert_eq!(urls_of(&two), new);
    for line in &two {
        assert_eq!(line["run"], 2, "{line}");
        assert!(
            line["sha256"].is_string() && line["path"].is_string(),
            "{line}"
        );
    }
    let duplicate = format!("{}/img/n-a-64x48.jpeg", site.origin);
    assert!(
        two.iter()
            .any(|l| l["url"] == duplicate.as_str() && l["duplicate"] == true),
        "{two:?}"
    );
    assert_eq!(run_list(&out, 1), one, "run 1's list stays as it was");

    // The manifest: run and found_at of each image's first run.
    let manifest = manifest(&out);
    assert_eq!(manifest.len(), 6);
    let mut started_2 = None;
    for line in &manifest {
        let url = line["url"].as_str().expect("url");
        let (run, found_at) = (&line["run"], line["found_at"].as_str().expect("found_at"));
        if new.contains(url) {
            assert_eq!(run, 2, "{line}");
            started_2 = Some(found_at.to_owned());
        } else {
            assert_eq!(run, 1, "{line}");
            assert_eq!(found_at, started_1, "{line}");
        }
    }
    let started_2 = started_2.expect("a line of run 2");
    assert!(started_2 >= started_1, "{started_2} before {started_1}");

    // `scrape urls --new`: the last run's, alone or with a state, in both forms.
    let listed: BTreeSet<String> = urls(&out, &["--new"])
        .iter()
        .map(|l| l.split_once('\t').expect("STATE<TAB>URL").1.to_owned())
        .collect();
    assert_eq!(listed, new);
    assert_eq!(
        urls(&out, &["--new", "--state", "duplicate"]),
        [format!("duplicate\t{duplicate}")]
    );
    let json = json_lines(&urls(&out, &["--new", "--json"]).join("\n"));
    assert_eq!(urls_of(&json), new);
    assert!(
        json.iter()
            .all(|l| l["run"] == 2 && l["found_at"] == started_2.as_str()),
        "{json:?}"
    );
    let everything = json_lines(&urls(&out, &["--json"]).join("\n"));
    assert_eq!(everything.len(), 6);

    // `scrape status`: the last run, its time and its new images.
    let status = status_json(&out);
    assert_eq!(status["last_run"]["run"], 2, "{status}");
    assert_eq!(status["last_run"]["found"], 3, "{status}");
    assert_eq!(status["last_run"]["stored"], 3, "{status}");
    let output = run(scrape().args(["status", "--out"]).arg(&out));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(&format!(
            "last run  2 began {started_2}: 3 new images found, 3 stored (listed in runs/00002.jsonl)"
        )),
        "{}",
        text(&output)
    );

    // A third run with nothing new: an empty list of its own, and nothing new to list.
    let output = run(&mut download_list(&list, &out, &[]));
    assert_done(&output);
    assert!(
        stderr(&output).contains("0 new images stored by run 3"),
        "{}",
        text(&output)
    );
    assert_eq!(run_list(&out, 3), Vec::<Value>::new());
    assert_eq!(urls(&out, &["--new"]), Vec::<String>::new());
    assert_eq!(run_list(&out, 2), two, "run 2's list stays as it was");
}

#[test]
fn a_profile_run_again_with_a_start_added_lists_that_start_s_images_as_run_2() {
    let setup = Setup::gallery(
        |root| {
            write_gallery(
                root,
                &[
                    vec!["/img/g-1-64x48.jpg".into()],
                    vec!["/img/g-2-64x48.jpg".into()],
                ],
            );
            write_gallery(
                &root.join("more"),
                &[vec![
                    "/img/g-3-64x48.jpg".into(),
                    "/img/g-4-64x48.png".into(),
                ]],
            );
        },
        |dir| demo_profile_in(dir, ""),
    );
    let origin = setup.site.origin.clone();
    assert_done(&setup.run());
    assert_eq!(
        urls_of(&run_list(&setup.out, 1)),
        absolute(&origin, &["/img/g-1-64x48.jpg", "/img/g-2-64x48.jpg"])
    );

    let more = format!("{origin}/more/gallery/");
    let output = run(setup.command().args(["--start", &more]));
    assert_done(&output);
    assert!(
        stderr(&output).contains("2 new images stored by run 2"),
        "{}",
        text(&output)
    );
    let new = absolute(&origin, &["/img/g-3-64x48.jpg", "/img/g-4-64x48.png"]);
    assert_eq!(urls_of(&run_list(&setup.out, 2)), new);
    let runs: BTreeSet<(String, u64)> = manifest(&setup.out)
        .iter()
        .map(|l| {
            let url = l["url"].as_str().expect("url").to_owned();
            (url, l["run"].as_u64().expect("run"))
        })
        .collect();
    let mut want: BTreeSet<(String, u64)> = new.iter().map(|u| (u.clone(), 2)).collect();
    want.insert((format!("{origin}/img/g-1-64x48.jpg"), 1));
    want.insert((format!("{origin}/img/g-2-64x48.jpg"), 1));
    assert_eq!(runs, want);
    let listed: BTreeSet<String> = urls(&setup.out, &["--new", "--state", "stored"])
        .iter()
        .map(|l| l.split_once('\t').expect("STATE<TAB>URL").1.to_owned())
        .collect();
    assert_eq!(listed, new);
}

#[test]
fn the_images_a_killed_run_stored_are_in_the_next_runs_list_so_every_image_is_listed_once() {
    let pages: Vec<Vec<String>> = (1..=12)
        .map(|p| {
            (0..2)
                .map(|i| format!("/img/k-p{p}-{i}-480x360.jpg"))
                .collect()
        })
        .collect();
    let setup = Setup::gallery(
        |root| write_gallery(root, &pages),
        |dir| demo_profile_in(dir, ""),
    )
    .args(["--concurrency", "1"]);
    let stop = kill_when(&setup, "3 images stored", PATIENCE, || {
        stored_count(&setup.out) >= 3
    });
    assert!(!stop.done.is_empty(), "the killed run committed no image");
    assert!(
        !setup.out.join("runs").join("00001.jsonl").exists(),
        "a run killed with SIGKILL wrote its list"
    );

    let output = setup.run();
    assert_done(&output);
    let all: BTreeSet<String> = pages
        .iter()
        .flatten()
        .map(|p| format!("{}{p}", setup.site.origin))
        .collect();
    let two = run_list(&setup.out, 2);
    assert_eq!(two.len(), all.len(), "each image once");
    assert_eq!(urls_of(&two), all);
    assert!(
        stderr(&output).contains(&format!("{} new images stored by run 2", all.len())),
        "{}",
        text(&output)
    );
    // Those the killed run committed were found by it.
    for line in &two {
        let url = line["url"].as_str().expect("url");
        let path = url.strip_prefix(&setup.site.origin).expect("same origin");
        if stop.done.contains(path) {
            assert_eq!(line["run"], 1, "{line}");
        }
    }
    let found_by_1 = two.iter().filter(|l| l["run"] == 1).count();
    assert!(found_by_1 >= stop.done.len(), "{found_by_1} found by run 1");
}
