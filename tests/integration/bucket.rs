//! Output into an S3-compatible bucket (`--out s3://bucket/prefix`): the objects equal a local
//! run's files, a kill loses nothing and leaves no partial object, shards go in once finished,
//! and credentials that cannot write stop the run before anything is fetched. The server is
//! moto's (`tests/s3_server.py`, from PyPI), on loopback, with signatures checked.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use scrape::output::bucket::{Bucket, BucketUrl};
use sha2::Digest;
use tempfile::TempDir;

use crate::dataset::{image_paths, read_shards};
use crate::support::{
    Background, PATIENCE, Site, download_list, expected_images, manifest, repo, run, scrape,
    stored_files, text, url_list,
};

pub const BUCKET: &str = "images";

/// An S3-compatible server of the test's own on `127.0.0.1`, with bucket [`BUCKET`], a user
/// who may write and one who may only read.
pub struct S3Server {
    child: Child,
    /// Held open: the server stops when it closes.
    _stdin: ChildStdin,
    python: PathBuf,
    port: u16,
    pub key: String,
    pub secret: String,
    read_only: (String, String),
}

impl S3Server {
    /// Starts one; `None` (the test skipped, with its reason) when the server is not
    /// installed, but with `CI` set that is a failure.
    pub fn start(test: &str) -> Option<Self> {
        let python = repo("target/pyenv/bin/python");
        let installed = Command::new(&python)
            .args(["-c", "import moto.server, boto3"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            let reason = "no moto in target/pyenv (scripts/setup.sh installs it)";
            assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
            eprintln!("skipping {test}: {reason}");
            return None;
        }
        let mut child = Command::new(&python)
            .arg(repo("tests/s3_server.py"))
            .args(["serve", BUCKET])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the S3 server starts");
        let stdin = child.stdin.take().expect("stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the S3 server says where it is");
        let said: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: `{line}`"));
        let field = |name: &str| said[name].as_str().expect(name).to_owned();
        Some(Self {
            port: said["port"].as_u64().expect("port") as u16,
            key: field("key"),
            secret: field("secret"),
            read_only: (field("read_only_key"), field("read_only_secret")),
            child,
            _stdin: stdin,
            python,
        })
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `cmd` as a user of this server with keys `key` and `secret` runs it, the state of its
    /// buckets kept under `state_home`.
    pub fn as_user<'c>(
        &self,
        cmd: &'c mut Command,
        (key, secret): (&str, &str),
        state_home: &Path,
    ) -> &'c mut Command {
        at_endpoint(cmd, &self.endpoint(), (key, secret), state_home)
    }

    /// `cmd` as the user who may write.
    pub fn as_writer<'c>(&self, cmd: &'c mut Command, state_home: &Path) -> &'c mut Command {
        let (key, secret) = (self.key.clone(), self.secret.clone());
        self.as_user(cmd, (&key, &secret), state_home)
    }

    /// Every object of the bucket, written into `dir` by name; the multipart uploads still
    /// open.
    pub fn dump(&self, dir: &Path) -> (Vec<String>, u64) {
        let output = run(Command::new(&self.python)
            .arg(repo("tests/s3_server.py"))
            .args(["dump", &self.endpoint(), &self.key, &self.secret, BUCKET])
            .arg(dir));
        assert!(output.status.success(), "{}", text(&output));
        let said: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("the dump says what it wrote");
        let objects = said["objects"]
            .as_array()
            .expect("objects")
            .iter()
            .map(|o| o.as_str().expect("a name").to_owned())
            .collect();
        (
            objects,
            said["open_uploads"].as_u64().expect("open uploads"),
        )
    }
}

