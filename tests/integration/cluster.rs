//! Many workers of one job over one Redis (`scrape worker`): the same result as one process,
//! nothing lost when workers or Redis die, poison items dead-lettered, per-host limits held
//! over all workers, idempotent enqueue. A real `redis-server` runs on a free loopback port.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use sha2::Digest;
use tempfile::TempDir;

use crate::cursor;
use crate::support::{
    BROWSER_PATIENCE, Background, PATIENCE, ServerRuntime, Site, assert_refused,
    chromium_available, manifest, manifest_hashes, pictures_and_copies, run, scrape, stored_files,
    text, wait_until,
};

/// A `redis-server` of the test's own on `127.0.0.1`, with its append-only file fsynced on
/// every write, so a kill loses nothing it acknowledged.
struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts one in `dir`; `None` (the test skipped, with its reason) when redis-server is not
    /// installed, but with `CI` set that is a failure.
    fn start(test: &str, dir: &Path) -> Option<Self> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            let reason =
                "redis-server is not installed (scripts/setup.sh installs Debian's redis-server)";
            assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
            eprintln!("skipping {test}: {reason}");
            return None;
        }
        let mut server = Self {
            child: None,
            port: 0,
            dir: dir.to_owned(),
        };
        server.launch();
        Some(server)
    }

    /// Starts redis-server on a free port (the port it had, after a kill), data in `dir`.
    fn launch(&mut self) {
        for _ in 0..20 {
            let port = match self.port {
                0 => std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .expect("a free port")
                    .port(),
                port => port,
            };
            let child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--appendonly", "yes", "--appendfsync", "always"])
                .args(["--save", "", "--protected-mode", "no"])
                .arg("--dir")
                .arg(&self.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts");
            self.child = Some(child);
            let mut ready = false;
            let mut ended = false;
            wait_until("redis-server to answer", PATIENCE, || {
                ended = self
                    .child
                    .as_mut()
                    .is_some_and(|c| c.try_wait().ok().flatten().is_some());
                ready = !ended && self.ping(port);
                ended || ready
            });
            if ready {
                self.port = port;
                return;
            }
            // The port was taken between finding it and binding it: another one.
        }
        panic!("redis-server did not start");
    }

    fn ping(&self, port: u16) -> bool {
        Command::new("redis-cli")
            .args(["-p", &port.to_string(), "PING"])
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"PONG"))
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// `redis-cli COMMAND...`'s output.
    fn cli(&self, args: &[&str]) -> String {
        let output = run(Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// A counter of job `job` (0 while it is not set).
    fn counter(&self, job: &str, field: &str) -> u64 {
        self.cli(&["HGET", &format!("scrape:{{{job}}}:counters"), field])
            .parse()
            .unwrap_or(0)
    }

    /// Image URLs whose effect job `job` has committed.
    fn committed_images(&self, job: &str) -> BTreeSet<String> {
        self.cli(&["HKEYS", &format!("scrape:{{{job}}}:image-records")])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// SIGKILL, then a start on the same port from the append-only file.
    fn kill_and_restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill redis-server");
            child.wait().expect("redis-server ends");
        }
        self.launch();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Requests a [`ClusterSite`] is answering right now, and the most it answered at once.
#[derive(Default)]
struct InFlight {
    now: AtomicI64,
    most: AtomicI64,
}

/// Counts a request in flight until dropped (also when the client goes away mid-answer).
struct Counted<'a>(&'a InFlight);

impl<'a> Counted<'a> {
    fn new(gauge: &'a InFlight) -> Self {
        let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
        gauge.most.fetch_max(now, Ordering::SeqCst);
        Self(gauge)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An image page `/c1/2` of a [`ClusterSite`] shows besides its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extra {
    Nothing,
    /// `/img/poison.png`, which never answers.
    Poison,
    /// `/img/slow-24x16.png`, answered after [`SLOW`]: longer than a worker's lease.
    Slow,
    /// Nothing more on the page, but the site's first image request is answered 429 with
    /// `Retry-After: 1`.
    Busy,
    /// Page `/c1/2` answers 503 the first time it is asked for, and `/c2/1` always answers 500.
    Flaky,
    /// An image request that finds [`CROWDED`] others in flight is answered 429 with
    /// `Retry-After: 1`.
    Crowded,
}

/// How many image requests at once [`Extra::Crowded`] takes.
const CROWDED: i64 = 4;

/// How long `/img/slow-24x16.png` takes.
const SLOW: Duration = Duration::from_secs(3);

/// What a [`ClusterSite`] serves and saw.
struct SiteState {
    chains: usize,
    pages: usize,
    images: usize,
    /// Every response waits this long first.
    delay: Duration,
    /// What page `/c1/2` shows besides.
    extra: Extra,
    hits: Mutex<BTreeMap<String, u64>>,
    pages_in_flight: InFlight,
    images_in_flight: InFlight,
    poison_hits: AtomicU64,
    /// When the 429 of [`Extra::Busy`] was sent.
    busy_at: Mutex<Option<Instant>>,
    /// The 429s of [`Extra::Crowded`].
    crowded: AtomicU64,
    /// When each image request arrived.
    image_arrivals: Mutex<Vec<Instant>>,
}

/// A site of `chains` chains of `pages` pages (`/c{chain}/{n}`, linked by `a.next`), each
/// with `images` images of its own, one image every page shows (`/img/logo-16x16.png`) and
/// one whose bytes every page shares under another URL (`/img/same-24x16.png?on=...`).
struct ClusterSite {
    state: Arc<SiteState>,
    origin: String,
    _runtime: ServerRuntime,
}

impl ClusterSite {
    fn serve(chains: usize, pages: usize, images: usize, delay: Duration, extra: Extra) -> Self {
        let state = Arc::new(SiteState {
            chains,
            pages,
            images,
            delay,
            extra,
            hits: Mutex::new(BTreeMap::new()),
            pages_in_flight: InFlight::default(),
            images_in_flight: InFlight::default(),
            poison_hits: AtomicU64::new(0),
            busy_at: Mutex::new(None),
            crowded: AtomicU64::new(0),
            image_arrivals: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&state));
        let (runtime, origin) = ServerRuntime::serve(2, app);
        Self {
            state,
            origin,
            _runtime: runtime,
        }
    }

    /// A profile of this site's chains in `dir`, with `extra` TOML at the end.
    fn profile(&self, dir: &Path, render: &str, extra: &str) -> PathBuf {
        let starts: Vec<String> = (1..=self.state.chains)
            .map(|c| format!("\"{}/c{c}/1\"", self.origin))
            .collect();
        let path = dir.join("cluster.toml");
        std::fs::write(
            &path,
            format!(
                "name = \"cluster\"\nstart = [{}]\nrender = \"{render}\"\n\n\
                 [pagination]\nkind = \"next_link\"\nselector = \"a.next\"\n\n\
                 [[images]]\nname = \"photos\"\nselector = \"main img\"\n\n\
                 [download]\nout = \"out\"\n{retries}{extra}\n",
                starts.join(", "),
                retries = if extra.contains("retries") {
                    ""
                } else {
                    "retries = 1\n"
                },
            ),
        )
        .expect("profile written");
        path
    }

    fn image_hits(&self) -> BTreeMap<String, u64> {
        let hits = self.state.hits.lock().expect("hits").clone();
        hits.into_iter()
            .filter(|(p, _)| p.starts_with("/img/"))
            .collect()
    }

    /// Distinct image URLs (paths with queries) the site shows.
    fn image_urls(&self) -> usize {
        let s = &self.state;
        s.chains * s.pages * (s.images + 1)
            + 1
            + usize::from(matches!(s.extra, Extra::Poison | Extra::Slow))
    }
}

async fn answer(
    axum::extract::State(site): axum::extract::State<Arc<SiteState>>,
    uri: axum::http::Uri,
) -> Response {
    let path = uri.path().to_owned();
    let full = uri
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_owned());
    if let Ok(mut hits) = site.hits.lock() {
        *hits.entry(full).or_default() += 1;
    }
    let image = path.starts_with("/img/");
    if image && let Ok(mut arrivals) = site.image_arrivals.lock() {
        arrivals.push(Instant::now());
    }
    // The TDMRep file each worker asks an origin for once, before its first image, is neither
    // a page nor an image, and is asked outside the host's turns.
    let gauge = if image {
        Some(&site.images_in_flight)
    } else {
        (path != crate::support::TDMREP_PATH).then_some(&site.pages_in_flight)
    };
    let _counted = gauge.map(Counted::new);
    if site.extra == Extra::Crowded
        && image
        && site.images_in_flight.now.load(Ordering::SeqCst) > CROWDED
    {
        site.crowded.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response();
    }
    tokio::time::sleep(site.delay).await;
    if path == "/img/poison.png" {
        site.poison_hits.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>().await;
    }
    if path == "/img/slow-24x16.png" {
        tokio::time::sleep(SLOW).await;
    }
    if site.extra == Extra::Flaky {
        let asked = site
            .hits
            .lock()
            .map_or(0, |h| h.get(&path).copied().unwrap_or(0));
        match path.as_str() {
            "/c1/2" if asked == 1 => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
            "/c2/1" => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            _ => {}
        }
    }
    if image
        && site.extra == Extra::Busy
        && let Ok(mut busy) = site.busy_at.lock()
        && busy.is_none()
    {
        *busy = Some(Instant::now());
        return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response();
    }
    if let Some(name) = path.strip_prefix("/img/") {
        let name = name.to_owned();
        let generated = tokio::task::spawn_blocking(move || scrape::demo::image_for(&name))
            .await
            .ok()
            .flatten();
        return match generated {
            Some((format, bytes)) => {
                ([(header::CONTENT_TYPE, format.content_type())], bytes).into_response()
            }
            None => StatusCode::NOT_FOUND.into_response(),
        };
    }
    let page = path
        .strip_prefix("/c")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(c, n)| Some((c.parse::<usize>().ok()?, n.parse::<usize>().ok()?)))
        .filter(|(c, n)| (1..=site.chains).contains(c) && (1..=site.pages).contains(n));
    let Some((chain, number)) = page else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut images: String = (1..=site.images)
        .map(|i| format!("<img src=\"/img/c{chain}-p{number}-{i}-24x16.png\">\n"))
        .collect();
    images.push_str("<img src=\"/img/logo-16x16.png\">\n");
    images.push_str(&format!(
        "<img src=\"/img/same-24x16.png?on=c{chain}-p{number}\">\n"
    ));
    match site.extra {
        Extra::Poison if chain == 1 && number == 2 => {
            images.push_str("<img src=\"/img/poison.png\">\n");
        }
        Extra::Slow if chain == 1 && number == 2 => {
            images.push_str("<img src=\"/img/slow-24x16.png\">\n");
        }
        _ => {}
    }
    let next = if number < site.pages {
        format!(
            "<a class=\"next\" href=\"/c{chain}/{}\">next</a>",
            number + 1
        )
    } else {
        String::new()
    };
    Html(format!(
        "<!doctype html><html><body><main>\n{images}</main><nav>{next}</nav></body></html>"
    ))
    .into_response()
}

/// A job's folder: the site, its profile, a Redis, and the shared output folder.
struct Job<S = ClusterSite> {
    dir: TempDir,
    site: S,
    profile: PathBuf,
    redis: RedisServer,
    out: PathBuf,
    /// Variables every run of the binary gets.
    env: Vec<(&'static str, &'static str)>,
}

impl Job {
    fn new(test: &str, site: ClusterSite, extra: &str) -> Option<Self> {
        Self::with(test, site, |dir, site| site.profile(dir, "static", extra))
    }
}

impl<S> Job<S> {
    /// A job of `site`, whose profile `profile` writes into the job's folder.
    fn with(test: &str, site: S, profile: impl FnOnce(&Path, &S) -> PathBuf) -> Option<Self> {
        let dir = TempDir::new().expect("temporary folder");
        let redis_dir = dir.path().join("redis");
        std::fs::create_dir_all(&redis_dir).expect("redis folder");
        let redis = RedisServer::start(test, &redis_dir)?;
        let profile = profile(dir.path(), &site);
        let out = dir.path().join("shared");
        Some(Self {
            dir,
            site,
            profile,
            redis,
            out,
            env: Vec::new(),
        })
    }

    /// The binary, with the job's variables.
    fn scrape(&self) -> Command {
        let mut cmd = scrape();
        cmd.envs(self.env.iter().copied());
        cmd
    }

    fn enqueue(&self) -> String {
        let output = run(self
            .scrape()
            .args(["enqueue", "--redis", &self.redis.url(), "--profile"])
            .arg(&self.profile));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// A worker named `name` in the background (`extra` flags after the usual ones).
    fn worker(&self, name: &str, extra: &[&str]) -> Background {
        let mut cmd = self.scrape();
        cmd.args(["worker", "--redis", &self.redis.url(), "--profile"])
            .arg(&self.profile)
            .arg("--out")
            .arg(&self.out)
            .args(["--name", name])
            .args(extra);
        Background::spawn(&mut cmd, &self.dir.path().join(format!("{name}.stderr")))
    }

    fn export(&self) -> std::process::Output {
        run(scrape()
            .args(["export", "--redis", &self.redis.url(), "--out"])
            .arg(&self.out))
    }

    /// The same profile run by one process into a folder of its own.
    fn one_process_run(&self) -> PathBuf {
        let out = self.dir.path().join("one-process");
        let output = run(self
            .scrape()
            .arg("--profile")
            .arg(&self.profile)
            .args(["--progress", "off", "--out"])
            .arg(&out));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        out
    }

    /// Items enqueued and not settled yet, from one read of the counters.
    fn pending(&self) -> u64 {
        let all = self.redis.cli(&["HGETALL", "scrape:{cluster}:counters"]);
        let lines: Vec<&str> = all.lines().collect();
        let counters: BTreeMap<&str, u64> = lines
            .chunks(2)
            .filter_map(|pair| Some((pair[0], pair.get(1)?.parse().ok()?)))
            .collect();
        let get = |field| counters.get(field).copied().unwrap_or(0);
        let settled: u64 = [
            "pages_done",
            "pages_failed",
            "images_stored",
            "images_duplicate",
            "images_failed",
            "dead",
        ]
        .into_iter()
        .map(get)
        .sum();
        (get("enqueued_pages") + get("enqueued_images")).saturating_sub(settled)
    }

    fn images_stored(&self) -> u64 {
        self.redis.counter("cluster", "images_stored")
    }

    /// Entries in the job's work stream `stream` (`pages`, `images`).
    fn stream_len(&self, stream: &str) -> u64 {
        self.redis
            .cli(&["XLEN", &format!("scrape:{{cluster}}:{stream}")])
            .parse()
            .expect("a stream length")
    }

    /// Entries of the job's work stream `stream` delivered and not acknowledged.
    fn stream_pending(&self, stream: &str) -> u64 {
        let summary = self.redis.cli(&[
            "XPENDING",
            &format!("scrape:{{cluster}}:{stream}"),
            "workers",
        ]);
        summary
            .lines()
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a pending count")
    }
}

/// Waits for `workers` to end on their own with exit 0.
fn all_finish(workers: Vec<Background>) {
    for worker in workers {
        let (status, stderr) = worker.wait(PATIENCE * 2);
        assert_eq!(status.code(), Some(0), "a worker failed:\n{stderr}");
    }
}

/// Asserts the shared folder holds what the one-process run stored: the same URLs with the
/// same bytes, the same files, as many duplicates, and no temporary file left.
fn assert_same_as_one_process<S>(job: &Job<S>, one: &Path) {
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(
        manifest_hashes(&job.out),
        manifest_hashes(one),
        "URLs and bytes"
    );
    assert_eq!(stored_files(&job.out), stored_files(one), "stored files");
    let duplicates = |out: &Path| {
        manifest(out)
            .iter()
            .filter(|l| l["duplicate"] == true)
            .count()
    };
    assert_eq!(duplicates(&job.out), duplicates(one), "duplicates");
    let urls: Vec<String> = manifest(&job.out)
        .iter()
        .map(|l| l["url"].as_str().unwrap_or_default().to_owned())
        .collect();
    let unique: BTreeSet<&String> = urls.iter().collect();
    assert_eq!(unique.len(), urls.len(), "a URL listed twice");
    let temporary: Vec<PathBuf> = crate::support::files_under(&job.out)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert_eq!(temporary, Vec::<PathBuf>::new(), "temporary files left");
}

#[test]
fn three_workers_store_what_one_process_stores() {
    let site = ClusterSite::serve(3, 4, 5, Duration::ZERO, Extra::Nothing);
    let Some(job) = Job::new("three_workers_store_what_one_process_stores", site, "") else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    let workers = ["w1", "w2", "w3"].map(|n| job.worker(n, &[])).into();
    all_finish(workers);
    assert_same_as_one_process(&job, &one);
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());

    let status = run(scrape().args(["status", "--redis", &job.redis.url(), "--json"]));
    assert_eq!(status.status.code(), Some(0), "{}", text(&status));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(status["finished"], true, "{status}");
    assert_eq!(status["pages_done"], 12, "{status}");
    assert_eq!(status["pending"], 0, "{status}");
    let by_workers: u64 = status["workers"]
        .as_object()
        .expect("workers")
        .values()
        .map(|w| w["pages_done"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(by_workers, 12, "{status}");
}

#[test]
fn workers_resize_what_they_store_as_one_process_does() {
    let site = ClusterSite::serve(2, 3, 2, Duration::ZERO, Extra::Nothing);
    let resize = "\n[download.resize]\nsize = 8\nmode = \"center_crop\"\nformat = \"png\"\n";
    let Some(job) = Job::new(
        "workers_resize_what_they_store_as_one_process_does",
        site,
        resize,
    ) else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    all_finish(["w1", "w2"].map(|n| job.worker(n, &[])).into());

    assert_same_as_one_process(&job, &one);
    let lines = manifest(&job.out);
    assert_eq!(lines.len(), job.site.image_urls());
    for line in &lines {
        let path = job.out.join(line["path"].as_str().expect("path"));
        let bytes = std::fs::read(&path).expect("a stored picture");
        assert_eq!(
            line["sha256"],
            hex::encode(sha2::Sha256::digest(&bytes)),
            "{line}"
        );
        let picture = image::load_from_memory(&bytes).expect("a stored picture decodes");
        assert_eq!((picture.width(), picture.height()), (8, 8), "{line}");
        assert!(line["original_width"].as_u64() > Some(8), "{line}");
        assert_ne!(line["original_sha256"], line["sha256"], "{line}");
    }
    // The picture every page shows under its own URL: one file, the other URLs duplicates.
    let shared: Vec<_> = lines
        .iter()
        .filter(|l| l["url"].as_str().is_some_and(|u| u.contains("/img/same-")))
        .collect();
    assert!(shared.len() > 1, "{shared:?}");
    assert!(
        shared.iter().all(|l| l["path"] == shared[0]["path"]),
        "{shared:?}"
    );
    assert_eq!(
        shared.iter().filter(|l| l["duplicate"] != true).count(),
        1,
        "{shared:?}"
    );
}

#[test]
fn export_with_a_parquet_profile_writes_a_row_per_image_the_workers_stored() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    let site = ClusterSite::serve(2, 3, 2, Duration::ZERO, Extra::Nothing);
    let test = "export_with_a_parquet_profile_writes_a_row_per_image_the_workers_stored";
    let Some(job) = Job::new(test, site, "format = \"parquet\"\nparquet_images = true") else {
        return;
    };
    job.enqueue();
    all_finish(["w1", "w2"].map(|n| job.worker(n, &[])).into());

    let output = run(scrape()
        .args(["export", "--redis", &job.redis.url(), "--out"])
        .arg(&job.out)
        .arg("--profile")
        .arg(&job.profile));

    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let reader = SerializedFileReader::new(
        std::fs::File::open(job.out.join("images.parquet")).expect("images.parquet"),
    )
    .expect("a Parquet file");
    let mut rows = BTreeMap::new();
    for row in reader.get_row_iter(None).expect("rows") {
        let row = row.expect("a row");
        rows.insert(row.get_string(0).expect("url").clone(), row);
    }
    let lines = manifest(&job.out);
    assert_eq!(lines.len(), job.site.image_urls());
    assert_eq!(rows.len(), lines.len(), "a row per image");
    for line in &lines {
        let row = &rows[line["url"].as_str().expect("url")];
        let status = if line["duplicate"] == true {
            "duplicate"
        } else {
            "stored"
        };
        assert_eq!(row.get_string(1).expect("status"), status, "{line}");
        assert_eq!(
            row.get_string(2).expect("path"),
            line["path"].as_str().unwrap()
        );
        let image = row.get_bytes(17).expect("image").data();
        assert_eq!(
            hex::encode(sha2::Sha256::digest(image)),
            line["sha256"].as_str().unwrap(),
            "the image column holds the stored bytes"
        );
    }
}

#[test]
fn killed_workers_lose_nothing_and_fetch_nothing_again_after_its_commit() {
    let site = ClusterSite::serve(4, 5, 6, Duration::from_millis(20), Extra::Nothing);
    let test = "killed_workers_lose_nothing_and_fetch_nothing_again_after_its_commit";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    let one = job.one_process_run();
    let before = job.site.image_hits();
    // The part file of an entry committed long ago, left by a worker killed then.
    let stale = job.out.join(".scrape/parts/w0/1-0.part");
    std::fs::create_dir_all(stale.parent().expect("folder")).expect("parts folder");
    std::fs::write(&stale, b"half an image").expect("part written");
    job.enqueue();
    let flags = ["--lease", "1s", "--concurrency", "4"];
    let mut first = job.worker("w1", &flags);
    let mut second = job.worker("w2", &flags);
    let third = job.worker("w3", &flags);
    let mut kills = Vec::new();
    for (victim, stored) in [(&mut first, 15), (&mut second, 45)] {
        victim.wait_for("images to be stored", PATIENCE, || {
            job.images_stored() >= stored
        });
        victim.child.kill().expect("kill");
        victim.child.wait().expect("killed worker ends");
        kills.push((job.redis.committed_images("cluster"), job.site.image_hits()));
    }
    drop((first, second));
    let fourth = job.worker(
        "w4",
        &[
            &flags[..],
            &["--progress", "plain", "--progress-interval", "200ms"],
        ]
        .concat(),
    );
    let mut logs = String::new();
    for worker in [third, fourth] {
        let (status, stderr) = worker.wait(PATIENCE * 2);
        assert_eq!(status.code(), Some(0), "a worker failed:\n{stderr}");
        logs.push_str(&stderr);
    }
    // The workers left say what they took over, and the one asked shows the job's progress.
    assert!(
        logs.contains("took over entries of a worker that stopped answering"),
        "{logs}"
    );
    assert!(
        logs.contains("pages ") && logs.contains(" | images "),
        "{logs}"
    );

    assert_same_as_one_process(&job, &one);
    let after = job.site.image_hits();
    let path = |url: &str| url.strip_prefix(&job.site.origin).unwrap_or(url).to_owned();
    for (committed, hits) in &kills {
        for url in committed {
            let p = path(url);
            assert_eq!(
                after.get(&p),
                hits.get(&p),
                "`{p}` was fetched again after its commit"
            );
        }
    }
    let again: u64 = after
        .iter()
        .map(|(p, n)| n - before.get(p).copied().unwrap_or(0))
        .map(|n| n.saturating_sub(1))
        .sum();
    // Only what the killed workers had in flight (4 transfers each) is fetched again.
    assert!(again <= 8, "{again} images fetched more than once");
    // Part files of killed workers went once their entries were committed by others.
    assert_eq!(crate::support::part_files(&job.out), Vec::<PathBuf>::new());
}

/// Every member of every finished shard in `out`: name -> SHA-256 of its bytes, with how many
/// times a name was found; each tar must read whole, to its end blocks.
fn shard_members(out: &Path) -> BTreeMap<String, (String, usize)> {
    let mut members = BTreeMap::new();
    for path in crate::support::files_under(out) {
        if path.extension().is_none_or(|e| e != "tar") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("a shard");
        assert_eq!(bytes.len() % 512, 0, "{} is whole blocks", path.display());
        assert!(
            bytes.ends_with(&[0; 1024]),
            "{} ends with its end blocks",
            path.display()
        );
        let shard = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut archive = tar::Archive::new(bytes.as_slice());
        for entry in archive.entries().expect("a tar") {
            let mut entry = entry.expect("a whole member");
            let name = format!("{shard}/{}", entry.path().unwrap().display());
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut body).expect("a member's bytes");
            let sha = hex::encode(sha2::Sha256::digest(&body));
            members.entry(name).or_insert((sha, 0)).1 += 1;
        }
    }
    members
}

#[test]
fn workers_write_shards_of_their_own_and_a_killed_one_loses_no_sample() {
    let site = ClusterSite::serve(4, 5, 6, Duration::from_millis(20), Extra::Nothing);
    let test = "workers_write_shards_of_their_own_and_a_killed_one_loses_no_sample";
    let Some(job) = Job::new(test, site, "format = \"webdataset\"\nshard_size = 7") else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    let flags = ["--lease", "1s", "--concurrency", "4"];
    let mut first = job.worker("w1", &flags);
    let second = job.worker("w2", &flags);
    first.wait_for("images to be stored", PATIENCE, || {
        job.images_stored() >= 20
    });
    first.child.kill().expect("kill");
    first.child.wait().expect("killed worker ends");
    let third = job.worker("w3", &flags);
    all_finish(vec![second, third]);
    // The killed worker's shard is finished by whoever finds it once no worker owns it.
    let owned_by_the_killed_worker = || {
        let keys = job.redis.cli(&["KEYS", "scrape:{cluster}:shard_owner:*"]);
        keys.lines()
            .any(|key| job.redis.cli(&["GET", key.trim()]).trim() == "w1")
    };
    crate::support::wait_until("the killed worker's lease to lapse", PATIENCE, || {
        !owned_by_the_killed_worker()
    });
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));

    // The same images with the same bytes as one process, each URL once.
    assert_eq!(
        manifest_hashes(&job.out),
        manifest_hashes(&one),
        "URLs and bytes"
    );
    let lines = manifest(&job.out);
    assert_eq!(lines.len(), job.site.image_urls());
    let members = shard_members(&job.out);
    // Every stored image is one sample of a finished shard, with its bytes and its JSON.
    let stored: Vec<&serde_json::Value> = lines.iter().filter(|l| l["duplicate"] != true).collect();
    for line in &stored {
        let path = line["path"].as_str().expect("path");
        let (sha, times) = members
            .get(path)
            .unwrap_or_else(|| panic!("{path} in a shard"));
        assert_eq!(
            (sha.as_str(), *times),
            (line["sha256"].as_str().unwrap(), 1),
            "{line}"
        );
        let json = format!("{}.json", path.rsplit_once('.').unwrap().0);
        assert!(members.contains_key(&json), "{json} beside {path}");
    }
    // No other sample: nothing a killed worker appended without committing, no duplicate.
    let images = members.keys().filter(|m| !m.ends_with(".json")).count();
    assert_eq!(images, stored.len(), "samples in the shards");
    let bytes: BTreeSet<&str> = stored
        .iter()
        .map(|l| l["sha256"].as_str().unwrap())
        .collect();
    assert_eq!(bytes.len(), stored.len(), "the same bytes stored twice");
    // Duplicates point at the sample that holds their bytes.
    for line in lines.iter().filter(|l| l["duplicate"] == true) {
        let path = line["path"].as_str().expect("path");
        assert_eq!(members[path].0, line["sha256"].as_str().unwrap(), "{line}");
    }
    let temporary: Vec<PathBuf> = crate::support::files_under(&job.out)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert_eq!(temporary, Vec::<PathBuf>::new(), "temporary files left");
}

