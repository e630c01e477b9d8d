//! Hostile image hosts: one test per way a server misbehaves, each running `scrape download`
//! against a server of this module on `127.0.0.1:0` and checking the manifest, the failure
//! classes, the exit code and what the server was asked.
//!
//! The server answers `/x/{name}` with whatever the test's handler for `name` returns for that
//! request (its number, `Range`, `If-Range`), and logs every request with the time it arrived
//! and counts the body bytes it sent, so tests can assert on retries, their spacing and their
//! ranges.
//!
//! Large bodies are a generated JPEG followed by pseudo-random bytes after its end (as motion
//! photos carry a video there): generated pictures compress to a few hundred KB even at
//! 4096x4096, and large ones take seconds to encode in a debug build, while the download stage
//! only keeps bodies over 2 MiB in a part file that a later attempt can resume.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use axum::serve::ListenerExt;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::support::{
    Background, PATIENCE, ServerRuntime, json_lines, part_files, run, scrape, stored_count, text,
};

const MIB: usize = 1 << 20;
/// Flags every run gets: short limits, so a test that fails does so quickly (and `--retries 2`
/// unless the test says otherwise).
const FLAGS: [&str; 8] = [
    "--progress",
    "off",
    "--connect-timeout",
    "2s",
    "--first-byte-timeout",
    "5s",
    "--timeout",
    "30s",
];
/// How long a cut reply waits after its last bytes before it drops the connection: hyper drops
/// its write buffer with the connection, so without the pause the client could receive fewer
/// bytes than the server counted as sent.
const FLUSH_PAUSE: Duration = Duration::from_millis(200);
/// The ETag of the large body.
const ETAG: &str = "\"large-v1\"";

// ---------------------------------------------------------------------------------------------
// The server

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Request {
    /// `{name}` of `/x/{name}`.
    name: String,
    /// 1 for the first request for this name, 2 for the next, ...
    number: usize,
    method: Method,
    range: Option<String>,
    if_range: Option<String>,
    at: Instant,
}

impl Request {
    /// `N` of `Range: bytes=N-`.
    fn range_start(&self) -> Option<usize> {
        self.range
            .as_deref()?
            .strip_prefix("bytes=")?
            .strip_suffix('-')?
            .parse()
            .ok()
    }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// What the server does with a request.
struct Reply {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Bytes,
    length: Length,
    /// Body bytes per write, and the pause before every write but the first.
    chunk: usize,
    pace: Duration,
    /// After this many body bytes, how the reply ends instead of finishing.
    end: Option<(usize, Ending)>,
    /// How long the server thinks before it answers at all.
    delay: Duration,
}

/// The `Content-Length` a reply declares.
enum Length {
    Actual,
    /// A lie: more than the bytes that follow (which then end with a [`Ending::Cut`]).
    Claimed(u64),
    /// None: chunked transfer encoding.
    Chunked,
}

enum Ending {
    /// The connection is dropped mid-body.
    Cut,
    /// Nothing more is ever sent, and the connection stays open.
    Stall,
}

impl Reply {
    /// 200 with `bytes`, typed by their magic bytes.
    fn image(bytes: &Bytes) -> Self {
        let content_type = if bytes.starts_with(&[0xFF, 0xD8]) {
            "image/jpeg"
        } else if bytes.starts_with(b"\x89PNG") {
            "image/png"
        } else if bytes.starts_with(b"GIF8") {
            "image/gif"
        } else {
            "application/octet-stream"
        };
        Self::status(200)
            .body(bytes.clone())
            .header(header::CONTENT_TYPE, content_type)
    }

    /// 206 with `bytes` from `from` on.
    fn partial(bytes: &Bytes, from: usize) -> Self {
        let range = format!("bytes {from}-{}/{}", bytes.len() - 1, bytes.len());
        Self::image(bytes)
            .with_status(206)
            .body(bytes.slice(from..))
            .header(header::CONTENT_RANGE, &range)
    }

    /// `code` with an empty body.
    fn status(code: u16) -> Self {
        Self {
            status: StatusCode::from_u16(code).expect("a status code"),
            headers: Vec::new(),
            body: Bytes::new(),
            length: Length::Actual,
            chunk: 64 * 1024,
            pace: Duration::ZERO,
            end: None,
            delay: Duration::ZERO,
        }
    }

    /// 302 to `/x/{to}`.
    fn redirect(to: &str) -> Self {
        Self::status(302).header(header::LOCATION, &format!("/x/{to}"))
    }

    fn with_status(mut self, code: u16) -> Self {
        self.status = StatusCode::from_u16(code).expect("a status code");
        self
    }

    fn body(mut self, body: Bytes) -> Self {
        self.body = body;
        self
    }

    fn header(mut self, name: HeaderName, value: &str) -> Self {
        self.headers.retain(|(n, _)| *n != name);
        let value = HeaderValue::from_str(value).expect("a header value");
        self.headers.push((name, value));
        self
    }

    fn etag(self) -> Self {
        self.header(header::ETAG, ETAG)
    }

    fn chunked(mut self) -> Self {
        self.length = Length::Chunked;
        self
    }

    /// Declares `length` bytes and closes the connection after the real ones.
    fn claim_length(mut self, length: u64) -> Self {
        self.length = Length::Claimed(length);
        let sent = self.body.len();
        self.cut_at(sent)
    }

    /// `chunk` bytes at a time, `pace` apart.
    fn paced(mut self, chunk: usize, pace: Duration) -> Self {
        self.chunk = chunk;
        self.pace = pace;
        self
    }

    /// Drops the connection after `bytes` body bytes.
    fn cut_at(mut self, bytes: usize) -> Self {
        self.end = Some((bytes, Ending::Cut));
        self
    }

    /// Answers only after `delay`: the request counts as in flight until then.
    fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Stops sending, for good, after `bytes` body bytes.
    fn stall_at(mut self, bytes: usize) -> Self {
        self.end = Some((bytes, Ending::Stall));
        self
    }

