//! A full disk stops the run with a clear error, leaves the state consistent, and the rerun
//! finishes once there is room: for image files and for WebDataset shards. The output folder is a small tmpfs mounted by the test (root
//! only); where mounting is not allowed the test says why and returns, unless `CI` is set.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::dataset::{image_paths, read_shards, tmp_files};
use crate::support::{self, Site};

/// A tmpfs mounted at a temporary folder, unmounted on drop.
struct SmallDisk {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).expect("mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to mount a tmpfs for the disk-full test"
            );
            eprintln!("skipping: cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(Self { _dir: dir, path })
    }

    fn grow(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.path)
            .status()
            .expect("mount runs");
        assert!(status.success(), "remount to {size}");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn run_demo(site: &Site, out: &Path) -> std::process::Output {
    support::run(
        support::scrape()
            .arg("--profile")
            .arg(support::repo("site-profiles/demo.toml"))
            .arg("--start")
            .arg(format!("{}/gallery/", site.origin))
            .arg("--out")
            .arg(out)
            .args(["--progress", "off"]),
    )
}

#[test]
fn a_full_disk_stops_the_run_clearly_and_the_rerun_finishes_once_there_is_room() {
    let Some(disk) = SmallDisk::mount("900k") else {
        return;
    };
    let site = Site::serve("fixtures/demo-site");
    let out = disk.path.join("out");

    let full = run_demo(&site, &out);
    assert_eq!(
        full.status.code(),
        Some(2),
        "a full disk is an environment error\n{}",
        support::text(&full)
    );
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert!(
        stderr.contains("No space left on device"),
        "the cause is named\n{stderr}"
    );
    assert!(
        stderr.contains("free"),
        "the message says what to do\n{stderr}"
    );
    let stored_before = support::stored_files(&out);
    assert!(
        stored_before.len() < 48,
        "the disk was meant to fill up: {} files",
        stored_before.len()
    );
    for (path, sha) in &stored_before {
        assert!(
            path.ends_with(&format!("{sha}.jpg")) || path.contains(sha.as_str()),
            "{path} holds other bytes"
        );
    }

    disk.grow("50m");
    let rerun = run_demo(&site, &out);
    assert_eq!(rerun.status.code(), Some(0), "{}", support::text(&rerun));
    assert_eq!(
        support::manifest_hashes(&out),
        support::expected_demo_images(&site.origin)
    );
    let stored = support::stored_files(&out);
    assert_eq!(stored.len(), 48);
    for (path, sha) in &stored {
        assert!(
            path.contains(sha.as_str()),
            "{path} does not hold the bytes its name says"
        );
    }
    assert!(
        support::part_files(&out).is_empty(),
        "no partial file is left"
    );
}

#[test]
fn shards_on_a_full_disk_stop_the_run_clearly_and_the_rerun_stores_each_image_once() {
    let Some(disk) = SmallDisk::mount("2m") else {
        return;
    };
    let site = Site::serve("fixtures/demo-site");
    let list_dir = tempfile::tempdir().expect("temp dir");
    let paths: Vec<String> = image_paths(200)
        .iter()
        .map(|p| p.replace("48x32", "480x360"))
        .collect();
    let list = support::url_list(list_dir.path(), &site.origin, &paths);
    let out = disk.path.join("out");
    let flags = ["--format", "webdataset", "--shard-size", "20"];

    let full = support::run(&mut support::download_list(&list, &out, &flags));
    assert_eq!(full.status.code(), Some(2), "{}", support::text(&full));
    let stderr = String::from_utf8_lossy(&full.stderr);
    assert!(
        stderr.contains("No space left on device") && stderr.contains("free"),
        "the cause and what to do are named\n{stderr}"
    );
    let finished = read_shards(&out, 20);
    assert!(
        finished.len() < paths.len(),
        "the disk was meant to fill up: {} samples",
        finished.len()
    );

    disk.grow("50m");
    let rerun = support::run(&mut support::download_list(&list, &out, &flags));
    assert_eq!(rerun.status.code(), Some(0), "{}", support::text(&rerun));
    assert_eq!(
        read_shards(&out, 20),
        support::expected_images(&site.origin, &paths),
        "every image exactly once over the shards"
    );
    assert_eq!(tmp_files(&out), Vec::<PathBuf>::new(), "no open shard left");
}