#[test]
fn a_redis_killed_and_restarted_mid_job_loses_nothing() {
    let site = ClusterSite::serve(3, 5, 6, Duration::from_millis(20), Extra::Nothing);
    let test = "a_redis_killed_and_restarted_mid_job_loses_nothing";
    let Some(mut job) = Job::new(test, site, "") else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    let mut workers: Vec<Background> = ["w1", "w2", "w3"]
        .map(|n| job.worker(n, &["--lease", "2s"]))
        .into();
    workers[0].wait_for("images to be stored", PATIENCE, || {
        job.images_stored() >= 20
    });
    let committed = job.redis.committed_images("cluster");
    job.redis.kill_and_restart();
    let kept = job.redis.committed_images("cluster");
    assert!(
        committed.is_subset(&kept),
        "commits lost in the restart: {:?}",
        committed.difference(&kept).collect::<Vec<_>>()
    );
    all_finish(workers);
    assert_same_as_one_process(&job, &one);
}

#[test]
fn an_item_its_workers_keep_dying_on_goes_to_the_dead_letter_stream() {
    let site = ClusterSite::serve(2, 3, 2, Duration::ZERO, Extra::Poison);
    let test = "an_item_its_workers_keep_dying_on_goes_to_the_dead_letter_stream";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    job.enqueue();
    let flags = ["--lease", "1s", "--max-deliveries", "2"];
    for (name, hits) in [("w1", 1), ("w2", 2)] {
        let mut worker = job.worker(name, &flags);
        // Killed on the poison alone: everything else it took is settled first.
        worker.wait_for("the poison image to be all that is left", PATIENCE, || {
            job.site.state.poison_hits.load(Ordering::SeqCst) >= hits && job.pending() == 1
        });
        worker.kill();
    }
    all_finish(vec![job.worker("w3", &flags)]);
    assert_eq!(job.site.state.poison_hits.load(Ordering::SeqCst), 2);
    assert_eq!(job.redis.counter("cluster", "dead"), 1);

    let status = run(scrape().args(["status", "--redis", &job.redis.url()]));
    assert_eq!(status.status.code(), Some(0), "{}", text(&status));
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("dead       1"), "{status}");
    assert!(status.contains("poison.png"), "{status}");

    let output = job.export();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let failures = std::fs::read_to_string(job.out.join("failures.jsonl")).expect("failures");
    let failures = crate::support::json_lines(&failures);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["class"], "dead_letter");
    assert_eq!(
        failures[0]["url"],
        format!("{}/img/poison.png", job.site.origin)
    );
    assert_eq!(manifest(&job.out).len(), job.site.image_urls() - 1);

    // `scrape retry --redis` puts the dead letter back for the workers, once however often it
    // is asked, and only when its class is asked for.
    let url = job.redis.url();
    let retry = |extra: &[&str]| {
        let output = run(scrape().args(["retry", "--redis", &url]).args(extra));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        text(&output)
    };
    let other = retry(&["--class", "http_404"]);
    assert!(
        other.contains("0 dead letter(s) and 0 failed image(s)"),
        "{other}"
    );
    let first = retry(&["--class", "dead_letter"]);
    assert!(
        first.contains("1 dead letter(s) and 0 failed image(s) queued again"),
        "{first}"
    );
    let again = retry(&[]);
    assert!(again.contains("0 dead letter(s)"), "{again}");
    assert_eq!(job.redis.counter("cluster", "dead"), 0);
    assert_eq!(job.pending(), 1);
    let mut worker = job.worker("w4", &flags);
    worker.wait_for("the poison image to be asked for again", PATIENCE, || {
        job.site.state.poison_hits.load(Ordering::SeqCst) >= 3
    });
    worker.kill();
}

