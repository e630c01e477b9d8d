//! The Prometheus endpoint of a running job (`--metrics ADDR`): `GET /metrics` answers the
//! job's totals, its pace this run and the process's memory in the text exposition format
//! 0.0.4. The totals are the state's (the writer's counters), so they carry on across runs of
//! the same output folder; what is counted per run says so in its help line.
//!
//! [`render_metrics`] turns a [`MetricsSnapshot`] into the text (pure); [`MetricsServer`]
//! serves it for as long as the job runs.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Live, Pace};
use crate::net::HostWindow;
use crate::state::Counters;

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long a stopping server waits for scrapes in progress before it drops them.
const DRAIN: Duration = Duration::from_secs(2);

/// What one scrape of the endpoint reports.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsSnapshot {
    /// The job's name: the profile's, or `download` for URL lists.
    pub job: String,
    pub version: String,
    /// When this run started, seconds since the Unix epoch.
    pub started_unix_secs: u64,
    /// Time since this run started.
    pub elapsed: Duration,
    /// The totals when this run started, and now.
    pub at_start: Counters,
    pub now: Counters,
    /// Bytes received by downloads this run.
    pub received_bytes: u64,
    /// Download attempts in progress.
    pub downloads_in_flight: u64,
    /// Pages being fetched or rendered (their host's turn has come).
    pub pages_in_flight: u64,
    /// Pages waiting for their host's turn.
    pub pages_waiting: u64,
    /// Image servers' answers this run: none (connect error, timeout), then 1xx to 5xx.
    pub image_answers: [u64; 6],
    /// The process's resident memory, when the system tells.
    pub resident_bytes: Option<u64>,
    /// The busiest hosts' windows of requests in flight, stage by stage.
    pub host_windows: Vec<HostWindow>,
}

/// One metric: its name, type, help line and samples (labels, value).
struct Metric {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: Vec<(String, String)>,
}

impl Metric {
    fn counter(name: &'static str, help: &'static str, value: u64) -> Self {
        Self {
            name,
            kind: "counter",
            help,
            samples: vec![(String::new(), value.to_string())],
        }
    }

    fn gauge(name: &'static str, help: &'static str, value: impl ToString) -> Self {
        Self {
            name,
            kind: "gauge",
            help,
            samples: vec![(String::new(), value.to_string())],
        }
    }
}

