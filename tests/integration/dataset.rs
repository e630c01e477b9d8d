//! Dataset formats, as a user runs them: `--format webdataset` writes complete tar shards that a
//! plain tar reader lists, with an index that matches them; a run killed mid-shard leaves no
//! torn tar under a final name and its rerun fetches nothing a finished shard holds; a damaged
//! sample leaves its shard with `verify --requeue` and is stored again once; a folder of image
//! files refuses a run that would add shards to it.
//! Near-duplicate flags: a smaller copy in another format is flagged with the picture stored
//! before it (or dropped), a different picture is not, and a run killed part-way and rerun
//! flags exactly what an uninterrupted run flags.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::support::{
    Background, PATIENCE, Site, assert_refused, download_list, expected_images, json_lines,
    manifest, pictures_and_copies, run, text, url_list,
};

/// Shards of 20, one image at a time, at most 300 a second: a kill lands mid-job.
const SLOW_SHARDS: [&str; 8] = [
    "--format",
    "webdataset",
    "--shard-size",
    "20",
    "--concurrency",
    "1",
    "--per-host-rps",
    "300",
];

/// `count` distinct generated JPEGs.
pub fn image_paths(count: usize) -> Vec<String> {
    (1..=count)
        .map(|i| format!("/img/sample-{i}-48x32.jpg"))
        .collect()
}

/// The finished shards (`NNNNN.tar`) in `out`, in order (none while `out` does not exist yet).
fn shards(out: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Vec::new();
    };
    let mut shards: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "tar"))
        .collect();
    shards.sort();
    shards
}

/// The members of the tar at `path`, read with the `tar` crate: name → bytes. Panics on a torn
/// or damaged tar.
fn members(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let file = std::fs::File::open(path).expect("shard opens");
    let mut archive = tar::Archive::new(file);
    let mut members = BTreeMap::new();
    for entry in archive.entries().expect("a tar") {
        let mut entry = entry.unwrap_or_else(|e| panic!("{}: damaged tar: {e}", path.display()));
        let name = entry
            .path()
            .expect("member name")
            .to_string_lossy()
            .into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).expect("member bytes");
        members.insert(name, bytes);
    }
    members
}

/// Checks every finished shard in `out` against its index and a plain `tar -tf`; returns the
/// samples of all of them: URL → sha256 of the image member.
pub fn read_shards(out: &Path, shard_size: usize) -> BTreeMap<String, String> {
    let mut samples = BTreeMap::new();
    for shard in shards(out) {
        let members = members(&shard);
        let listed = run(Command::new("tar").arg("-tf").arg(&shard));
        assert!(listed.status.success(), "{}", text(&listed));
        let listed: BTreeSet<String> = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            listed,
            members.keys().cloned().collect(),
            "tar -tf lists what the tar crate reads"
        );
        let index = json_lines(
            &std::fs::read_to_string(shard.with_extension("jsonl")).expect("the shard's index"),
        );
        // An image, its json and, for a captioned image, its txt.
        let captions = members.keys().filter(|m| m.ends_with(".txt")).count();
        assert!(
            index.len() <= shard_size && members.len() - captions == 2 * index.len(),
            "{}: {} samples in the index, {} members",
            shard.display(),
            index.len(),
            members.len()
        );
        for line in index {
            let key = line["key"].as_str().expect("key");
            let image = &members[&format!("{key}.jpg")];
            let json: serde_json::Value =
                serde_json::from_slice(&members[&format!("{key}.json")]).expect("sample json");
            assert_eq!(json, line, "the index line is the sample's json");
            let sha256 = hex::encode(Sha256::digest(image));
            assert_eq!(json["sha256"], sha256.as_str());
            assert_eq!(json["bytes"], image.len());
            let url = json["url"].as_str().expect("url").to_owned();
            assert!(
                samples.insert(url.clone(), sha256).is_none(),
                "`{url}` is in two samples"
            );
        }
    }
    samples
}

/// Files of `out` (not the state folder) whose name ends in `.tmp`.
pub fn tmp_files(out: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(out)
        .expect("output folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect()
}

#[test]
fn webdataset_shards_are_complete_tars_whose_index_and_manifest_match_the_images() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(25);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");

    let output = run(&mut download_list(
        &list,
        &out,
        &["--format", "webdataset", "--shard-size", "10"],
    ));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let names: Vec<String> = shards(&out)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["00000.tar", "00001.tar", "00002.tar"],
        "the last one partial"
    );
    assert_eq!(read_shards(&out, 10), expected_images(&site.origin, &paths));
    assert_eq!(tmp_files(&out), Vec::<PathBuf>::new(), "no open shard left");
    let manifest = manifest(&out);
    assert_eq!(manifest.len(), paths.len());
    for line in &manifest {
        let path = line["path"].as_str().expect("path");
        let (shard, member) = path.split_once('/').expect("shard/member");
        assert!(members(&out.join(shard)).contains_key(member), "{path}");
    }
    let verified = run(crate::support::scrape().args(["verify", "--out"]).arg(&out));
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
    assert!(
        crate::support::stderr(&verified)
            .contains("25 image(s) in 3 shard(s) checked: 0 missing or changed"),
        "{}",
        text(&verified)
    );
}