#[test]
fn workers_together_never_exceed_the_per_host_limits() {
    let site = ClusterSite::serve(6, 3, 8, Duration::from_millis(30), Extra::Nothing);
    let extra = "per_host = 3\nadaptive = false\n\n[crawl]\nper_host = 2\n";
    let Some(job) = Job::new(
        "workers_together_never_exceed_the_per_host_limits",
        site,
        extra,
    ) else {
        return;
    };
    job.enqueue();
    all_finish(["w1", "w2", "w3"].map(|n| job.worker(n, &[])).into());
    let state = &job.site.state;
    let images = state.images_in_flight.most.load(Ordering::SeqCst);
    let pages = state.pages_in_flight.most.load(Ordering::SeqCst);
    assert!(images <= 3, "{images} image requests at once");
    assert!(pages <= 2, "{pages} page requests at once");
    // Not vacuous: the workers did work side by side up to the limit.
    assert_eq!(images, 3, "the image limit was never reached");
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
}

#[test]
fn a_repeated_enqueue_and_an_image_on_every_page_make_one_item_each() {
    let site = ClusterSite::serve(3, 2, 1, Duration::ZERO, Extra::Nothing);
    let test = "a_repeated_enqueue_and_an_image_on_every_page_make_one_item_each";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    let first = job.enqueue();
    let second = job.enqueue();
    assert!(first.contains("3 of 3 start pages enqueued"), "{first}");
    assert!(second.contains("0 of 3 start pages enqueued"), "{second}");
    assert_eq!(job.redis.cli(&["XLEN", "scrape:{cluster}:pages"]), "3");
    all_finish(vec![job.worker("w1", &[]), job.worker("w2", &[])]);
    assert_eq!(job.redis.counter("cluster", "enqueued_pages"), 6);
    // The logo every page shows is one item: six pages, one image of their own and one shared
    // by bytes each, and the logo once.
    assert_eq!(job.redis.counter("cluster", "enqueued_images"), 13);
    assert_eq!(job.redis.cli(&["SCARD", "scrape:{cluster}:seen"]), "19");
    // Done, they are trimmed from their streams.
    assert_eq!(job.stream_len("pages") + job.stream_len("images"), 0);
    let logo = job.site.image_hits().get("/img/logo-16x16.png").copied();
    assert_eq!(logo, Some(1));
}

