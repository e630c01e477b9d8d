//! robots.txt for the crawl: asked once per origin before its first page or API request,
//! kept in the state database with when it was fetched, and asked again when it is older than
//! its `Cache-Control: max-age` or 24 hours (RFC 9309 §2.4).
//!
//! What the answer means (RFC 9309 §2.3.1): a 2xx body's rules apply (its first 500 KiB); a
//! 4xx means there is none, so everything is allowed; a 5xx, a 429 or no answer at all means
//! everything is disallowed until it is asked again, [`UNREACHABLE_FOR`] later. Redirects are
//! followed (at least the five the RFC asks for). A `Crawl-delay` raises the host's minimum
//! interval between request starts in the crawl's [`Hosts`].
//!
//! Replaying a recording, robots.txt comes from the recording like every other request; an
//! origin whose robots.txt was not recorded is allowed everything, and the request is not
//! listed as unrecorded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use reqwest::header::CACHE_CONTROL;
use serde::{Deserialize, Serialize};

use super::client::HttpClient;
use super::failure::{Failure, FailureClass, classify};
use super::hosts::Hosts;
use crate::profile::{DownloadSettings, agent_token};
use crate::redact::redact;
use crate::replay::{Network, OutgoingRequest};
use crate::robots::{
    MAX_ROBOTS_BYTES, MAX_TDMREP_BYTES, RobotsTxt, TDMREP_PATH, TdmRep, header_opt_out,
};

/// How the error of a page that robots.txt disallows begins .
pub const ROBOTS_REFUSAL: &str = "robots.txt disallows";

/// One origin's robots.txt as last fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotsRecord {
    /// Seconds since the Unix epoch when it was fetched.
    pub fetched: u64,
    /// How long it holds after that, in seconds.
    pub fresh_for: u64,
    /// What the fetch gave.
    pub outcome: RobotsOutcome,
}

/// What fetching an origin's robots.txt gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RobotsOutcome {
    /// A 2xx body (its first 500 KiB): its rules apply.
    Rules { body: String },
    /// A 4xx (but 429): there is no robots.txt, everything is allowed.
    Missing { status: u16 },
    /// A 5xx, a 429 or no answer: everything is disallowed until it is asked again.
    Unreachable { detail: String },
}

/// Where the robots.txt answers of a run are kept, so that a rerun within their lifetime does
/// not ask again: the job's state.
pub trait RobotsStore: Send + Sync {
    /// The record kept for `origin`, if any.
    fn load(&self, origin: String) -> BoxFuture<'_, Option<RobotsRecord>>;
    /// Keeps `record` for `origin` (a record lost only means asking again next run).
    fn save(&self, origin: String, record: RobotsRecord) -> BoxFuture<'_, ()>;
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long a robots.txt holds at most (RFC 9309 §2.4: no more than 24 hours).
pub const MAX_FRESH: Duration = Duration::from_secs(24 * 60 * 60);
/// How long it holds at least, whatever its `Cache-Control` says, so a crawl does not ask for
/// it before every page.
const MIN_FRESH: Duration = Duration::from_secs(60);
/// How long an unreachable robots.txt disallows everything before it is asked again.
pub const UNREACHABLE_FOR: Duration = Duration::from_secs(10 * 60);
/// Redirects followed when replaying (the live client follows its own, more than five).
const MAX_REDIRECTS: usize = 5;

/// Asks each origin's robots.txt whether a page or API request may be sent.
pub struct RobotsGate {
    client: HttpClient,
    hosts: Arc<Hosts>,
    /// The product token matched against `User-agent` lines.
    token: String,
    store: Option<Arc<dyn RobotsStore>>,
    origins: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Known>>>>>,
}

/// An origin's robots.txt as this run knows it.
struct Known {
    txt: RobotsTxt,
    record: RobotsRecord,
}

impl Known {
    fn from_record(record: RobotsRecord) -> Self {
        let txt = match &record.outcome {
            RobotsOutcome::Rules { body } => RobotsTxt::parse(body.as_bytes()),
            RobotsOutcome::Missing { .. } => RobotsTxt::allow_all(),
            RobotsOutcome::Unreachable { .. } => RobotsTxt::disallow_all(),
        };
        Self { txt, record }
    }

