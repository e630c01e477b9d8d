//! API requests for `kind = "json_cursor"`: the tool calls a JSON API itself, no browser.
//!
//! Transient failures (time-outs, resets, 429, 5xx) are retried here with back-off; any other
//! status is handed back with its body, because whether a 400 or a 410 means "your cursor has
//! expired" is the profile's to say (`paginate::json_cursor::read`). Header values may come from
//! the environment (read by `session` when the run starts); they are marked sensitive and never
//! logged, stored or printed.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use super::PageFailure;
use crate::net::hosts::{LocalGate, retry_after};
use crate::net::session::TokenKeeper;
use crate::net::session::token::HeldToken;
use crate::net::{
    Failure, FailureClass, Hosts, HttpClient, RetryPolicy, RobotsGate, Stopped, classify,
    with_retries,
};
use crate::paginate::json_cursor::ApiRequest;
use crate::profile::{ApiMethod, HeaderSource};
use crate::redact::redact;
use crate::replay::OutgoingRequest;

/// Largest API response read.
const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// A response, whatever its status.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    /// After redirects.
    pub url: url::Url,
    pub status: u16,
    pub body: Vec<u8>,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
}

/// Sends API requests with the run's client, the profile's API headers and the session's
/// token.
#[derive(Clone)]
pub struct ApiFetcher {
    client: HttpClient,
    retry: RetryPolicy,
    hosts: Arc<Hosts>,
    headers: HeaderMap,
    token: Option<Arc<TokenKeeper>>,
    /// robots.txt, asked before each API request; `None` when it is ignored.
    robots: Option<Arc<RobotsGate>>,
}