#[test]
fn a_live_worker_keeps_a_task_longer_than_its_lease() {
    let site = ClusterSite::serve(2, 2, 2, Duration::ZERO, Extra::Slow);
    let test = "a_live_worker_keeps_a_task_longer_than_its_lease";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    job.enqueue();
    // The slow image takes three leases; the other worker waits all along to take it over.
    let flags = ["--lease", "1s"];
    all_finish(vec![job.worker("w1", &flags), job.worker("w2", &flags)]);
    let hits = job.site.image_hits();
    assert_eq!(hits.get("/img/slow-24x16.png"), Some(&1), "{hits:?}");
    assert_eq!(job.redis.counter("cluster", "dead"), 0);
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
}

#[test]
fn a_429_holds_every_worker_back_from_its_host() {
    let site = ClusterSite::serve(4, 2, 5, Duration::ZERO, Extra::Busy);
    let Some(job) = Job::new("a_429_holds_every_worker_back_from_its_host", site, "") else {
        return;
    };
    job.enqueue();
    all_finish(["w1", "w2", "w3"].map(|n| job.worker(n, &[])).into());
    let state = &job.site.state;
    let busy = state
        .busy_at
        .lock()
        .expect("busy")
        .expect("the 429 was sent");
    let arrivals = state.image_arrivals.lock().expect("arrivals").clone();
    // Requests sent before the 429 reached its worker may still arrive just after it (on a
    // loaded machine, those granted a turn just before, a handful, may arrive later still);
    // from then on nobody asks the host for the second its Retry-After says, where an unheld
    // host gets hundreds.
    let held = (busy + Duration::from_millis(300))..(busy + Duration::from_millis(900));
    let during: Vec<Duration> = arrivals
        .iter()
        .filter(|t| held.contains(*t))
        .map(|t| *t - busy)
        .collect();
    assert!(
        during.len() <= 6,
        "image requests while the host was held back, after the 429: {during:?}"
    );
    assert!(
        arrivals.iter().any(|t| *t >= held.end),
        "the rest came after"
    );
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
}

#[test]
fn workers_share_one_adaptive_window_per_host_and_soon_keep_within_what_it_takes() {
    let test = "workers_share_one_adaptive_window_per_host_and_soon_keep_within_what_it_takes";
    let site = ClusterSite::serve(4, 2, 10, Duration::from_millis(100), Extra::Crowded);
    // Allowed 16 at once, the host takes 4: each 429 holds every worker back for a second.
    let extra = "retries = 8\nper_host = 16\nconcurrency = 16";
    let Some(job) = Job::new(test, site, extra) else {
        return;
    };
    job.enqueue();
    all_finish(["w1", "w2", "w3"].map(|n| job.worker(n, &[])).into());

    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(
        manifest(&job.out).len(),
        job.site.image_urls(),
        "nothing lost"
    );
    let refused = job.site.state.crowded.load(Ordering::SeqCst);
    let asked: u64 = job.site.image_hits().values().sum();
    // Each image is asked for once, and again only after a 429.
    assert_eq!(
        asked,
        job.site.image_urls() as u64 + refused,
        "nothing fetched twice"
    );
    // A window that halves on each crowded answer and grows back one request at a time finds
    // the host's limit within a few refusals (about 11 here); a fixed limit of 16 is refused
    // in every burst (about 240, and images lost after 8 retries).
    assert!(
        refused <= 40,
        "{refused} requests refused for crowding the host"
    );
}