    fn is_fresh(&self, at: u64) -> bool {
        at.saturating_sub(self.record.fetched) < self.record.fresh_for
    }
}

impl RobotsGate {
    /// A gate sending with `client`, matching robots.txt groups against the product token of
    /// `user_agent`, and pacing hosts with a `Crawl-delay` in `hosts`.
    pub fn new(client: HttpClient, hosts: Arc<Hosts>, user_agent: &str) -> Self {
        Self {
            client,
            hosts,
            token: agent_token(user_agent),
            store: None,
            origins: Mutex::new(HashMap::new()),
        }
    }

    /// The same gate keeping what it fetches in `store`, so a rerun within a robots.txt's
    /// lifetime does not ask again.
    pub fn with_store(mut self, store: Arc<dyn RobotsStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The product token robots.txt is read for.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// `Ok` when robots.txt allows `url`; otherwise a failure of class `robots` whose detail
    /// says why.
    pub async fn check(&self, url: &url::Url) -> Result<(), Failure> {
        if !matches!(url.scheme(), "http" | "https") {
            return Ok(());
        }
        let known = self.known(url).await;
        let Some(known) = known.as_ref() else {
            return Ok(());
        };
        if known.txt.for_agent(&self.token).is_allowed(url) {
            return Ok(());
        }
        let detail = match &known.record.outcome {
            RobotsOutcome::Unreachable { detail } => format!(
                "{ROBOTS_REFUSAL} everything while it cannot be read ({detail}); asked again after {UNREACHABLE_FOR:?}"
            ),
            _ => format!("{ROBOTS_REFUSAL} `{}` for `{}`", url.path(), self.token),
        };
        Err(Failure::new(FailureClass::Robots, detail))
    }

    /// The values of the `Sitemap:` lines of the robots.txt of `url`'s origin (none when it
    /// has no robots.txt); a failure when it cannot be read.
    pub async fn sitemaps(&self, url: &url::Url) -> Result<Vec<String>, Failure> {
        let known = self.known(url).await;
        match known.as_ref().map(|k| (&k.record.outcome, &k.txt)) {
            Some((RobotsOutcome::Unreachable { detail }, _)) => Err(Failure::new(
                FailureClass::Robots,
                format!(
                    "robots.txt cannot be read ({detail}); asked again after {UNREACHABLE_FOR:?}"
                ),
            )),
            Some((_, txt)) => Ok(txt.sitemaps().to_vec()),
            None => Ok(Vec::new()),
        }
    }

    /// The robots.txt of `url`'s origin as this run knows it, fetched (or loaded from the
    /// state) when it is not known yet or no longer fresh: one request per origin, the
    /// others wait for its answer.
    async fn known(&self, url: &url::Url) -> tokio::sync::OwnedMutexGuard<Option<Known>> {
        let origin = url.origin().ascii_serialization();
        let slot = {
            let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(origins.entry(origin.clone()).or_default())
        };
        let mut known = slot.lock_owned().await;
        let at = now();
        if known.as_ref().is_none_or(|k| !k.is_fresh(at)) {
            let record = match self.stored(&origin, at).await {
                Some(record) => record,
                None => self.fetch(&origin, at).await,
            };
            let fresh = Known::from_record(record);
            if let Some(delay) = fresh.txt.for_agent(&self.token).crawl_delay() {
                tracing::info!(origin = %origin, "robots.txt asks for {delay:?} between requests");
                self.hosts.get(url).raise_floor(delay);
            }
            *known = Some(fresh);
        }
        known
    }

    /// The record kept in the state for `origin`, when it is still fresh.
    async fn stored(&self, origin: &str, at: u64) -> Option<RobotsRecord> {
        let record = self.store.as_ref()?.load(origin.to_owned()).await?;
        Known::from_record(record.clone())
            .is_fresh(at)
            .then_some(record)
    }

    /// Fetches `origin`'s robots.txt and keeps the result.
    async fn fetch(&self, origin: &str, at: u64) -> RobotsRecord {
        let (outcome, max_age) = match url::Url::parse(&format!("{origin}/robots.txt")) {
            Ok(url) => match self.client.network() {
                Network::Replay(_) => self.replayed(url),
                Network::Live | Network::Record(_) => self.fetched(url).await,
            },
            Err(e) => (
                RobotsOutcome::Unreachable {
                    detail: e.to_string(),
                },
                None,
            ),
        };
        let fresh_for = match &outcome {
            RobotsOutcome::Unreachable { detail } => {
                tracing::warn!(origin = %origin, %detail, "robots.txt cannot be read: nothing there is fetched for now");
                UNREACHABLE_FOR
            }
            _ => max_age.unwrap_or(MAX_FRESH).clamp(MIN_FRESH, MAX_FRESH),
        };
        let record = RobotsRecord {
            fetched: at,
            fresh_for: fresh_for.as_secs(),
            outcome,
        };
        if let Some(store) = &self.store {
            store.save(origin.to_owned(), record.clone()).await;
        }
        record
    }

    /// robots.txt over the network: the outcome and the `max-age` it was sent with.
    async fn fetched(&self, url: url::Url) -> (RobotsOutcome, Option<Duration>) {
        tracing::debug!(url = %redact(&url), "fetching robots.txt");
        let response = match self.client.send(self.client.get(url)).await {
            Ok(response) => response,
            Err(e) => {
                let detail = classify(&e).detail;
                return (RobotsOutcome::Unreachable { detail }, None);
            }
        };
        let status = response.status().as_u16();
        let max_age = response
            .headers()
            .get_all(CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(max_age);
        if !response.status().is_success() {
            return (outcome_of_status(status), max_age);
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(e) => {
                    let detail = classify(&e).detail;
                    return (RobotsOutcome::Unreachable { detail }, None);
                }
            }
            // RFC 9309 §2.5: what comes after the first 500 KiB is not read.
            if body.len() >= MAX_ROBOTS_BYTES {
                body.truncate(MAX_ROBOTS_BYTES);
                break;
            }
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        (RobotsOutcome::Rules { body }, max_age)
    }

    /// robots.txt from the recording being replayed; a missing one allows everything.
    fn replayed(&self, url: url::Url) -> (RobotsOutcome, Option<Duration>) {
        let Network::Replay(replayer) = self.client.network() else {
            return (RobotsOutcome::Missing { status: 404 }, None);
        };
        let mut request = OutgoingRequest {
            method: "GET".into(),
            url,
            headers: Vec::new(),
            body: None,
        };
        let mut answer = replayer.answer_unlisted(&request);
        for _ in 0..MAX_REDIRECTS {
            let next = (300..400)
                .contains(&answer.status)
                .then(|| answer.header("location"))
                .flatten()
                .and_then(|l| request.url.join(l).ok());
            let Some(next) = next else { break };
            request.url = next;
            answer = replayer.answer_unlisted(&request);
        }
        if let Some(detail) = answer.failure() {
            return (RobotsOutcome::Unreachable { detail }, None);
        }
        if (200..300).contains(&answer.status) {
            let body = &answer.body[..answer.body.len().min(MAX_ROBOTS_BYTES)];
            let body = String::from_utf8_lossy(body).into_owned();
            return (RobotsOutcome::Rules { body }, None);
        }
        (outcome_of_status(answer.status), None)
    }
}

/// The opt-out of a response whose `X-Robots-Tag` headers carry one of `[politeness]
/// opt_out` for the crawler (read before the body, so an opted-out image is never read), as a
/// failure of class `opted_out` naming the directive.
pub fn opted_out(
    headers: &reqwest::header::HeaderMap,
    settings: &DownloadSettings,
) -> Option<Failure> {
    let watched = &settings.politeness.opt_out;
    if watched.is_empty() {
        return None;
    }
    let values = headers
        .get_all("x-robots-tag")
        .iter()
        .filter_map(|v| v.to_str().ok());
    if let Some(directive) = header_opt_out(values, &agent_token(&settings.user_agent), watched) {
        return Some(Failure::new(
            FailureClass::OptedOut,
            format!("X-Robots-Tag: {directive}"),
        ));
    }
    // TDMRep (W3C community report): `tdm-reservation: 1` reserves text and data mining
    // rights on the resource; `tdm-policy` names where a licence for it may be had.
    let reserved = headers
        .get("tdm-reservation")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() == "1");
    reserved.then(|| {
        let policy = headers
            .get("tdm-policy")
            .and_then(|v| v.to_str().ok())
            .map(|p| format!(" (tdm-policy: {})", p.trim()))
            .unwrap_or_default();
        Failure::new(
            FailureClass::OptedOut,
            format!("tdm-reservation: 1{policy}"),
        )
    })
}

/// Asks each origin's TDMRep file (`/.well-known/tdmrep.json`) whether an image's mining
/// rights are reserved: once per origin and run, the other images of the origin waiting for
/// the answer. A missing, unreadable or broken file reserves nothing (the protocol's default);
/// a broken one is warned about once. Replaying, the file comes from the recording, or is
/// missing.
pub struct TdmRepGate {
    client: HttpClient,
    origins: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<TdmRep>>>>,
}

impl TdmRepGate {
    /// A gate asking with `client`.
    pub fn new(client: HttpClient) -> Self {
        Self {
            client,
            origins: Mutex::new(HashMap::new()),
        }
    }