impl S3Server {
    /// Puts `body` as object `name`, over what is there.
    pub fn put(&self, name: &str, body: &str) {
        let output = run(Command::new(&self.python)
            .arg(repo("tests/s3_server.py"))
            .args([
                "put",
                &self.endpoint(),
                &self.key,
                &self.secret,
                BUCKET,
                name,
                body,
            ]));
        assert!(output.status.success(), "{}", text(&output));
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each object under `dir` whose name holds a SHA-256 (`{shard}/{sha256}.{ext}`) has those
/// bytes: none is partial.
pub fn assert_whole(files: &BTreeMap<String, String>) {
    for (name, sha256) in files {
        let stem = Path::new(name)
            .file_stem()
            .expect("a name")
            .to_string_lossy();
        assert_eq!(
            &*stem, sha256,
            "`{name}` does not hold the bytes it is named after"
        );
    }
}

/// `cmd` with the store at `endpoint` and these credentials, and nothing else of the
/// environment's AWS settings.
fn at_endpoint<'c>(
    cmd: &'c mut Command,
    endpoint: &str,
    (key, secret): (&str, &str),
    state_home: &Path,
) -> &'c mut Command {
    for var in [
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", key)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("SCRAPE_STATE_HOME", state_home)
}

fn bucket_url(prefix: &str) -> String {
    format!("s3://{BUCKET}/{prefix}")
}

#[test]
fn images_put_into_a_bucket_equal_a_local_runs_files_and_a_rerun_puts_nothing_again() {
    let Some(server) = S3Server::start("images_put_into_a_bucket_equal_a_local_runs_files") else {
        return;
    };
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(40);
    let list = url_list(dir.path(), &site.origin, &paths);
    let local = dir.path().join("local");
    let state_home = dir.path().join("state");
    let ran = run(&mut download_list(&list, &local, &[]));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));

    let into_bucket = Path::new(&bucket_url("run/one")).to_owned();
    let requests_before = site.image_requests();
    let ran = run(server.as_writer(&mut download_list(&list, &into_bucket, &[]), &state_home));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));
    assert!(
        !text(&ran).contains(&server.secret),
        "the secret was printed"
    );
    assert_eq!(site.image_requests() - requests_before, 40);

    let dump = dir.path().join("dump");
    let (objects, open_uploads) = server.dump(&dump);
    assert_eq!(open_uploads, 0);
    let in_bucket = stored_files(&dump.join("run/one"));
    assert_eq!(in_bucket, stored_files(&local), "the same names and bytes");
    assert_whole(&in_bucket);
    assert_eq!(manifest(&dump.join("run/one")).len(), 40);
    assert!(
        objects.iter().all(|o| o.starts_with("run/one/")),
        "{objects:?}"
    );
    assert!(
        state_home.join("s3/images/run/one/.scrape").is_dir(),
        "the state is kept in a folder of its own"
    );

    // Nothing is fetched or put twice; the state is found again from the bucket's URL.
    let ran = run(server.as_writer(&mut download_list(&list, &into_bucket, &[]), &state_home));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));
    assert_eq!(site.image_requests() - requests_before, 40, "fetched again");
    let status = run(server
        .as_writer(&mut scrape(), &state_home)
        .args(["status", "--out"])
        .arg(&into_bucket));
    assert_eq!(status.status.code(), Some(0), "{}", text(&status));
    assert!(text(&status).contains("40"), "{}", text(&status));
}

#[test]
fn a_run_killed_while_putting_images_is_finished_by_its_rerun_with_every_object_whole() {
    let Some(server) = S3Server::start("a_run_killed_while_putting_images") else {
        return;
    };
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(120);
    let list = url_list(dir.path(), &site.origin, &paths);
    let state_home = dir.path().join("state");
    let into_bucket = Path::new(&bucket_url("killed")).to_owned();
    let slow = ["--concurrency", "2", "--per-host-rps", "100"];

    let mut killed = Background::spawn(
        server.as_writer(&mut download_list(&list, &into_bucket, &slow), &state_home),
        &dir.path().join("killed.stderr"),
    );
    killed.wait_for("30 images fetched", PATIENCE, || {
        site.image_requests() >= 30
    });
    killed.kill();

    let ran = run(server.as_writer(&mut download_list(&list, &into_bucket, &[]), &state_home));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));
    let dump = dir.path().join("dump");
    let (_, open_uploads) = server.dump(&dump);
    assert_eq!(open_uploads, 0);
    let in_bucket = stored_files(&dump.join("killed"));
    assert_whole(&in_bucket);
    let expected: std::collections::BTreeSet<String> = expected_images(&site.origin, &paths)
        .into_values()
        .collect();
    let stored: std::collections::BTreeSet<String> = in_bucket.into_values().collect();
    assert_eq!(stored, expected, "every image once, nothing else");
    assert_eq!(manifest(&dump.join("killed")).len(), paths.len());
}