#[test]
fn a_worker_killed_while_a_crowded_host_holds_workers_back_loses_nothing() {
    let test = "a_worker_killed_while_a_crowded_host_holds_workers_back_loses_nothing";
    let site = ClusterSite::serve(4, 2, 10, Duration::from_millis(100), Extra::Crowded);
    // Allowed 16 at once, the host takes 4, and one of three workers is killed mid-job.
    let extra = "retries = 8\nper_host = 16\nconcurrency = 16";
    let Some(job) = Job::new(test, site, extra) else {
        return;
    };
    job.enqueue();
    let flags = ["--lease", "1s"];
    let mut first = job.worker("w1", &flags);
    let others = vec![job.worker("w2", &flags), job.worker("w3", &flags)];
    first.wait_for("images to be stored", PATIENCE, || {
        job.images_stored() >= 15
    });
    first.child.kill().expect("kill");
    first.child.wait().expect("killed worker ends");
    let (committed, hits_then) = (job.redis.committed_images("cluster"), job.site.image_hits());
    all_finish(others);

    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let urls = job.site.image_urls() as u64;
    assert_eq!(manifest(&job.out).len() as u64, urls, "nothing lost");
    let after = job.site.image_hits();
    for url in &committed {
        let path = url.strip_prefix(&job.site.origin).unwrap_or(url);
        assert_eq!(
            after.get(path),
            hits_then.get(path),
            "`{path}` was fetched again after its commit"
        );
    }
    let refused = job.site.state.crowded.load(Ordering::SeqCst);
    let asked: u64 = after.values().sum();
    // Asked once each, again after a 429, and again for what the killed worker had in flight
    // (its share of the host's window).
    let again = asked - urls - refused;
    assert!(again <= CROWDED as u64, "{again} images fetched twice");
    assert!(
        refused <= 40,
        "{refused} requests refused for crowding the host"
    );
}

/// A job of the `json_cursor` fixture API (`items` items, three per page, newest first) over
/// Redis, its token in the workers' environment.
fn cursor_job(test: &str, items: u64) -> Option<Job<cursor::Server>> {
    let server = cursor::Server::start(items);
    let mut job = Job::with(test, server, |dir, server| {
        let path = dir.join("api.toml");
        let text = format!(
            "name = \"cluster\"\nstart = [\"{}/\"]\n{}",
            server.origin,
            cursor::REST
        );
        std::fs::write(&path, text).expect("profile written");
        path
    })?;
    job.env.push((cursor::TOKEN_VAR, cursor::TOKEN));
    Some(job)
}

/// The image file names the job's manifest lists, with their SHA-256.
fn stored_by_name<S>(job: &Job<S>) -> BTreeMap<String, String> {
    manifest_hashes(&job.out)
        .into_iter()
        .map(|(url, sha)| (url.rsplit('/').next().unwrap_or_default().to_owned(), sha))
        .collect()
}

#[test]
fn a_json_cursor_chain_over_three_workers_stores_what_one_process_stores() {
    let test = "a_json_cursor_chain_over_three_workers_stores_what_one_process_stores";
    let Some(job) = cursor_job(test, 20) else {
        return;
    };
    let one = job.one_process_run();
    let asked = job.site.log();
    assert_eq!(asked.len(), 7, "{asked:?}");
    job.enqueue();
    all_finish(["w1", "w2", "w3"].map(|n| job.worker(n, &[])).into());
    assert_same_as_one_process(&job, &one);
    assert_eq!(stored_by_name(&job), cursor::expected(1..=20));
    let log = job.site.log();
    assert_eq!(
        log[asked.len()..],
        asked[..],
        "the workers asked for each API page once, in chain order"
    );
}

#[test]
fn a_worker_killed_mid_chain_loses_nothing_and_another_goes_on_with_its_cursor() {
    let test = "a_worker_killed_mid_chain_loses_nothing_and_another_goes_on_with_its_cursor";
    let Some(job) = cursor_job(test, 20) else {
        return;
    };
    job.site.hold("cursor:12");
    job.enqueue();
    let flags = ["--lease", "1s"];
    let mut first = job.worker("w1", &flags);
    first.wait_for("the fourth page's request", PATIENCE, || {
        job.site.log().len() >= 4
    });
    first.kill();
    job.site.release();
    all_finish(vec![job.worker("w2", &flags), job.worker("w3", &flags)]);
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(stored_by_name(&job), cursor::expected(1..=20));
    assert_eq!(
        job.site.log(),
        [
            "first",
            "cursor:18",
            "cursor:15",
            "cursor:12",
            "cursor:12",
            "cursor:9",
            "cursor:6",
            "cursor:3"
        ],
        "only the page the killed worker held is asked for again"
    );
    assert!(
        job.site.image_hits().values().all(|n| *n <= 2),
        "{:?}",
        job.site.image_hits()
    );
}

#[test]
fn two_workers_rendering_pages_in_the_browser_store_what_one_process_stores() {
    let test = "two_workers_rendering_pages_in_the_browser_store_what_one_process_stores";
    if !chromium_available(test) {
        return;
    }
    let site = ClusterSite::serve(2, 3, 3, Duration::ZERO, Extra::Nothing);
    let Some(job) = Job::with(test, site, |dir, site| site.profile(dir, "browser", "")) else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    let workers = vec![job.worker("w1", &[]), job.worker("w2", &[])];
    for worker in workers {
        let (status, stderr) = worker.wait(BROWSER_PATIENCE * 2);
        assert_eq!(status.code(), Some(0), "a worker failed:\n{stderr}");
    }
    assert_same_as_one_process(&job, &one);
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
    assert_eq!(job.redis.counter("cluster", "pages_done"), 6);
}

#[test]
fn a_page_failing_for_a_moment_is_asked_again_and_one_failing_for_good_is_recorded_failed() {
    let site = ClusterSite::serve(2, 2, 2, Duration::ZERO, Extra::Flaky);
    let test =
        "a_page_failing_for_a_moment_is_asked_again_and_one_failing_for_good_is_recorded_failed";
    // One retry (the profile's `retries = 1`): two attempts at each page at most.
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    job.enqueue();
    all_finish(vec![job.worker("w1", &[]), job.worker("w2", &[])]);
    let hits = job.site.state.hits.lock().expect("hits").clone();
    assert_eq!(hits.get("/c1/2"), Some(&2), "{hits:?}");
    assert_eq!(hits.get("/c2/1"), Some(&2), "{hits:?}");
    assert_eq!(job.redis.counter("cluster", "pages_done"), 2);
    assert_eq!(job.redis.counter("cluster", "pages_failed"), 1);
    let output = job.export();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let failures = std::fs::read_to_string(job.out.join("failures.jsonl")).expect("failures");
    let failures = crate::support::json_lines(&failures);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["kind"], "page");
    assert_eq!(failures[0]["url"], format!("{}/c2/1", job.site.origin));
    // Chain 1 whole: two pages of two images and one shared by bytes each, and the logo.
    assert_eq!(manifest(&job.out).len(), 7);
}

#[test]
fn a_run_with_redis_seeds_the_job_and_works_on_it_beside_other_workers() {
    let site = ClusterSite::serve(3, 3, 4, Duration::from_millis(10), Extra::Nothing);
    let test = "a_run_with_redis_seeds_the_job_and_works_on_it_beside_other_workers";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    let one = job.one_process_run();
    // Started first: it waits for the job to be seeded.
    let other = job.worker("w2", &[]);
    let mut cmd = job.scrape();
    cmd.arg("--profile")
        .arg(&job.profile)
        .args(["--redis", &job.redis.url(), "--progress", "off", "--out"])
        .arg(&job.out);
    let seeding = Background::spawn(&mut cmd, &job.dir.path().join("run.stderr"));
    let (status, stderr) = seeding.wait(PATIENCE * 2);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("3 of 3 start pages enqueued"), "{stderr}");
    all_finish(vec![other]);
    assert_same_as_one_process(&job, &one);
    assert_eq!(job.redis.counter("cluster", "pages_done"), 9);
}

/// Seeds of the pictures the near-duplicate jobs show.
const NEAR_SEEDS: [u64; 3] = [31, 32, 33];

/// A job over one page, `/index.html`, showing a picture for each of [`NEAR_SEEDS`] and a
/// half-size PNG copy of each (within 4 bits of its picture; pictures of other seeds are far
/// apart), with `near_duplicate_distance = 4` and `keys` in `[download]`.
fn near_duplicate_job(test: &str, keys: &str) -> Option<Job<(Site, TempDir)>> {
    let root = TempDir::new().expect("site folder");
    let paths = pictures_and_copies(root.path(), NEAR_SEEDS);
    let page: String = paths.iter().map(|p| format!("<img src=\"{p}\">")).collect();
    std::fs::write(
        root.path().join("index.html"),
        format!("<html><body>{page}</body></html>"),
    )
    .expect("page written");
    let site = Site::serve_dir(root.path());
    Job::with(test, (site, root), |dir, (site, _)| {
        let path = dir.join("near.toml");
        std::fs::write(
            &path,
            format!(
                "name = \"cluster\"\nstart = [\"{}/index.html\"]\nrender = \"static\"\n\n\
                 [[images]]\nselector = \"img\"\n\n\
                 [download]\nout = \"out\"\nnear_duplicate_distance = 4\n{keys}\n",
                site.origin
            ),
        )
        .expect("profile written");
        path
    })
}

