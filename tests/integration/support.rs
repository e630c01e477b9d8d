//! Shared helpers: the binary, the demo site on a loopback port, expected results, waiting,
//! a job's test folder ([`Setup`]) and the stop-and-resume harness ([`resume_and_compare`]).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use scrape::demo::DemoSite;
use scrape::state::{ImageStatus, State};
use sha2::{Digest, Sha256};

// Timeouts. A wait that ends early costs nothing (they poll); only a test that is failing anyway
// waits them out, so they are set for the slowest machine the tests run on: two cores shared by
// two test threads, Chromium and often a build.

/// Longest wait for a condition or for a run of the binary against a site on loopback. Those
/// runs take a second or a few; a loaded 2-core machine can make that ten times as long.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Longest wait for work that goes through Chromium: launching it, rendering pages, or a job of
/// the binary that does both. A cold start of Chromium alone takes seconds, and more than ten on
/// a loaded machine, before the first page is asked for.
pub const BROWSER_PATIENCE: Duration = Duration::from_secs(60);

/// How long the processes of a browser may take to exit once it is closed, killed or left
/// without its parent. Not patience but a bound the tests hold the code to: a browser still
/// running after it has leaked.
pub const BROWSER_EXIT: Duration = Duration::from_secs(15);

/// The TDMRep file (`/.well-known/tdmrep.json`) a run asks each origin for once; the request
/// counts of the test servers and proxies leave it out.
pub const TDMREP_PATH: &str = "/.well-known/tdmrep.json";

/// A path inside the repository.
pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The `scrape` binary built for these tests, with logs quiet unless asked.
pub fn scrape() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scrape"));
    cmd.env_remove("SCRAPE_LOG");
    cmd
}

/// `scrape download --urls LIST --out OUT --progress off` plus `extra`.
pub fn download_list(list: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = scrape();
    cmd.arg("download")
        .arg("--urls")
        .arg(list)
        .arg("--out")
        .arg(out)
        .args(["--progress", "off"])
        .args(extra);
    cmd
}

/// Runs `cmd` and returns its output; stdout and stderr are captured.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("the scrape binary runs")
}

/// Stdout and stderr of `output`, for assertion messages.
pub fn text(output: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Stderr of `output`, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `text` as JSON lines (what `probe` prints, the manifest, the failure list).
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}` is not JSON: {e}")))
        .collect()
}

/// A multi-threaded runtime with `workers` threads, for a server that runs beside a synchronous
/// test.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A runtime of its own for a test server, shut down without waiting for its tasks when the
/// server is dropped: a stalled reply never ends, and a server may be dropped inside an async
/// test, where blocking on its tasks would panic.
pub struct ServerRuntime(Option<tokio::runtime::Runtime>);

impl ServerRuntime {
    pub fn new(workers: usize) -> Self {
        Self(Some(runtime(workers)))
    }

    /// `app` served on `127.0.0.1:0` by a runtime of `workers` threads: the runtime (the
    /// server lives as long as it does) and the server's origin, `http://127.0.0.1:PORT`.
    pub fn serve(workers: usize, app: axum::Router) -> (Self, String) {
        let runtime = Self::new(workers);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        let origin = format!("http://{}", listener.local_addr().expect("its address"));
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (runtime, origin)
    }
}

impl std::ops::Deref for ServerRuntime {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("running until dropped")
    }
}

impl Drop for ServerRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A site served from a folder on `127.0.0.1:0` by the project's demo server, on its own
/// runtime thread so tests can stay synchronous and run the binary as a child process.
pub struct Site {
    runtime: tokio::runtime::Runtime,
    site: Option<DemoSite>,
    pub origin: String,
}

impl Site {
    /// Serves `root` (a folder of the repository, e.g. `fixtures/demo-site`).
    pub fn serve(root: &str) -> Self {
        Self::serve_dir(&repo(root))
    }

    /// Serves any folder, e.g. a site a test wrote into a temporary directory.
    pub fn serve_dir(root: &Path) -> Self {
        let runtime = runtime(2);
        let site = runtime
            .block_on(DemoSite::start(root, 0))
            .expect("demo site starts");
        let origin = site.origin();
        Self {
            runtime,
            site: Some(site),
            origin,
        }
    }

