//! `--metrics ADDR`: a running job serves its totals at `/metrics` in Prometheus' text format,
//! and an address it cannot use stops the command before anything is written.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Path as UrlPath;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use tempfile::TempDir;

use crate::support::{Background, PATIENCE, ServerRuntime, download_list, run, text};

/// Generated images under `/img/NAME`; `stuck-64x64.jpg` sends its first bytes and then
/// nothing, for good, so a job downloading it keeps running.
struct ImageServer {
    origin: String,
    /// Runs the server; shut down with it, without waiting: `stuck` replies never end.
    _runtime: ServerRuntime,
}

impl ImageServer {
    fn start() -> Self {
        let app = Router::new().route("/img/{name}", get(image));
        let (runtime, origin) = ServerRuntime::serve(1, app);
        Self {
            origin,
            _runtime: runtime,
        }
    }

    fn url(&self, name: &str) -> String {
        format!("{}/img/{name}", self.origin)
    }
}

async fn image(UrlPath(name): UrlPath<String>) -> Response {
    let Some((format, bytes)) = scrape::demo::image_for(&name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let length = bytes.len();
    let body = if name.starts_with("stuck") {
        let head = Bytes::copy_from_slice(&bytes[..64]);
        let stream = futures_util::stream::once(async move { Ok::<_, std::io::Error>(head) })
            .chain(futures_util::stream::pending());
        Body::from_stream(stream)
    } else {
        Body::from(bytes)
    };
    (
        [
            (header::CONTENT_TYPE, format.content_type().to_owned()),
            (header::CONTENT_LENGTH, length.to_string()),
        ],
        body,
    )
        .into_response()
}

/// A URL list of `urls` in a fresh folder, and the output folder beside it.
fn list(urls: &[String]) -> (TempDir, PathBuf, PathBuf) {
    let dir = TempDir::new().expect("temporary folder");
    let list = dir.path().join("list.txt");
    std::fs::write(&list, urls.join("\n") + "\n").expect("list written");
    let out = dir.path().join("out");
    (dir, list, out)
}

/// `scrape download` of `list` into `out`, serving metrics at `metrics`; long timeouts, so
/// the stalled image stays in flight.
fn download(list: &Path, out: &Path, metrics: &str) -> std::process::Command {
    download_list(
        list,
        out,
        &[
            "--timeout",
            "600s",
            "--min-speed",
            "0",
            "--metrics",
            metrics,
        ],
    )
}

/// The body of `GET /metrics` at `addr`, over a plain connection; none while nothing answers.
fn scrape_metrics(addr: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(PATIENCE)).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    Some(body.to_owned())
}

/// The samples of an exposition, name (with labels) → value, after checking that each metric
/// has its `# HELP` and `# TYPE` lines before its first sample.
fn parse_exposition(text: &str) -> BTreeMap<String, f64> {
    let mut helped = Vec::new();
    let mut typed = Vec::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("# HELP NAME TEXT");
            assert!(!help.is_empty(), "{line}");
            helped.push(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE NAME KIND");
            assert!(matches!(kind, "counter" | "gauge"), "{line}");
            assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
            typed.push(name.to_owned());
        } else {
            let (series, value) = line.rsplit_once(' ').expect("NAME VALUE");
            let name = series.split('{').next().unwrap_or_default();
            assert!(name.starts_with("scrape_"), "{line}");
            assert!(
                helped.last().map(String::as_str) == Some(name)
                    && typed.last().map(String::as_str) == Some(name),
                "`{name}` comes without its HELP and TYPE lines:\n{text}"
            );
            let value: f64 = value.parse().expect("a number");
            samples.insert(series.to_owned(), value);
        }
    }
    samples
}

#[test]
fn a_running_download_serves_its_totals_to_prometheus() {
    let server = ImageServer::start();
    let urls: Vec<String> = ["a-64x64.jpg", "b-64x64.png", "stuck-64x64.jpg"]
        .iter()
        .map(|n| server.url(n))
        .collect();
    let (dir, list, out) = list(&urls);
    let stderr = dir.path().join("stderr");
    let mut job = Background::spawn(&mut download(&list, &out, "127.0.0.1:0"), &stderr);

    let mut addr = String::new();
    job.wait_for("the metrics address on stderr", PATIENCE, || {
        let text = job_stderr(&stderr);
        let found = text
            .lines()
            .find_map(|l| l.strip_prefix("metrics at http://"))
            .and_then(|rest| rest.strip_suffix("/metrics"));
        if let Some(found) = found {
            addr = found.to_owned();
        }
        found.is_some()
    });
    assert!(
        !addr.ends_with(":0"),
        "the real port is printed, not `{addr}`"
    );

    let mut samples = BTreeMap::new();
    job.wait_for("two stored images in the metrics", PATIENCE, || {
        let Some(body) = scrape_metrics(&addr) else {
            return false;
        };
        samples = parse_exposition(&body);
        samples.get("scrape_images_stored_total") == Some(&2.0)
    });
    let version = env!("CARGO_PKG_VERSION");
    let info = format!("scrape_info{{profile=\"download\",version=\"{version}\"}}");
    assert_eq!(samples.get(&info), Some(&1.0), "{samples:?}");
    for (name, value) in [
        ("scrape_images_found_total", 3.0),
        ("scrape_images_pending", 1.0),
        ("scrape_images_failed", 0.0),
        ("scrape_images_duplicate_total", 0.0),
        // The stalled image: its attempt is still going.
        ("scrape_downloads_in_flight", 1.0),
        ("scrape_image_answers_total{class=\"5xx\"}", 0.0),
    ] {
        assert_eq!(samples.get(name), Some(&value), "{name}: {samples:?}");
    }
    for name in [
        "scrape_received_bytes_total",
        "scrape_stored_bytes_total",
        "scrape_images_per_second",
        "scrape_start_time_seconds",
        "scrape_resident_memory_bytes",
    ] {
        assert!(
            samples.get(name).is_some_and(|v| *v > 0.0),
            "{name}: {samples:?}"
        );
    }
    let answered = samples
        .get("scrape_image_answers_total{class=\"2xx\"}")
        .copied()
        .unwrap_or_default();
    assert!(answered >= 2.0, "{samples:?}");
    let window = format!(
        "scrape_host_window{{stage=\"download\",host=\"{}\"}}",
        server.origin.trim_start_matches("http://")
    );
    assert!(
        samples.get(&window).is_some_and(|w| *w >= 1.0),
        "{window}: {samples:?}"
    );
    job.kill();
}

#[test]
fn a_taken_metrics_port_stops_the_command_before_anything_is_written() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = taken.local_addr().expect("its address").to_string();
    let (_dir, list, out) = list(&["http://127.0.0.1:9/img/a-64x64.jpg".to_owned()]);

    let output = run(&mut download(&list, &out, &addr));

    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("--metrics: cannot serve metrics at `{addr}`")),
        "{}",
        text(&output)
    );
    assert!(
        !out.exists(),
        "the output folder was created:\n{}",
        text(&output)
    );
}

fn job_stderr(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
