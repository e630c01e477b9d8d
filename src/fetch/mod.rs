//! Fetch: pages over plain HTTP for `render = "static"` profiles.
//!
//! Returns a [`PageSnapshot`] for the pure stages; transient failures are retried here with
//! back-off, so the crawl only sees a page or a final failure.

pub mod api;

use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::net::{Failed, FailureClass, HttpClient, backoff, classify};
use crate::page::PageSnapshot;

/// Largest page body read; a gallery page is far smaller, a bigger body is a mistake.
const MAX_PAGE_BYTES: usize = 32 * 1024 * 1024;

/// Fetches pages with the run's HTTP client.
#[derive(Clone)]
pub struct PageFetcher {
    client: HttpClient,
    retries: u32,
}

/// Why a page could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageFailure {
    /// The server says the page does not exist (404, 410): pagination by template ends here.
    Missing(u16),
    /// Anything else, after retries.
    Failed(Failed),
    /// The run was cancelled while fetching.
    Cancelled,
}

impl PageFetcher {
    pub fn new(client: HttpClient, retries: u32) -> Self {
        Self { client, retries }
    }

    /// The run's HTTP client.
    pub fn client(&self) -> &HttpClient {
        &self.client
    }

    /// Fetches `url`, retrying transient failures.
    pub async fn fetch(
        &self,
        url: &url::Url,
        cancel: &CancellationToken,
    ) -> Result<PageSnapshot, PageFailure> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = tokio::select! {
                r = self.fetch_once(url) => r,
                () = cancel.cancelled() => return Err(PageFailure::Cancelled),
            };
            let failed = match result {
                Ok(snapshot) => return Ok(snapshot),
                Err(PageFailure::Failed(f))
                    if f.class.is_transient() && attempt <= self.retries =>
                {
                    f
                }
                Err(other) => return Err(other),
            };
            let wait = backoff(attempt, Duration::from_millis(250), Duration::from_secs(30));
            tracing::debug!(url = %url, attempt, error = %failed.detail, "page fetch failed; retrying in {wait:?}");
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = cancel.cancelled() => return Err(PageFailure::Cancelled),
            }
        }
    }

    async fn fetch_once(&self, url: &url::Url) -> Result<PageSnapshot, PageFailure> {
        let failed = |e: reqwest::Error| PageFailure::Failed(classify(&e));
        let response = self
            .client
            .send(self.client.get(url.clone()))
            .await
            .map_err(failed)?;
        let status = response.status().as_u16();
        if matches!(status, 404 | 410) {
            return Err(PageFailure::Missing(status));
        }
        if !response.status().is_success() {
            return Err(PageFailure::Failed(Failed::new(
                FailureClass::Http(status),
                format!("HTTP {status}"),
            )));
        }
        let final_url = response.url().clone();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.map_err(failed)?);
            if body.len() > MAX_PAGE_BYTES {
                return Err(PageFailure::Failed(Failed::new(
                    FailureClass::TooLarge,
                    format!("page is larger than {MAX_PAGE_BYTES} bytes"),
                )));
            }
        }
        Ok(PageSnapshot::html(
            final_url,
            String::from_utf8_lossy(&body).into_owned(),
        ))
    }
}