    fn into_response(self, sent: Arc<AtomicU64>) -> Response {
        let mut response = Response::builder().status(self.status);
        for (name, value) in self.headers {
            response = response.header(name, value);
        }
        let length = match self.length {
            Length::Actual => Some(self.body.len() as u64),
            Length::Claimed(n) => Some(n),
            Length::Chunked => None,
        };
        if let Some(length) = length {
            response = response.header(header::CONTENT_LENGTH, length);
        }
        let body = BodyCursor {
            limit: self
                .end
                .as_ref()
                .map_or(self.body.len(), |(n, _)| (*n).min(self.body.len())),
            body: self.body,
            at: 0,
            chunk: self.chunk.max(1),
            pace: self.pace,
            ending: self.end.map(|(_, e)| e),
            sent,
        };
        let stream = futures_util::stream::unfold(body, BodyCursor::next);
        response
            .body(Body::from_stream(stream))
            .expect("a valid response")
    }
}

/// A reply body being streamed; `sent` counts what was handed to the connection.
struct BodyCursor {
    body: Bytes,
    at: usize,
    limit: usize,
    chunk: usize,
    pace: Duration,
    ending: Option<Ending>,
    sent: Arc<AtomicU64>,
}

impl BodyCursor {
    async fn next(mut self) -> Option<(std::io::Result<Bytes>, Self)> {
        if self.at >= self.limit {
            return match self.ending.take() {
                None => None,
                Some(Ending::Stall) => std::future::pending().await,
                Some(Ending::Cut) => {
                    tokio::time::sleep(FLUSH_PAUSE).await;
                    let cut = std::io::Error::other("connection cut by the test server");
                    Some((Err(cut), self))
                }
            };
        }
        if self.at > 0 && !self.pace.is_zero() {
            tokio::time::sleep(self.pace).await;
        }
        let end = (self.at + self.chunk).min(self.limit);
        let piece = self.body.slice(self.at..end);
        self.at = end;
        self.sent.fetch_add(piece.len() as u64, Ordering::SeqCst);
        Some((Ok(piece), self))
    }
}

#[derive(Default)]
struct Shared {
    handlers: Mutex<HashMap<String, Handler>>,
    log: Mutex<Vec<Request>>,
    sent: Mutex<HashMap<String, Arc<AtomicU64>>>,
    /// Requests waiting for their answer now, and the most there ever were at once.
    in_flight: AtomicU64,
    most_in_flight: AtomicU64,
}

/// A misbehaving image host on `127.0.0.1:0`, on its own runtime thread so tests stay
/// synchronous and run the binary as a child process.
struct Hostile {
    /// Runs the server; shut down with it, without waiting: stalled replies never end.
    _runtime: ServerRuntime,
    shared: Arc<Shared>,
    origin: String,
}

impl Hostile {
    /// A server that closes connections the ordinary way (FIN).
    fn start() -> Self {
        Self::start_with(false)
    }

    /// A server whose every connection ends with a TCP reset (`SO_LINGER` 0) instead of a FIN.
    fn start_resetting() -> Self {
        Self::start_with(true)
    }

    fn start_with(reset: bool) -> Self {
        let runtime = ServerRuntime::new(2);
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/x/{name}", any(answer))
            .with_state(Arc::clone(&shared));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a loopback port");
        let origin = format!("http://{}", listener.local_addr().expect("local address"));
        let listener = listener.tap_io(move |tcp| {
            if reset {
                tcp.set_zero_linger().expect("SO_LINGER");
            }
        });
        runtime.spawn(async move {
            axum::serve(listener, app).await.expect("the server runs");
        });
        Self {
            _runtime: runtime,
            shared,
            origin,
        }
    }

    /// Answers requests for `/x/{name}` with `handler`.
    fn route(&self, name: &str, handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) {
        lock(&self.shared.handlers).insert(name.to_owned(), Arc::new(handler));
    }

    fn url(&self, name: &str) -> String {
        format!("{}/x/{name}", self.origin)
    }

    /// The requests for `name` so far, in order.
    fn requests(&self, name: &str) -> Vec<Request> {
        lock(&self.shared.log)
            .iter()
            .filter(|r| r.name == name)
            .cloned()
            .collect()
    }

    fn hits(&self, name: &str) -> usize {
        self.requests(name).len()
    }

    /// The most requests the server was answering at once (counted until their headers go).
    fn most_in_flight(&self) -> u64 {
        self.shared.most_in_flight.load(Ordering::SeqCst)
    }

