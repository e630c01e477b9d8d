//! Fetch: pages over plain HTTP for `render = "static"` profiles.
//!
//! Returns a [`PageSnapshot`] for the pure stages; transient failures are retried here with
//! back-off, so the crawl only sees a page or a final failure.

pub mod api;

use std::sync::Arc;

use reqwest::header::{ETAG, LAST_MODIFIED};
use tokio_util::sync::CancellationToken;

use crate::net::client::read_bounded;
use crate::net::hosts::{LocalGate, retry_after};
use crate::net::{
    Failure, FailureClass, Hosts, HttpClient, MAX_PAGE_BYTES, RetryPolicy, RobotsGate, Stopped,
    classify, with_retries,
};
use crate::page::{PageSnapshot, Validators};
use crate::redact::redact;

/// Fetches pages with the run's HTTP client, under the crawl's per-host limits.
#[derive(Clone)]
pub struct PageFetcher {
    client: HttpClient,
    retry: RetryPolicy,
    hosts: Arc<Hosts>,
    /// robots.txt, asked before each page; `None` when it is ignored (or for `probe`).
    robots: Option<Arc<RobotsGate>>,
}

/// Why a page could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageFailure {
    /// The server says the page does not exist (404, 410): pagination by template ends here.
    Missing(u16),
    /// Anything else, after retries.
    Failed(Failure),
    /// The run was cancelled while fetching.
    Cancelled,
}

impl PageFetcher {
    /// A fetcher that retries `retries` times, with no per-host limits of its own (one page at
    /// a time: `probe`, `new-profile`).
    pub fn new(client: HttpClient, retries: u32) -> Self {
        Self::with_hosts(client, retries, Arc::new(Hosts::unlimited()))
    }

    /// A fetcher whose requests take their host's turn in `hosts` (the crawl's `[crawl]`
    /// limits), attempt by attempt, so a host that answers 429 or 503 is slowed for every page.
    pub fn with_hosts(client: HttpClient, retries: u32, hosts: Arc<Hosts>) -> Self {
        Self {
            client,
            retry: RetryPolicy::new(retries),
            hosts,
            robots: None,
        }
    }

    /// The same fetcher asking `robots` before every page it fetches or renders.
    pub fn with_robots(mut self, robots: Arc<RobotsGate>) -> Self {
        self.robots = Some(robots);
        self
    }

    /// Whether robots.txt lets the page at `url` be fetched or rendered (always, when it is
    /// ignored); a refusal is a failure of class `robots`, never retried.
    pub async fn robots_allow(&self, url: &url::Url) -> Result<(), PageFailure> {
        match &self.robots {
            Some(robots) => robots.check(url).await.map_err(PageFailure::Failed),
            None => Ok(()),
        }
    }

    /// The run's HTTP client.
    pub fn client(&self) -> &HttpClient {
        &self.client
    }

    /// The per-host limits page requests go through (also taken by browser renders).
    pub fn hosts(&self) -> &Arc<Hosts> {
        &self.hosts
    }

    /// Fetches the page at `url`, retrying transient failures.
    pub async fn fetch(
        &self,
        url: &url::Url,
        cancel: &CancellationToken,
    ) -> Result<PageSnapshot, PageFailure> {
        self.fetch_if_changed(url, None, cancel)
            .await?
            .ok_or_else(unasked_304)
    }

    /// Fetches the page at `url` as [`PageFetcher::fetch`] does; with `validators`, only if it
    /// changed since they were sent (`If-None-Match`, `If-Modified-Since`): `None` when the
    /// server answers `304 Not Modified`.
    pub async fn fetch_if_changed(
        &self,
        url: &url::Url,
        validators: Option<&Validators>,
        cancel: &CancellationToken,
    ) -> Result<Option<PageSnapshot>, PageFailure> {
        let Some(body) = self
            .fetch_body_if_changed(url, "page", MAX_PAGE_BYTES, validators, cancel)
            .await?
        else {
            return Ok(None);
        };
        let mut snapshot =
            PageSnapshot::html(body.url, String::from_utf8_lossy(&body.bytes).into_owned());
        snapshot.robots_tags = body.robots_tags;
        snapshot.validators = body.validators;
        Ok(Some(snapshot))
    }

    /// Fetches the body of `url` (a page, or a file such as a sitemap: `what` names it in
    /// errors) as it comes, at most `limit` bytes after the client's decoding, asking
    /// robots.txt first and retrying transient failures like a page.
    pub async fn fetch_body(
        &self,
        url: &url::Url,
        what: &'static str,
        limit: usize,
        cancel: &CancellationToken,
    ) -> Result<Body, PageFailure> {
        self.fetch_body_if_changed(url, what, limit, None, cancel)
            .await?
            .ok_or_else(unasked_304)
    }