#[test]
fn a_webdataset_job_killed_mid_shard_leaves_no_torn_tar_and_never_fetches_a_finished_shard_again() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(300);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");
    let flags = SLOW_SHARDS;

    let mut killed = Background::spawn(
        &mut download_list(&list, &out, &flags),
        &dir.path().join("killed.stderr"),
    );
    killed.wait_for("two finished shards", PATIENCE, || shards(&out).len() >= 2);
    killed.kill();

    let finished = read_shards(&out, 20);
    assert!(finished.len() >= 40, "{} samples", finished.len());
    let hits_at_kill = site.hits();
    let output = run(&mut download_list(&list, &out, &flags));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));

    let hits = site.hits();
    for url in finished.keys() {
        let path = url.strip_prefix(&site.origin).expect("same origin");
        assert_eq!(
            hits.get(path),
            hits_at_kill.get(path),
            "`{path}` was in a finished shard and was fetched again"
        );
    }
    assert_eq!(
        read_shards(&out, 20),
        expected_images(&site.origin, &paths),
        "every image exactly once over the shards"
    );
    assert_eq!(tmp_files(&out), Vec::<PathBuf>::new(), "no open shard left");
    assert_eq!(manifest(&out).len(), paths.len());
}

#[test]
fn a_folder_of_image_files_refuses_a_run_that_would_store_shards_and_keeps_what_it_holds() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(12);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");
    let first = run(&mut download_list(&list, &out, &[]));
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let manifest_before = std::fs::read(out.join("manifest.jsonl")).expect("manifest");
    let requests = site.hits().values().sum::<u64>();

    let refused = run(&mut download_list(&list, &out, &["--format", "webdataset"]));

    assert_refused(
        &refused,
        &[
            "holds image files, as downloaded",
            "would store WebDataset shards, as downloaded",
            "rerun with `--format files`",
        ],
    );
    assert_eq!(
        site.hits().values().sum::<u64>(),
        requests,
        "nothing fetched"
    );
    assert_eq!(shards(&out), Vec::<PathBuf>::new());
    assert_eq!(tmp_files(&out), Vec::<PathBuf>::new(), "no shard opened");
    assert_eq!(
        std::fs::read(out.join("manifest.jsonl")).expect("manifest"),
        manifest_before,
        "the manifest as it was"
    );

    // Parquet stores the same files, and adds its table.
    let parquet = run(&mut download_list(&list, &out, &["--format", "parquet"]));
    assert_eq!(parquet.status.code(), Some(0), "{}", text(&parquet));
    assert!(out.join("images.parquet").is_file());
    assert_eq!(
        site.hits().values().sum::<u64>(),
        requests,
        "nothing fetched"
    );

    // Starting over may change the format.
    let fresh = run(&mut download_list(
        &list,
        &out,
        &["--format", "webdataset", "--fresh"],
    ));
    assert_eq!(fresh.status.code(), Some(0), "{}", text(&fresh));
    assert_eq!(
        read_shards(&out, 10_000),
        expected_images(&site.origin, &paths)
    );
}

/// Flips a byte in the body of the `nth` image member of the tar at `path`; that member's name.
fn damage_image_member(path: &Path, nth: usize) -> String {
    let file = std::fs::File::open(path).expect("shard opens");
    let mut archive = tar::Archive::new(file);
    let (name, at) = archive
        .entries()
        .expect("a tar")
        .map(|entry| entry.expect("member"))
        .filter_map(|entry| {
            let name = entry.path().expect("name").to_string_lossy().into_owned();
            name.ends_with(".jpg")
                .then(|| (name, entry.raw_file_position()))
        })
        .nth(nth)
        .expect("enough samples");
    let mut bytes = std::fs::read(path).expect("shard read");
    bytes[at as usize + 100] ^= 0xff;
    std::fs::write(path, bytes).expect("shard written");
    name
}