    /// Body bytes sent for `name` so far, all requests together.
    fn sent(&self, name: &str) -> u64 {
        lock(&self.shared.sent)
            .get(name)
            .map_or(0, |n| n.load(Ordering::SeqCst))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    UrlPath(name): UrlPath<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let text = |name: HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let request = {
        let mut log = lock(&shared.log);
        let request = Request {
            number: log.iter().filter(|r| r.name == name).count() + 1,
            name: name.clone(),
            method,
            range: text(header::RANGE),
            if_range: text(header::IF_RANGE),
            at: Instant::now(),
        };
        log.push(request.clone());
        request
    };
    let handler = lock(&shared.handlers).get(&name).cloned();
    let sent = Arc::clone(lock(&shared.sent).entry(name).or_default());
    let reply = handler.map_or_else(|| Reply::status(404), |h| h(&request));
    let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    shared.most_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(reply.delay).await;
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    reply.into_response(sent)
}

// ---------------------------------------------------------------------------------------------
// Bodies

/// A generated picture (`name` as `scrape::demo::image_for` reads it), cached.
fn picture(name: &str) -> Bytes {
    static CACHE: OnceLock<Mutex<HashMap<String, Bytes>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(bytes) = lock(cache).get(name) {
        return bytes.clone();
    }
    let (_, bytes) = scrape::demo::image_for(name).expect("a generated image name");
    let bytes = Bytes::from(bytes);
    lock(cache).insert(name.to_owned(), bytes.clone());
    bytes
}

/// A 640x480 JPEG with 5 MiB of pseudo-random bytes after its end: large enough to go to a part
/// file, and no window of it repeats, so a resume at a wrong offset cannot go unnoticed.
fn large() -> Bytes {
    static LARGE: OnceLock<Bytes> = OnceLock::new();
    LARGE
        .get_or_init(|| {
            let mut bytes = picture("large-640x480.jpg").to_vec();
            let mut state = 0x9E37_79B9_7F4A_7C15u64;
            while bytes.len() < 5 * MIB {
                // xorshift64*
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                bytes.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
            }
            Bytes::from(bytes)
        })
        .clone()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

// ---------------------------------------------------------------------------------------------
// Running the binary

/// A URL list and an output folder.
struct Job {
    dir: TempDir,
    list: PathBuf,
    out: PathBuf,
}

/// A finished run.
struct Finished {
    output: Output,
    elapsed: Duration,
    out: PathBuf,
}

impl Job {
    fn new(urls: &[String]) -> Self {
        let dir = TempDir::new().expect("temporary folder");
        let list = dir.path().join("list.txt");
        std::fs::write(&list, urls.join("\n") + "\n").expect("list written");
        let out = dir.path().join("out");
        Self { dir, list, out }
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = scrape();
        cmd.arg("download")
            .arg("--urls")
            .arg(&self.list)
            .arg("--out")
            .arg(&self.out)
            .args(FLAGS)
            .args(extra);
        if !extra.contains(&"--retries") {
            cmd.args(["--retries", "2"]);
        }
        cmd
    }

    fn run(&self, extra: &[&str]) -> Finished {
        let began = Instant::now();
        let output = run(&mut self.command(extra));
        Finished {
            output,
            elapsed: began.elapsed(),
            out: self.out.clone(),
        }
    }
}

/// Downloads `urls` with `extra` flags into a fresh folder.
fn download(urls: &[String], extra: &[&str]) -> (Job, Finished) {
    let job = Job::new(urls);
    let finished = job.run(extra);
    (job, finished)
}

impl Finished {
    fn exit_code(&self) -> Option<i32> {
        self.output.status.code()
    }

    fn lines(&self, file: &str) -> Vec<Value> {
        json_lines(&std::fs::read_to_string(self.out.join(file)).unwrap_or_default())
    }

    fn manifest(&self) -> Vec<Value> {
        self.lines("manifest.jsonl")
    }

    fn failures(&self) -> Vec<Value> {
        self.lines("failures.jsonl")
    }

    /// The failure line of `url`.
    fn failure(&self, url: &str) -> Value {
        self.failures()
            .into_iter()
            .find(|l| l["url"] == url)
            .unwrap_or_else(|| panic!("`{url}` in failures.jsonl\n{}", text(&self.output)))
    }

    /// Asserts `url` failed with `class` after `attempts` attempts, and was not stored.
    fn assert_failed(&self, url: &str, class: &str, attempts: u64) {
        let failure = self.failure(url);
        assert_eq!(failure["class"], class, "{failure}");
        assert_eq!(failure["attempts"], attempts, "{failure}");
        assert!(
            !self.manifest().iter().any(|l| l["url"] == url),
            "`{url}` failed and is in the manifest too"
        );
    }

    /// Asserts `url` is stored with exactly `bytes`, under the name the manifest gives.
    fn assert_stored(&self, url: &str, bytes: &[u8]) {
        let manifest = self.manifest();
        let line = manifest
            .iter()
            .find(|l| l["url"] == url)
            .unwrap_or_else(|| panic!("`{url}` in the manifest\n{}", text(&self.output)));
        let path = line["path"].as_str().expect("a path");
        let stored = std::fs::read(self.out.join(path)).expect("the stored file");
        assert_eq!(
            (stored.len(), sha256(&stored)),
            (bytes.len(), sha256(bytes)),
            "`{url}` stored as `{path}` is not the bytes served"
        );
        assert_eq!(line["sha256"], sha256(bytes), "{line}");
        assert_eq!(line["bytes"], bytes.len(), "{line}");
    }

    fn assert_exit(&self, code: i32) {
        assert_eq!(self.exit_code(), Some(code), "{}", text(&self.output));
    }
}

// ---------------------------------------------------------------------------------------------
// Throttling and server errors

#[test]
fn a_429_with_retry_after_is_retried_no_sooner_than_asked() {
    let server = Hostile::start();
    let image = picture("t-640x480.jpg");
    server.route("throttled.jpg", move |r| match r.number {
        1 => Reply::status(429).header(header::RETRY_AFTER, "1"),
        _ => Reply::image(&image),
    });
    let url = server.url("throttled.jpg");

    let (_job, run) = download(std::slice::from_ref(&url), &[]);

    run.assert_exit(0);
    run.assert_stored(&url, &picture("t-640x480.jpg"));
    let requests = server.requests("throttled.jpg");
    assert_eq!(requests.len(), 2, "{requests:?}");
    let gap = requests[1].at - requests[0].at;
    assert!(
        gap >= Duration::from_millis(900),
        "retried {gap:?} after a 429 with `Retry-After: 1`"
    );
}

#[test]
fn ctrl_c_while_a_download_waits_out_a_long_retry_after_stops_the_run_at_once() {
    let server = Hostile::start();
    server.route("busy.jpg", |_| {
        Reply::status(429).header(header::RETRY_AFTER, "300")
    });
    let url = server.url("busy.jpg");
    let job = Job::new(std::slice::from_ref(&url));
    let mut started = Background::spawn(&mut job.command(&[]), &job.dir.path().join("stderr.txt"));
    started.wait_for("the first answer, a 429", PATIENCE, || {
        server.hits("busy.jpg") >= 1
    });
    started.interrupt();
    // The next attempt would go in 300 s: a run that waited for it would outlast the wait.
    let (status, stderr) = started.wait(PATIENCE);

    assert_eq!(status.code(), Some(130), "{status:?}\n{stderr}");
    assert_eq!(server.hits("busy.jpg"), 1);
    assert!(
        part_files(&job.out).is_empty(),
        "{:?}",
        part_files(&job.out)
    );
}

#[test]
fn a_503_is_retried_until_it_succeeds_or_the_retries_run_out() {
    let server = Hostile::start();
    let image = picture("recovers-640x480.jpg");
    server.route("recovers.jpg", move |r| match r.number {
        1 | 2 => Reply::status(503),
        _ => Reply::image(&image),
    });
    server.route("down.jpg", |_| Reply::status(503));
    let (recovers, down) = (server.url("recovers.jpg"), server.url("down.jpg"));

    let (_job, run) = download(&[recovers.clone(), down.clone()], &[]);

    run.assert_exit(1);
    run.assert_stored(&recovers, &picture("recovers-640x480.jpg"));
    assert_eq!(server.hits("recovers.jpg"), 3);
    // `--retries 2`: the first attempt and two more.
    run.assert_failed(&down, "http_503", 3);
    assert_eq!(server.hits("down.jpg"), 3);
}

#[test]
fn a_404_fails_after_one_attempt() {
    let server = Hostile::start();
    server.route("gone.jpg", |_| Reply::status(404));
    let url = server.url("gone.jpg");

    let (_job, run) = download(std::slice::from_ref(&url), &[]);

    run.assert_exit(1);
    run.assert_failed(&url, "http_404", 1);
    assert_eq!(server.hits("gone.jpg"), 1);
}

#[test]
fn retry_downloads_the_failed_images_again_by_class() {
    let server = Hostile::start();
    server.route("busy-64x64.jpg", |_| Reply::status(503));
    server.route("gone-64x64.jpg", |_| Reply::status(404));
    let (busy, gone) = (server.url("busy-64x64.jpg"), server.url("gone-64x64.jpg"));
    let (job, first) = download(&[busy.clone(), gone.clone()], &[]);
    first.assert_exit(1);
    first.assert_failed(&busy, "http_503", 3);
    first.assert_failed(&gone, "http_404", 1);

    let retry = |extra: &[&str]| Finished {
        output: run(scrape()
            .args(["retry", "--progress", "off", "--out"])
            .arg(&job.out)
            .args(extra)),
        elapsed: Duration::ZERO,
        out: job.out.clone(),
    };
    // A retry that fails again counts its attempt on top of the earlier ones.
    let still_gone = retry(&["--class", "http_404"]);
    still_gone.assert_exit(1);
    still_gone.assert_failed(&gone, "http_404", 2);
    still_gone.assert_failed(&busy, "http_503", 3);
    assert_eq!(server.hits("gone-64x64.jpg"), 2);

    // The servers are back; only the 503s are asked for again.
    for name in ["busy-64x64.jpg", "gone-64x64.jpg"] {
        server.route(name, move |_| Reply::image(&picture(name)));
    }
    let only_503 = retry(&["--class", "http_503"]);
    only_503.assert_exit(1);
    only_503.assert_stored(&busy, &picture("busy-64x64.jpg"));
    only_503.assert_failed(&gone, "http_404", 2);
    assert_eq!(server.hits("gone-64x64.jpg"), 2);

    let all = retry(&[]);
    all.assert_exit(0);
    all.assert_stored(&gone, &picture("gone-64x64.jpg"));
    all.assert_stored(&busy, &picture("busy-64x64.jpg"));
    assert_eq!(
        server.hits("busy-64x64.jpg"),
        4,
        "stored images are not fetched again"
    );
    assert!(all.failures().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Per-host windows

/// Log lines of a `-v` run that say the host's window shrank.
fn window_decreases(finished: &Finished) -> Vec<String> {
    String::from_utf8_lossy(&finished.output.stderr)
        .lines()
        .filter(|l| l.contains("host window shrank"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_window_grows_on_a_host_that_answers_slowly_and_never_passes_per_host() {
    let server = Hostile::start();
    let image = picture("slow-64x64.jpg");
    let urls: Vec<String> = (0..240)
        .map(|n| {
            let name = format!("slow-{n}.jpg");
            let image = image.clone();
            server.route(&name, move |_| {
                Reply::image(&image).after(Duration::from_millis(100))
            });
            server.url(&name)
        })
        .collect();

    let (_job, run) = download(&urls, &["--per-host", "24"]);

    run.assert_exit(0);
    assert_eq!(run.manifest().len(), urls.len());
    let most = server.most_in_flight();
    assert!(
        most > 8,
        "the window grew past where it starts: at most {most} in flight"
    );
    assert!(most <= 24, "{most} in flight, over --per-host 24");
}

#[test]
fn a_burst_of_503s_shrinks_the_window_once() {
    let server = Hostile::start();
    let image = picture("burst-64x64.jpg");
    let answered = Arc::new(AtomicU64::new(0));
    let urls: Vec<String> = (0..16)
        .map(|n| {
            let name = format!("burst-{n}.jpg");
            let (image, answered) = (image.clone(), Arc::clone(&answered));
            server.route(&name, move |_| {
                // The first window's worth of requests, all in flight together, get a 503.
                if answered.fetch_add(1, Ordering::SeqCst) < 8 {
                    Reply::status(503).after(Duration::from_millis(300))
                } else {
                    Reply::image(&image)
                }
            });
            server.url(&name)
        })
        .collect();

    let (_job, run) = download(&urls, &["-v", "--log-format", "json"]);

    run.assert_exit(0);
    assert_eq!(run.manifest().len(), urls.len());
    assert_eq!(server.most_in_flight(), 8, "the window starts at 8");
    let decreases = window_decreases(&run);
    assert_eq!(
        decreases.len(),
        1,
        "one burst, one decrease: {decreases:#?}"
    );
    assert!(decreases[0].contains("\"window\":4"), "{}", decreases[0]);
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert_eq!(
        stderr.matches("host slowed down").count(),
        1,
        "the pace is slowed once too\n{stderr}"
    );
}

#[test]
fn a_host_that_stops_answering_for_a_while_is_back_to_full_speed_within_seconds() {
    let server = Hostile::start();
    let image = picture("back-64x64.jpg");
    let asked = Arc::new(AtomicU64::new(0));
    let urls: Vec<String> = (0..40)
        .map(|n| {
            let name = format!("back-{n}.jpg");
            let (image, asked) = (image.clone(), Arc::clone(&asked));
            server.route(&name, move |_| {
                // The first eight requests are never answered; then the host is back.
                if asked.fetch_add(1, Ordering::SeqCst) < 8 {
                    Reply::image(&image).after(Duration::from_secs(3600))
                } else {
                    Reply::image(&image)
                }
            });
            server.url(&name)
        })
        .collect();

    let (_job, run) = download(&urls, &["-v"]);

    run.assert_exit(0);
    assert_eq!(run.manifest().len(), urls.len());
    let decreases = window_decreases(&run);
    assert_eq!(
        decreases.len(),
        1,
        "eight time-outs in flight together are one event: {decreases:#?}"
    );
    // Five seconds of first-byte time-out, then 40 quick answers: the host is not left paced
    // at seconds per request (before, eight time-outs made it 12.8 s between starts).
    assert!(
        run.elapsed < Duration::from_secs(20),
        "took {:?}\n{}",
        run.elapsed,
        text(&run.output)
    );
}

/// A host on `127.0.0.1:0` that accepts connections and never answers, nor closes them.
struct Silent {
    addr: std::net::SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Silent {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                held.extend(stream.ok());
            }
        });
        Self { addr, stop }
    }

    fn url(&self, name: &str) -> String {
        format!("http://{}/p/{name}", self.addr)
    }
}

impl Drop for Silent {
    /// Wakes the accepting thread so that it ends, dropping what it holds.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
    }
}

#[test]
fn a_host_that_never_answers_does_not_hold_up_a_healthy_one() {
    let silent = Silent::start();
    let server = Hostile::start();
    // More images of the silent host, first in the list, than the run has task slots (four
    // per download in flight).
    let mut urls: Vec<String> = (0..100).map(|n| silent.url(&format!("{n}.jpg"))).collect();
    let healthy: Vec<String> = (0..20)
        .map(|n| {
            let name = format!("healthy-{n}-64x64.jpg");
            let image = picture(&name);
            server.route(&name, move |_| Reply::image(&image));
            server.url(&name)
        })
        .collect();
    urls.extend(healthy.iter().cloned());
    let job = Job::new(&urls);

    let stderr = job.dir.path().join("silent.stderr");
    let mut running = Background::spawn(&mut job.command(&["--concurrency", "16"]), &stderr);
    running.wait_for(
        "the healthy host's 20 images while the silent host hangs",
        PATIENCE,
        || stored_count(&job.out) >= healthy.len(),
    );
    running.kill();
    let hits: usize = (0..20)
        .map(|n| server.hits(&format!("healthy-{n}-64x64.jpg")))
        .sum();
    assert_eq!(hits, healthy.len(), "each healthy image asked for once");
}

// ---------------------------------------------------------------------------------------------
// Broken bodies

#[test]
fn a_connection_reset_mid_body_is_retried_and_stored() {
    let server = Hostile::start_resetting();
    let image = picture("reset-800x600.jpg");
    let half = image.len() / 2;
    server.route("reset-once.jpg", {
        let image = image.clone();
        move |r| match r.number {
            1 => Reply::image(&image)
                .paced(1024, Duration::ZERO)
                .cut_at(half),
            _ => Reply::image(&image),
        }
    });
    server.route("always-reset.jpg", move |_| {
        Reply::image(&image)
            .paced(1024, Duration::ZERO)
            .cut_at(half)
    });
    let (once, always) = (server.url("reset-once.jpg"), server.url("always-reset.jpg"));

    let (_job, run) = download(&[once.clone(), always.clone()], &[]);

    run.assert_exit(1);
    run.assert_stored(&once, &picture("reset-800x600.jpg"));
    assert_eq!(server.hits("reset-once.jpg"), 2);
    run.assert_failed(&always, "reset", 3);
    assert_eq!(server.hits("always-reset.jpg"), 3);
}

#[test]
fn a_body_cut_short_is_truncated_and_retried() {
    let server = Hostile::start();
    let image = picture("short-640x480.jpg");
    let claimed = image.len() as u64 * 2;
    let half = image.len() / 2;
    server.route("always-short.jpg", {
        let image = image.clone();
        move |_| Reply::image(&image).claim_length(claimed)
    });
    server.route("chunked-short.jpg", {
        let image = image.clone();
        move |_| Reply::image(&image).chunked().cut_at(half)
    });
    server.route("short-once.jpg", move |r| match r.number {
        1 => Reply::image(&image).claim_length(claimed),
        _ => Reply::image(&image),
    });
    let [always, chunked, once] =
        ["always-short.jpg", "chunked-short.jpg", "short-once.jpg"].map(|n| server.url(n));

    let (_job, run) = download(&[always.clone(), chunked.clone(), once.clone()], &[]);

    run.assert_exit(1);
    // Content-Length larger than the body, then the connection closed.
    run.assert_failed(&always, "truncated", 3);
    assert_eq!(server.hits("always-short.jpg"), 3);
    // Chunked, closed before the last chunk.
    run.assert_failed(&chunked, "truncated", 3);
    run.assert_stored(&once, &picture("short-640x480.jpg"));
    assert_eq!(server.hits("short-once.jpg"), 2);
}

#[test]
fn a_slow_drip_below_the_minimum_speed_times_out_without_hanging() {
    let server = Hostile::start();
    let image = picture("drip-640x480.jpg");
    server.route("drip.jpg", move |_| {
        Reply::image(&image).paced(16, Duration::from_millis(500))
    });
    let url = server.url("drip.jpg");

    // One attempt: the speed is judged over a 10-second window, so each attempt costs that.
    let (_job, run) = download(
        std::slice::from_ref(&url),
        &["--min-speed", "10KB", "--retries", "0"],
    );

    run.assert_exit(1);
    run.assert_failed(&url, "timeout", 1);
    assert!(
        run.elapsed < Duration::from_secs(10 + 5),
        "a drip held one attempt for {:?}",
        run.elapsed
    );
}

// ---------------------------------------------------------------------------------------------
// Resuming large bodies

/// A large body whose first reply breaks after 3 MiB (past the 2 MiB kept in memory, so the
/// client has a part file to resume), and whose later replies `resumed` decides.
fn large_broken_once(server: &Hostile, name: &str, resumed: fn(&Request, &Bytes) -> Reply) {
    let body = large();
    server.route(name, move |r| match r.number {
        1 => Reply::image(&body).etag().cut_at(3 * MIB),
        _ => resumed(r, &body),
    });
}

#[test]
fn resume_continues_the_part_when_the_server_honours_range() {
    let server = Hostile::start();
    large_broken_once(&server, "large.jpg", |r, body| match r.range_start() {
        Some(from) if r.if_range.as_deref() == Some(ETAG) => Reply::partial(body, from).etag(),
        _ => Reply::image(body).etag(),
    });
    let url = server.url("large.jpg");

    let (_job, run) = download(std::slice::from_ref(&url), &[]);

    run.assert_exit(0);
    run.assert_stored(&url, &large());
    let requests = server.requests("large.jpg");
    let ranges: Vec<_> = requests
        .iter()
        .map(|r| (r.range.as_deref(), r.if_range.as_deref()))
        .collect();
    let expected_range = format!("bytes={}-", 3 * MIB);
    assert_eq!(
        ranges,
        [(None, None), (Some(expected_range.as_str()), Some(ETAG))],
        "one resume, from the 3 MiB the part held"
    );
    assert_eq!(
        server.sent("large.jpg"),
        large().len() as u64,
        "sent once in all"
    );
    assert!(requests.iter().all(|r| r.method == Method::GET));
    assert_eq!(part_files(&run.out), Vec::<PathBuf>::new());
}

#[test]
fn resume_restarts_when_the_server_ignores_range() {
    let server = Hostile::start();
    large_broken_once(&server, "large.jpg", |_, body| Reply::image(body).etag());
    let url = server.url("large.jpg");

    let (_job, run) = download(std::slice::from_ref(&url), &[]);

    run.assert_exit(0);
    run.assert_stored(&url, &large());
    let requests = server.requests("large.jpg");
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[1].range_start(), Some(3 * MIB), "{requests:?}");
}

#[test]
fn resume_restarts_when_a_206_starts_elsewhere() {
    let server = Hostile::start();
    // A 206 from 1000 bytes before the asked offset: appending it would corrupt the file.
    large_broken_once(&server, "large.jpg", |r, body| match r.range_start() {
        Some(from) => Reply::partial(body, from - 1000).etag(),
        None => Reply::image(body).etag(),
    });
    let url = server.url("large.jpg");

    let (_job, run) = download(std::slice::from_ref(&url), &[]);

    run.assert_exit(0);
    run.assert_stored(&url, &large());
    let starts: Vec<_> = server
        .requests("large.jpg")
        .iter()
        .map(Request::range_start)
        .collect();
    assert_eq!(
        starts,
        [None, Some(3 * MIB), None],
        "the bad 206 is dropped with its part and the file fetched from the start"
    );
}

#[test]
fn a_206_to_a_request_without_range_is_not_taken_for_the_whole_file() {
    let server = Hostile::start();
    let image = picture("partial-640x480.jpg");
    // The first 4000 bytes, as a 206 nobody asked for: the JPEG header is all there, and
    // verifying the header alone would take the prefix for the picture.
    server.route("prefix.jpg", move |_| {
        let range = format!("bytes 0-3999/{}", image.len());
        Reply::image(&image.slice(..4000))
            .with_status(206)
            .header(header::CONTENT_RANGE, &range)
            .header(header::CONTENT_TYPE, "image/jpeg")
    });
    let url = server.url("prefix.jpg");

    let (_job, run) = download(std::slice::from_ref(&url), &[]);

    run.assert_exit(1);
    run.assert_failed(&url, "truncated", 3);
    assert_eq!(stored_count(&run.out), 0);
}

/// The bytes of a part its sidecar vouches for: where a rerun continues it. The part itself may
/// be longer: a kill can fall between writing bytes and writing the sidecar that follows them.
fn vouched_bytes(part: &Path) -> Option<u64> {
    let mut sidecar = part.as_os_str().to_owned();
    sidecar.push(".json");
    let record: Value = serde_json::from_slice(&std::fs::read(sidecar).ok()?).ok()?;
    record["written_bytes"].as_u64()
}

/// A download of the large body killed mid-body (the first reply stalls past 3 MiB; later
/// replies honour `Range`): the job, its URL and the one part file left, non-empty and short,
/// with a sidecar vouching for some of it.
fn killed_with_a_part(server: &Hostile) -> (Job, String, PathBuf) {
    let stall = 3 * MIB + MIB / 2;
    server.route("large.jpg", move |r| match r.range_start() {
        Some(from) if r.if_range.as_deref() == Some(ETAG) => Reply::partial(&large(), from).etag(),
        _ if r.number > 1 => Reply::image(&large()).etag(),
        _ => Reply::image(&large())
            .etag()
            .paced(256 * 1024, Duration::from_millis(20))
            .stall_at(stall),
    });
    let url = server.url("large.jpg");
    let job = Job::new(std::slice::from_ref(&url));

    let stderr = job.dir.path().join("killed.stderr");
    let mut killed = Background::spawn(&mut job.command(&[]), &stderr);
    killed.wait_for(
        "3 MiB sent and a part file vouched for on disk",
        PATIENCE,
        || {
            server.sent("large.jpg") > 3 * MIB as u64
                && part_files(&job.out)
                    .iter()
                    .any(|p| vouched_bytes(p).is_some_and(|n| n > 0))
        },
    );
    killed.kill();

    let parts = part_files(&job.out);
    assert_eq!(parts.len(), 1, "{parts:?}");
    let part = parts[0].clone();
    assert!(
        part.starts_with(job.out.join(".scrape/parts")) && part.ends_with("0.part"),
        "`{}` is not the part of download 0",
        part.display()
    );
    let kept = part.metadata().expect("the part").len();
    let vouched = vouched_bytes(&part).expect("the part's sidecar");
    assert!(
        vouched > 0 && vouched <= kept && kept < large().len() as u64,
        "the part holds {kept} bytes, {vouched} vouched for"
    );
    (job, url, part)
}

#[test]
fn a_killed_download_resumes_its_part_with_range() {
    let server = Hostile::start();
    let (job, url, part) = killed_with_a_part(&server);
    let kept = vouched_bytes(&part).expect("the part's sidecar");

    let rerun = job.run(&[]);

    rerun.assert_exit(0);
    rerun.assert_stored(&url, &large());
    let ranges: Vec<_> = server
        .requests("large.jpg")
        .iter()
        .map(|r| r.range.clone())
        .collect();
    assert_eq!(
        ranges,
        [None, Some(format!("bytes={kept}-"))],
        "the rerun asks for the rest of the {kept}-byte part"
    );
    assert_eq!(part_files(&job.out), Vec::<PathBuf>::new());
}

#[test]
fn a_part_damaged_between_runs_is_downloaded_again_from_the_start() {
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage); 3] = [
        ("100 bytes flipped in the middle", |bytes| {
            let middle = bytes.len() / 2;
            for byte in &mut bytes[middle..middle + 100] {
                *byte ^= 0xFF;
            }
        }),
        ("replaced by garbage of the same length", |bytes| {
            bytes.fill(0x5A);
        }),
        ("cut short", |bytes| bytes.truncate(bytes.len() / 3)),
    ];
    for (damage, apply) in damages {
        let server = Hostile::start();
        let (job, url, part) = killed_with_a_part(&server);
        let mut bytes = std::fs::read(&part).expect("the part");
        apply(&mut bytes);
        std::fs::write(&part, &bytes).expect("the part damaged");

        let rerun = job.run(&[]);

        rerun.assert_exit(0);
        rerun.assert_stored(&url, &large());
        let ranges: Vec<_> = server
            .requests("large.jpg")
            .iter()
            .map(|r| r.range.clone())
            .collect();
        assert_eq!(ranges, [None, None], "{damage}: the rerun starts over");
        assert_eq!(part_files(&job.out), Vec::<PathBuf>::new(), "{damage}");
    }
}

#[test]
fn status_reports_a_running_job_from_its_snapshot_and_the_database_once_it_stops() {
    let server = Hostile::start();
    for name in ["a-64x64.jpg", "b-64x64.jpg"] {
        server.route(name, move |_| Reply::image(&picture(name)));
    }
    // Never finishes while the test looks: the job stays running.
    server.route("stuck.jpg", |_| Reply::image(&large()).stall_at(1024));
    let urls: Vec<String> = ["a-64x64.jpg", "b-64x64.jpg", "stuck.jpg"]
        .iter()
        .map(|n| server.url(n))
        .collect();
    let job = Job::new(&urls);
    let status = |extra: &[&str]| {
        run(scrape()
            .arg("status")
            .args(extra)
            .arg("--out")
            .arg(&job.out))
    };

    let stderr = job.dir.path().join("running.stderr");
    let mut running = Background::spawn(&mut job.command(&[]), &stderr);
    let mut seen = Value::Null;
    running.wait_for(
        "status to show the two stored images of the running job",
        PATIENCE,
        || {
            let output = status(&["--json"]);
            if !output.status.success() {
                return false;
            }
            seen = serde_json::from_slice(&output.stdout).expect("status --json prints JSON");
            seen["counters"]["stored"] == 2
        },
    );
    assert_eq!(seen["running"]["pid"], running.child.id(), "{seen}");
    assert_eq!(seen["counters"]["images_found"], 3, "{seen}");
    assert_eq!(seen["pending"], 1, "{seen}");
    assert!(
        seen["running"]["images_per_second"].as_f64().unwrap() > 0.0,
        "{seen}"
    );
    assert!(seen["running"]["eta_seconds"].is_u64(), "{seen}");
    let host = server.origin.trim_start_matches("http://");
    let window = &seen["running"]["hosts"][0];
    assert_eq!(
        (&window["stage"], &window["host"]),
        (&Value::from("download"), &Value::from(host)),
        "{seen}"
    );
    assert!(window["window"].as_u64().is_some_and(|w| w >= 1), "{seen}");
    let output = status(&[]);
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(
        shown.contains(&format!("running: pid {}", running.child.id())),
        "{shown}"
    );
    assert!(shown.contains("2 stored"), "{shown}");
    assert!(shown.contains("images/s this run, ETA"), "{shown}");
    assert!(
        shown.contains(&format!("host      {host} (download): window ")),
        "{shown}"
    );
    assert!(shown.trim_end().ends_with("running"), "{shown}");

    running.kill();
    let output = status(&["--json"]);
    assert!(output.status.success(), "{}", text(&output));
    let after: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(after.get("running").is_none(), "{after}");
    assert_eq!(after["counters"]["stored"], 2, "{after}");
    assert_eq!(after["failures"], serde_json::json!({}), "{after}");

    // A run that ends takes its snapshot with it.
    server.route("stuck.jpg", |_| Reply::image(&picture("stuck-64x64.jpg")));
    job.run(&[]).assert_exit(0);
    assert!(!job.out.join(".scrape/live.json").exists());
}

// ---------------------------------------------------------------------------------------------
// Bodies that are not what they claim

#[test]
fn html_served_as_a_jpeg_is_not_an_image() {
    let server = Hostile::start();
    let html = Bytes::from_static(b"<!doctype html><html><body>Access denied</body></html>");
    server.route("login.jpg", move |_| {
        Reply::image(&html).header(header::CONTENT_TYPE, "image/jpeg")
    });
    let url = server.url("login.jpg");

    let (_job, run) = download(std::slice::from_ref(&url), &[]);

    run.assert_exit(1);
    run.assert_failed(&url, "not_an_image", 1);
    assert_eq!(server.hits("login.jpg"), 1);
}

#[test]
fn a_file_over_max_bytes_is_too_large_with_or_without_a_length() {
    let server = Hostile::start();
    server.route("known.jpg", |_| Reply::image(&large()));
    server.route("chunked.jpg", |_| Reply::image(&large()).chunked());
    let (known, chunked) = (server.url("known.jpg"), server.url("chunked.jpg"));

    let (_job, run) = download(&[known.clone(), chunked.clone()], &["--max-bytes", "100KB"]);

    run.assert_exit(1);
    run.assert_failed(&known, "too_large", 1);
    run.assert_failed(&chunked, "too_large", 1);
    assert_eq!(part_files(&run.out), Vec::<PathBuf>::new());
}

#[test]
fn a_decompression_bomb_header_is_too_large() {
    let server = Hostile::start();
    // Headers alone, declaring 60000x60000 (3.6 gigapixels); nothing needs to follow.
    let mut png = b"\x89PNG\r\n\x1A\n\0\0\0\x0DIHDR".to_vec();
    png.extend_from_slice(&60_000u32.to_be_bytes());
    png.extend_from_slice(&60_000u32.to_be_bytes());
    png.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
    let mut gif = b"GIF89a".to_vec();
    gif.extend_from_slice(&60_000u16.to_le_bytes());
    gif.extend_from_slice(&60_000u16.to_le_bytes());
    gif.extend_from_slice(&[0, 0, 0, 0x3B]);
    let (png, gif) = (Bytes::from(png), Bytes::from(gif));
    server.route("bomb.png", move |_| Reply::image(&png));
    server.route("bomb.gif", move |_| Reply::image(&gif));
    let (png, gif) = (server.url("bomb.png"), server.url("bomb.gif"));

    let (_job, run) = download(&[png.clone(), gif.clone()], &[]);

    run.assert_exit(1);
    run.assert_failed(&png, "too_large", 1);
    run.assert_failed(&gif, "too_large", 1);
}

// ---------------------------------------------------------------------------------------------
// Redirects and duplicates

#[test]
fn a_redirect_chain_is_followed_and_a_loop_fails() {
    let server = Hostile::start();
    server.route("hop1.jpg", |_| Reply::redirect("hop2.jpg"));
    server.route("hop2.jpg", |_| Reply::redirect("hop3.jpg"));
    server.route("hop3.jpg", |_| Reply::redirect("final.jpg"));
    server.route("final.jpg", |_| Reply::image(&picture("final-640x480.jpg")));
    server.route("loop-a.jpg", |_| Reply::redirect("loop-b.jpg"));
    server.route("loop-b.jpg", |_| Reply::redirect("loop-a.jpg"));
    let (chain, looped) = (server.url("hop1.jpg"), server.url("loop-a.jpg"));

    let (_job, run) = download(&[chain.clone(), looped.clone()], &[]);

    run.assert_exit(1);
    run.assert_stored(&chain, &picture("final-640x480.jpg"));
    for name in ["hop1.jpg", "hop2.jpg", "hop3.jpg", "final.jpg"] {
        assert_eq!(server.hits(name), 1, "{name}");
    }
    run.assert_failed(&looped, "redirect", 1);
    let looped_hits = server.hits("loop-a.jpg") + server.hits("loop-b.jpg");
    assert!(looped_hits <= 12, "{looped_hits} requests in the loop");
}

#[test]
fn the_same_bytes_under_two_urls_are_stored_once_and_listed_twice() {
    let server = Hostile::start();
    server.route("a.jpg", |_| Reply::image(&picture("same-640x480.jpg")));
    server.route("b.jpg", |_| Reply::image(&picture("same-640x480.jpg")));
    let (a, b) = (server.url("a.jpg"), server.url("b.jpg"));

    let (_job, run) = download(&[a.clone(), b.clone()], &[]);

    run.assert_exit(0);
    let bytes = picture("same-640x480.jpg");
    run.assert_stored(&a, &bytes);
    run.assert_stored(&b, &bytes);
    let manifest = run.manifest();
    let duplicates: Vec<_> = manifest
        .iter()
        .filter(|l| l.get("duplicate") == Some(&Value::Bool(true)))
        .collect();
    assert_eq!(duplicates.len(), 1, "{manifest:?}");
    assert_eq!(manifest[0]["path"], manifest[1]["path"]);
    assert_eq!(stored_count(&run.out), 1);
}

// ---------------------------------------------------------------------------------------------
// File names

#[test]
fn a_long_non_ascii_name_is_cut_by_bytes_and_the_job_finishes() {
    let server = Hostile::start();
    // 120 three-byte characters and 90 four-byte ones: 360 bytes each, under 100 characters
    // for the second, over the 255 bytes a file name may have for both.
    let names = ["中".repeat(120), "\u{20000}".repeat(90)];
    let urls: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            server.route(name, move |_| {
                Reply::image(&picture(&format!("n{i}-64x48.png")))
            });
            // As the manifest lists it: percent-encoded.
            url::Url::parse(&server.url(name))
                .expect("a URL")
                .to_string()
        })
        .collect();

    let (_job, run) = download(&urls, &["--path", "{host}/{name}-{sha256}.{ext}"]);

    run.assert_exit(0);
    for (i, url) in urls.iter().enumerate() {
        run.assert_stored(url, &picture(&format!("n{i}-64x48.png")));
    }
    for line in run.manifest() {
        let path = line["path"].as_str().expect("a path");
        assert!(
            path.split('/').all(|segment| segment.len() <= 255),
            "`{path}` has a name over 255 bytes"
        );
    }
}