    /// A failure of class `opted_out` naming the rule, when `url`'s origin reserves its
    /// mining rights; asked only while `settings` obey opt-outs.
    pub async fn check(&self, url: &url::Url, settings: &DownloadSettings) -> Result<(), Failure> {
        if settings.politeness.opt_out.is_empty() || !matches!(url.scheme(), "http" | "https") {
            return Ok(());
        }
        let origin = url.origin().ascii_serialization();
        let cell = {
            let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(origins.entry(origin.clone()).or_default())
        };
        let rules = cell.get_or_init(|| self.fetch(origin)).await;
        match rules.reservation(url) {
            Some(reserved) => Err(Failure::new(FailureClass::OptedOut, reserved.detail())),
            None => Ok(()),
        }
    }

    async fn fetch(&self, origin: String) -> TdmRep {
        let Ok(url) = url::Url::parse(&format!("{origin}{TDMREP_PATH}")) else {
            return TdmRep::default();
        };
        let body = match self.client.network() {
            Network::Replay(replayer) => {
                let request = OutgoingRequest {
                    method: "GET".into(),
                    url: url.clone(),
                    headers: Vec::new(),
                    body: None,
                };
                let answer = replayer.answer_unlisted(&request);
                (200..300)
                    .contains(&answer.status)
                    .then(|| answer.body.clone())
            }
            Network::Live | Network::Record(_) => self.fetched(url.clone()).await,
        };
        let Some(body) = body else {
            return TdmRep::default();
        };
        TdmRep::parse(&body).unwrap_or_else(|reason| {
            tracing::warn!(url = %redact(&url), %reason, "the TDMRep file cannot be read: it reserves nothing");
            TdmRep::default()
        })
    }