/// The label of each class of [`MetricsSnapshot::image_answers`].
const ANSWER_CLASSES: [&str; 6] = ["none", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// The metrics of `s` in the text exposition format 0.0.4: `# HELP` and `# TYPE` before each.
pub fn render_metrics(s: &MetricsSnapshot) -> String {
    let now = &s.now;
    let rate = Pace::between(&s.at_start, now, s.elapsed).rate;
    let mut metrics = vec![
        Metric::counter(
            "scrape_pages_done_total",
            "Pages crawled and recorded, all runs of the output folder.",
            now.pages_done,
        ),
        // A gauge: a failed page that a later attempt fetches is no longer counted.
        Metric::gauge(
            "scrape_pages_failed",
            "Pages whose last attempt failed (the next run retries them).",
            now.pages_failed,
        ),
        Metric::counter(
            "scrape_images_found_total",
            "Distinct images found, all runs of the output folder.",
            now.images_found,
        ),
        Metric::counter(
            "scrape_images_stored_total",
            "Images downloaded, verified and stored, all runs of the output folder.",
            now.stored,
        ),
        Metric::counter(
            "scrape_images_duplicate_total",
            "Images whose bytes were already stored under another URL, all runs.",
            now.duplicates,
        ),
        // A gauge: `scrape retry` queues failed images again, so the count can go down.
        Metric::gauge(
            "scrape_images_failed",
            "Images whose last attempt failed (scrape retry queues them again).",
            now.failed,
        ),
        Metric::gauge(
            "scrape_images_pending",
            "Images found and not yet stored, deduplicated or failed.",
            now.pending(),
        ),
        Metric::gauge(
            "scrape_links_queued",
            "Linked pages ([[follow]] levels) queued and not crawled yet.",
            now.links_queued,
        ),
        Metric::counter(
            "scrape_stored_bytes_total",
            "Bytes of the images stored, all runs of the output folder.",
            now.stored_bytes,
        ),
        Metric::counter(
            "scrape_received_bytes_total",
            "Bytes received by downloads this run, failed attempts included.",
            s.received_bytes,
        ),
        Metric::gauge(
            "scrape_downloads_in_flight",
            "Download attempts in progress.",
            s.downloads_in_flight,
        ),
        Metric::gauge(
            "scrape_pages_in_flight",
            "Pages being fetched or rendered.",
            s.pages_in_flight,
        ),
        Metric::gauge(
            "scrape_pages_waiting",
            "Pages waiting for their host's turn.",
            s.pages_waiting,
        ),
        Metric {
            name: "scrape_image_answers_total",
            kind: "counter",
            help: "Image servers' answers this run by status class; `none`: no answer (connect error, timeout).",
            samples: ANSWER_CLASSES
                .iter()
                .zip(s.image_answers)
                .map(|(class, n)| (format!("{{class=\"{class}\"}}"), n.to_string()))
                .collect(),
        },
        Metric::gauge(
            "scrape_images_per_second",
            "Images done (stored, duplicate or failed) per second, this run.",
            format!("{rate:.3}"),
        ),
        Metric::gauge(
            "scrape_start_time_seconds",
            "When this run started, seconds since the Unix epoch.",
            s.started_unix_secs,
        ),
    ];
    if !s.host_windows.is_empty() {
        metrics.push(Metric {
            name: "scrape_host_window",
            kind: "gauge",
            help: "Requests allowed in flight to a host now (its adaptive window), for the busiest hosts.",
            samples: s
                .host_windows
                .iter()
                .map(|w| {
                    (
                        format!(
                            "{{stage=\"{}\",host=\"{}\"}}",
                            label_value(&w.stage),
                            label_value(&w.host)
                        ),
                        w.window.to_string(),
                    )
                })
                .collect(),
        });
    }
    if let Some(bytes) = s.resident_bytes {
        metrics.push(Metric::gauge(
            "scrape_resident_memory_bytes",
            "Resident memory of the scrape process.",
            bytes,
        ));
    }
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        text,
        "# HELP scrape_info The running job and the scrape version.\n\
         # TYPE scrape_info gauge\n\
         scrape_info{{profile=\"{}\",version=\"{}\"}} 1",
        label_value(&s.job),
        label_value(&s.version)
    );
    for m in metrics {
        let _ = writeln!(
            text,
            "# HELP {name} {help}\n# TYPE {name} {kind}",
            name = m.name,
            help = m.help,
            kind = m.kind,
        );
        for (labels, value) in &m.samples {
            let _ = writeln!(text, "{}{labels} {value}", m.name);
        }
    }
    text
}