#[test]
fn an_image_that_cannot_be_written_fails_alone_and_the_job_goes_on() {
    let server = Hostile::start();
    server.route("blocked.png", |_| Reply::image(&picture("b-64x48.png")));
    server.route("fine.png", |_| Reply::image(&picture("f-64x48.png")));
    let (blocked, fine) = (server.url("blocked.png"), server.url("fine.png"));
    let job = Job::new(&[blocked.clone(), fine.clone()]);
    // A regular file where the first image's folder should be: its rename cannot succeed.
    std::fs::create_dir_all(&job.out).expect("output folder");
    std::fs::write(job.out.join("blocked"), "in the way").expect("a file in the way");

    let run = job.run(&["--path", "{name}/{sha256}.{ext}"]);

    run.assert_exit(1);
    run.assert_failed(&blocked, "disk", 1);
    assert!(
        run.failure(&blocked)["detail"]
            .as_str()
            .is_some_and(|d| d.contains("blocked")),
        "the detail names the path"
    );
    run.assert_stored(&fine, &picture("f-64x48.png"));
}

// ---------------------------------------------------------------------------------------------
// Damaged output

/// Three stored images, their URLs and the bytes served for each.
fn three_stored() -> (Hostile, Job, Vec<(String, Bytes)>) {
    let server = Hostile::start();
    let images: Vec<(String, Bytes)> = ["a", "b", "c"]
        .iter()
        .map(|name| {
            let bytes = picture(&format!("{name}-64x48.png"));
            let served = bytes.clone();
            server.route(name, move |_| Reply::image(&served));
            (server.url(name), bytes)
        })
        .collect();
    let urls: Vec<String> = images.iter().map(|(u, _)| u.clone()).collect();
    let job = Job::new(&urls);
    job.run(&[]).assert_exit(0);
    (server, job, images)
}