impl ApiFetcher {
    /// Sends with `client` and the profile's API `headers` (their `env:` values already read
    /// when the run started, see `session::resolve_env`), each attempt taking its host's turn
    /// in `hosts` (the crawl's, shared with page fetches).
    pub fn new(
        client: HttpClient,
        retries: u32,
        hosts: Arc<Hosts>,
        headers: &[(String, HeaderSource)],
        token: Option<Arc<TokenKeeper>>,
    ) -> Self {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            // Names and values were checked by the profile and the session.
            if let (Ok(name), Some(Ok(mut value))) = (
                HeaderName::from_bytes(name.as_bytes()),
                value.literal().map(HeaderValue::from_str),
            ) {
                value.set_sensitive(true);
                map.insert(name, value);
            }
        }
        Self {
            client,
            retry: RetryPolicy::new(retries),
            hosts,
            headers: map,
            token,
            robots: None,
        }
    }

    /// The same fetcher asking `robots` before every API request.
    pub fn with_robots(mut self, robots: Arc<RobotsGate>) -> Self {
        self.robots = Some(robots);
        self
    }

    /// Whether the run replays a recording that does not have `request` (the chain's
    /// recording ended before it).
    pub fn is_past_recording(&self, request: &ApiRequest) -> bool {
        let (method, headers) = match request.method {
            ApiMethod::Get => ("GET", Vec::new()),
            ApiMethod::Post => (
                "POST",
                vec![("content-type".into(), "application/json".into(), false)],
            ),
        };
        self.client.is_past_recording(&OutgoingRequest {
            method: method.into(),
            url: request.url.clone(),
            headers,
            body: request.body.clone().map(String::into_bytes),
        })
    }

    /// Sends `request` with the token, if the profile has one: a 401 or 403 gets the token
    /// fetched again and the request sent once more; a second refusal is handed back.
    pub async fn fetch(
        &self,
        request: &ApiRequest,
        cancel: &CancellationToken,
    ) -> Result<ApiResponse, PageFailure> {
        if let Some(robots) = &self.robots {
            robots
                .check(&request.url)
                .await
                .map_err(PageFailure::Failed)?;
        }
        let Some(keeper) = &self.token else {
            return self.send(request, &self.headers, cancel).await;
        };
        let mut rejected = None;
        loop {
            let token = self.token(keeper, rejected.as_ref(), cancel).await?;
            let mut headers = self.headers.clone();
            headers.insert(keeper.header().clone(), token.clone());
            let response = self.send(request, &headers, cancel).await?;
            if matches!(response.status, 401 | 403) && rejected.is_none() {
                tracing::info!(url = %redact(&request.url), status = response.status, "the API refused the token; fetching a new one");
                rejected = Some(token);
                continue;
            }
            return Ok(response);
        }
    }

    /// The token to send: the one held, or a new one when there is none, it is older than
    /// `refresh_after`, or the API just `rejected` it.
    async fn token(
        &self,
        keeper: &TokenKeeper,
        rejected: Option<&HeaderValue>,
        cancel: &CancellationToken,
    ) -> Result<HeaderValue, PageFailure> {
        let mut held = keeper.held.lock().await;
        if let Some(value) = keeper.usable(held.as_ref(), rejected, SystemTime::now()) {
            return Ok(value);
        }
        let response = self
            .send(&keeper.request, &keeper.headers, cancel)
            .await
            .map_err(|failure| match failure {
                PageFailure::Failed(f) => PageFailure::Failed(Failure::new(
                    f.class,
                    format!(
                        "the token request to `{}` failed: {}",
                        redact(&keeper.request.url),
                        f.detail
                    ),
                )),
                other => other,
            })?;
        let value = keeper
            .read_reply(response.status, &response.body)
            .map_err(|message| {
                let class = if (200..300).contains(&response.status) {
                    FailureClass::Other
                } else {
                    FailureClass::Http(response.status)
                };
                PageFailure::Failed(Failure::new(class, message))
            })?;
        tracing::debug!(url = %redact(&keeper.request.url), "fetched a token");
        *held = Some(HeldToken {
            value: value.clone(),
            fetched: SystemTime::now(),
        });
        Ok(value)
    }

    /// Sends `request` with `headers`, retrying transient failures.
    async fn send(
        &self,
        request: &ApiRequest,
        headers: &HeaderMap,
        cancel: &CancellationToken,
    ) -> Result<ApiResponse, PageFailure> {
        let host = self.hosts.get(&request.url);
        let gate = LocalGate::<PageFailure>::new(&host);
        let tried = with_retries(self.retry, &gate, cancel, |_| async {
            Ok(match self.fetch_once(request, headers).await {
                // A transient status is tried again; any other is the caller's to read (an
                // expired cursor, a refused token).
                Ok(response) if FailureClass::Http(response.status).is_transient() => {
                    let status = response.status;
                    let mut failed =
                        Failure::new(FailureClass::Http(status), format!("HTTP {status}"));
                    failed.retry_after = response.retry_after;
                    Err(failed)
                }
                other => other,
            })
        })
        .await;
        match tried {
            Ok((Ok(response), _)) => Ok(response),
            Ok((Err(failed), attempts)) => {
                tracing::debug!(url = %redact(&request.url), attempts, error = %failed.detail, "API request failed");
                Err(PageFailure::Failed(failed))
            }
            Err(Stopped::Cancelled) => Err(PageFailure::Cancelled),
            Err(Stopped::Fatal(failure)) => Err(failure),
        }
    }

    async fn fetch_once(
        &self,
        request: &ApiRequest,
        headers: &HeaderMap,
    ) -> Result<ApiResponse, Failure> {
        let builder = match request.method {
            ApiMethod::Get => self.client.get(request.url.clone()),
            ApiMethod::Post => self
                .client
                .post(request.url.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(request.body.clone().unwrap_or_default()),
        };
        let builder = builder
            .header(ACCEPT, "application/json")
            .headers(headers.clone());
        let response = self.client.send(builder).await.map_err(|e| classify(&e))?;
        let status = response.status().as_u16();
        let url = response.url().clone();
        let retry_after = retry_after(response.headers());
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.map_err(|e| classify(&e))?);
            if body.len() > MAX_RESPONSE_BYTES {
                return Err(Failure::new(
                    FailureClass::TooLarge,
                    format!("API response is larger than {MAX_RESPONSE_BYTES} bytes"),
                ));
            }
        }
        Ok(ApiResponse {
            url,
            status,
            body,
            retry_after,
        })
    }
}
