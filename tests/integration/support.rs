//! Shared helpers: the binary, the demo site on a loopback port, expected results.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use scrape::demo::DemoSite;
use sha2::{Digest, Sha256};

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
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
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

    /// How many requests each path got so far.
    pub fn hits(&self) -> BTreeMap<String, u64> {
        self.site
            .as_ref()
            .map(|s| s.hits().into_iter().collect())
            .unwrap_or_default()
    }

    /// Requests for images (`/img/...`), all paths together.
    pub fn image_requests(&self) -> u64 {
        self.hits()
            .iter()
            .filter(|(p, _)| p.starts_with("/img/"))
            .map(|(_, n)| n)
            .sum()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some(site) = self.site.take() {
            self.runtime.block_on(site.stop());
        }
    }
}

/// The demo site's expected images: absolute URL → sha256 of the bytes the server sends.
pub fn expected_demo_images(origin: &str) -> BTreeMap<String, String> {
    let list = std::fs::read_to_string(repo("fixtures/demo-site/expected-images.txt"))
        .expect("expected list");
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

/// The manifest of `out`: one JSON object per line.
pub fn manifest(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("manifest.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("manifest lines are JSON"))
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

/// Every regular file under `out` except the state folder and the manifest files, relative,
/// with its sha256.
pub fn stored_files(out: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut stack = vec![out.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable output folder") {
            let path = entry.expect("entry").path();
            let rel = path
                .strip_prefix(out)
                .expect("inside")
                .to_string_lossy()
                .into_owned();
            if rel == ".scrape" || rel.ends_with(".jsonl") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("readable file");
                files.insert(rel, hex::encode(Sha256::digest(&bytes)));
            }
        }
    }
    files
}

/// A profile for the demo site that writes into `out`, as a file in `dir`.
pub fn demo_profile_in(dir: &Path, extra: &str) -> PathBuf {
    let source = std::fs::read_to_string(repo("site-profiles/demo.toml")).expect("demo profile");
    let path = dir.join("demo.toml");
    std::fs::write(&path, format!("{source}\n{extra}")).expect("profile written");
    path
}

/// Polls `condition` every few milliseconds until it holds; panics after `timeout`, naming
/// `what` was awaited.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// How many files are stored under `out` (state folder and `.jsonl` lists left out); cheap
/// enough to poll, and tolerant of folders appearing while it walks.
pub fn stored_count(out: &Path) -> usize {
    let mut count = 0;
    let mut stack = vec![out.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == ".scrape" || name.ends_with(".jsonl") || name.ends_with(".tmp") {
                continue;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(_) => count += 1,
                Err(_) => {}
            }
        }
    }
    count
}

/// Every `*.part` file anywhere under `out`, the state folder's `parts` included.
pub fn part_files(out: &Path) -> Vec<PathBuf> {
    let mut parts = Vec::new();
    let mut stack = vec![out.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "part") {
                parts.push(path);
            }
        }
    }
    parts
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
                "<a class=\"next\" href=\"/gallery/page-{}.html\">Next</a>",
                number + 1
            )
        } else {
            String::new()
        };
        let html = format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Page {number}</title></head>\n\
             <body><main><section class=\"gallery\">\n{figures}</section>\n<nav>{next}</nav></main></body></html>\n"
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
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                return (status, self.stderr_text());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the run did not end:\n{}", self.stderr_text());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
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
/// one that counts its requests (`/slow`). Every request is counted by path.
pub struct ApiServer {
    pub addr: std::net::SocketAddr,
    /// Requests for `/slow`.
    pub page_requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    hits: std::sync::Arc<std::sync::Mutex<BTreeMap<String, u64>>>,
    task: tokio::task::JoinHandle<()>,
    /// Its own runtime, when started by [`ApiServer::serve`] outside of one.
    runtime: Option<tokio::runtime::Runtime>,
}

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
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
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
    fn drop(&mut self) {
        self.task.abort();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
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
    runtime: Option<tokio::runtime::Runtime>,
    kind: Kind,
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
}

impl Drop for Proxy {
    /// Without waiting for its tasks: a proxy may be dropped inside an async test.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
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
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
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
            runtime: Some(runtime),
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

    /// Forwarded requests by target path.
    pub fn paths(&self) -> BTreeMap<String, u64> {
        let mut paths = BTreeMap::new();
        for (target, _) in &self.seen.lock().unwrap().forwarded {
            let path = url::Url::parse(target)
                .expect("target URL")
                .path()
                .to_owned();
            *paths.entry(path).or_default() += 1;
        }
        paths
    }

    pub fn forwarded(&self) -> usize {
        self.seen.lock().unwrap().forwarded.len()
    }

    pub fn authorizations(&self) -> Vec<Option<String>> {
        let seen = self.seen.lock().unwrap();
        seen.forwarded
            .iter()
            .map(|(_, auth)| auth.clone())
            .collect()
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
