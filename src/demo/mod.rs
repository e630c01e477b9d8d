//! The demo site: a gallery served on loopback by the project itself, for the quick start, the
//! tests and anyone trying a profile without the internet.
//!
//! Pages are static files from a folder; images under `/img/` are generated on request from their
//! name (`/img/<anything>-<W>x<H>.<jpg|png|gif>`), byte-identical every time, so tests can compute
//! the expected sha256 of every image without storing binary fixtures. The JSON APIs of the
//! demo's single-page app and photo feed are in [`api`].

pub mod api;
pub mod imagegen;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State as AxumState};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::verify::ImageFormat;

/// A running demo site.
pub struct DemoSite {
    addr: SocketAddr,
    hits: Arc<Mutex<HashMap<String, u64>>>,
    /// The requests of `hits` a browser sent (its user agent names Chrome).
    browser_hits: Arc<Mutex<HashMap<String, u64>>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Site {
    root: Arc<PathBuf>,
    tokens: api::Tokens,
}

impl DemoSite {
    /// Serves `root` on `listener` until [`DemoSite::stop`] or drop of the runtime.
    pub fn serve(root: &Path, listener: TcpListener) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let hits = Arc::new(Mutex::new(HashMap::new()));
        let browser_hits = Arc::new(Mutex::new(HashMap::new()));
        let site = Site {
            root: Arc::new(root.to_owned()),
            tokens: api::Tokens::default(),
        };
        let counted = Arc::clone(&hits);
        let counted_browser = Arc::clone(&browser_hits);
        let app = Router::new()
            .route("/spa/api/items", post(api::spa_items_handler))
            .route(
                "/api/token",
                post(|AxumState(site): AxumState<Site>, body: String| {
                    api::token_handler(site.tokens, body)
                }),
            )
            .route(
                "/api/photos",
                get(
                    |AxumState(site): AxumState<Site>, headers: HeaderMap, uri: Uri| {
                        api::photos_handler(site.tokens, headers, uri)
                    },
                ),
            )
            .fallback(handle)
            .with_state(site)
            .layer(axum::middleware::from_fn(
                move |request: Request, next: Next| {
                    let path = request.uri().path().to_owned();
                    let browser = request
                        .headers()
                        .get(axum::http::header::USER_AGENT)
                        .and_then(|ua| ua.to_str().ok())
                        .is_some_and(|ua| ua.contains("Chrome/"));
                    if browser && let Ok(mut hits) = counted_browser.lock() {
                        *hits.entry(path.clone()).or_default() += 1;
                    }
                    if let Ok(mut hits) = counted.lock() {
                        *hits.entry(path).or_default() += 1;
                    }
                    next.run(request)
                },
            ));
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { token.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "demo site stopped");
            }
        });
        Ok(Self {
            addr,
            hits,
            browser_hits,
            stop,
            task,
        })
    }

    /// Binds `127.0.0.1:port` (0 for any free port) and serves `root`.
    pub async fn start(root: &Path, port: u16) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        Self::serve(root, listener)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests each path received (images under `/img/` included).
    pub fn hits(&self) -> HashMap<String, u64> {
        self.hits.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// How many of [`DemoSite::hits`] a browser sent, per path.
    pub fn browser_hits(&self) -> HashMap<String, u64> {
        self.browser_hits
            .lock()
            .map(|h| h.clone())
            .unwrap_or_default()
    }

    /// Stops serving and waits for the server task.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn handle(AxumState(site): AxumState<Site>, headers: HeaderMap, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    if let Some(name) = path.strip_prefix("/img/") {
        // Encoding a large picture takes a while: off the async workers, so pages stay fast.
        let name = name.to_owned();
        let image = tokio::task::spawn_blocking(move || image_for(&name))
            .await
            .ok()
            .flatten();
        return match image {
            Some((format, bytes)) => {
                ([(header::CONTENT_TYPE, format.content_type())], bytes).into_response()
            }
            None => StatusCode::NOT_FOUND.into_response(),
        };
    }
    let Some((content_type, bytes, modified)) = read_static(&site.root, &path).await else {
        return StatusCode::NOT_FOUND.into_response();
    };
    // Files carry their modification time, and a request that has them as they were gets a
    // `304`, as from any static server: what a refresh of the demo asks with.
    let Some(modified) = modified.map(httpdate::fmt_http_date) else {
        return ([(header::CONTENT_TYPE, content_type)], Body::from(bytes)).into_response();
    };
    let unchanged = headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|since| since.to_str().ok())
        .is_some_and(|since| since == modified);
    if unchanged {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::LAST_MODIFIED, modified)],
        )
            .into_response();
    }
    (
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::LAST_MODIFIED, modified),
        ],
        Body::from(bytes),
    )
        .into_response()
}

/// The generated image for `/img/<name>`: format from the extension, size from a `-WxH` suffix
/// (default 320x240), picture from a hash of the name.
pub fn image_for(name: &str) -> Option<(ImageFormat, Vec<u8>)> {
    let (stem, ext) = name.rsplit_once('.')?;
    let format = match ext {
        "jpg" | "jpeg" => ImageFormat::Jpeg,
        "png" => ImageFormat::Png,
        "gif" => ImageFormat::Gif,
        _ => return None,
    };
    let (width, height) = stem
        .rsplit_once('-')
        .and_then(|(_, size)| size.split_once('x'))
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .filter(|(w, h)| (1..=4096).contains(w) && (1..=4096).contains(h))
        .unwrap_or((320, 240));
    let seed = fnv1a(stem.as_bytes());
    Some((format, imagegen::generate(format, seed, width, height)?))
}

/// FNV-1a: a fixed, documented hash, so image bytes never change with the Rust version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The file `path` names under `root`: its content type, bytes and modification time.
async fn read_static(
    root: &Path,
    path: &str,
) -> Option<(&'static str, Vec<u8>, Option<std::time::SystemTime>)> {
    let mut file = root.to_owned();
    for part in Path::new(path.trim_start_matches('/')).components() {
        match part {
            Component::Normal(p) => file.push(p),
            _ => return None,
        }
    }
    if path.ends_with('/') || file.is_dir() {
        file.push("index.html");
    }
    let bytes = tokio::fs::read(&file).await.ok()?;
    let modified = tokio::fs::metadata(&file)
        .await
        .ok()
        .and_then(|m| m.modified().ok());
    let content_type = match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        _ => "application/octet-stream",
    };
    Some((content_type, bytes, modified))
}