/// `value` escaped for a label: backslash, double quote and line feed.
fn label_value(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

/// Resident memory from `/proc/self/status` (`VmRSS`, in kB: no page size needed, unlike
/// `statm`); none where there is no procfs.
async fn resident_bytes() -> Option<u64> {
    let status = tokio::fs::read_to_string("/proc/self/status").await.ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Why the metrics endpoint cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics at `{addr}`")]
pub struct MetricsError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// A socket bound for the metrics endpoint, bound before a job starts so that a taken port
/// stops the command before anything is touched. Clones share the socket: the first job run
/// with it serves it.
#[derive(Debug, Clone)]
pub struct MetricsListener {
    addr: SocketAddr,
    socket: Arc<Mutex<Option<std::net::TcpListener>>>,
}

impl MetricsListener {
    /// Binds `addr` (port 0: a free port).
    pub fn bind(addr: SocketAddr) -> Result<Self, MetricsError> {
        let error = |source| MetricsError { addr, source };
        let socket = std::net::TcpListener::bind(addr).map_err(error)?;
        socket.set_nonblocking(true).map_err(error)?;
        let addr = socket.local_addr().map_err(error)?;
        Ok(Self {
            addr,
            socket: Arc::new(Mutex::new(Some(socket))),
        })
    }

    /// The address bound, with the real port.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The socket for the runtime; none if a job already took it.
    pub fn take(&self) -> Result<Option<tokio::net::TcpListener>, MetricsError> {
        let socket = self.socket.lock().ok().and_then(|mut s| s.take());
        socket
            .map(tokio::net::TcpListener::from_std)
            .transpose()
            .map_err(|source| MetricsError {
                addr: self.addr,
                source,
            })
    }
}

/// What the endpoint reads on each scrape.
struct Source {
    job: String,
    started_unix_secs: u64,
    began: Instant,
    at_start: Counters,
    counters: watch::Receiver<Counters>,
    live: Arc<Live>,
}

impl Source {
    async fn snapshot(&self) -> MetricsSnapshot {
        // Read before the counters are borrowed: the borrow must not be held across an await.
        let resident_bytes = resident_bytes().await;
        let (fetching, waiting) = self.live.pages_fetching_and_waiting();
        MetricsSnapshot {
            job: self.job.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_unix_secs: self.started_unix_secs,
            elapsed: self.began.elapsed(),
            at_start: self.at_start,
            now: *self.counters.borrow(),
            received_bytes: self.live.bytes(),
            downloads_in_flight: self.live.in_flight(),
            pages_in_flight: fetching,
            pages_waiting: waiting,
            image_answers: self.live.answers(),
            resident_bytes,
            host_windows: self.live.host_windows(),
        }
    }
}

/// Serves `GET /metrics` until stopped.
pub struct MetricsServer {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl MetricsServer {
    /// Serves the metrics of job `job` (its totals from `counters`, its bytes from `live`) on
    /// `listener`, and says where on stderr.
    pub fn start(
        listener: tokio::net::TcpListener,
        job: &str,
        counters: watch::Receiver<Counters>,
        live: Arc<Live>,
    ) -> Self {
        let at_start = *counters.borrow();
        let source = Arc::new(Source {
            job: job.to_owned(),
            started_unix_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            began: Instant::now(),
            at_start,
            counters,
            live,
        });
        if let Ok(addr) = listener.local_addr() {
            eprintln!("metrics at http://{addr}/metrics");
        }
        let app = Router::new()
            .route("/metrics", get(metrics))
            .with_state(source);
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                let served = axum::serve(listener, app)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await;
                if let Err(e) = served {
                    tracing::warn!(error = %e, "the metrics endpoint stopped");
                }
            }
        });
        Self { stop, task }
    }

    /// Stops serving; a scrape still in progress gets a moment to finish.
    pub async fn finish(mut self) {
        self.stop.cancel();
        if tokio::time::timeout(DRAIN, &mut self.task).await.is_err() {
            self.task.abort();
        }
    }
}