#[test]
fn webdataset_shards_go_into_the_bucket_once_finished_and_a_kill_loses_none() {
    let Some(server) = S3Server::start("webdataset_shards_go_into_the_bucket") else {
        return;
    };
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let paths = image_paths(70);
    let list = url_list(dir.path(), &site.origin, &paths);
    let state_home = dir.path().join("state");
    let into_bucket = Path::new(&bucket_url("shards")).to_owned();
    let flags = ["--format", "webdataset", "--shard-size", "20"];
    let slow = [&flags[..], &["--concurrency", "1", "--per-host-rps", "100"]].concat();

    let mut killed = Background::spawn(
        server.as_writer(&mut download_list(&list, &into_bucket, &slow), &state_home),
        &dir.path().join("killed.stderr"),
    );
    killed.wait_for("45 images fetched", PATIENCE, || {
        site.image_requests() >= 45
    });
    killed.kill();

    let ran = run(server.as_writer(&mut download_list(&list, &into_bucket, &flags), &state_home));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));
    let dump = dir.path().join("dump");
    let (objects, open_uploads) = server.dump(&dump);
    assert_eq!(open_uploads, 0);
    let shards: Vec<&String> = objects.iter().filter(|o| o.ends_with(".tar")).collect();
    assert_eq!(shards.len(), 4, "{objects:?}");
    assert_eq!(
        read_shards(&dump.join("shards"), 20),
        expected_images(&site.origin, &paths),
        "every image exactly once over the shards"
    );
    let left: Vec<PathBuf> = std::fs::read_dir(state_home.join("s3/images/shards"))
        .expect("the state folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".tar"))
        .collect();
    assert_eq!(
        left,
        Vec::<PathBuf>::new(),
        "a shard put is not kept locally"
    );
}

#[test]
fn credentials_that_cannot_write_stop_the_run_before_anything_is_fetched() {
    let Some(server) = S3Server::start("credentials_that_cannot_write") else {
        return;
    };
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let list = url_list(dir.path(), &site.origin, &image_paths(3));
    let state_home = dir.path().join("state");
    let into_bucket = Path::new(&bucket_url("refused")).to_owned();
    let (read_key, read_secret) = server.read_only.clone();
    for (key, secret) in [
        (server.key.as_str(), "not-the-secret"),
        ("AKIANOSUCHKEY", server.secret.as_str()),
        (read_key.as_str(), read_secret.as_str()),
    ] {
        let ran = run(server.as_user(
            &mut download_list(&list, &into_bucket, &[]),
            (key, secret),
            &state_home,
        ));
        let said = text(&ran);
        assert_eq!(ran.status.code(), Some(2), "{said}");
        assert!(said.contains("did not take a test write"), "{said}");
        assert!(!said.contains(secret), "the secret was printed: {said}");
    }
    assert_eq!(site.image_requests(), 0, "nothing is fetched");
    let ran = run(server.as_writer(
        &mut download_list(&list, Path::new("s3://No_Such/x"), &[]),
        &state_home,
    ));
    assert_eq!(ran.status.code(), Some(2), "{}", text(&ran));
    assert!(text(&ran).contains("not a bucket URL"), "{}", text(&ran));
}