/// Runs the job with two workers and exports it; the manifest lines by `(picture, copy)` of
/// each seed.
fn near_duplicate_pairs(job: &Job<(Site, TempDir)>) -> Vec<(serde_json::Value, serde_json::Value)> {
    job.enqueue();
    all_finish(["w1", "w2"].map(|n| job.worker(n, &[])).into());
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let lines: BTreeMap<String, serde_json::Value> = manifest(&job.out)
        .into_iter()
        .map(|line| {
            let url = line["url"].as_str().expect("url");
            let path = url.strip_prefix(&job.site.0.origin).expect("same origin");
            (path.to_owned(), line)
        })
        .collect();
    assert_eq!(lines.len(), 2 * NEAR_SEEDS.len(), "{lines:?}");
    NEAR_SEEDS
        .iter()
        .map(|seed| {
            (
                lines[&format!("/{seed}.jpg")].clone(),
                lines[&format!("/{seed}-small.png")].clone(),
            )
        })
        .collect()
}

/// Of a picture and its copy, the one flagged as the other's near-duplicate, and the other:
/// exactly one of them is flagged, whichever worker stored its picture first.
fn flagged_of(
    pair: &(serde_json::Value, serde_json::Value),
) -> (&serde_json::Value, &serde_json::Value) {
    let (picture, copy) = pair;
    let flagged: Vec<_> = [(picture, copy), (copy, picture)]
        .into_iter()
        .filter(|(line, _)| line.get("near_duplicate_of").is_some())
        .collect();
    assert_eq!(
        flagged.len(),
        1,
        "exactly one of {picture} and {copy} is flagged"
    );
    let (later, earlier) = flagged[0];
    assert_eq!(later["near_duplicate_of"], earlier["sha256"], "{later}");
    assert_eq!(later["near_duplicate_path"], earlier["path"], "{later}");
    assert!(
        later["near_duplicate_distance"]
            .as_u64()
            .is_some_and(|d| d <= 4),
        "{later}"
    );
    (later, earlier)
}

#[test]
fn workers_flag_each_near_duplicate_once_through_their_shared_index() {
    let test = "workers_flag_each_near_duplicate_once_through_their_shared_index";
    let Some(job) = near_duplicate_job(test, "") else {
        return;
    };
    for pair in near_duplicate_pairs(&job) {
        let (later, earlier) = flagged_of(&pair);
        assert_ne!(
            later["path"], earlier["path"],
            "kept: stored as a file of its own"
        );
        assert_ne!(later["duplicate"], true, "{later}");
    }
    assert_eq!(stored_files(&job.out).len(), 2 * NEAR_SEEDS.len());
    // Each stored picture is in the index under each of its 5 bands, once.
    let bands = job
        .redis
        .cli(&["--scan", "--pattern", "scrape:{cluster}:phash:*"]);
    let entries: usize = bands
        .lines()
        .map(|key| {
            job.redis
                .cli(&["SCARD", key])
                .trim()
                .parse::<usize>()
                .expect("a count")
        })
        .sum();
    assert_eq!(entries, 5 * 2 * NEAR_SEEDS.len(), "{bands}");
}

#[test]
fn workers_dropping_near_duplicates_store_one_of_each_pair() {
    let test = "workers_dropping_near_duplicates_store_one_of_each_pair";
    let Some(job) = near_duplicate_job(test, "near_duplicates = \"drop\"") else {
        return;
    };
    for pair in near_duplicate_pairs(&job) {
        let (later, earlier) = flagged_of(&pair);
        assert_eq!(later["duplicate"], true, "{later}");
        assert_eq!(later["path"], earlier["path"], "{later}");
        assert_ne!(earlier["duplicate"], true, "{earlier}");
    }
    assert_eq!(
        stored_files(&job.out).len(),
        NEAR_SEEDS.len(),
        "one file per pair"
    );
    for line in manifest(&job.out) {
        let bytes = std::fs::read(job.out.join(line["path"].as_str().expect("path")))
            .expect("the file a line names exists");
        if line["duplicate"] != true {
            let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
            assert_eq!(line["sha256"], sha256, "{line}");
        }
    }
}

#[test]
fn a_host_one_worker_paused_for_a_wall_holds_back_every_workers_requests() {
    let dir = TempDir::new().expect("temporary folder");
    let Some(redis) = RedisServer::start("pause_host_script", dir.path()) else {
        return;
    };
    // KEYS: the host's leases, its pace, its window, the liveness prefix; ARGV: lease ms,
    // limit, interval ms, token, starting window.
    let acquire = |token: &str| {
        redis.cli(&[
            "EVAL",
            scrape::cluster::scripts::ACQUIRE_HOST,
            "4",
            "leases",
            "pace",
            "window",
            "alive:",
            "30000",
            "4",
            "0",
            token,
            "0",
        ])
    };
    let first = |answer: String| -> i64 {
        answer
            .lines()
            .next()
            .and_then(|l| l.parse().ok())
            .expect("a wait")
    };
    assert_eq!(first(acquire("a 1")), 0, "an open host lends a lease");
    // Worker `a` met a wall: the host waits 60 s for everyone.
    redis.cli(&[
        "EVAL",
        scrape::cluster::scripts::PAUSE_HOST,
        "1",
        "pace",
        "60000",
    ]);
    for token in ["a 2", "b 1"] {
        let wait = first(acquire(token));
        assert!((59_000..=60_000).contains(&wait), "{token} waits {wait} ms");
    }
    // A shorter pause later does not shorten it.
    redis.cli(&[
        "EVAL",
        scrape::cluster::scripts::PAUSE_HOST,
        "1",
        "pace",
        "10",
    ]);
    assert!(first(acquire("b 2")) > 10_000);
}

#[test]
fn the_near_duplicate_script_counts_every_bit_and_breaks_ties_by_sha256() {
    let dir = TempDir::new().expect("temporary folder");
    let Some(redis) = RedisServer::start("near_duplicate_script", dir.path()) else {
        return;
    };
    // One band key for every call: the script compares what the keys hold.
    let search = |url: &str, sha: &str, hash: &str, mode: &str| {
        redis.cli(&[
            "EVAL",
            scrape::cluster::scripts::NEAR_DUPLICATE,
            "2",
            "owners",
            "band",
            url,
            sha,
            hash,
            &format!("{sha}.png"),
            "4",
            mode,
        ])
    };
    assert_eq!(search("/a", "aa", "ffffffffffffffff", "keep"), "");
    // Differs from `aa` in the top bit of each half (negative numbers to Lua's bit library)
    // and two more: 4 bits.
    assert_eq!(
        search("/b", "bb", "7ffffffe7ffffffe", "keep"),
        "aa\naa.png\n4"
    );
    // 5 bits from `aa`, 1 from `bb`.
    assert_eq!(
        search("/c", "cc", "7ffffffe7ffffffc", "keep"),
        "bb\nbb.png\n1"
    );
    // 4 bits from `aa`, more from the others.
    assert_eq!(
        search("/d", "9d", "fffffffffffffff0", "keep"),
        "aa\naa.png\n4"
    );
    assert_eq!(
        // 1 bit from `9d`; dropped, so not indexed.
        search("/e", "ee", "fffffffffffffff8", "drop"),
        "9d\n9d.png\n1"
    );
    assert_eq!(
        redis.cli(&["SISMEMBER", "band", "fffffffffffffff8 ee ee.png"]),
        "0"
    );
    // The same bytes delivered again do not find themselves, and of `bb` and `9d` (4 bits
    // each) the smaller SHA-256 wins. Bytes another URL owns are a plain duplicate, not
    // searched.
    assert_eq!(
        search("/a", "aa", "ffffffffffffffff", "keep"),
        "9d\n9d.png\n4"
    );
    redis.cli(&["HSET", "owners", "ff", "/f"]);
    assert_eq!(search("/g", "ff", "ffffffffffffffff", "keep"), "");
    assert_eq!(redis.cli(&["SCARD", "band"]), "4", "aa, bb, cc and 9d");
}