fn verify(job: &Job, extra: &[&str]) -> Output {
    run(scrape()
        .arg("verify")
        .arg("--out")
        .arg(&job.out)
        .args(extra))
}

#[test]
fn verify_finds_changed_and_missing_files_and_requeue_fetches_them_again() {
    let (_server, job, images) = three_stored();
    let done = job.run(&[]);
    let path_of = |url: &str| {
        let line = done
            .manifest()
            .into_iter()
            .find(|l| l["url"] == url)
            .expect("listed");
        job.out.join(line["path"].as_str().expect("a path"))
    };
    let (changed, missing) = (path_of(&images[0].0), path_of(&images[1].0));
    let mut bytes = std::fs::read(&changed).expect("stored file");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&changed, bytes).expect("file damaged");
    std::fs::remove_file(&missing).expect("file removed");

    let found = verify(&job, &[]);
    assert_eq!(found.status.code(), Some(1), "{}", text(&found));
    assert!(
        crate::support::stderr(&found)
            .contains("3 image(s) in 3 file(s) checked: 2 missing or changed"),
        "{}",
        text(&found)
    );
    let listed = String::from_utf8_lossy(&found.stdout).into_owned();
    assert_eq!(listed.lines().count(), 2, "{}", text(&found));
    assert!(
        listed.contains(&images[0].0) && listed.contains("SHA-256"),
        "{listed}"
    );
    assert!(listed.contains(&images[1].0), "{listed}");

    // The export notices the missing file without hashing: listed as a failure, not stored.
    let rerun = job.run(&[]);
    rerun.assert_exit(1);
    assert_eq!(rerun.failure(&images[1].0)["class"], "missing");

    let requeued = verify(&job, &["--requeue"]);
    assert_eq!(requeued.status.code(), Some(1), "{}", text(&requeued));
    assert!(crate::support::stderr(&requeued).contains("2 image(s) queued again"));
    let fetched = job.run(&[]);
    fetched.assert_exit(0);
    for (url, bytes) in &images {
        fetched.assert_stored(url, bytes);
    }
    let clean = verify(&job, &[]);
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean));
}