#[test]
fn damaged_samples_leave_their_shards_and_are_stored_again_once() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(300);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");
    let flags = SLOW_SHARDS;
    let mut killed = Background::spawn(
        &mut download_list(&list, &out, &flags),
        &dir.path().join("killed.stderr"),
    );
    // Eight samples into the open shard: its first is committed (the writer commits each batch
    // before it places the next, and one image at a time makes small batches, even on a busy
    // machine where a commit takes a while).
    killed.wait_for(
        "two finished shards and eight samples in the open one",
        PATIENCE,
        || {
            shards(&out).len() >= 2
                && tmp_files(&out).iter().any(|p| {
                    p.to_string_lossy().ends_with(".jsonl.tmp")
                        && std::fs::read_to_string(p).is_ok_and(|index| index.lines().count() >= 8)
                })
        },
    );
    killed.kill();
    // One sample in a finished shard, and one in the shard a crash left open.
    let in_finished = damage_image_member(&out.join("00000.tar"), 7);
    let open = tmp_files(&out)
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".tar.tmp"))
        .expect("the open shard");
    let in_open = damage_image_member(&open, 0);

    let verified = run(crate::support::scrape()
        .args(["verify", "--requeue", "--out"])
        .arg(&out));

    assert_eq!(verified.status.code(), Some(1), "{}", text(&verified));
    let said = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert!(
        said.contains(&format!("00000.tar/{in_finished}")) && said.contains(&in_open),
        "both listed: {said}"
    );
    let index = std::fs::read_to_string(out.join("00000.jsonl")).expect("index");
    let key = in_finished.trim_end_matches(".jpg");
    assert!(
        !index.contains(&format!("\"key\":\"{key}\"")),
        "the damaged sample left the index"
    );
    assert!(
        !members(&out.join("00000.tar")).contains_key(&in_finished),
        "and the tar"
    );

    let output = run(&mut download_list(&list, &out, &flags));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(
        read_shards(&out, 20),
        expected_images(&site.origin, &paths),
        "every image exactly once over the shards, with its bytes"
    );
    assert_eq!(manifest(&out).len(), paths.len());
    let again = run(crate::support::scrape().args(["verify", "--out"]).arg(&out));
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
}

#[test]
fn a_retry_without_flags_stores_in_the_format_the_list_was_stored_in() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let mut paths = image_paths(12);
    paths.push("/img/not-here.txt".to_owned());
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");
    let first = run(&mut download_list(
        &list,
        &out,
        &["--format", "webdataset", "--shard-size", "5"],
    ));
    assert_eq!(first.status.code(), Some(1), "one fails: {}", text(&first));
    let before = read_shards(&out, 5);

    let retried = run(crate::support::scrape().args(["retry", "--out"]).arg(&out));

    assert_eq!(
        retried.status.code(),
        Some(1),
        "it fails again: {}",
        text(&retried)
    );
    assert!(
        site.hits()
            .get("/img/not-here.txt")
            .is_some_and(|n| *n == 2),
        "asked again: {:?}",
        site.hits()
    );
    assert_eq!(read_shards(&out, 5), before, "the same shards");
    let loose: Vec<_> = std::fs::read_dir(&out)
        .expect("output folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| {
            name.ends_with(".jpg") || !name.contains('.') && name != ".scrape" && name != "runs"
        })
        .collect();
    assert!(
        loose.is_empty(),
        "no image files beside the shards: {loose:?}"
    );
}

#[test]
fn images_parquet_has_a_row_per_url_matching_the_manifest_with_the_image_bytes() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let mut paths = image_paths(5);
    paths.push("/img/missing.webp".to_owned());
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");
    let profile = dir.path().join("p.toml");
    std::fs::write(
        &profile,
        "name = \"p\"\nstart = [\"http://a.test/\"]\n[[images]]\nselector = \"img\"\n\
         [download]\nformat = \"parquet\"\nparquet_images = true\n",
    )
    .expect("profile written");

    let output = run(download_list(&list, &out, &["--retries", "0", "--profile"]).arg(&profile));

    assert_eq!(
        output.status.code(),
        Some(1),
        "one URL fails: {}",
        text(&output)
    );
    let reader = SerializedFileReader::new(
        std::fs::File::open(out.join("images.parquet")).expect("images.parquet"),
    )
    .expect("a Parquet file");
    let mut rows = BTreeMap::new();
    for row in reader.get_row_iter(None).expect("rows") {
        let row = row.expect("a row");
        let url = row.get_string(0).expect("url").clone();
        rows.insert(url, row);
    }
    assert_eq!(rows.len(), paths.len(), "a row per URL");
    let manifest = manifest(&out);
    assert_eq!(manifest.len(), 5);
    for line in &manifest {
        let row = &rows[line["url"].as_str().expect("url")];
        assert_eq!(row.get_string(1).expect("status"), "stored");
        assert_eq!(
            row.get_string(2).expect("path"),
            line["path"].as_str().unwrap()
        );
        assert_eq!(
            row.get_string(3).expect("sha256"),
            line["sha256"].as_str().unwrap()
        );
        assert_eq!(
            row.get_long(4).expect("bytes"),
            line["bytes"].as_i64().unwrap()
        );
        assert_eq!(row.get_int(6).expect("width"), 48);
        assert_eq!(row.get_long(22).expect("run"), 1, "found by the first run");
        let image = row.get_bytes(17).expect("image").data();
        assert_eq!(
            hex::encode(Sha256::digest(image)),
            line["sha256"].as_str().unwrap(),
            "the image column holds the stored bytes"
        );
    }
    let missing = &rows[&format!("{}/img/missing.webp", site.origin)];
    assert_eq!(missing.get_string(1).expect("status"), "failed");
    assert_eq!(missing.get_string(11).expect("class"), "http_404");
}