    /// How many requests each path got so far, but the TDMRep file every origin is asked for
    /// once per run (`robots::an_origins_tdmrep_file...` counts it).
    pub fn hits(&self) -> BTreeMap<String, u64> {
        self.site
            .as_ref()
            .map(|s| {
                s.hits()
                    .into_iter()
                    .filter(|(path, _)| path != TDMREP_PATH)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many requests each path got from a browser (Chromium rendering a page).
    pub fn browser_hits(&self) -> BTreeMap<String, u64> {
        self.site
            .as_ref()
            .map(|s| s.browser_hits().into_iter().collect())
            .unwrap_or_default()
    }

    /// Requests for images (`/img/...`), all paths together.
    pub fn image_requests(&self) -> u64 {
        image_hits(self.hits()).values().sum()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some(site) = self.site.take() {
            self.runtime.block_on(site.stop());
        }
    }
}

/// The image requests (`/img/...`) of a server's hit counters, by path.
pub fn image_hits(hits: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    hits.into_iter()
        .filter(|(p, _)| p.starts_with("/img/"))
        .collect()
}

/// The demo site's expected images: absolute URL → sha256 of the bytes the server sends.
pub fn expected_demo_images(origin: &str) -> BTreeMap<String, String> {
    expected_images_listed(origin, "fixtures/demo-site/expected-images.txt")
}

/// The images of the demo site's albums (`/albums/`, JavaScript apps rendered in the
/// browser): absolute URL → sha256.
pub fn expected_album_images(origin: &str) -> BTreeMap<String, String> {
    expected_images_listed(origin, "fixtures/demo-site/expected-album-images.txt")
}

/// The images whose paths the repository file `list` names, one a line.
fn expected_images_listed(origin: &str, list: &str) -> BTreeMap<String, String> {
    let list = std::fs::read_to_string(repo(list)).expect("expected list");
    let paths: Vec<String> = list
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    expected_images(origin, &paths)
}

/// `paths` (`/img/...`, queries allowed) on `origin` → sha256 of the bytes the fixture servers
/// generate for them.
pub fn expected_images(origin: &str, paths: &[String]) -> BTreeMap<String, String> {
    paths
        .iter()
        .map(|path| {
            let name = path.trim_start_matches("/img/");
            let name = name.split('?').next().unwrap_or(name);
            let (_, bytes) = scrape::demo::image_for(name).expect("a generated image name");
            (
                format!("{origin}{path}"),
                hex::encode(Sha256::digest(&bytes)),
            )
        })
        .collect()
}

/// A URL list of `paths` on `origin`, written into `dir` as `urls.txt`.
pub fn url_list(dir: &Path, origin: &str, paths: &[String]) -> PathBuf {
    let list = dir.join("urls.txt");
    let text: String = paths.iter().map(|p| format!("{origin}{p}\n")).collect();
    std::fs::write(&list, text).expect("list written");
    list
}

/// The images of the infinite gallery (`fixtures/js-sites/infinite`), as paths.
pub fn infinite_paths() -> Vec<String> {
    (1..=3)
        .flat_map(|n| (1..=4).map(move |i| format!("/img/scroll-{n}-{i}-640x480.jpg")))
        .collect()
}

/// Writes `bytes` to `file` (its folders made) when it does not hold them yet; a file that
/// changes gets a modification time a minute past the one it had, so a server's
/// `Last-Modified` changes even within the second it was last written.
pub fn write_changed(file: &Path, bytes: &[u8]) {
    if std::fs::read(file).ok().as_deref() == Some(bytes) {
        return;
    }
    let before = std::fs::metadata(file).and_then(|m| m.modified()).ok();
    std::fs::create_dir_all(file.parent().expect("a parent folder")).expect("folder made");
    std::fs::write(file, bytes).expect("file written");
    if let Some(before) = before {
        let handle = std::fs::File::options()
            .write(true)
            .open(file)
            .expect("file opened");
        handle
            .set_modified(before + Duration::from_secs(60))
            .expect("modification time set");
    }
}

/// The manifest of `out`: one JSON object per line.
pub fn manifest(out: &Path) -> Vec<serde_json::Value> {
    json_lines(&std::fs::read_to_string(out.join("manifest.jsonl")).unwrap_or_default())
}

/// The manifest lines of `out` with `origin` replaced by `ORIGIN`, so runs of the same site
/// served on different ports compare, and without `run` and `found_at`: which run found an
/// image, and when, depends on where the runs before were stopped.
pub fn manifest_lines(out: &Path, origin: &str) -> BTreeSet<String> {
    std::fs::read_to_string(out.join("manifest.jsonl"))
        .expect("manifest.jsonl")
        .lines()
        .map(|l| {
            let mut line: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            let fields = line.as_object_mut().expect("a JSON object");
            assert!(fields.remove("run").is_some_and(|r| r.is_u64()), "{l}");
            assert!(fields.remove("found_at").is_some(), "{l}");
            line.to_string().replace(origin, "ORIGIN")
        })
        .collect()
}

/// Manifest as URL → sha256.
pub fn manifest_hashes(out: &Path) -> BTreeMap<String, String> {
    manifest(out)
        .iter()
        .map(|v| {
            (
                v["url"].as_str().unwrap_or_default().to_owned(),
                v["sha256"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Every file under `dir`, at any depth, in no order. Files and folders that come or go while
/// it walks are passed over, so it may be polled while a run writes.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(_) => files.push(entry.path()),
                Err(_) => {}
            }
        }
    }
    files
}

/// Every regular file under `out` except the state folder and the manifest files, relative,
/// with its sha256.
pub fn stored_files(out: &Path) -> BTreeMap<String, String> {
    assert!(out.is_dir(), "no output folder `{}`", out.display());
    let mut files = BTreeMap::new();
    for path in files_under(out) {
        let rel = path.strip_prefix(out).expect("inside");
        if rel.starts_with(".scrape") || rel.to_string_lossy().ends_with(".jsonl") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("readable file");
        files.insert(
            rel.to_string_lossy().into_owned(),
            hex::encode(Sha256::digest(&bytes)),
        );
    }
    files
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    assert!(dir.is_dir(), "no folder `{}`", dir.display());
    files_under(dir)
        .into_iter()
        .filter(|path| {
            std::fs::read(path)
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

/// A profile for the demo site that writes into `out`, as a file in `dir`.
pub fn demo_profile_in(dir: &Path, extra: &str) -> PathBuf {
    let source = std::fs::read_to_string(repo("site-profiles/demo.toml")).expect("demo profile");
    let path = dir.join("demo.toml");
    std::fs::write(&path, format!("{source}\n{extra}")).expect("profile written");
    path
}

/// Polls `condition` every 2 ms until it holds; panics after `timeout`, saying `what` was
/// awaited. `what` is formatted only then, so it may describe the state at the timeout (see
/// [`described`]).
pub fn wait_until(what: impl fmt::Display, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// [`wait_until`] in async code: polls every 20 ms and sleeps on the runtime in between, so the
/// tasks it watches go on.
pub async fn eventually(
    what: impl fmt::Display,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A description written only when shown: what [`wait_until`] awaited, with the state at the
/// timeout.
pub fn described(describe: impl Fn() -> String) -> impl fmt::Display {
    struct Described<F>(F);
    impl<F: Fn() -> String> fmt::Display for Described<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&(self.0)())
        }
    }
    Described(describe)
}

/// How many files are stored under `out` (state folders, `.jsonl` lists and `.tmp` files left
/// out); cheap enough to poll, and tolerant of folders appearing while it walks.
pub fn stored_count(out: &Path) -> usize {
    files_under(out)
        .iter()
        .filter(|path| {
            let rel = path.strip_prefix(out).unwrap_or(path);
            let name = rel.to_string_lossy();
            !rel.components().any(|c| c.as_os_str() == ".scrape")
                && !name.ends_with(".jsonl")
                && !name.ends_with(".tmp")
        })
        .count()
}

/// Every `*.part` file anywhere under `out`, the state folder's `parts` included.
pub fn part_files(out: &Path) -> Vec<PathBuf> {
    files_under(out)
        .into_iter()
        .filter(|path| path.extension().is_some_and(|e| e == "part"))
        .collect()
}

/// Asserts `output` is a refusal (exit 2) whose message says each of `phrases`.
pub fn assert_refused(output: &Output, phrases: &[&str]) {
    assert_eq!(output.status.code(), Some(2), "{}", text(output));
    let said = text(output);
    for phrase in phrases {
        assert!(said.contains(phrase), "`{phrase}` not said: {said}");
    }
}

/// `scrape status --json --out OUT`, parsed; panics (with the output) unless it exits 0.
pub fn status_json(out: &Path) -> serde_json::Value {
    let output = run(scrape().args(["status", "--json", "--out"]).arg(out));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    serde_json::from_slice(&output.stdout).expect("status --json prints JSON")
}

/// Writes a gallery the demo profile understands into `root`: `/gallery/` (page 1) and
/// `/gallery/page-N.html`, linked by `a.next`, page `i` holding `pages[i]` as
/// `.gallery figure img` sources.
pub fn write_gallery(root: &Path, pages: &[Vec<String>]) {
    write_gallery_with(root, pages, |_| String::new());
}

/// [`write_gallery`] with `script(number)` (a `<script>` element, or nothing) at the end of the
/// body of page `number`.
pub fn write_gallery_with(root: &Path, pages: &[Vec<String>], script: impl Fn(usize) -> String) {
    let gallery = root.join("gallery");
    std::fs::create_dir_all(&gallery).expect("gallery folder");
    for (i, images) in pages.iter().enumerate() {
        let number = i + 1;
        let name = if number == 1 {
            "index.html".to_owned()
        } else {
            format!("page-{number}.html")
        };
        let figures: String = images
            .iter()
            .map(|src| format!("    <figure><img src=\"{src}\" alt=\"\"></figure>\n"))
            .collect();
        let next = if number < pages.len() {
            format!(
                "<a class=\"next\" href=\"{}\">Next</a>",
                gallery_page(number + 1)
            )
        } else {
            String::new()
        };
        let script = script(number);
        let html = format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Page {number}</title></head>\n\
             <body><main><section class=\"gallery\">\n{figures}</section>\n<nav>{next}</nav></main>{script}</body></html>\n"
        );
        std::fs::write(gallery.join(name), html).expect("page written");
    }
}

/// The path of gallery page `number` as [`write_gallery`] names it.
pub fn gallery_page(number: usize) -> String {
    if number == 1 {
        "/gallery/".to_owned()
    } else {
        format!("/gallery/page-{number}.html")
    }
}

/// A run of the binary in the background, its stderr kept in a file.
pub struct Background {
    pub child: Child,
    stderr: PathBuf,
}

impl Background {
    /// Starts `cmd` with stderr going to `stderr` (a file path).
    pub fn spawn(cmd: &mut Command, stderr: &Path) -> Self {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr).expect("stderr file"))
            .spawn()
            .expect("the scrape binary starts");
        Self {
            child,
            stderr: stderr.to_owned(),
        }
    }

    /// Waits up to `timeout` for `condition`, failing early if the run ends first.
    pub fn wait_for(&mut self, what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
        let mut ended = None;
        wait_until(what, timeout, || {
            ended = self.child.try_wait().expect("child status");
            ended.is_some() || condition()
        });
        assert!(
            ended.is_none(),
            "the run ended ({ended:?}) before {what}:\n{}",
            self.stderr_text()
        );
    }

    /// SIGKILL, and proof that it was the kill that ended the run.
    pub fn kill(mut self) {
        self.child.kill().expect("kill");
        let status = self.child.wait().expect("wait");
        assert_eq!(
            status.signal(),
            Some(9),
            "the run ended before the kill: {status:?}\n{}",
            self.stderr_text()
        );
    }

    /// Sends SIGINT, as Ctrl-C does, with the `kill` command.
    pub fn interrupt(&self) {
        let pid = self.child.id().to_string();
        let sent = run(Command::new("kill").args(["-INT", &pid]));
        assert!(sent.status.success(), "{}", text(&sent));
    }

    /// Waits up to `timeout` for the run to end on its own; its status and stderr.
    pub fn wait(mut self, timeout: Duration) -> (ExitStatus, String) {
        let mut ended = None;
        let stderr = &self.stderr;
        wait_until(
            described(|| {
                let text = std::fs::read_to_string(stderr).unwrap_or_default();
                format!("the run to end; its stderr:\n{text}")
            }),
            timeout,
            || {
                ended = self.child.try_wait().expect("child status");
                ended.is_some()
            },
        );
        (ended.expect("ended"), self.stderr_text())
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Background {
    /// Kills a run still going, as when a test fails while it runs: no process outlives its test.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// A job's test folder.

/// A temporary folder with what one job of the binary needs: the site it crawls (a [`Site`] or a
/// test's own server), a profile, and the output folder `out`. [`Setup::command`] runs the
/// profile into `out` with the flags and environment the setup was given.
pub struct Setup<S = Site> {
    pub dir: TempDir,
    pub site: S,
    pub profile: PathBuf,
    pub out: PathBuf,
    /// Flags for every run, after `--profile`, `--progress off` and `--out`.
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
}

impl<S> Setup<S> {
    /// In a new temporary folder: `site` made (it may serve files it writes into the folder),
    /// then the profile written by `profile`, which returns its path.
    pub fn with(site: impl FnOnce(&Path) -> S, profile: impl FnOnce(&Path, &S) -> PathBuf) -> Self {
        let dir = TempDir::new().expect("temporary folder");
        let site = site(dir.path());
        let profile = profile(dir.path(), &site);
        let out = dir.path().join("out");
        Self {
            dir,
            site,
            profile,
            out,
            args: Vec::new(),
            envs: Vec::new(),
        }
    }

    /// With `args` added to every run.
    pub fn args<A: Into<OsString>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// With the environment variable `key` set for every run.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// `scrape --profile PROFILE --progress off --out OUT` plus the setup's flags and
    /// environment.
    pub fn command(&self) -> Command {
        let mut cmd = scrape();
        cmd.arg("--profile")
            .arg(&self.profile)
            .args(["--progress", "off", "--out"])
            .arg(&self.out)
            .args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// Runs to the end.
    pub fn run(&self) -> Output {
        run(&mut self.command())
    }

    /// Starts a run in the background; its stderr goes to `NAME.stderr` in the folder.
    pub fn spawn(&self, name: &str) -> Background {
        let stderr = self.dir.path().join(format!("{name}.stderr"));
        Background::spawn(&mut self.command(), &stderr)
    }
}

impl Setup<Site> {
    /// A site that `write` writes into the folder's `site/`, served on loopback, and the profile
    /// `profile` writes into the folder; runs start at the site's `/gallery/`.
    pub fn gallery(write: impl FnOnce(&Path), profile: impl FnOnce(&Path) -> PathBuf) -> Self {
        let setup = Self::with(
            |dir| {
                let root = dir.join("site");
                write(&root);
                Site::serve_dir(&root)
            },
            |dir, _| profile(dir),
        );
        let start = format!("{}/gallery/", setup.site.origin);
        setup.args(["--start", &start])
    }

    /// The manifest lines with the site's origin replaced, so runs of different servers
    /// compare.
    pub fn manifest_lines(&self) -> BTreeSet<String> {
        manifest_lines(&self.out, &self.site.origin)
    }

    /// Image requests by path (pages are counted apart).
    pub fn image_hits(&self) -> BTreeMap<String, u64> {
        image_hits(self.site.hits())
    }
}

// Stopping a job and resuming it: a clean run of a site, runs of the same site served elsewhere
// stopped at chosen or random points, then a rerun that must end with the clean result.

/// What a run never stopped left.
pub struct CleanRun {
    /// Manifest lines, the origin replaced ([`Setup::manifest_lines`]).
    pub manifest: BTreeSet<String>,
    /// Stored files with their sha256.
    pub files: BTreeMap<String, String>,
    /// Image requests by path.
    pub images: BTreeMap<String, u64>,
    pub stderr: String,
}

impl CleanRun {
    /// Runs `setup` to its end; panics unless it exits 0.
    pub fn of(setup: &Setup) -> Self {
        let output = setup.run();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        Self {
            manifest: setup.manifest_lines(),
            files: stored_files(&setup.out),
            images: setup.image_hits(),
            stderr: stderr(&output),
        }
    }

    /// Asserts that `setup`'s output folder holds what the clean run's does: the same manifest
    /// (but for the origin) and the same files.
    pub fn assert_same(&self, setup: &Setup) {
        assert_eq!(setup.manifest_lines(), self.manifest, "manifest");
        assert_eq!(stored_files(&setup.out), self.files, "stored files");
    }
}

/// What a run had done when it ended (killed, interrupted, or on its own): the image requests
/// the site had answered by then, by path, and the images (paths) the state holds as stored or
/// duplicate, never to be fetched again.
pub struct Stop {
    pub requested: BTreeMap<String, u64>,
    pub done: BTreeSet<String>,
}

impl Stop {
    /// Of the run of `setup` that just ended.
    pub fn of(setup: &Setup) -> Self {
        Self {
            requested: setup.image_hits(),
            done: committed(&setup.out),
        }
    }
}

/// URLs (paths) the state of `out` records as stored or duplicate: done, never to be fetched
/// again.
pub fn committed(out: &Path) -> BTreeSet<String> {
    let state = State::open_existing(out).expect("state after the stop opens");
    let mut done = BTreeSet::new();
    if state.profile_name().expect("meta table").is_none() {
        // Killed before the database was set up.
        return done;
    }
    state
        .for_each_image(|url, record| {
            if matches!(record.status, ImageStatus::Stored | ImageStatus::Duplicate) {
                done.insert(url::Url::parse(url).expect("URL").path().to_owned());
            }
            Ok(())
        })
        .expect("image records");
    done
}

/// Starts a run of `setup` and kills it (SIGKILL) once `condition` holds, failing if it ends
/// first; what it had done.
pub fn kill_when(
    setup: &Setup,
    what: &str,
    timeout: Duration,
    condition: impl FnMut() -> bool,
) -> Stop {
    let mut started = setup.spawn("killed");
    started.wait_for(what, timeout, condition);
    started.kill();
    Stop::of(setup)
}

/// Runs `setup` again to its end after the runs that ended at `stops` (in order) and checks it
/// against `clean`: exit 0, the clean manifest and files, no part file left, `pages` pages done,
/// the chain ended and nothing pending or failed. Then the requests: no run asked for an image
/// twice, none asked again for what an earlier run had committed, and the rerun asked exactly
/// for what the last stopped run had not committed.
pub fn resume_and_compare(setup: &Setup, clean: &CleanRun, pages: usize, stops: &[Stop]) {
    let output = setup.run();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));

    clean.assert_same(setup);
    assert_eq!(
        part_files(&setup.out),
        Vec::<PathBuf>::new(),
        "part files left"
    );
    let status = status_json(&setup.out);
    assert_eq!(status["counters"]["pages_done"], pages, "{status}");
    assert_eq!(status["pending"], 0, "{status}");
    assert_eq!(status["state"], "complete", "{status}");
    assert_eq!(status["counters"]["failed"], 0, "{status}");
    assert_ne!(
        status["chains"][0]["checkpoint"]["end"],
        serde_json::Value::Null
    );

    let total = setup.image_hits();
    let count = |hits: &BTreeMap<String, u64>, path: &str| hits.get(path).copied().unwrap_or(0);
    let mut before = BTreeMap::new();
    for (number, stop) in stops.iter().enumerate() {
        for path in clean.images.keys() {
            let during = count(&stop.requested, path) - count(&before, path);
            assert!(
                during <= 1,
                "`{path}` requested {during} times before stop {number}"
            );
        }
        before.clone_from(&stop.requested);
    }
    let done = stops.last().map(|s| s.done.clone()).unwrap_or_default();
    for path in clean.images.keys() {
        let after = count(&total, path) - count(&before, path);
        let expected = u64::from(!done.contains(path));
        assert_eq!(
            after,
            expected,
            "`{path}`: requested {after} times by the rerun (stored before the stop: {})",
            done.contains(path)
        );
    }
    // What a stopped run had committed was never fetched again.
    for (number, stop) in stops.iter().enumerate() {
        for path in &stop.done {
            assert_eq!(
                total.get(path),
                stop.requested.get(path),
                "`{path}`, committed before stop {number}, was fetched again"
            );
        }
    }
    // Images requested before a stop but not committed are fetched again, exactly once (the
    // loops above). How many there are depends only on how far the writer was behind when the
    // process died, which the machine's load decides: it is not bounded here.
}

/// Whether Chromium is here. Without it a browser test prints why and is skipped; with `CI`
/// set, a missing browser fails the test.
pub fn chromium_available(test: &str) -> bool {
    match scrape::render::find_executable(None) {
        Ok(_) => true,
        Err(e) if std::env::var_os("CI").is_some() => panic!("{test}: {e}"),
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            false
        }
    }
}

/// The tests' own app server on `127.0.0.1:0`: the single-page app of
/// `fixtures/js-sites/spa` (`/spa/`) with its POST API (`POST /spa/api/items`: three pages of
/// items behind a cursor, 3, 3 and 2 items, images `/img/spa-{1..8}-800x600.jpg`), generated
/// images under `/img/` (the demo server's), a page that never finishes loading (`/hang`) and
/// one that counts its requests (`/slow`), and a feed in a scroll container filled from a slow
/// API (`/feed/`, [`FEED_DELAY`] per page), a page of a few kilobytes gzipped that unpacks
/// to [`BOMB_BYTES`] (`/bomb`) and one that takes memory without end ([`HEAP_PAGE`], `/heap`). Every request is counted by path.
pub struct ApiServer {
    pub addr: std::net::SocketAddr,
    /// Requests for `/slow`.
    pub page_requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    hits: std::sync::Arc<std::sync::Mutex<BTreeMap<String, u64>>>,
    task: tokio::task::JoinHandle<()>,
    /// Its own runtime, when started by [`ApiServer::serve`] outside of one.
    runtime: Option<ServerRuntime>,
}

/// What `/bomb` unpacks to: an image, then spaces.
pub const BOMB_BYTES: usize = 16 << 20;

/// A page (`/heap`) whose script takes 16 MiB more memory every 40 ms (400 MiB a second),
/// without end; it has one image and is never `#ready`.
pub const HEAP_PAGE: &str = r#"<!doctype html><html><body><div class="gallery"><img src="/img/heap-40x30.jpg"></div>
<script>
const kept = [];
setInterval(() => { const a = new Float64Array(2 << 20); a.fill(Math.random()); kept.push(a); }, 40);
</script></body></html>"#;

/// A page (`/many-json`) that asks `/big.json?n=N` twelve times, one after another: each answer
/// is [`BIG_JSON_BYTES`] of JSON with one image (`/img/big-N-40x30.jpg`); it shows `#done` once
/// all are in.
pub const MANY_JSON_PAGE: &str = r#"<!doctype html><html><body><p>loading</p><script>
(async () => {
  for (let n = 1; n <= 12; n++) await (await fetch('/big.json?n=' + n)).json();
  document.body.insertAdjacentHTML('beforeend', '<p id="done">done</p>');
})();
</script></body></html>"#;

/// The size of each `/big.json` answer.
pub const BIG_JSON_BYTES: usize = 4 << 20;

/// Pages of the feed's slow API (`/feed/api/{page}`), and images on each.
pub const FEED_PAGES: u32 = 5;
pub const FEED_IMAGES_PER_PAGE: u32 = 4;

/// How long the feed's API takes to answer: far longer than the settle time of the tests
/// that scroll it, as a busy API does.
pub const FEED_DELAY: Duration = Duration::from_millis(1500);

/// A page that grows by one image (`/img/eN-40x30.jpg`) each time it is scrolled to the
/// bottom, without end; with the fragment `#marked`, it shows `#end` after three.
pub const ENDLESS_PAGE: &str = r#"<!doctype html><html><head><style>.b{height:1500px}</style></head><body>
<div id="g"></div><div id="sentinel">more</div>
<script>
let k = 0;
function batch() {
  const d = document.createElement('div'); d.className = 'b';
  const im = document.createElement('img'); im.src = '/img/e' + k + '-40x30.jpg'; d.appendChild(im);
  document.getElementById('g').appendChild(d); k++;
  if (k === 3 && location.hash === '#marked') document.body.insertAdjacentHTML('beforeend', '<p id="end">the end</p>');
}
batch();
new IntersectionObserver(es => { if (es.some(e => e.isIntersecting)) setTimeout(batch, 50); }).observe(document.getElementById('sentinel'));
</script></body></html>"#;

/// The images the SPA's API lists, as paths.
pub fn spa_image_paths() -> Vec<String> {
    scrape::demo::api::spa_image_paths()
}

impl ApiServer {
    /// Starts on the current runtime.
    pub async fn start() -> Self {
        use std::sync::Arc;
        use std::sync::atomic::AtomicU64;

        use axum::Router;
        use axum::routing::{get, post};

        let page_requests = Arc::new(AtomicU64::new(0));
        let hits = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let counted = Arc::clone(&hits);
        let app = Router::new()
            .route("/spa/", get(api::spa_page))
            .route("/spa/api/items", post(api::spa_items))
            .route("/hang", get(api::hanging_page))
            .route("/never.js", get(api::never))
            .route("/slow", get(api::slow_page))
            .route("/img/{name}", get(api::image))
            .route("/feed/", get(api::feed_page))
            .route("/feed/api/{page}", get(api::feed_items))
            .route("/bomb", get(api::gzip_bomb))
            .route("/heap", get(|| async { axum::response::Html(HEAP_PAGE) }))
            .route(
                "/many-json",
                get(|| async { axum::response::Html(MANY_JSON_PAGE) }),
            )
            .route("/big.json", get(api::big_json))
            .with_state(Arc::clone(&page_requests))
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let path = request.uri().path().to_owned();
                    if let Ok(mut hits) = counted.lock() {
                        *hits.entry(path).or_default() += 1;
                    }
                    next.run(request)
                },
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            page_requests,
            hits,
            task,
            runtime: None,
        }
    }

    /// Starts on a runtime of its own, for tests that stay synchronous and run the binary.
    pub fn serve() -> Self {
        let runtime = ServerRuntime::new(2);
        let mut server = runtime.block_on(Self::start());
        server.runtime = Some(runtime);
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests each path got so far.
    pub fn hits(&self) -> BTreeMap<String, u64> {
        self.hits.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

impl Drop for ApiServer {
    /// Its runtime, if it has one, goes with it.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The SPA of `fixtures/js-sites/spa` as a `json_cursor` walk of its POST API, driven by the
/// rendered page ("Load more" clicked until it is gone: three API pages, 3 + 3 + 2 items);
/// `extra` goes into `[pagination]`.
pub fn rendered_spa_walk(dir: &Path, origin: &str, extra: &str) -> PathBuf {
    let profile = dir.join("spa-walk.toml");
    std::fs::write(
        &profile,
        format!(
            r##"name = "spa-walk"
start = ["{origin}/spa/"]
render = "browser"

[browser]
wait_for = "#app li"
click = "#more"
settle = "1s"

[pagination]
kind = "json_cursor"
request = "/spa/api/items"
method = "POST"
body = '{{"cursor": "{{cursor}}"}}'
cursor = "$.next_cursor"
{extra}

[[api]]
url = "/spa/api/items$"
items = "$.items[*]"
image = "$.image.url"
"##
        ),
    )
    .unwrap();
    profile
}

/// The handlers of [`ApiServer`].
mod api {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use axum::extract::{Path, State};
    use axum::http::{StatusCode, header};
    use axum::response::{Html, IntoResponse, Response};

    use super::repo;

    pub async fn spa_page() -> Html<String> {
        Html(std::fs::read_to_string(repo("fixtures/js-sites/spa/index.html")).unwrap())
    }

    /// The demo site's answers: three pages of items behind a cursor, 3, 3 and 2 items.
    pub async fn spa_items(body: String) -> ([(header::HeaderName, &'static str); 1], String) {
        let body = scrape::demo::api::spa_items(&body).to_string();
        ([(header::CONTENT_TYPE, "application/json")], body)
    }

    /// `fixtures/js-sites/feed`: a scroll container filled from the slow feed API.
    pub async fn feed_page() -> Html<String> {
        Html(std::fs::read_to_string(repo("fixtures/js-sites/feed/index.html")).unwrap())
    }

    /// Page `page` of the feed: [`super::FEED_IMAGES_PER_PAGE`] images and the next page,
    /// after [`super::FEED_DELAY`], never cached.
    pub async fn feed_items(Path(page): Path<u32>) -> Response {
        tokio::time::sleep(super::FEED_DELAY).await;
        let items: Vec<String> = (1..=super::FEED_IMAGES_PER_PAGE)
            .map(|i| format!("/img/feed-{page}-{i}-40x30.jpg"))
            .collect();
        let next = (page < super::FEED_PAGES).then_some(page + 1);
        let body = serde_json::json!({ "items": items, "next": next }).to_string();
        (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response()
    }

    /// [`super::BIG_JSON_BYTES`] of JSON: one item with an image, then zeros.
    pub async fn big_json(uri: axum::http::Uri) -> Response {
        let n = uri
            .query()
            .and_then(|q| q.strip_prefix("n="))
            .unwrap_or_default()
            .to_owned();
        let head = format!("{{\"items\":[{{\"image\":\"/img/big-{n}-40x30.jpg\"}}],\"pad\":[0");
        let zeros = (super::BIG_JSON_BYTES - head.len() - 2) / 2;
        let body = format!("{head}{}]}}", ",0".repeat(zeros));
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    }

    pub async fn hanging_page() -> Html<&'static str> {
        Html("<!DOCTYPE html><p>almost</p><script src=\"/never.js\"></script>")
    }

    pub async fn never() -> &'static str {
        std::future::pending::<()>().await;
        ""
    }

    /// A page that counts its requests, so a test can act while the browser is on it.
    pub async fn slow_page(State(requests): State<Arc<AtomicU64>>) -> Html<&'static str> {
        requests.fetch_add(1, Ordering::SeqCst);
        Html("<!DOCTYPE html><p id=\"ready\">ready</p>")
    }

    /// [`super::BOMB_BYTES`] of a page, gzipped once (to about 16 KB) and kept.
    pub async fn gzip_bomb() -> Response {
        static BODY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let body = tokio::task::spawn_blocking(|| {
            BODY.get_or_init(|| {
                use std::io::Write;
                let head = b"<!doctype html><div class=gallery><img src=/img/bomb-40x30.jpg>";
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(head).unwrap();
                let spaces = vec![b' '; 1 << 20];
                for _ in 0..super::BOMB_BYTES >> 20 {
                    gz.write_all(&spaces).unwrap();
                }
                gz.finish().unwrap()
            })
            .clone()
        })
        .await
        .unwrap();
        (
            [
                (header::CONTENT_TYPE, "text/html"),
                (header::CONTENT_ENCODING, "gzip"),
            ],
            body,
        )
            .into_response()
    }

    /// The demo server's generated image for `name`.
    pub async fn image(Path(name): Path<String>) -> Response {
        let image = tokio::task::spawn_blocking(move || scrape::demo::image_for(&name))
            .await
            .ok()
            .flatten();
        match image {
            Some((format, bytes)) => {
                ([(header::CONTENT_TYPE, format.content_type())], bytes).into_response()
            }
            None => StatusCode::NOT_FOUND.into_response(),
        }
    }
}

// Proxies: a forward HTTP proxy and a SOCKS5 one that count what they carry.

/// What a proxy saw: each forwarded request's target URL and its `Proxy-Authorization`, and
/// how many requests it refused for want of the right credentials.
#[derive(Debug, Default)]
pub struct Seen {
    pub forwarded: Vec<(String, Option<String>)>,
    pub refused: u64,
}

/// Which kind of proxy a [`Proxy`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A forward HTTP proxy: absolute-form request lines, one request per connection.
    Http,
    /// SOCKS5 without authentication, `CONNECT` only.
    Socks5,
}

/// A proxy on `127.0.0.1:0`, on its own runtime thread.
pub struct Proxy {
    /// Runs the proxy; shut down with it.
    runtime: ServerRuntime,
    kind: Kind,
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
}

impl Proxy {
    /// An HTTP proxy; with `basic`, requests without `Proxy-Authorization: Basic <basic>` get
    /// a 407.
    pub fn http(basic: Option<&str>) -> Self {
        Self::start(Kind::Http, basic.map(str::to_owned))
    }

    pub fn socks5() -> Self {
        Self::start(Kind::Socks5, None)
    }

    fn start(kind: Kind, basic: Option<String>) -> Self {
        let runtime = ServerRuntime::new(2);
        // Bound here, outside any runtime: a proxy may be started inside an async test.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("proxy binds");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("address");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = Arc::clone(&seen);
        runtime.spawn(async move {
            let listener = TcpListener::from_std(listener).expect("proxy listens");
            while let Ok((stream, _)) = listener.accept().await {
                let seen = Arc::clone(&shared);
                let basic = basic.clone();
                tokio::spawn(async move {
                    let _ = match kind {
                        Kind::Http => forward_http(stream, basic.as_deref(), &seen).await,
                        Kind::Socks5 => forward_socks5(stream, &seen).await,
                    };
                });
            }
        });
        Self {
            runtime,
            kind,
            addr,
            seen,
        }
    }

    pub fn url(&self) -> String {
        match self.kind {
            Kind::Http => format!("http://{}", self.addr),
            Kind::Socks5 => format!("socks5://{}", self.addr),
        }
    }

    /// The requests forwarded so far, as (target path, `Proxy-Authorization`), but the TDMRep
    /// file each origin is asked for once per run (as [`Site::hits`] leaves it out).
    fn carried(&self) -> Vec<(String, Option<String>)> {
        let seen = self.seen.lock().unwrap();
        seen.forwarded
            .iter()
            .map(|(target, auth)| {
                let url = url::Url::parse(target).expect("target URL");
                (url.path().to_owned(), auth.clone())
            })
            .filter(|(path, _)| path != TDMREP_PATH)
            .collect()
    }

    /// Forwarded requests by target path.
    pub fn paths(&self) -> BTreeMap<String, u64> {
        let mut paths = BTreeMap::new();
        for (path, _) in self.carried() {
            *paths.entry(path).or_default() += 1;
        }
        paths
    }

    pub fn forwarded(&self) -> usize {
        self.carried().len()
    }

    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.carried().into_iter().map(|(_, auth)| auth).collect()
    }

    pub fn refused(&self) -> u64 {
        self.seen.lock().unwrap().refused
    }
}

/// Reads a request head (through the blank line) from `reader`.
async fn read_head(reader: &mut BufReader<TcpStream>) -> std::io::Result<Vec<String>> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end().to_owned();
        if line.is_empty() {
            return Ok(lines);
        }
        lines.push(line);
    }
}

/// Serves one request of `stream` as a forward proxy: `GET http://host:port/path HTTP/1.1` is
/// sent on to `host:port` in origin form, and the answer streamed back; the connection closes
/// after it.
async fn forward_http(
    stream: TcpStream,
    basic: Option<&str>,
    seen: &Mutex<Seen>,
) -> std::io::Result<()> {
    let mut client = BufReader::new(stream);
    let head = read_head(&mut client).await?;
    let request_line = head.first().cloned().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let header = |name: &str| {
        head[1..].iter().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    let authorization = header("proxy-authorization");
    if let Some(expected) = basic
        && authorization.as_deref() != Some(&format!("Basic {expected}"))
    {
        seen.lock().unwrap().refused += 1;
        client
            .get_mut()
            .write_all(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n\
                  Proxy-Authenticate: Basic realm=\"tests\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await?;
        return client.get_mut().shutdown().await;
    }
    let Ok(url) = url::Url::parse(target) else {
        client
            .get_mut()
            .write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await?;
        return Ok(());
    };
    seen.lock()
        .unwrap()
        .forwarded
        .push((target.to_owned(), authorization));
    let origin = format!(
        "{}:{}",
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or(80)
    );
    let mut upstream = TcpStream::connect(origin).await?;
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let mut out = format!("{method} {path} HTTP/1.1\r\n");
    for line in &head[1..] {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if !name.starts_with("proxy-") && name != "connection" && name != "keep-alive" {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    upstream.write_all(out.as_bytes()).await?;
    let length: u64 = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = (&mut client).take(length);
    tokio::io::copy(&mut body, &mut upstream).await?;
    tokio::io::copy(&mut upstream, client.get_mut()).await?;
    client.get_mut().shutdown().await
}

/// Serves one SOCKS5 connection: no authentication, `CONNECT` to an IPv4 address or a name,
/// then bytes both ways. The target is counted as `socks://host:port/`.
async fn forward_socks5(mut stream: TcpStream, seen: &Mutex<Seen>) -> std::io::Result<()> {
    let mut greeting = [0u8; 2];
    stream.read_exact(&mut greeting).await?;
    let mut methods = vec![0u8; usize::from(greeting[1])];
    stream.read_exact(&mut methods).await?;
    stream.write_all(&[5, 0]).await?;
    let mut request = [0u8; 4];
    stream.read_exact(&mut request).await?;
    let host = match request[3] {
        1 => {
            let mut ip = [0u8; 4];
            stream.read_exact(&mut ip).await?;
            std::net::Ipv4Addr::from(ip).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            stream.read_exact(&mut len).await?;
            let mut name = vec![0u8; usize::from(len[0])];
            stream.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        _ => return Err(std::io::ErrorKind::Unsupported.into()),
    };
    let mut port = [0u8; 2];
    stream.read_exact(&mut port).await?;
    let port = u16::from_be_bytes(port);
    let mut upstream = TcpStream::connect((host.as_str(), port)).await?;
    stream.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
    seen.lock()
        .unwrap()
        .forwarded
        .push((format!("socks://{host}:{port}/"), None));
    tokio::io::copy_bidirectional(&mut stream, &mut upstream).await?;
    Ok(())
}

/// A 240x180 picture of 12x9 blocks of colours drawn from `seed`: pictures of other seeds
/// share no structure, so their perceptual hashes are far apart.
pub fn blocks(seed: u64) -> image::RgbImage {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8
    };
    let colours: Vec<[u8; 3]> = (0..12 * 9).map(|_| [next(), next(), next()]).collect();
    image::RgbImage::from_fn(240, 180, |x, y| {
        image::Rgb(colours[(y / 20 * 12 + x / 20) as usize])
    })
}

/// Writes a picture into `root` for each seed, `{seed}.jpg` (240x180), and a copy of it scaled
/// to half its size and re-encoded as a PNG, `{seed}-small.png`. The paths: every picture,
/// then every copy, so that a copy is always stored after its picture.
pub fn pictures_and_copies(root: &Path, seeds: impl IntoIterator<Item = u64>) -> Vec<String> {
    let encode = |picture: &image::RgbImage, format| {
        let mut bytes = std::io::Cursor::new(Vec::new());
        picture.write_to(&mut bytes, format).expect("encoded");
        bytes.into_inner()
    };
    let (mut pictures, mut copies) = (Vec::new(), Vec::new());
    for seed in seeds {
        let picture = blocks(seed);
        let copy =
            image::imageops::resize(&picture, 120, 90, image::imageops::FilterType::Triangle);
        let jpeg = encode(&picture, image::ImageFormat::Jpeg);
        std::fs::write(root.join(format!("{seed}.jpg")), jpeg).expect("picture written");
        let png = encode(&copy, image::ImageFormat::Png);
        std::fs::write(root.join(format!("{seed}-small.png")), png).expect("copy written");
        pictures.push(format!("/{seed}.jpg"));
        copies.push(format!("/{seed}-small.png"));
    }
    pictures.extend(copies);
    pictures
}

/// `origin` joined with `path`.
pub fn url(origin: &str, path: &str) -> url::Url {
    url::Url::parse(&format!("{origin}{path}")).unwrap()
}

/// Values of `attribute` on elements matching `selector` in a rendered page.
pub fn attribute_values(
    snapshot: &scrape::page::PageSnapshot,
    selector: &str,
    attribute: &str,
) -> BTreeSet<String> {
    let document = scraper::Html::parse_document(&snapshot.html);
    let selector = scraper::Selector::parse(selector).unwrap();
    document
        .select(&selector)
        .filter_map(|e| e.value().attr(attribute).map(str::to_owned))
        .collect()
}

/// Elements matching `selector` in a rendered page.
pub fn count(snapshot: &scrape::page::PageSnapshot, selector: &str) -> usize {
    let document = scraper::Html::parse_document(&snapshot.html);
    document
        .select(&scraper::Selector::parse(selector).unwrap())
        .count()
}

/// Serves `pages` (name, HTML) from a temporary folder with the demo server, whose `/img/`
/// answers generated images.
pub async fn pages_site(pages: &[(&str, &str)]) -> (tempfile::TempDir, scrape::demo::DemoSite) {
    let root = tempfile::tempdir().unwrap();
    for (name, html) in pages {
        let path = root.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, html).unwrap();
    }
    let site = scrape::demo::DemoSite::start(root.path(), 0).await.unwrap();
    (root, site)
}