    /// [`PageFetcher::fetch_body`], asked only if the body changed when there are
    /// `validators`: `None` for a `304 Not Modified`, an answer like any other (never retried).
    async fn fetch_body_if_changed(
        &self,
        url: &url::Url,
        what: &'static str,
        limit: usize,
        validators: Option<&Validators>,
        cancel: &CancellationToken,
    ) -> Result<Option<Body>, PageFailure> {
        self.robots_allow(url).await?;
        let host = self.hosts.get(url);
        let gate = LocalGate::<PageFailure>::new(&host);
        let tried = with_retries(self.retry, &gate, cancel, |_| async {
            match self.fetch_once(url, what, limit, validators).await {
                Err(PageFailure::Failed(failed)) => Ok(Err(failed)),
                // A page the server says is missing, or unchanged, is an answer, not a
                // failure to retry.
                other => Ok(Ok(other)),
            }
        })
        .await;
        match tried {
            Ok((Ok(fetched), _)) => fetched,
            Ok((Err(failed), attempts)) => {
                tracing::debug!(url = %redact(url), attempts, error = %failed.detail, "{what} fetch failed");
                Err(PageFailure::Failed(failed))
            }
            Err(Stopped::Cancelled) => Err(PageFailure::Cancelled),
            Err(Stopped::Fatal(failure)) => Err(failure),
        }
    }

    /// The robots.txt of `url`'s origin, as the run's gate reads it: the values of its
    /// `Sitemap:` lines. A failure when robots.txt is not read in this run, or cannot be.
    pub async fn robots_sitemaps(&self, url: &url::Url) -> Result<Vec<String>, Failure> {
        match &self.robots {
            Some(robots) => robots.sitemaps(url).await,
            None => Err(Failure::new(
                FailureClass::Other,
                "robots.txt is not read in this run (`robots = \"ignore\"`), so its sitemaps are not either",
            )),
        }
    }

    async fn fetch_once(
        &self,
        url: &url::Url,
        what: &str,
        limit: usize,
        validators: Option<&Validators>,
    ) -> Result<Option<Body>, PageFailure> {
        let failed = |e: reqwest::Error| PageFailure::Failed(classify(&e));
        let mut request = self.client.get(url.clone());
        for (name, value) in validators
            .map(Validators::conditional_headers)
            .unwrap_or_default()
        {
            request = request.header(name, value);
        }
        let response = self.client.send(request).await.map_err(failed)?;
        let status = response.status().as_u16();
        if matches!(status, 404 | 410) {
            return Err(PageFailure::Missing(status));
        }
        // Unchanged, for a request that asked so; a 304 nobody asked for is a failure.
        if status == 304 && validators.is_some() {
            return Ok(None);
        }
        if !response.status().is_success() {
            let mut failed = Failure::new(FailureClass::Http(status), format!("HTTP {status}"));
            failed.retry_after = retry_after(response.headers());
            return Err(PageFailure::Failed(failed));
        }
        let final_url = response.url().clone();
        let robots_tags = response
            .headers()
            .get_all("x-robots-tag")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect();
        let headers = response.headers();
        let validators = Validators::from_headers(
            headers.get(ETAG).map(|v| v.as_bytes()),
            headers.get(LAST_MODIFIED).map(|v| v.as_bytes()),
        );
        let (bytes, cut) = read_bounded(response, limit).await.map_err(failed)?;
        if cut {
            return Err(PageFailure::Failed(Failure::new(
                FailureClass::TooLarge,
                format!("{what} is larger than {limit} bytes"),
            )));
        }
        Ok(Some(Body {
            url: final_url,
            robots_tags,
            validators,
            bytes,
        }))
    }
}

/// A `304 Not Modified` where no conditional request was made (no validators sent).
fn unasked_304() -> PageFailure {
    PageFailure::Failed(Failure::new(
        FailureClass::Http(304),
        "HTTP 304 to a request that was not conditional",
    ))
}

/// A body fetched whole, within its limit.
#[derive(Debug, Clone)]
pub struct Body {
    /// Where it was answered from, after redirects.
    pub url: url::Url,
    /// The response's `X-Robots-Tag` headers.
    pub robots_tags: Vec<String>,
    /// The response's `ETag` and `Last-Modified`, when they can be kept.
    pub validators: Validators,
    pub bytes: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::get;

    use super::*;
    use crate::net::session::Session;
    use crate::profile::DownloadSettings;

    /// A loopback server for `app`; its origin.
    async fn serve(app: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        origin
    }

    fn fetcher(retries: u32) -> PageFetcher {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = HttpClient::new(
            &DownloadSettings::defaults_for("fetch"),
            &Session::default(),
            Default::default(),
        )
        .unwrap();
        let limits = crate::net::hosts::HostLimits {
            per_host: 4,
            adaptive: true,
            rate: None,
        };
        PageFetcher::with_hosts(client, retries, Arc::new(Hosts::new("crawl", limits)))
    }

    fn url(origin: &str, path: &str) -> url::Url {
        url::Url::parse(&format!("{origin}{path}")).unwrap()
    }