/// Runs `scrape download --profile PROFILE` into `out` once for each of `lists` (paths on
/// `origin`), in turn, so that every image of a list is stored before those of the next; each
/// run must exit 0.
fn download_in_turn(dir: &Path, origin: &str, out: &Path, profile: &Path, lists: &[&[String]]) {
    for (number, paths) in lists.iter().enumerate() {
        let folder = dir.join(format!("list-{number}"));
        std::fs::create_dir_all(&folder).expect("list folder");
        let list = url_list(&folder, origin, paths);
        let output = run(download_list(&list, out, &["--profile"]).arg(profile));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    }
}

/// A profile file in `dir` with `[download]` holding `keys`.
fn download_profile(dir: &Path, keys: &str) -> PathBuf {
    let profile = dir.join("p.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"p\"\nstart = [\"http://a.test/\"]\n[[images]]\nselector = \"img\"\n\
             [download]\n{keys}\n"
        ),
    )
    .expect("profile written");
    profile
}

/// The manifest of `out` by URL path.
fn manifest_by_path(out: &Path, origin: &str) -> BTreeMap<String, serde_json::Value> {
    manifest(out)
        .into_iter()
        .map(|line| {
            let url = line["url"].as_str().expect("url");
            (
                url.strip_prefix(origin).expect("same origin").to_owned(),
                line,
            )
        })
        .collect()
}

#[test]
fn a_smaller_copy_in_another_format_is_flagged_with_the_picture_before_it_and_another_is_not() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir(&root).expect("site folder");
    pictures_and_copies(&root, [11, 12]);
    let site = Site::serve_dir(&root);
    let out = dir.path().join("out");
    let profile = download_profile(
        dir.path(),
        "format = \"parquet\"\nnear_duplicate_distance = 4",
    );
    let pictures = ["/11.jpg".to_owned(), "/12.jpg".to_owned()];

    download_in_turn(
        dir.path(),
        &site.origin,
        &out,
        &profile,
        &[&pictures, &["/11-small.png".to_owned()]],
    );

    let lines = manifest_by_path(&out, &site.origin);
    let (picture, copy, other) = (
        &lines["/11.jpg"],
        &lines["/11-small.png"],
        &lines["/12.jpg"],
    );
    for line in [picture, copy, other] {
        let phash = line["phash"].as_str().expect("a phash");
        assert!(
            phash.len() == 16 && u64::from_str_radix(phash, 16).is_ok(),
            "{line}"
        );
    }
    assert_eq!(copy["near_duplicate_of"], picture["sha256"], "{copy}");
    assert_eq!(copy["near_duplicate_path"], picture["path"], "{copy}");
    assert!(
        copy["near_duplicate_distance"]
            .as_u64()
            .expect("a distance")
            <= 4
    );
    assert_ne!(
        copy["path"], picture["path"],
        "kept: stored as a file of its own"
    );
    for line in [picture, other] {
        assert!(line.get("near_duplicate_of").is_none(), "{line}");
    }

    let reader = SerializedFileReader::new(
        std::fs::File::open(out.join("images.parquet")).expect("images.parquet"),
    )
    .expect("a Parquet file");
    let mut rows = BTreeMap::new();
    for row in reader.get_row_iter(None).expect("rows") {
        let row = row.expect("a row");
        rows.insert(row.get_string(0).expect("url").clone(), row);
    }
    let row = &rows[&format!("{}/11-small.png", site.origin)];
    assert_eq!(
        row.get_string(13).expect("phash"),
        copy["phash"].as_str().unwrap()
    );
    assert_eq!(
        row.get_string(14).expect("near_duplicate_of"),
        picture["sha256"].as_str().unwrap()
    );
    assert_eq!(
        row.get_int(16).expect("near_duplicate_distance") as u64,
        copy["near_duplicate_distance"].as_u64().unwrap()
    );
}

#[test]
fn with_drop_a_near_duplicate_is_not_stored_and_points_at_the_picture_before_it() {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir(&root).expect("site folder");
    let paths = pictures_and_copies(&root, [21, 22]);
    let site = Site::serve_dir(&root);
    let out = dir.path().join("out");
    let profile = download_profile(
        dir.path(),
        "near_duplicate_distance = 4\nnear_duplicates = \"drop\"",
    );

    let (pictures, copies) = paths.split_at(2);
    download_in_turn(
        dir.path(),
        &site.origin,
        &out,
        &profile,
        &[pictures, copies],
    );

    let lines = manifest_by_path(&out, &site.origin);
    assert_eq!(lines.len(), 4, "a line per URL");
    for seed in [21, 22] {
        let picture = &lines[&format!("/{seed}.jpg")];
        let copy = &lines[&format!("/{seed}-small.png")];
        assert_eq!(copy["duplicate"], true, "{copy}");
        assert_eq!(copy["path"], picture["path"], "{copy}");
        assert_eq!(copy["near_duplicate_of"], picture["sha256"], "{copy}");
    }
    assert_eq!(
        crate::support::stored_files(&out).len(),
        2,
        "the copies are not stored"
    );
    let verified = run(crate::support::scrape().args(["verify", "--out"]).arg(&out));
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
}

