//! The one HTTP client of a run, shared by page fetching, API calls and downloads: the seam
//! where a run is recorded or replayed, and where each request takes its proxy.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::failure::error_chain;
use super::session::Session;
use crate::profile::DownloadSettings;
use crate::proxy::{ProxyEndpoint, Rotation};
use crate::replay::{Network, OutgoingRequest, RecordedResponse};

/// Builds the one HTTP client of a run: rustls, connection reuse, HTTP/2 where offered, the
/// session's cookie jar when it has one.
pub fn build_client(
    settings: &DownloadSettings,
    session: &Session,
) -> Result<reqwest::Client, reqwest::Error> {
    build_client_through(settings, session, None)
}

/// [`build_client`], its connections going through `proxy` when there is one.
fn build_client_through(
    settings: &DownloadSettings,
    session: &Session,
    proxy: Option<&ProxyEndpoint>,
) -> Result<reqwest::Client, reqwest::Error> {
    let mut headers = HeaderMap::new();
    for (name, value) in &settings.headers {
        // Names and values were checked when the profile was validated, and `env:` values
        // when the run started (`session::resolve_env`).
        if let (Ok(name), Some(Ok(mut value))) = (
            HeaderName::from_bytes(name.as_bytes()),
            value.literal().map(HeaderValue::from_str),
        ) {
            // Values may be secrets (tokens, cookies): never shown in debug output.
            value.set_sensitive(true);
            headers.insert(name, value);
        }
    }
    let mut builder = reqwest::Client::builder();
    if let Some(endpoint) = proxy {
        let mut proxy = reqwest::Proxy::all(endpoint.url().as_str())?;
        if let Some(c) = endpoint.credentials() {
            proxy = proxy.basic_auth(c.username.expose(), c.password.expose());
        }
        builder = builder.proxy(proxy);
    }
    if let Some(jar) = &session.cookies {
        builder = builder.cookie_provider(Arc::clone(jar));
    }
    builder
        .user_agent(&settings.user_agent)
        .default_headers(headers)
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.timeout)
        .pool_max_idle_per_host(settings.per_host.max(1))
        .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
        .tcp_nodelay(true)
        .build()
}

/// Redirects followed per request.
const MAX_REDIRECTS: usize = 10;

/// Largest page body read; a gallery page is far smaller, a bigger body is a mistake.
pub const MAX_PAGE_BYTES: usize = 32 * 1024 * 1024;

/// The header a recorded response carries when its body was cut at the recording bound.
const TRUNCATED_HEADER: &str = "x-scrape-truncated";

/// The HTTP side of a run, the one seam between the program and the network: page fetching,
/// API calls and downloads all send through it. Live, it is the reqwest client; recording, it
/// also keeps each exchange (the body read up to the larger of the page and image limits, then
/// handed on as an equal response);
/// replaying, it answers from the recording and never opens a connection.
/// With proxies, each request goes through the next healthy one (see [`Rotation`]).
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    proxies: Option<Arc<Proxies>>,
    network: Network,
    /// The session's cookie jar, when the run carries cookies.
    jar: Option<Arc<reqwest::cookie::Jar>>,
    /// Body bytes a recording keeps of a response that may be an image: the larger of the page
    /// and image limits (markup and JSON get [`MAX_PAGE_BYTES`]). One byte more is read, so
    /// that the caller's own limit fails the response as too large.
    record_limit_bytes: usize,
}

/// One client per proxy, and the rotation that picks among them.
struct Proxies {
    clients: Vec<(ProxyEndpoint, reqwest::Client)>,
    rotation: Mutex<Rotation>,
    cooldown: Duration,
}

impl Proxies {
    fn rotation(&self) -> std::sync::MutexGuard<'_, Rotation> {
        // The rotation is left consistent at every step: a panic elsewhere does not spoil it.
        self.rotation.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes how a request through proxy `index` went: no connection, a time-out or a `407`
    /// count against the proxy; any other answer is the site's and clears its record.
    fn report(&self, index: usize, result: &Result<reqwest::Response, reqwest::Error>) {
        let failure = match result {
            Ok(response)
                if response.status() == reqwest::StatusCode::PROXY_AUTHENTICATION_REQUIRED =>
            {
                Some("407 proxy authentication required".to_owned())
            }
            Ok(_) => None,
            Err(e) if e.is_connect() || e.is_timeout() => Some(error_chain(e)),
            Err(_) => None,
        };
        let endpoint = &self.clients[index].0;
        match failure {
            None => self.rotation().succeeded(index),
            Some(why) => {
                let benched = self.rotation().failed(index, Instant::now());
                if benched {
                    tracing::warn!(
                        "proxy {endpoint} benched for {:?} after failing: {why}",
                        self.cooldown
                    );
                } else {
                    tracing::debug!("proxy {endpoint} failed: {why}");
                }
            }
        }
    }
}