    #[tokio::test]
    async fn a_page_answering_503_is_asked_again() {
        let asked = Arc::new(AtomicUsize::new(0));
        let app = Router::new().route(
            "/p",
            get({
                let asked = Arc::clone(&asked);
                move || async move {
                    match asked.fetch_add(1, Ordering::SeqCst) {
                        0 => (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response(),
                        _ => ([(header::CONTENT_TYPE, "text/html")], "<img src=a.jpg>")
                            .into_response(),
                    }
                }
            }),
        );
        let origin = serve(app).await;
        let fetcher = fetcher(2);
        let page = url(&origin, "/p");
        let snapshot = fetcher
            .fetch(&page, &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(snapshot.html, "<img src=a.jpg>");
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_missing_page_is_missing_at_once_and_a_client_error_is_not_retried() {
        let asked = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route("/gone", get(|| async { StatusCode::GONE }))
            .route(
                "/forbidden",
                get({
                    let asked = Arc::clone(&asked);
                    move || async move {
                        asked.fetch_add(1, Ordering::SeqCst);
                        StatusCode::FORBIDDEN
                    }
                }),
            );
        let origin = serve(app).await;
        let fetcher = fetcher(3);
        let cancel = CancellationToken::new();
        assert_eq!(
            fetcher
                .fetch(&url(&origin, "/gone"), &cancel)
                .await
                .unwrap_err(),
            PageFailure::Missing(410)
        );
        let Err(PageFailure::Failed(failed)) =
            fetcher.fetch(&url(&origin, "/forbidden"), &cancel).await
        else {
            panic!("a 403 is a failed page");
        };
        assert_eq!(failed.class, FailureClass::Http(403));
        assert_eq!(asked.load(Ordering::SeqCst), 1, "a 403 is final");
    }

    #[tokio::test]
    async fn a_fetch_waiting_on_a_slow_page_ends_as_cancelled_when_the_run_is_cancelled() {
        let app = Router::new().route("/slow", get(std::future::pending::<&'static str>));
        let origin = serve(app).await;
        let fetcher = fetcher(0);
        let cancel = CancellationToken::new();
        let page = url(&origin, "/slow");
        let fetch = fetcher.fetch(&page, &cancel);
        let (result, ()) = tokio::join!(fetch, async { cancel.cancel() });
        assert_eq!(result.unwrap_err(), PageFailure::Cancelled);
    }

    #[tokio::test]
    async fn a_page_asked_with_its_validators_is_unchanged_on_a_304_and_a_304_unasked_fails() {
        let asked = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route(
                "/p",
                get(|headers: axum::http::HeaderMap| async move {
                    let sent = |name: &str| headers.get(name).map(|v| v.as_bytes().to_vec());
                    match (sent("if-none-match"), sent("if-modified-since")) {
                        (Some(etag), Some(date))
                            if etag == b"\"v1\"" && date == b"Wed, 21 Oct 2015 07:28:00 GMT" =>
                        {
                            StatusCode::NOT_MODIFIED.into_response()
                        }
                        _ => (
                            [
                                (header::ETAG, "\"v1\""),
                                (header::LAST_MODIFIED, "Wed, 21 Oct 2015 07:28:00 GMT"),
                            ],
                            "<img src=a.jpg>",
                        )
                            .into_response(),
                    }
                }),
            )
            .route(
                "/long",
                get(|| async { ([(header::ETAG, "x".repeat(600))], "<p>") }),
            )
            .route(
                "/unasked",
                get({
                    let asked = Arc::clone(&asked);
                    move || async move {
                        asked.fetch_add(1, Ordering::SeqCst);
                        StatusCode::NOT_MODIFIED
                    }
                }),
            );
        let origin = serve(app).await;
        let fetcher = fetcher(3);
        let cancel = CancellationToken::new();
        let page = url(&origin, "/p");
        let snapshot = fetcher.fetch(&page, &cancel).await.unwrap();
        assert_eq!(snapshot.validators.etag.as_deref(), Some("\"v1\""));
        let unchanged = fetcher
            .fetch_if_changed(&page, Some(&snapshot.validators), &cancel)
            .await
            .unwrap();
        assert!(unchanged.is_none(), "a 304 is the page unchanged");
        let other = Validators::from_headers(Some(b"\"v0\""), None);
        let changed = fetcher
            .fetch_if_changed(&page, Some(&other), &cancel)
            .await
            .unwrap();
        assert_eq!(changed.map(|s| s.html).as_deref(), Some("<img src=a.jpg>"));

        let long = fetcher
            .fetch(&url(&origin, "/long"), &cancel)
            .await
            .unwrap();
        assert!(
            long.validators.is_empty(),
            "an ETag past the bound is not kept"
        );

        let Err(PageFailure::Failed(failed)) =
            fetcher.fetch(&url(&origin, "/unasked"), &cancel).await
        else {
            panic!("a 304 to a plain request is a failed page");
        };
        assert_eq!(failed.class, FailureClass::Http(304));
        assert_eq!(asked.load(Ordering::SeqCst), 1, "a 304 is final");
    }
}