/// Entries of the band index in the state of `out`.
fn band_entries(out: &Path) -> u64 {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let db = redb::Database::open(out.join(".scrape/state.redb")).expect("state opens");
    let txn = db.begin_read().expect("a read");
    let index = txn
        .open_multimap_table(scrape::state::tables::PHASH_BANDS)
        .expect("the band index");
    index.len().expect("its length")
}

#[test]
fn a_run_killed_part_way_then_rerun_flags_what_an_uninterrupted_run_flags_and_indexes_each_picture_once()
 {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir(&root).expect("site folder");
    let paths = pictures_and_copies(&root, 1..=150);
    let site = Site::serve_dir(&root);
    let list = url_list(dir.path(), &site.origin, &paths);
    let profile = download_profile(dir.path(), "near_duplicate_distance = 4");
    // One image at a time, at most 300 a second: the kill lands mid-job, and each picture is
    // stored before its copy in every run.
    let flags = [
        "--concurrency",
        "1",
        "--per-host",
        "1",
        "--per-host-rps",
        "300",
        "--profile",
    ];
    let flags_of = |out: &Path| {
        let mut cmd = download_list(&list, out, &flags);
        cmd.arg(&profile);
        cmd
    };
    let near_flags = |out: &Path| -> BTreeMap<String, serde_json::Value> {
        manifest_by_path(out, &site.origin)
            .into_iter()
            .map(|(path, line)| (path, line["near_duplicate_of"].clone()))
            .collect()
    };

    let whole = dir.path().join("whole");
    let output = run(&mut flags_of(&whole));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let out = dir.path().join("out");
    let mut killed = Background::spawn(&mut flags_of(&out), &dir.path().join("killed.stderr"));
    killed.wait_for("a fifth of the images stored", PATIENCE, || {
        crate::support::stored_count(&out) >= 60
    });
    killed.kill();
    let output = run(&mut flags_of(&out));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let expected = near_flags(&whole);
    assert_eq!(expected.len(), paths.len());
    let flagged: BTreeSet<&String> = expected
        .iter()
        .filter(|(_, flag)| !flag.is_null())
        .map(|(path, _)| path)
        .collect();
    assert!(
        flagged.len() == 150 && flagged.iter().all(|p| p.ends_with("-small.png")),
        "the copies and only they are flagged: {flagged:?}"
    );
    let resumed = near_flags(&out);
    let differ: Vec<_> = expected
        .iter()
        .filter(|(path, flag)| resumed.get(*path) != Some(flag))
        .map(|(path, flag)| format!("{path}: {flag} then {}", resumed[path]))
        .collect();
    assert!(differ.is_empty(), "flags differ: {differ:#?}");
    let stored = crate::support::stored_files(&out).len() as u64;
    assert_eq!(
        stored,
        paths.len() as u64,
        "kept: every picture and copy stored"
    );
    assert_eq!(
        band_entries(&out),
        stored * 5,
        "5 bands per picture, each once"
    );
    assert_eq!(band_entries(&whole), stored * 5);
}

#[test]
fn a_rerun_lists_the_samples_of_a_truncated_shard_as_missing_and_not_in_the_manifest() {
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(30);
    let list = url_list(dir.path(), &site.origin, &paths);
    let out = dir.path().join("out");
    let flags = ["--format", "webdataset", "--shard-size", "10"];
    let output = run(&mut download_list(&list, &out, &flags));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let cut = out.join("00001.tar");
    let whole = members(&cut);
    let bytes = std::fs::read(&cut).expect("shard read");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("shard cut");

    let output = run(&mut download_list(&list, &out, &flags));

    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let manifest = manifest(&out);
    let failures = json_lines(&std::fs::read_to_string(out.join("failures.jsonl")).unwrap());
    let missing: BTreeSet<&str> = failures
        .iter()
        .filter(|f| f["class"] == "missing")
        .map(|f| f["url"].as_str().expect("url"))
        .collect();
    assert!(
        !missing.is_empty() && missing.len() < 10,
        "the samples past the cut, not those before it: {failures:?}"
    );
    assert_eq!(manifest.len() + missing.len(), paths.len());
    let still = tar::Archive::new(std::fs::File::open(&cut).expect("shard opens"))
        .entries()
        .expect("a tar")
        .map_while(Result::ok)
        .count();
    assert!(still < whole.len(), "the cut took members away");
    for line in &manifest {
        let path = line["path"].as_str().expect("path");
        let url = line["url"].as_str().expect("url");
        assert!(!missing.contains(url), "{url} is both stored and missing");
        if let Some(member) = path.strip_prefix("00001.tar/") {
            let mut archive = tar::Archive::new(std::fs::File::open(&cut).expect("shard opens"));
            let there = archive
                .entries()
                .expect("a tar")
                .map_while(Result::ok)
                .any(|mut e| {
                    let mut body = Vec::new();
                    e.path().is_ok_and(|p| p.to_string_lossy() == member)
                        && e.read_to_end(&mut body).is_ok()
                        && body.len() as u64 == line["bytes"].as_u64().expect("bytes")
                });
            assert!(there, "`{path}` is listed but not whole in its shard");
        }
    }
}