#[test]
fn the_redis_password_never_appears_in_an_error_message() {
    let site = ClusterSite::serve(1, 1, 1, Duration::from_millis(0), Extra::Nothing);
    let test = "the_redis_password_never_appears_in_an_error_message";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    job.redis
        .cli(&["CONFIG", "SET", "requirepass", "pw-right-7q7q"]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let wrong_password = format!("redis://:pw-wrong-x1x1@127.0.0.1:{}/0", job.redis.port);
    let nobody_there = format!("redis://ann-user:pw-right-7q7q@127.0.0.1:{closed}/0");
    let profile = job.profile.to_str().expect("UTF-8 path");
    let out = job.out.to_str().expect("UTF-8 path");
    for url in [&wrong_password, &nobody_there] {
        for args in [
            vec!["status", "--redis", url],
            vec!["enqueue", "--redis", url, "--profile", profile],
            vec!["worker", "--redis", url, "--profile", profile, "--out", out],
            vec!["export", "--redis", url, "--out", out],
        ] {
            let output = run(job.scrape().args(&args));
            let shown = text(&output);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {shown}");
            assert!(
                shown.contains("Redis at `redis://127.0.0.1:"),
                "{args:?}: {shown}"
            );
            for secret in ["pw-wrong", "pw-right", "ann-user"] {
                assert!(!shown.contains(secret), "{args:?} shows {secret}: {shown}");
            }
        }
    }
}

#[test]
fn a_profile_sharing_only_the_name_of_a_running_job_is_refused() {
    let site = ClusterSite::serve(1, 1, 1, Duration::from_millis(0), Extra::Nothing);
    let test = "a_profile_sharing_only_the_name_of_a_running_job_is_refused";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    job.enqueue();
    let first = std::fs::read_to_string(&job.profile).expect("profile read");
    let faster = job.dir.path().join("faster.toml");
    std::fs::write(
        &faster,
        first.replace("[download]", "[download]\nconcurrency = 3"),
    )
    .expect("profile written");
    let other = job.dir.path().join("other.toml");
    std::fs::write(&other, first.replace("main img", "nav img")).expect("profile written");
    let url = job.redis.url();
    let enqueue = |profile: &Path| {
        run(job
            .scrape()
            .args(["enqueue", "--redis", &url, "--profile"])
            .arg(profile))
    };
    let output = enqueue(&faster);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let output = enqueue(&other);
    assert_refused(
        &output,
        &["job `cluster` runs another profile", "--job NAME"],
    );
    let output = run(job
        .scrape()
        .args(["worker", "--redis", &url, "--profile"])
        .arg(&other)
        .arg("--out")
        .arg(&job.out));
    assert_refused(&output, &["job `cluster` runs another profile"]);
    let output = run(job
        .scrape()
        .args(["enqueue", "--redis", &url, "--job", "another", "--profile"])
        .arg(&other));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
}

#[test]
fn a_redis_that_can_lose_the_job_is_refused_unless_the_risk_is_accepted() {
    let site = ClusterSite::serve(1, 1, 1, Duration::from_millis(0), Extra::Nothing);
    let test = "a_redis_that_can_lose_the_job_is_refused_unless_the_risk_is_accepted";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    job.redis.cli(&["CONFIG", "SET", "appendonly", "no"]);
    job.redis
        .cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let url = job.redis.url();
    let out = job.out.to_string_lossy().into_owned();
    for args in [
        vec!["enqueue", "--redis", &url],
        vec!["worker", "--redis", &url, "--out", &out],
        vec!["--redis", &url, "--out", &out],
    ] {
        let output = run(job.scrape().args(args).arg("--profile").arg(&job.profile));
        assert_refused(
            &output,
            &[
                "this Redis can lose the job",
                "appendonly",
                "allkeys-lru",
                "--allow-volatile-redis",
            ],
        );
    }
    assert_eq!(
        job.redis.cli(&["DBSIZE"]),
        "0",
        "nothing written to a refused Redis"
    );

    let output = run(job
        .scrape()
        .args([
            "enqueue",
            "--allow-volatile-redis",
            "--redis",
            &url,
            "--profile",
        ])
        .arg(&job.profile));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        text(&output).contains("accepted with --allow-volatile-redis"),
        "{}",
        text(&output)
    );

    // Made durable, it is taken without the flag.
    job.redis.cli(&["CONFIG", "SET", "appendonly", "yes"]);
    job.redis
        .cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    all_finish(vec![job.worker("w1", &[])]);
    assert_eq!(job.images_stored(), job.site.image_urls() as u64);
}