#[test]
fn ctrl_c_while_a_silent_store_is_asked_for_the_test_write_stops_the_run_at_once() {
    // A store that takes connections and never answers: the client would wait out its own
    // timeout and retries (half a minute and more) before the run could stop.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let endpoint = format!("http://{}", silent.local_addr().expect("its address"));
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn({
        let asked = std::sync::Arc::clone(&asked);
        move || {
            let mut held = Vec::new();
            for connection in silent.incoming().flatten() {
                held.push(connection);
                asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let list = url_list(dir.path(), &site.origin, &image_paths(3));
    let mut cmd = download_list(&list, Path::new(&bucket_url("silent")), &[]);
    at_endpoint(
        &mut cmd,
        &endpoint,
        ("key", "secret"),
        &dir.path().join("state"),
    );
    let mut job = Background::spawn(&mut cmd, &dir.path().join("stderr.txt"));
    job.wait_for("the store to be asked", PATIENCE, || {
        asked.load(std::sync::atomic::Ordering::SeqCst) > 0
    });
    job.interrupt();
    let (status, said) = job.wait(PATIENCE);
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(said.contains("nothing was fetched"), "{said}");
    assert_eq!(site.image_requests(), 0, "nothing is fetched");
}

#[test]
fn verify_reads_the_objects_back_and_requeue_puts_a_damaged_one_again() {
    let Some(server) = S3Server::start("verify_reads_the_objects_back") else {
        return;
    };
    let site = Site::serve("fixtures/demo-site");
    let dir = TempDir::new().expect("temporary folder");
    let list = url_list(dir.path(), &site.origin, &image_paths(5));
    let state_home = dir.path().join("state");
    let into_bucket = Path::new(&bucket_url("checked")).to_owned();
    let ran = run(server.as_writer(&mut download_list(&list, &into_bucket, &[]), &state_home));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));
    let verify = |requeue: bool| {
        let mut cmd = scrape();
        cmd.args(["verify", "--out"]).arg(&into_bucket);
        if requeue {
            cmd.arg("--requeue");
        }
        run(server.as_writer(&mut cmd, &state_home))
    };
    let checked = verify(false);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    assert!(
        text(&checked).contains("5 image(s) in 5 file(s) checked: 0 missing or changed"),
        "{}",
        text(&checked)
    );

    let dump = dir.path().join("dump");
    server.dump(&dump);
    let damaged = stored_files(&dump.join("checked"))
        .into_keys()
        .next()
        .expect("an image");
    server.put(&format!("checked/{damaged}"), "not the image");
    let checked = verify(true);
    assert_eq!(checked.status.code(), Some(1), "{}", text(&checked));
    let listed = String::from_utf8_lossy(&checked.stdout).into_owned();
    assert!(listed.starts_with(&format!("{damaged}\t")), "{listed}");
    assert!(
        text(&checked).contains("1 image(s) queued again"),
        "{}",
        text(&checked)
    );

    let ran = run(server.as_writer(&mut download_list(&list, &into_bucket, &[]), &state_home));
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran));
    let checked = verify(false);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    let again = dir.path().join("again");
    server.dump(&again);
    assert_whole(&stored_files(&again.join("checked")));
}

#[test]
fn a_file_above_the_part_size_is_put_in_parts_and_read_back_whole() {
    let Some(server) = S3Server::start("a_file_above_the_part_size_is_put_in_parts") else {
        return;
    };
    let dir = TempDir::new().expect("temporary folder");
    // 40 MiB that do not compress: three parts of at most 16 MiB.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let bytes: Vec<u8> = (0..40 * 1024 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect();
    let file = dir.path().join("00000.tar");
    std::fs::write(&file, &bytes).expect("file written");
    let endpoint = server.endpoint();
    let url = BucketUrl::parse(&bucket_url("parts")).expect("a bucket URL");
    let bucket = Bucket::connect_with(
        url,
        &[
            ("aws_endpoint", &endpoint),
            ("aws_region", "us-east-1"),
            ("aws_access_key_id", &server.key),
            ("aws_secret_access_key", &server.secret),
        ],
    )
    .expect("connected");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime
        .block_on(bucket.put_file("00000.tar", &file))
        .expect("put in parts");
    let (sha256, size) = runtime
        .block_on(bucket.hash("00000.tar"))
        .expect("read back")
        .map(|(size, hash)| (hash, size))
        .expect("the object is there");
    assert_eq!(size, bytes.len() as u64);
    assert_eq!(sha256, hex::encode(sha2::Sha256::digest(&bytes)));
    let (objects, open_uploads) = server.dump(&dir.path().join("dump"));
    assert_eq!(objects, ["parts/00000.tar"]);
    assert_eq!(open_uploads, 0, "the parts were completed into the object");
}