#[test]
fn with_drop_distinct_flat_pictures_and_plain_gradients_are_all_stored() {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir(&root).expect("site folder");
    let flat = |name: &str, colour: [u8; 3]| {
        (
            name.to_owned(),
            image::RgbImage::from_pixel(200, 150, image::Rgb(colour)),
        )
    };
    // Both darken from left to right, in other colours: dHash sees the same gradients.
    let gradient = |name: &str, from: [u8; 3], to: [u8; 3]| {
        let picture = image::RgbImage::from_fn(200, 150, |x, _| {
            let mix = |a: u8, b: u8| {
                (f32::from(a) + (f32::from(b) - f32::from(a)) * x as f32 / 199.0) as u8
            };
            image::Rgb([
                mix(from[0], to[0]),
                mix(from[1], to[1]),
                mix(from[2], to[2]),
            ])
        });
        (name.to_owned(), picture)
    };
    let pictures = [
        flat("red", [255, 0, 0]),
        flat("blue", [0, 0, 255]),
        flat("white", [255, 255, 255]),
        flat("black", [0, 0, 0]),
        gradient("yellow-to-black", [255, 255, 0], [0, 0, 0]),
        gradient("cyan-to-navy", [0, 255, 255], [0, 0, 128]),
    ];
    let mut paths = Vec::new();
    for (name, picture) in pictures {
        picture
            .save(root.join(format!("{name}.png")))
            .expect("picture written");
        paths.push(format!("/{name}.png"));
    }
    let site = Site::serve_dir(&root);
    let out = dir.path().join("out");
    let profile = download_profile(
        dir.path(),
        "near_duplicate_distance = 4\nnear_duplicates = \"drop\"",
    );

    download_in_turn(dir.path(), &site.origin, &out, &profile, &[&paths]);

    let lines = manifest_by_path(&out, &site.origin);
    assert_eq!(lines.len(), paths.len(), "a line per URL");
    for (path, line) in &lines {
        assert!(line.get("duplicate").is_none(), "{path}: {line}");
        assert!(line.get("near_duplicate_of").is_none(), "{path}: {line}");
    }
    assert_eq!(crate::support::stored_files(&out).len(), paths.len());
}

/// The Python of `target/pyenv`, where `scripts/setup.sh` installs the `webdataset` package;
/// `None` (the test skipped with a word) outside CI when it is missing.
fn webdataset_python(test: &str) -> Option<PathBuf> {
    let python = crate::support::repo("target/pyenv/bin/python");
    let ready = Command::new(&python)
        .args(["-c", "import webdataset"])
        .output()
        .is_ok_and(|o| o.status.success());
    match ready {
        true => Some(python),
        false if std::env::var_os("CI").is_some() => {
            panic!("{test}: no webdataset package in target/pyenv (scripts/setup.sh installs it)")
        }
        false => {
            eprintln!(
                "{test}: skipped, no webdataset package in target/pyenv (run scripts/setup.sh)"
            );
            None
        }
    }
}

#[test]
fn captions_go_into_the_manifest_and_every_webdataset_sample_as_its_txt_member() {
    let Some(python) = webdataset_python(
        "captions_go_into_the_manifest_and_every_webdataset_sample_as_its_txt_member",
    ) else {
        return;
    };
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir_all(&root).expect("site folder");
    std::fs::write(
        root.join("index.html"),
        r#"<html><body><main>
<img src="/img/fox-48x32.jpg" alt="A red fox in the snow">
<figure><img src="/img/owl-48x32.jpg"><figcaption>An owl, <em>at night</em></figcaption></figure>
<img src="/img/bare-48x32.jpg">
</main></body></html>"#,
    )
    .expect("page written");
    let site = Site::serve_dir(&root);
    let profile = dir.path().join("captions.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"captions\"\nstart = [\"{}/\"]\nrender = \"static\"\n\n\
             [[images]]\nselector = \"main img\"\n\n[download]\nformat = \"webdataset\"\n",
            site.origin
        ),
    )
    .expect("profile written");
    let out = dir.path().join("out");
    let output = run(crate::support::scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off", "--out"])
        .arg(&out));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));

    let captions: BTreeMap<String, Option<String>> = manifest(&out)
        .iter()
        .map(|l| {
            let url = l["url"].as_str().unwrap_or_default();
            let name = url.rsplit('/').next().unwrap_or_default().to_owned();
            (name, l["caption"].as_str().map(str::to_owned))
        })
        .collect();
    assert_eq!(
        captions,
        BTreeMap::from([
            ("bare-48x32.jpg".to_owned(), None),
            (
                "fox-48x32.jpg".to_owned(),
                Some("A red fox in the snow".to_owned())
            ),
            (
                "owl-48x32.jpg".to_owned(),
                Some("An owl, at night".to_owned())
            ),
        ])
    );

    // Read back as a training loader reads them: each sample's `txt` is its caption.
    let read = r#"