    /// The body of a 2xx answer (its first [`MAX_TDMREP_BYTES`]), or nothing.
    async fn fetched(&self, url: url::Url) -> Option<Vec<u8>> {
        tracing::debug!(url = %redact(&url), "fetching the TDMRep file");
        let response = self.client.send(self.client.get(url)).await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.ok()?);
            if body.len() >= MAX_TDMREP_BYTES {
                body.truncate(MAX_TDMREP_BYTES);
                break;
            }
        }
        Some(body)
    }
}

/// What a non-2xx answer to a robots.txt request means (RFC 9309 §2.3.1.3-4): a 429 or a 5xx
/// is "unreachable", any other status means there is no robots.txt.
fn outcome_of_status(status: u16) -> RobotsOutcome {
    if status == 429 || status >= 500 {
        RobotsOutcome::Unreachable {
            detail: format!("HTTP {status}"),
        }
    } else {
        RobotsOutcome::Missing { status }
    }
}

/// The `max-age` of a `Cache-Control` value; `no-store` and `no-cache` count as zero.
fn max_age(value: &str) -> Option<Duration> {
    value.split(',').map(str::trim).find_map(|directive| {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        let seconds = lower.strip_prefix("max-age=")?.trim_matches('"');
        seconds.parse::<u64>().ok().map(Duration::from_secs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::session::Session;

    #[test]
    fn a_tdm_reservation_header_opts_an_image_out_with_its_policy_in_the_detail() {
        let settings = DownloadSettings::defaults_for("t");
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = reqwest::header::HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, reqwest::header::HeaderValue::from_static(value));
            }
            map
        };
        let detail = |pairs| opted_out(&headers(pairs), &settings).map(|f| f.detail);
        assert_eq!(detail(&[]), None);
        assert_eq!(detail(&[("tdm-reservation", "0")]), None);
        assert_eq!(
            detail(&[("tdm-reservation", "1")]).as_deref(),
            Some("tdm-reservation: 1")
        );
        assert_eq!(
            detail(&[
                ("tdm-reservation", " 1 "),
                ("tdm-policy", "https://a.test/policy.json")
            ])
            .as_deref(),
            Some("tdm-reservation: 1 (tdm-policy: https://a.test/policy.json)")
        );
        let mut ignoring = DownloadSettings::defaults_for("t");
        ignoring.politeness.opt_out.clear();
        assert!(opted_out(&headers(&[("tdm-reservation", "1")]), &ignoring).is_none());
    }
    use crate::replay::matching::MatchRules;
    use crate::replay::{RecordedResponse, Recorder, Replayer};

    #[tokio::test]
    async fn a_replay_obeys_a_recorded_robots_txt_and_allows_all_without_one() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let recorder = Recorder::new();
        let robots = OutgoingRequest {
            method: "GET".into(),
            url: url::Url::parse("http://a.test/robots.txt").unwrap(),
            headers: Vec::new(),
            body: None,
        };
        let rules = RecordedResponse {
            status: 200,
            headers: Vec::new(),
            body: b"user-agent: *\ndisallow: /private\n".to_vec(),
        };
        recorder.record(&robots, &rules);
        let replayer = Arc::new(Replayer::new(recorder.har(), MatchRules::default()));
        let settings = DownloadSettings::defaults_for("t");
        let network = Network::Replay(Arc::clone(&replayer));
        let client = HttpClient::new(&settings, &Session::default(), network).unwrap();
        let gate = RobotsGate::new(client, Arc::new(Hosts::unlimited()), &settings.user_agent);
        let url = |s: &str| url::Url::parse(s).unwrap();

        let refused = gate
            .check(&url("http://a.test/private/1"))
            .await
            .unwrap_err();
        assert_eq!(refused.class, FailureClass::Robots, "{refused:?}");
        assert!(gate.check(&url("http://a.test/public")).await.is_ok());
        assert!(gate.check(&url("http://b.test/private/1")).await.is_ok());
        assert!(
            replayer.unmatched().is_empty(),
            "{:?}",
            replayer.unmatched()
        );
    }

    #[test]
    fn cache_control_gives_the_lifetime() {
        assert_eq!(max_age("max-age=3600"), Some(Duration::from_secs(3600)));
        assert_eq!(
            max_age("public, Max-Age=\"60\""),
            Some(Duration::from_secs(60))
        );
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
    }

    #[test]
    fn statuses_mean_what_rfc_9309_says() {
        assert_eq!(
            outcome_of_status(404),
            RobotsOutcome::Missing { status: 404 }
        );
        assert_eq!(
            outcome_of_status(401),
            RobotsOutcome::Missing { status: 401 }
        );
        for status in [429, 500, 503] {
            assert!(matches!(
                outcome_of_status(status),
                RobotsOutcome::Unreachable { .. }
            ));
        }
    }

    #[test]
    fn a_record_is_fresh_for_its_lifetime_only() {
        let known = Known::from_record(RobotsRecord {
            fetched: 1_000,
            fresh_for: 60,
            outcome: RobotsOutcome::Missing { status: 404 },
        });
        assert!(known.is_fresh(1_059));
        assert!(!known.is_fresh(1_060));
    }
}