async fn metrics(State(source): State<Arc<Source>>) -> impl IntoResponse {
    let text = render_metrics(&source.snapshot().await);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> MetricsSnapshot {
        MetricsSnapshot {
            job: "gallery".to_owned(),
            version: "1.2.3".to_owned(),
            started_unix_secs: 1_700_000_000,
            elapsed: Duration::from_secs(10),
            at_start: Counters {
                images_found: 10,
                stored: 4,
                ..Counters::default()
            },
            now: Counters {
                pages_done: 3,
                pages_failed: 1,
                images_found: 20,
                stored: 12,
                stored_bytes: 4096,
                duplicates: 2,
                failed: 1,
                links_queued: 7,
                ..Counters::default()
            },
            received_bytes: 5000,
            downloads_in_flight: 2,
            pages_in_flight: 3,
            pages_waiting: 4,
            image_answers: [1, 0, 12, 0, 3, 1],
            resident_bytes: Some(1 << 20),
            host_windows: vec![
                HostWindow {
                    stage: "download".into(),
                    host: "img.test:443".into(),
                    window: 64,
                    in_flight: 60,
                },
                HostWindow {
                    stage: "crawl".into(),
                    host: "img.test:443".into(),
                    window: 8,
                    in_flight: 2,
                },
            ],
        }
    }

    /// The sample lines of `text`: name (with labels) → value.
    fn samples(text: &str) -> Vec<(&str, &str)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').expect("`name value`"))
            .collect()
    }

    #[test]
    fn every_metric_has_its_help_and_type_just_before_it() {
        let text = render_metrics(&snapshot());
        let mut lines = text.lines().peekable();
        let mut metrics = 0;
        while let Some(help) = lines.next() {
            let name = help
                .strip_prefix("# HELP ")
                .and_then(|rest| rest.split(' ').next())
                .unwrap_or_else(|| panic!("`{help}` is not a HELP line\n{text}"));
            let kind = lines
                .next()
                .and_then(|l| l.strip_prefix(&format!("# TYPE {name} ")));
            assert!(
                matches!(kind, Some("counter" | "gauge")),
                "{name}: {kind:?}"
            );
            assert_eq!(name.ends_with("_total"), kind == Some("counter"), "{name}");
            assert!(name.starts_with("scrape_"), "{name}");
            let mut samples = 0;
            while lines.peek().is_some_and(|l| !l.starts_with('#')) {
                let sample = lines.next().unwrap_or_default();
                assert_eq!(sample.split(['{', ' ']).next(), Some(name), "{sample}");
                samples += 1;
            }
            assert!(samples > 0, "{name} has no sample");
            metrics += 1;
        }
        assert!(metrics > 10, "{text}");
    }

    #[test]
    fn totals_come_from_the_state_and_pace_from_this_run() {
        let text = render_metrics(&snapshot());
        let samples = samples(&text);
        let expected = [
            ("scrape_info{profile=\"gallery\",version=\"1.2.3\"}", "1"),
            ("scrape_pages_done_total", "3"),
            ("scrape_pages_failed", "1"),
            ("scrape_images_found_total", "20"),
            ("scrape_images_stored_total", "12"),
            ("scrape_images_duplicate_total", "2"),
            ("scrape_images_failed", "1"),
            ("scrape_images_pending", "5"),
            ("scrape_links_queued", "7"),
            ("scrape_stored_bytes_total", "4096"),
            ("scrape_received_bytes_total", "5000"),
            ("scrape_downloads_in_flight", "2"),
            ("scrape_pages_in_flight", "3"),
            ("scrape_pages_waiting", "4"),
            ("scrape_image_answers_total{class=\"none\"}", "1"),
            ("scrape_image_answers_total{class=\"1xx\"}", "0"),
            ("scrape_image_answers_total{class=\"2xx\"}", "12"),
            ("scrape_image_answers_total{class=\"3xx\"}", "0"),
            ("scrape_image_answers_total{class=\"4xx\"}", "3"),
            ("scrape_image_answers_total{class=\"5xx\"}", "1"),
            // 11 done this run (15 - 4) in 10 seconds.
            ("scrape_images_per_second", "1.100"),
            ("scrape_start_time_seconds", "1700000000"),
            (
                "scrape_host_window{stage=\"download\",host=\"img.test:443\"}",
                "64",
            ),
            (
                "scrape_host_window{stage=\"crawl\",host=\"img.test:443\"}",
                "8",
            ),
            ("scrape_resident_memory_bytes", "1048576"),
        ];
        assert_eq!(samples, expected, "{text}");
    }

    #[test]
    fn memory_is_left_out_when_the_system_does_not_tell() {
        let text = render_metrics(&MetricsSnapshot {
            resident_bytes: None,
            ..snapshot()
        });
        assert!(!text.contains("scrape_resident_memory_bytes"), "{text}");
    }

    #[test]
    fn label_values_escape_quotes_backslashes_and_newlines() {
        let text = render_metrics(&MetricsSnapshot {
            job: "a\"b\\c\nd".to_owned(),
            ..snapshot()
        });
        assert!(
            text.contains(r#"scrape_info{profile="a\"b\\c\nd",version="1.2.3"} 1"#),
            "{text}"
        );
    }

    #[tokio::test]
    async fn resident_memory_is_read_from_proc_on_linux() {
        let bytes = resident_bytes().await;
        if cfg!(target_os = "linux") {
            assert!(bytes.is_some_and(|b| b > 0), "{bytes:?}");
        }
    }

    #[test]
    fn a_taken_port_is_an_error_naming_the_address() {
        let taken = MetricsListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = taken.local_addr();
        let error = MetricsListener::bind(addr).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("cannot serve metrics at `{addr}`")
        );
        assert_eq!(error.source.kind(), std::io::ErrorKind::AddrInUse);
    }
}