#[test]
fn retry_with_redis_puts_failed_images_of_a_class_back_for_the_workers() {
    let site = ClusterSite::serve(2, 2, 2, Duration::ZERO, Extra::Busy);
    let test = "retry_with_redis_puts_failed_images_of_a_class_back_for_the_workers";
    // No retry: the site's first image request, answered 429, fails for good.
    let Some(job) = Job::new(test, site, "retries = 0") else {
        return;
    };
    job.enqueue();
    all_finish(vec![job.worker("w1", &[])]);
    assert_eq!(job.redis.counter("cluster", "images_failed"), 1);
    assert_eq!(job.stream_len("images"), 0, "done entries are trimmed");
    let output = job.export();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let failures = std::fs::read_to_string(job.out.join("failures.jsonl")).expect("failures");
    let class = crate::support::json_lines(&failures)[0]["class"]
        .as_str()
        .expect("a class")
        .to_owned();

    let url = job.redis.url();
    let retry = |class: &str| {
        let output = run(scrape().args(["retry", "--redis", &url, "--class", class]));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        text(&output)
    };
    assert!(retry("timeout").contains("0 failed image(s)"));
    assert!(retry(&class).contains("0 dead letter(s) and 1 failed image(s) queued again"));
    assert!(
        retry(&class).contains("0 failed image(s)"),
        "a second retry adds nothing"
    );
    assert_eq!(job.pending(), 1);

    all_finish(vec![job.worker("w2", &[])]);
    assert_eq!(job.redis.counter("cluster", "images_failed"), 0);
    assert_eq!(job.stream_len("images"), 0, "done entries are trimmed");
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
    let urls: BTreeSet<String> = manifest(&job.out)
        .iter()
        .map(|l| l["url"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(urls.len(), job.site.image_urls(), "each image listed once");
}

#[test]
fn a_killed_worker_holds_its_host_for_seconds_not_for_its_lease() {
    let site = ClusterSite::serve(2, 3, 4, Duration::from_millis(50), Extra::Slow);
    let test = "a_killed_worker_holds_its_host_for_seconds_not_for_its_lease";
    // One download at a time to the host.
    let Some(job) = Job::new(test, site, "per_host = 1\nadaptive = false") else {
        return;
    };
    job.enqueue();
    let flags = ["--lease", "20s"];
    // One download at a time, so the images it has not started are left in the stream.
    let mut first = job.worker("w1", &[&flags[..], &["--concurrency", "1"]].concat());
    // Killed while its request for the slow image holds the host's only lease.
    first.wait_for("the slow image to be asked for", PATIENCE, || {
        job.site.image_hits().contains_key("/img/slow-24x16.png")
    });
    first.kill();
    let stored = job.images_stored();
    assert!(job.pending() > 1, "images are left for another worker");
    let second = job.worker("w2", &flags);
    // Its lease would hold the host for 20 s; it is dropped once the worker is not alive.
    wait_until(
        "another worker to store an image of the host",
        Duration::from_secs(12),
        || job.images_stored() > stored,
    );
    all_finish(vec![second]);
    let output = job.export();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
}

#[test]
fn a_finished_job_keeps_no_done_entry_in_its_streams_and_its_export_is_exact() {
    let site = ClusterSite::serve(3, 4, 5, Duration::ZERO, Extra::Nothing);
    let test = "a_finished_job_keeps_no_done_entry_in_its_streams_and_its_export_is_exact";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    all_finish(["w1", "w2", "w3"].map(|n| job.worker(n, &[])).into());
    assert_eq!(job.stream_len("pages"), 0, "pages left in their stream");
    assert_eq!(job.stream_len("images"), 0, "images left in their stream");
    assert_same_as_one_process(&job, &one);
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
    let status = run(scrape().args(["status", "--redis", &job.redis.url(), "--json"]));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(status["finished"], true, "{status}");
    assert_eq!(status["pages_done"], 12, "{status}");

    // The seen and done sets hold digests of one size, not URLs.
    for set in ["seen", "done"] {
        let members = job
            .redis
            .cli(&["SMEMBERS", &format!("scrape:{{cluster}}:{set}")]);
        let members: Vec<&str> = members.lines().collect();
        assert_eq!(members.len(), 12 + job.site.image_urls(), "{set}");
        for member in members {
            assert_eq!(member.len(), 32, "{set}: `{member}`");
            assert!(!member.contains("http"), "{set}: `{member}`");
        }
    }
}

#[test]
fn a_worker_killed_mid_job_keeps_its_entries_through_trimming_and_nothing_is_lost() {
    let site = ClusterSite::serve(3, 5, 6, Duration::from_millis(30), Extra::Nothing);
    let test = "a_worker_killed_mid_job_keeps_its_entries_through_trimming_and_nothing_is_lost";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    let flags = ["--lease", "1s", "--concurrency", "4"];
    let mut first = job.worker("w1", &flags);
    // Trimming runs once a second: images done well before the kill are gone from the stream.
    first.wait_for("done images to leave their stream", PATIENCE, || {
        let stored = job.images_stored();
        stored >= 20
            && job.stream_len("images") + stored < job.redis.counter("cluster", "enqueued_images")
    });
    first.kill();
    let pending = job.stream_pending("images");
    assert!(pending > 0, "the killed worker had images in flight");
    assert!(job.stream_len("images") >= pending, "pending entries stay");
    all_finish(vec![job.worker("w2", &flags)]);
    assert_eq!(job.stream_pending("images"), 0);
    assert_eq!(job.stream_len("images"), 0);
    assert_eq!(job.stream_len("pages"), 0);
    assert_same_as_one_process(&job, &one);
    assert_eq!(manifest(&job.out).len(), job.site.image_urls());
}

#[test]
fn a_job_begun_with_whole_urls_in_its_seen_set_is_refused() {
    let site = ClusterSite::serve(1, 1, 1, Duration::ZERO, Extra::Nothing);
    let test = "a_job_begun_with_whole_urls_in_its_seen_set_is_refused";
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    let start = format!("p {}/c1/1", job.site.origin);
    job.redis.cli(&["SADD", "scrape:{cluster}:seen", &start]);
    let output = run(job
        .scrape()
        .args(["enqueue", "--redis", &job.redis.url(), "--profile"])
        .arg(&job.profile));
    assert_refused(
        &output,
        &["job `cluster` keeps its items as `urls`", "--job NAME"],
    );
    assert_eq!(job.redis.cli(&["SCARD", "scrape:{cluster}:seen"]), "1");
}

#[test]
fn each_worker_signs_in_by_itself_and_again_when_the_site_signs_it_out() {
    use crate::session::{LOGIN, MEMBER, Members, PASSWORD, profile, stored_urls};
    let members = Members::serve(5, 2);
    // Each sign-in is good for two pages.
    members
        .shared
        .login_pages
        .store(2, std::sync::atomic::Ordering::SeqCst);
    let Some(mut job) = Job::with(
        "each_worker_signs_in_by_itself_and_again_when_the_site_signs_it_out",
        members,
        |dir, members| profile(dir, members, LOGIN),
    ) else {
        return;
    };
    job.env = vec![("M_USER", MEMBER), ("M_PASS", PASSWORD)];
    job.enqueue();

    all_finish(vec![job.worker("a", &[]), job.worker("b", &[])]);

    let exported = job.export();
    assert_eq!(exported.status.code(), Some(0), "{}", text(&exported));
    assert_eq!(stored_urls(&job.out), job.site.pictures());
    let log = job.site.log();
    let sign_ins = log
        .iter()
        .filter(|l| l.starts_with("POST /members/login"))
        .count();
    // One each at the start (two sessions, four pages), and at least once more for the fifth.
    assert!(sign_ins >= 3, "{log:?}");
    let first_page = log.iter().position(|l| l.contains("/members/page/"));
    let first_sign_in = log
        .iter()
        .position(|l| l.starts_with("POST /members/login"));
    assert!(
        first_sign_in < first_page,
        "signed in before any page: {log:?}"
    );
}

#[test]
fn workers_without_a_shared_disk_put_into_a_bucket_what_one_process_stores() {
    let test = "workers_without_a_shared_disk_put_into_a_bucket";
    let Some(server) = crate::bucket::S3Server::start(test) else {
        return;
    };
    let site = ClusterSite::serve(4, 5, 6, Duration::from_millis(20), Extra::Nothing);
    let Some(job) = Job::new(test, site, "") else {
        return;
    };
    let one = job.one_process_run();
    job.enqueue();
    let into_bucket = format!("s3://{}/workers", crate::bucket::BUCKET);
    // Each worker has a disk of its own: its state home (its part files) is nobody else's.
    let worker = |name: &str| {
        let mut cmd = job.scrape();
        server.as_writer(&mut cmd, &job.dir.path().join("machines").join(name));
        cmd.args(["worker", "--redis", &job.redis.url(), "--profile"])
            .arg(&job.profile)
            .args(["--out", &into_bucket, "--name", name])
            .args(["--lease", "1s", "--concurrency", "4"]);
        Background::spawn(&mut cmd, &job.dir.path().join(format!("{name}.stderr")))
    };
    let mut first = worker("w1");
    let others = vec![worker("w2"), worker("w3")];
    first.wait_for("images to be stored", PATIENCE, || {
        job.images_stored() >= 15
    });
    first.kill();
    all_finish(others);

    let mut export = scrape();
    server.as_writer(&mut export, &job.dir.path().join("machines/exporter"));
    let output = run(export.args(["export", "--redis", &job.redis.url(), "--out", &into_bucket]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let dump = job.dir.path().join("dump");
    let (_, open_uploads) = server.dump(&dump);
    assert_eq!(open_uploads, 0);
    let in_bucket = dump.join("workers");
    assert_eq!(
        stored_files(&in_bucket),
        stored_files(&one),
        "the same names and bytes"
    );
    crate::bucket::assert_whole(&stored_files(&in_bucket));
    assert_eq!(
        manifest_hashes(&in_bucket),
        manifest_hashes(&one),
        "URLs and bytes"
    );
}

#[test]
fn the_job_in_redis_commits_a_page_with_what_it_leads_to_once_and_knows_what_it_has_seen() {
    use scrape::cluster::ledger::EntryPage;
    use scrape::cluster::{Connection, Item, JobQueue, PageItem, Stream};
    use scrape::paginate::{EndReason, NextPage, PagePosition};
    use scrape::state::{
        NewImage, NewLink, PageCommitted, PageLedger, PageResult, PageSeen, PageUnit, Revisit,
        commit_page,
    };

    let dir = TempDir::new().expect("temporary folder");
    let Some(redis) = RedisServer::start("redis_page_ledger", dir.path()) else {
        return;
    };
    let position = |url: &str, number: i64| PagePosition {
        url: url.into(),
        number,
        done: 0,
        cursor: None,
        after_id: None,
        offset: 0,
    };
    let start = "http://127.0.0.1:9/gallery?page=1";
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let conn = Connection::open(&redis.url()).await.expect("Redis answers");
        let queue = JobQueue::new(conn, "ledger", "w1")
            .with_readers()
            .await
            .expect("readers");
        queue.create_groups().await.expect("groups");
        let first = PageItem {
            start: start.into(),
            position: position(start, 1),
            level: None,
            depth: 0,
            metadata: BTreeMap::new(),
            last_id: None,
        };
        queue
            .enqueue(&[Item::Page(first.clone())])
            .await
            .expect("enqueued");
        let cancel = tokio_util::sync::CancellationToken::new();
        let entries = queue.read(Stream::Pages, 1, &cancel).await.expect("read");
        let entry = entries.first().expect("the start page's entry");
        let mut ledger = EntryPage {
            queue: &queue,
            entry,
            item: &first,
            last_id: Some("item-40".into()),
        };
        let image = |url: &str| NewImage {
            url: url.into(),
            rule: "gallery".into(),
            attribute: "src".into(),
            metadata: BTreeMap::new(),
            caption: None,
            rights: None,
        };
        let page = || PageUnit {
            start: start.into(),
            position: position(start, 1),
            in_chain: true,
            result: PageResult::Done {
                images: vec![image("http://127.0.0.1:9/a.jpg")],
                links: vec![NewLink {
                    url: "http://127.0.0.1:9/detail/1".into(),
                    level: "detail".into(),
                    depth: 1,
                    metadata: BTreeMap::new(),
                    lastmod: None,
                    revisit: Revisit::Never,
                }],
            },
            next: Some(NextPage::Fetch(position(
                "http://127.0.0.1:9/gallery?page=2",
                2,
            ))),
            seen: PageSeen::default(),
        };
        assert_eq!(
            commit_page(&mut ledger, page()).await.expect("committed"),
            PageCommitted::Done
        );
        // Delivered again after its commit: nothing is added twice.
        assert_eq!(
            commit_page(&mut ledger, page()).await.expect("committed"),
            PageCommitted::Before
        );
        let known = ledger
            .known_images(vec![
                "http://127.0.0.1:9/a.jpg".into(),
                "http://127.0.0.1:9/b.jpg".into(),
            ])
            .await
            .expect("asked");
        assert_eq!(
            known,
            ["http://127.0.0.1:9/a.jpg".to_owned()].into(),
            "only the image the page led to is known"
        );
        let knows = |images: &[&str], pages: &[&str]| {
            let images = images.iter().map(|u| (*u).to_owned()).collect();
            let pages = pages.iter().map(|u| (*u).to_owned()).collect();
            ledger.knows_all(images, pages)
        };
        assert!(
            knows(
                &["http://127.0.0.1:9/a.jpg"],
                &[
                    "http://127.0.0.1:9/detail/1",
                    "http://127.0.0.1:9/gallery?page=2"
                ]
            )
            .await
            .expect("asked")
        );
        assert!(
            !knows(
                &["http://127.0.0.1:9/a.jpg"],
                &["http://127.0.0.1:9/detail/2"]
            )
            .await
            .expect("asked")
        );
        // The page's children: its image, its link's page, and the chain's next page carrying
        // the chain's furthest id.
        let pages = queue.read(Stream::Pages, 10, &cancel).await.expect("read");
        let items: Vec<PageItem> = pages
            .iter()
            .filter_map(|e| match &e.item {
                Ok(Item::Page(page)) => Some(page.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(items[0].level.as_deref(), Some("detail"));
        assert_eq!(items[1].position.number, 2);
        assert_eq!(items[1].last_id.as_deref(), Some("item-40"));
        let images = queue.read(Stream::Images, 10, &cancel).await.expect("read");
        assert_eq!(images.len(), 1, "one image entry, not two");
        // A page asked past the chain's end is recorded done, with why, and leads nowhere.
        let last = &pages[1];
        let mut ledger = EntryPage {
            queue: &queue,
            entry: last,
            item: &items[1],
            last_id: None,
        };
        ledger
            .end_chain(start, &items[1].position, EndReason::MissingPage)
            .await
            .expect("ended");
    });
    assert_eq!(redis.counter("ledger", "pages_done"), 2);
    assert_eq!(redis.counter("ledger", "enqueued_pages"), 3);
    let record = redis.cli(&[
        "HGET",
        "scrape:{ledger}:page-records",
        "http://127.0.0.1:9/gallery?page=2",
    ]);
    assert!(
        record.contains("end of pagination: page not found"),
        "{record}"
    );
}
