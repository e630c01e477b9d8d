//! `[download.resize]`, as a user runs it: each mode stores pictures of the size it promises,
//! in the format asked for, with the downloaded picture's sha256 and size in the manifest;
//! `scrape verify` passes on the result; a picture that does not decode fails alone; a rerun
//! downloads nothing; a run killed part-way and rerun stores what an uninterrupted run stores;
//! WebDataset shards hold the resized pictures (workers over Redis: `cluster.rs`); a folder of
//! pictures resized one way refuses a run that would resize them another.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::support::{
    Background, PATIENCE, Site, assert_refused, download_list, manifest, part_files, run, scrape,
    status_json, stored_count, text, url_list,
};

/// A `width` x `height` picture with a gradient and a bright square in its centre.
fn picture(width: u32, height: u32) -> image::RgbaImage {
    image::RgbaImage::from_fn(width, height, |x, y| {
        let centre = x.abs_diff(width / 2) < width / 8 && y.abs_diff(height / 2) < height / 8;
        let level = if centre { 250 } else { (x * 200 / width) as u8 };
        image::Rgba([level, (y * 200 / height) as u8, 120, 255])
    })
}

fn encoded(picture: &image::RgbaImage, format: image::ImageFormat) -> Vec<u8> {
    let mut bytes = std::io::Cursor::new(Vec::new());
    match format {
        image::ImageFormat::Jpeg => image::DynamicImage::ImageRgba8(picture.clone())
            .into_rgb8()
            .write_to(&mut bytes, format),
        _ => picture.write_to(&mut bytes, format),
    }
    .expect("encoded");
    bytes.into_inner()
}

/// A site's pictures: name → (bytes, width, height).
type Pictures = BTreeMap<String, (Vec<u8>, u32, u32)>;

/// Writes the site's pictures into `root`.
fn write_site(root: &Path) -> Pictures {
    let pictures = [
        ("wide.jpg", 320, 240, image::ImageFormat::Jpeg),
        ("tall.png", 100, 300, image::ImageFormat::Png),
        ("small.png", 40, 30, image::ImageFormat::Png),
        ("anim.gif", 90, 60, image::ImageFormat::Gif),
    ];
    pictures
        .into_iter()
        .map(|(name, width, height, format)| {
            let bytes = encoded(&picture(width, height), format);
            std::fs::write(root.join(name), &bytes).expect("picture written");
            (name.to_owned(), (bytes, width, height))
        })
        .collect()
}

/// A site of generated pictures in `dir/site`, served; their URL paths and bytes.
fn serve_pictures(dir: &Path) -> (Site, Pictures) {
    let root = dir.join("site");
    std::fs::create_dir_all(&root).expect("site folder");
    let pictures = write_site(&root);
    (Site::serve_dir(&root), pictures)
}

/// A profile in `dir` whose `[download]` holds `download` and whose `[download.resize]` holds
/// `resize`.
fn resize_profile(dir: &Path, download: &str, resize: &str) -> PathBuf {
    let profile = dir.join("p.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"p\"\nstart = [\"http://a.test/\"]\n[[images]]\nselector = \"img\"\n\
             [download]\n{download}\n[download.resize]\n{resize}\n"
        ),
    )
    .expect("profile written");
    profile
}

/// Downloads every picture of `pictures` from `site` into `out` with `profile`; the exit code
/// and output.
fn download(
    dir: &Path,
    site: &Site,
    pictures: &Pictures,
    out: &Path,
    profile: &Path,
) -> std::process::Output {
    let paths: Vec<String> = pictures.keys().map(|name| format!("/{name}")).collect();
    let list = url_list(dir, &site.origin, &paths);
    run(download_list(&list, out, &["--retries", "0", "--profile"]).arg(profile))
}