impl HttpClient {
    /// The client of a run with `settings` and `session`, sending its requests the `network` way.
    /// A replay never uses the proxies of `settings`.
    pub fn new(
        settings: &DownloadSettings,
        session: &Session,
        network: Network,
    ) -> Result<Self, reqwest::Error> {
        let endpoints = match network {
            Network::Replay(_) => &[][..],
            Network::Live | Network::Record(_) => &settings.proxy.endpoints[..],
        };
        let proxies = if endpoints.is_empty() {
            None
        } else {
            let clients = endpoints
                .iter()
                .map(|e| Ok((e.clone(), build_client_through(settings, session, Some(e))?)))
                .collect::<Result<Vec<_>, reqwest::Error>>()?;
            Some(Arc::new(Proxies {
                rotation: Mutex::new(Rotation::new(
                    clients.len(),
                    settings.proxy.max_failures,
                    settings.proxy.cooldown,
                )),
                clients,
                cooldown: settings.proxy.cooldown,
            }))
        };
        // Requests are built on a client without proxy; they are sent through the one picked.
        Ok(Self {
            client: build_client(settings, session)?,
            proxies,
            network,
            jar: session.cookies.clone(),
            record_limit_bytes: MAX_PAGE_BYTES
                .max(usize::try_from(settings.max_bytes).unwrap_or(usize::MAX)),
        })
    }

    /// The proxies for browser processes started now: the healthy ones in list order, or the
    /// one benched longest ago when every one is benched; none without proxies.
    pub fn browser_proxies(&self) -> Vec<ProxyEndpoint> {
        let Some(proxies) = self.proxies.as_ref() else {
            return Vec::new();
        };
        let mut rotation = proxies.rotation();
        let first = rotation.first_healthy(Instant::now());
        let healthy: Vec<ProxyEndpoint> = proxies
            .clients
            .iter()
            .enumerate()
            .filter(|(index, _)| !rotation.is_benched(*index))
            .map(|(_, (endpoint, _))| endpoint.clone())
            .collect();
        if healthy.is_empty() {
            vec![proxies.clients[first].0.clone()]
        } else {
            healthy
        }
    }

    /// The cookie jar its requests carry and keep the sites' cookies in, when the run has one.
    pub fn jar(&self) -> Option<&Arc<reqwest::cookie::Jar>> {
        self.jar.as_ref()
    }

    /// Where requests go (the browser follows the same way).
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// Whether this client replays a recording that has no answer for `request`: where a
    /// chain's recording ended (`scrape record --pages N`).
    pub fn is_past_recording(&self, request: &OutgoingRequest) -> bool {
        match &self.network {
            Network::Replay(replayer) => !replayer.has(request),
            Network::Live | Network::Record(_) => false,
        }
    }

    /// A GET request to finish and [`HttpClient::send`].
    pub fn get(&self, url: url::Url) -> reqwest::RequestBuilder {
        self.client.get(url)
    }

    /// A POST request to finish and [`HttpClient::send`].
    pub fn post(&self, url: url::Url) -> reqwest::RequestBuilder {
        self.client.post(url)
    }

    /// Sends `request` to the network, to the network and the recording, or to the recording.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, reqwest::Error> {
        match &self.network {
            Network::Live => self.execute(request.build()?).await,
            Network::Record(recorder) => {
                let request = request.build()?;
                let outgoing = outgoing(&request);
                let response = match self.execute(request).await {
                    Ok(response) => response,
                    Err(e) => {
                        // Kept as a failure: a replay fails the same way.
                        recorder.record(&outgoing, &RecordedResponse::failed(error_chain(&e)));
                        return Err(e);
                    }
                };
                let status = response.status().as_u16();
                let final_url = response.url().clone();
                let mut headers = header_pairs(response.headers());
                let limit = if is_markup(response.headers()) {
                    MAX_PAGE_BYTES
                } else {
                    self.record_limit_bytes
                };
                let (body, cut) = read_bounded(response, limit).await?;
                if cut {
                    tracing::warn!(
                        url = %crate::redact::redact(&final_url),
                        "response body over {limit} bytes: recorded cut short (marked `{TRUNCATED_HEADER}`)",
                    );
                    headers.push((
                        TRUNCATED_HEADER.to_owned(),
                        format!("more than {limit} bytes"),
                    ));
                }
                let recorded = RecordedResponse {
                    status,
                    headers,
                    body,
                };
                if final_url != outgoing.url {
                    // reqwest followed redirects: keep the hop as a redirect, so a replay
                    // ends on the same URL (and resolves relative links the same way).
                    recorder.record(&outgoing, &redirect_to(&final_url));
                    let mut hop = outgoing.clone();
                    hop.url = final_url.clone();
                    hop.method = "GET".into();
                    hop.body = None;
                    recorder.record(&hop, &recorded);
                } else {
                    recorder.record(&outgoing, &recorded);
                }
                Ok(to_response(recorded, final_url))
            }
            Network::Replay(replayer) => {
                let request = request.build()?;
                let mut outgoing = outgoing(&request);
                let mut answer = replayer.answer(&outgoing);
                for _ in 0..MAX_REDIRECTS {
                    let location = (300..400)
                        .contains(&answer.status)
                        .then(|| answer.header("location"))
                        .flatten()
                        .and_then(|l| outgoing.url.join(l).ok());
                    let Some(next) = location else { break };
                    outgoing.url = next;
                    outgoing.method = "GET".into();
                    outgoing.body = None;
                    answer = replayer.answer(&outgoing);
                }
                Ok(match answer.failure() {
                    Some(error) => failed_response(&error, outgoing.url),
                    None => to_response(answer, outgoing.url),
                })
            }
        }
    }
}