#[test]
fn a_damaged_record_in_the_state_is_an_error_naming_it_with_the_fresh_hint() {
    let (_server, job, images) = three_stored();
    use redb::ReadableTable as _;
    let db = redb::Database::open(job.out.join(".scrape/state.redb")).expect("state opens");
    let images_table: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("images_v1");
    let txn = db.begin_write().expect("write");
    {
        let mut table = txn.open_table(images_table).expect("images table");
        let url = images[2].0.as_str();
        let stored = table
            .get(url)
            .expect("read")
            .expect("record")
            .value()
            .to_vec();
        let mut record: Value = serde_json::from_slice(&stored).expect("JSON record");
        // Valid JSON, a wrong value: what a bit flip in a hex digit leaves.
        record["stored"]["sha256"] = Value::from("fbc03ff25c45ca129d7d1dc<aa4b");
        let bytes = serde_json::to_vec(&record).expect("JSON");
        table.insert(url, bytes.as_slice()).expect("write record");
    }
    txn.commit().expect("commit");
    drop(db);

    let listed = run(scrape().arg("urls").arg("--out").arg(&job.out));
    assert_eq!(listed.status.code(), Some(2), "{}", text(&listed));
    let err = crate::support::stderr(&listed);
    assert!(
        err.contains(&format!(
            "damaged record `{}` in table `images_v1`",
            images[2].0
        )),
        "{err}"
    );
    assert!(err.contains("--fresh"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Offsets of `bytes` to damage: the header's first bytes, then `count` evenly spread over the
/// bytes that are not zero (the pages in use; most of a new redb file is zeros).
fn offsets_to_flip(bytes: &[u8], count: usize) -> Vec<usize> {
    let used: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    let step = (used.len() / count).max(1);
    let mut offsets: Vec<usize> = (0..64).step_by(7).collect();
    offsets.extend(used.iter().step_by(step).copied());
    offsets
}

#[test]
fn bit_flips_in_the_state_end_in_a_clear_error_or_a_right_answer_never_a_panic() {
    let (_server, job, images) = three_stored();
    let state = job.out.join(".scrape/state.redb");
    let pristine = std::fs::read(&state).expect("the state");
    let ends_well = |output: &Output, what: &str, offset: usize| {
        let err = crate::support::stderr(output);
        assert!(
            matches!(output.status.code(), Some(0..=2)) && !err.contains("panicked"),
            "{what} with a bit flipped at {offset}: {}",
            text(output)
        );
        if output.status.code() == Some(2) {
            assert!(
                err.contains("state database") && err.contains("--fresh"),
                "{what} with a bit flipped at {offset} gives no clear reason: {err}"
            );
        }
    };
    for (n, offset) in offsets_to_flip(&pristine, 48).into_iter().enumerate() {
        let mut damaged = pristine.clone();
        damaged[offset] ^= 1 << (n % 8);
        std::fs::write(&state, &damaged).expect("the state damaged");

        let status = run(scrape().arg("status").arg("--out").arg(&job.out));
        ends_well(&status, "status", offset);
        let rerun = job.run(&[]);
        ends_well(&rerun.output, "a rerun", offset);
        if rerun.exit_code() == Some(0) {
            for (url, bytes) in &images {
                rerun.assert_stored(url, bytes);
            }
        }
    }
}

#[test]
fn recording_a_page_over_the_page_limit_keeps_a_bounded_body_and_fails_the_page() {
    let server = Hostile::start();
    // 48 MiB of markup, chunked: no length to refuse it by.
    let page = Bytes::from(b"<p>".repeat(16 * MIB));
    server.route("huge.html", move |_| {
        Reply::status(200)
            .body(page.clone())
            .header(header::CONTENT_TYPE, "text/html")
            .chunked()
    });
    let dir = TempDir::new().expect("temporary folder");
    let profile = dir.path().join("huge.toml");
    let start = server.url("huge.html");
    std::fs::write(
        &profile,
        format!("name = \"huge\"\nstart = [\"{start}\"]\n\n[[images]]\nselector = \"img\"\n"),
    )
    .expect("profile written");
    let out = dir.path().join("rec");

    let output = run(scrape()
        .args(["record", "--quiet", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(&out));

    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let har = std::fs::metadata(out.join("site.har")).expect("the recording");
    assert!(
        har.len() < 40 * MIB as u64,
        "the recording holds {} bytes",
        har.len()
    );
    let recording = std::fs::read_to_string(out.join("site.har")).expect("the recording");
    assert!(
        recording.contains("x-scrape-truncated"),
        "no truncation mark"
    );
}