import json, sys, webdataset as wds
for sample in wds.WebDataset(sys.argv[1:], shardshuffle=False):
    meta = json.loads(sample["json"])
    txt = sample.get("txt")
    print(json.dumps({"url": meta["url"], "txt": None if txt is None else txt.decode("utf-8"),
                      "caption": meta.get("caption"), "image": len(sample["jpg"])}))
"#;
    let shards: Vec<PathBuf> = shards(&out);
    assert_eq!(shards.len(), 1);
    let loaded = run(Command::new(&python).arg("-c").arg(read).args(&shards));
    assert!(loaded.status.success(), "{}", text(&loaded));
    let samples = json_lines(&String::from_utf8_lossy(&loaded.stdout));
    assert_eq!(samples.len(), 3, "{}", text(&loaded));
    for sample in samples {
        let url = sample["url"].as_str().unwrap_or_default();
        let name = url.rsplit('/').next().unwrap_or_default();
        let expected = captions[name].as_deref();
        assert_eq!(sample["txt"].as_str(), expected, "{name}: the .txt member");
        assert_eq!(
            sample["caption"].as_str(),
            expected,
            "{name}: the .json member"
        );
        assert!(sample["image"].as_u64().unwrap_or_default() > 0);
    }
}

#[test]
fn rights_a_page_publishes_go_with_its_images_and_licenses_counts_them() {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir_all(&root).expect("site folder");
    let page = |images: &str, head: &str| {
        format!("<html><head>{head}</head><body><main>{images}</main></body></html>")
    };
    std::fs::write(
        root.join("cc.html"),
        page(
            r#"<img src="/img/cc-1-48x32.jpg" alt="Harbour at dawn"><img src="/img/cc-2-48x32.jpg">"#,
            r#"<script type="application/ld+json">{"@type": "WebPage",
               "license": "https://creativecommons.org/licenses/by/4.0/",
               "creator": {"@type": "Person", "name": "Ann Lee"}}</script>"#,
        ),
    )
    .expect("page written");
    std::fs::write(
        root.join("linked.html"),
        page(
            r#"<img src="/img/link-48x32.jpg"><a rel="license" href="/terms">Terms</a>"#,
            "",
        ),
    )
    .expect("page written");
    std::fs::write(
        root.join("none.html"),
        page(r#"<img src="/img/none-48x32.jpg">"#, ""),
    )
    .expect("page written");
    let site = Site::serve_dir(&root);
    let profile = dir.path().join("rights.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"rights\"\nstart = [\"{0}/cc.html\", \"{0}/linked.html\", \"{0}/none.html\"]\n\
             render = \"static\"\n\n[[images]]\nselector = \"main img\"\n\n\
             [download]\nformat = \"parquet\"\n",
            site.origin
        ),
    )
    .expect("profile written");
    let out = dir.path().join("out");
    let output = run(crate::support::scrape()
        .arg("--profile")
        .arg(&profile)
        .args(["--progress", "off", "--out"])
        .arg(&out));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));

    // Parquet: caption, license and rights columns.
    {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use parquet::record::RowAccessor;
        let reader = SerializedFileReader::new(
            std::fs::File::open(out.join("images.parquet")).expect("images.parquet"),
        )
        .expect("a Parquet file");
        let mut columns = BTreeMap::new();
        for row in reader.get_row_iter(None).expect("rows") {
            let row = row.expect("a row");
            let url = row.get_string(0).expect("url").clone();
            let name = url.rsplit('/').next().unwrap_or_default().to_owned();
            let text = |i: usize| row.get_string(i).ok().cloned();
            columns.insert(name, (text(23), text(24), text(25).is_some()));
        }
        assert_eq!(
            columns["cc-1-48x32.jpg"],
            (
                Some("Harbour at dawn".to_owned()),
                Some("https://creativecommons.org/licenses/by/4.0/".to_owned()),
                true
            )
        );
        assert_eq!(columns["none-48x32.jpg"], (None, None, false));
    }

    let rights: BTreeMap<String, serde_json::Value> = manifest(&out)
        .iter()
        .map(|l| {
            let url = l["url"].as_str().unwrap_or_default();
            (
                url.rsplit('/').next().unwrap_or_default().to_owned(),
                l["rights"].clone(),
            )
        })
        .collect();
    let cc = serde_json::json!({
        "license": {"value": "https://creativecommons.org/licenses/by/4.0/", "from": "json-ld"},
        "creator": {"value": "Ann Lee", "from": "json-ld"},
    });
    assert_eq!(rights["cc-1-48x32.jpg"], cc);
    assert_eq!(rights["cc-2-48x32.jpg"], cc);
    assert_eq!(
        rights["link-48x32.jpg"],
        serde_json::json!({"license": {"value": format!("{}/terms", site.origin), "from": "rel=license"}})
    );
    assert_eq!(rights["none-48x32.jpg"], serde_json::Value::Null);

    let counted = run(crate::support::scrape()
        .args(["licenses", "--json", "--out"])
        .arg(&out));
    assert_eq!(counted.status.code(), Some(0), "{}", text(&counted));
    let counts: serde_json::Value =
        serde_json::from_slice(&counted.stdout).expect("one JSON object");
    assert_eq!(counts["images"], 4);
    assert_eq!(
        counts["licenses"],
        serde_json::json!({
            "https://creativecommons.org/licenses/by/4.0/": 2,
            format!("{}/terms", site.origin): 1,
            "(none stated)": 1,
        })
    );
    assert_eq!(
        counts["creators"],
        serde_json::json!({"Ann Lee": 2, "(none stated)": 2})
    );
    let table = run(crate::support::scrape()
        .args(["licenses", "--out"])
        .arg(&out));
    assert!(
        crate::support::text(&table)
            .contains("       2  https://creativecommons.org/licenses/by/4.0/"),
        "{}",
        text(&table)
    );
    let missing = run(crate::support::scrape()
        .args(["licenses", "--out"])
        .arg(dir.path().join("nowhere")));
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
}