impl HttpClient {
    /// Sends `request` to the network: straight, or through the next proxy. When a proxy
    /// cannot be reached, the request goes on to the next one (a run loses nothing to a dead
    /// proxy but the connection attempt), each proxy tried at most once.
    async fn execute(
        &self,
        request: reqwest::Request,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let Some(proxies) = &self.proxies else {
            return self.client.execute(request).await;
        };
        let mut request = request;
        for _ in 1..proxies.clients.len() {
            let index = proxies.rotation().pick(Instant::now());
            let Some(spare) = request.try_clone() else {
                break;
            };
            let result = proxies.clients[index].1.execute(request).await;
            proxies.report(index, &result);
            match result {
                Err(e) if e.is_connect() => request = spare,
                other => return other,
            }
        }
        let index = proxies.rotation().pick(Instant::now());
        let result = proxies.clients[index].1.execute(request).await;
        proxies.report(index, &result);
        result
    }
}

fn outgoing(request: &reqwest::Request) -> OutgoingRequest {
    OutgoingRequest {
        method: request.method().as_str().to_owned(),
        url: request.url().clone(),
        headers: request
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    value.is_sensitive(),
                )
            })
            .collect(),
        body: request
            .body()
            .and_then(|b| b.as_bytes())
            .map(<[u8]>::to_vec),
    }
}

fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn redirect_to(url: &url::Url) -> RecordedResponse {
    RecordedResponse {
        status: 302,
        headers: vec![("location".into(), url.to_string())],
        body: Vec::new(),
    }
}

/// Whether a response is a page or an API answer (HTML, XML, JSON, text), not an image.
fn is_markup(headers: &HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase)
        .is_some_and(|t| {
            t.starts_with("text/") || t.contains("json") || t.contains("html") || t.contains("xml")
        })
}

/// The body of `response`, read as it streams up to `limit + 1` bytes; `true` when it was cut
/// there (the caller, seeing more than its own limit, fails it as too large).
pub(crate) async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = (limit + 1).saturating_sub(body.len());
        if chunk.len() >= room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// A genuine `reqwest::Response` with `answer`'s status, headers and body, at `url`.
fn to_response(answer: RecordedResponse, url: url::Url) -> reqwest::Response {
    use reqwest::ResponseBuilderExt;
    let mut builder = http::Response::builder().status(answer.status).url(url);
    for (name, value) in &answer.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            builder = builder.header(name, value);
        }
    }
    let length = answer.body.len();
    let response = builder
        .header(reqwest::header::CONTENT_LENGTH, length)
        .body(answer.body)
        .unwrap_or_else(|_| {
            // Only an invalid status gets here; the recording was checked when loaded.
            let mut fallback = http::Response::new(Vec::new());
            *fallback.status_mut() = http::StatusCode::BAD_GATEWAY;
            fallback
        });
    reqwest::Response::from(response)
}

/// A replayed request that failed while recording: a `reqwest::Response` whose body cannot be
/// read (the one failure reqwest lets a replay make), the error naming the recorded cause.
/// Whoever reads it fails as on a connection cut: no page, no image, no API answer.
fn failed_response(error: &str, url: url::Url) -> reqwest::Response {
    use reqwest::ResponseBuilderExt;
    let cause = std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        format!("failed while recording: {error}"),
    );
    let body = reqwest::Body::wrap_stream(futures_util::stream::once(async move {
        Err::<Vec<u8>, std::io::Error>(cause)
    }));
    let response = http::Response::builder()
        .url(url)
        .body(body)
        .unwrap_or_else(|_| http::Response::new(reqwest::Body::from(Vec::new())));
    reqwest::Response::from(response)
}