/// The manifest of `out` by file name of the URL.
fn lines_by_name(out: &Path) -> BTreeMap<String, serde_json::Value> {
    manifest(out)
        .into_iter()
        .map(|line| {
            let url = line["url"].as_str().expect("url");
            (url.rsplit('/').next().unwrap().to_owned(), line)
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn each_mode_stores_the_size_it_promises_and_the_manifest_keeps_the_original() {
    // (mode, format, expected output size by picture, expected format)
    let cases = [
        (
            "keep_ratio",
            "jpeg",
            [
                ("wide.jpg", (64, 48)),
                ("tall.png", (21, 64)),
                ("small.png", (40, 30)),
                ("anim.gif", (64, 43)),
            ],
            image::ImageFormat::Jpeg,
        ),
        (
            "center_crop",
            "png",
            [
                ("wide.jpg", (64, 64)),
                ("tall.png", (64, 64)),
                ("small.png", (40, 30)),
                ("anim.gif", (64, 60)),
            ],
            image::ImageFormat::Png,
        ),
        (
            "border",
            "webp",
            [
                ("wide.jpg", (64, 64)),
                ("tall.png", (64, 64)),
                ("small.png", (64, 64)),
                ("anim.gif", (64, 64)),
            ],
            image::ImageFormat::WebP,
        ),
    ];
    for (mode, format, sizes, expected_format) in cases {
        let dir = TempDir::new().expect("temporary folder");
        let (site, pictures) = serve_pictures(dir.path());
        let out = dir.path().join("out");
        let profile = resize_profile(
            dir.path(),
            "",
            &format!("size = 64\nmode = \"{mode}\"\nformat = \"{format}\""),
        );

        let output = download(dir.path(), &site, &pictures, &out, &profile);

        assert_eq!(output.status.code(), Some(0), "{mode}: {}", text(&output));
        let lines = lines_by_name(&out);
        assert_eq!(lines.len(), pictures.len(), "{mode}");
        for (name, (width, height)) in sizes {
            let line = &lines[name];
            let stored = std::fs::read(out.join(line["path"].as_str().unwrap())).expect("stored");
            let decoded = image::load_from_memory(&stored).expect("the stored file decodes");
            assert_eq!(
                image::guess_format(&stored).unwrap(),
                expected_format,
                "{mode} {name}"
            );
            assert_eq!(
                (decoded.width(), decoded.height()),
                (width, height),
                "{mode} {name}"
            );
            assert_eq!(
                (line["width"].as_u64(), line["height"].as_u64()),
                (Some(u64::from(width)), Some(u64::from(height)))
            );
            assert_eq!(line["sha256"], sha256(&stored).as_str(), "{mode} {name}");
            assert_eq!(line["bytes"], stored.len(), "{mode} {name}");
            let (original, original_width, original_height) = &pictures[name];
            assert_eq!(
                line["original_sha256"],
                sha256(original).as_str(),
                "{mode} {name}"
            );
            assert_eq!(line["original_bytes"], original.len());
            assert_eq!(line["original_width"], *original_width);
            assert_eq!(line["original_height"], *original_height);
            let sha = line["sha256"].as_str().unwrap();
            assert!(
                line["path"].as_str().unwrap().contains(sha),
                "named by the stored bytes' hash: {line}"
            );
        }

        let verified = run(scrape().args(["verify", "--out"]).arg(&out));
        assert_eq!(
            verified.status.code(),
            Some(0),
            "{mode}: {}",
            text(&verified)
        );
    }
}

#[test]
fn a_picture_that_does_not_decode_fails_alone_and_a_rerun_downloads_nothing() {
    let dir = TempDir::new().expect("temporary folder");
    let (site, mut pictures) = serve_pictures(dir.path());
    // A PNG whose header is right (the download's checks pass) and whose pixels are missing:
    // the IHDR chunk, then IEND.
    let mut broken = encoded(&picture(80, 80), image::ImageFormat::Png)[..33].to_vec();
    broken.extend_from_slice(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]);
    std::fs::write(dir.path().join("site").join("broken.png"), &broken).expect("written");
    pictures.insert("broken.png".to_owned(), (broken, 80, 80));
    let out = dir.path().join("out");
    let profile = resize_profile(dir.path(), "", "size = 32");

    let output = download(dir.path(), &site, &pictures, &out, &profile);

    assert_eq!(
        output.status.code(),
        Some(1),
        "one image fails: {}",
        text(&output)
    );
    let failures = crate::support::json_lines(
        &std::fs::read_to_string(out.join("failures.jsonl")).expect("failures.jsonl"),
    );
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/broken.png")
    );
    assert_eq!(failures[0]["class"], "undecodable", "{}", failures[0]);
    assert_eq!(
        manifest(&out).len(),
        pictures.len() - 1,
        "the others are stored"
    );
    let stored = lines_by_name(&out);

    let requests = site.hits().values().sum::<u64>();
    let again = download(dir.path(), &site, &pictures, &out, &profile);

    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert_eq!(
        site.hits().values().sum::<u64>(),
        requests,
        "nothing downloaded again: {:?}",
        site.hits()
    );
    assert_eq!(lines_by_name(&out), stored, "the same files");
}

#[test]
fn a_resizing_run_killed_part_way_and_rerun_stores_what_an_uninterrupted_run_stores() {
    let dir = TempDir::new().expect("temporary folder");
    let root = dir.path().join("site");
    std::fs::create_dir_all(&root).expect("site folder");
    let paths: Vec<String> = (0..120u32)
        .map(|n| {
            let name = format!("{n}.png");
            let bytes = encoded(&picture(120 + n, 90), image::ImageFormat::Png);
            std::fs::write(root.join(&name), bytes).expect("picture written");
            format!("/{name}")
        })
        .collect();
    let site = Site::serve_dir(&root);
    let list = url_list(dir.path(), &site.origin, &paths);
    let profile = resize_profile(dir.path(), "", "size = 48\nmode = \"border\"");
    // One image at a time, at most 200 a second: the kill lands mid-job.
    let command = |out: &Path| {
        let mut cmd = download_list(
            &list,
            out,
            &[
                "--concurrency",
                "1",
                "--per-host",
                "1",
                "--per-host-rps",
                "200",
                "--profile",
            ],
        );
        cmd.arg(&profile);
        cmd
    };
    let hashes = |out: &Path| -> BTreeMap<String, (String, String)> {
        manifest(out)
            .into_iter()
            .map(|line| {
                let url = line["url"].as_str().expect("url").to_owned();
                let sha = line["sha256"].as_str().expect("sha256").to_owned();
                let original = line["original_sha256"]
                    .as_str()
                    .expect("original")
                    .to_owned();
                (url, (sha, original))
            })
            .collect()
    };

    let whole = dir.path().join("whole");
    let output = run(&mut command(&whole));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let out = dir.path().join("out");
    let mut killed = Background::spawn(&mut command(&out), &dir.path().join("killed.stderr"));
    killed.wait_for("a third of the images stored", PATIENCE, || {
        stored_count(&out) >= 40
    });
    killed.kill();
    let output = run(&mut command(&out));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let expected = hashes(&whole);
    assert_eq!(expected.len(), paths.len());
    assert_eq!(hashes(&out), expected, "the same resized files");
    assert_eq!(part_files(&out), Vec::<PathBuf>::new(), "no part file left");
    let verified = run(scrape().args(["verify", "--out"]).arg(&out));
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
}

#[test]
fn two_urls_with_the_same_bytes_are_one_resized_image() {
    let dir = TempDir::new().expect("temporary folder");
    let (site, mut pictures) = serve_pictures(dir.path());
    let copy = pictures["wide.jpg"].clone();
    std::fs::write(dir.path().join("site").join("copy.jpg"), &copy.0).expect("written");
    pictures.insert("copy.jpg".to_owned(), copy);
    let out = dir.path().join("out");
    let profile = resize_profile(dir.path(), "", "size = 32");

    let output = download(dir.path(), &site, &pictures, &out, &profile);

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines = lines_by_name(&out);
    let (wide, copy) = (&lines["wide.jpg"], &lines["copy.jpg"]);
    assert_eq!(wide["path"], copy["path"], "one file");
    assert_eq!(wide["original_sha256"], copy["original_sha256"]);
    assert!(
        wide.get("duplicate").is_some() || copy.get("duplicate").is_some(),
        "one of them is the duplicate: {wide} {copy}"
    );
}

#[test]
fn webdataset_shards_hold_the_resized_pictures_with_their_originals() {
    let dir = TempDir::new().expect("temporary folder");
    let (site, pictures) = serve_pictures(dir.path());
    let out = dir.path().join("out");
    let profile = resize_profile(
        dir.path(),
        "format = \"webdataset\"",
        "size = 48\nmode = \"center_crop\"",
    );

    let output = download(dir.path(), &site, &pictures, &out, &profile);

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let shard = std::fs::File::open(out.join("00000.tar")).expect("a finished shard");
    let mut members = BTreeMap::new();
    for entry in tar::Archive::new(shard).entries().expect("a tar") {
        let mut entry = entry.expect("a member");
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).expect("member bytes");
        members.insert(name, bytes);
    }
    assert_eq!(members.len(), 2 * pictures.len());
    let originals: BTreeMap<String, &str> = pictures
        .iter()
        .map(|(name, (bytes, ..))| (sha256(bytes), name.as_str()))
        .collect();
    for (name, json) in members.iter().filter(|(n, _)| n.ends_with(".json")) {
        let json: serde_json::Value = serde_json::from_slice(json).expect("sample json");
        let key = name.trim_end_matches(".json");
        let image = &members[&format!("{key}.jpg")];
        let decoded = image::load_from_memory(image).expect("decodes");
        let original = originals[json["original_sha256"].as_str().expect("original_sha256")];
        let expected = if original == "small.png" {
            (40, 30)
        } else {
            (48, 48)
        };
        assert_eq!((decoded.width(), decoded.height()), expected, "{original}");
        assert_eq!(json["sha256"], sha256(image).as_str());
        assert_eq!(json["original_width"], pictures[original].1);
    }
    let verified = run(scrape().args(["verify", "--out"]).arg(&out));
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
}

#[test]
fn a_folder_of_pictures_resized_one_way_refuses_a_run_that_would_resize_them_another() {
    let dir = TempDir::new().expect("temporary folder");
    let (site, pictures) = serve_pictures(dir.path());
    let out = dir.path().join("out");
    let first = download(
        dir.path(),
        &site,
        &pictures,
        &out,
        &resize_profile(dir.path(), "", "size = 32"),
    );
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let stored = lines_by_name(&out);
    let requests = site.hits().values().sum::<u64>();

    let other = resize_profile(dir.path(), "", "size = 64\nmode = \"center_crop\"");
    let refused = download(dir.path(), &site, &pictures, &out, &other);

    assert_refused(
        &refused,
        &[
            "resized to 32 px (keep_ratio, jpeg quality 95)",
            "resized to 64 px (center_crop, jpeg quality 95)",
            "rerun with the `[download.resize]` table",
            "--fresh",
        ],
    );
    assert_eq!(
        site.hits().values().sum::<u64>(),
        requests,
        "nothing fetched"
    );
    assert_eq!(lines_by_name(&out), stored, "the manifest as it was");
    let status = status_json(&out);
    assert_eq!(
        status["state"], "complete",
        "the refused run left no trace: {status}"
    );
}