/// A JPEG of `seed`'s picture with `xmp` (an XMP packet's `rdf:Description` attributes and
/// body) in an APP1 segment, as cameras and editors write it.
fn jpeg_with_xmp(seed: u64, xmp: &str) -> Vec<u8> {
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(crate::support::blocks(seed))
        .write_to(&mut jpeg, image::ImageFormat::Jpeg)
        .expect("a JPEG");
    let jpeg = jpeg.into_inner();
    let packet = format!(
        r#"<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" {xmp}</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>"#
    );
    let mut segment = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
    segment.extend_from_slice(packet.as_bytes());
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xff, 0xe1]);
    out.extend_from_slice(
        &u16::try_from(segment.len() + 2)
            .expect("fits")
            .to_be_bytes(),
    );
    out.extend_from_slice(&segment);
    out.extend_from_slice(&jpeg[2..]);
    out
}

#[test]
fn an_image_whose_xmp_prohibits_mining_is_opted_out_and_its_xmp_rights_are_kept() {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir_all(root.join("files")).expect("site folder");
    std::fs::write(
        root.join("files/credited.jpg"),
        jpeg_with_xmp(
            1,
            r#"xmpRights:WebStatement="https://a.test/terms"><dc:creator><rdf:Seq><rdf:li>Ann Lee</rdf:li></rdf:Seq></dc:creator>"#,
        ),
    )
    .expect("image written");
    std::fs::write(
        root.join("files/reserved.jpg"),
        jpeg_with_xmp(
            2,
            r#"plus:DataMining="http://ns.useplus.org/ldf/vocab/DMI-PROHIBITED-GENAIMLTRAINING">"#,
        ),
    )
    .expect("image written");
    let site = Site::serve_dir(&root);
    let list = url_list(
        dir.path(),
        &site.origin,
        &[
            "/files/credited.jpg".to_owned(),
            "/files/reserved.jpg".to_owned(),
        ],
    );
    let out = dir.path().join("out");
    let output = run(&mut download_list(&list, &out, &[]));
    assert_eq!(
        output.status.code(),
        Some(1),
        "one is opted out: {}",
        text(&output)
    );

    let lines = manifest(&out);
    assert_eq!(lines.len(), 1, "{}", text(&output));
    assert_eq!(
        lines[0]["rights"],
        serde_json::json!({
            "creator": {"value": "Ann Lee", "from": "xmp"},
            "web_statement": {"value": "https://a.test/terms", "from": "xmp"},
        })
    );
    let failures =
        json_lines(&std::fs::read_to_string(out.join("failures.jsonl")).expect("failures.jsonl"));
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0]["class"], "opted_out");
    assert_eq!(
        failures[0]["detail"],
        "plus:DataMining: http://ns.useplus.org/ldf/vocab/DMI-PROHIBITED-GENAIMLTRAINING"
    );
}
