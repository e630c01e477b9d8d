//! Record to HAR, replay from HAR: a site's pages kept once and crawled again offline.
//!
//! Recording and replaying plug in at the two network edges only, the HTTP client
//! ([`crate::net::HttpClient`]) and the browser's request interception
//! ([`crate::render`]); nothing between them knows whether it is replaying. [`Network`] says
//! which way a run goes: live, recording every exchange into a [`Recorder`], or answered by a
//! [`Replayer`] from a recording, where a request that is not in the recording gets a 404 and
//! is remembered for the end of the run (unless `[replay] ignore` matches its URL). A request
//! that failed without a response while recording (a refused connection, an unknown host) is
//! kept as a failure, HAR's way (status 0 and `_error`), and fails again when replayed.

pub use scrape_core::replay::{har, matching};

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use har::{Content, Entry, Har, HarError, NameValue, PostData, Timings};
use matching::{MatchRules, RequestKey, jsonp_callback, request_key, rewrite_jsonp};

/// Where a run's requests go.
#[derive(Clone, Default)]
pub enum Network {
    /// To the network.
    #[default]
    Live,
    /// To the network, each exchange kept for a HAR file.
    Record(Arc<Recorder>),
    /// Nowhere: answered from a recording.
    Replay(Arc<Replayer>),
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Live => f.write_str("Live"),
            Self::Record(r) => write!(f, "Record({} entries)", r.len()),
            Self::Replay(r) => write!(f, "Replay({} entries)", r.entries.len()),
        }
    }
}

/// A request as it leaves a network edge.
#[derive(Debug, Clone)]
pub struct OutgoingRequest {
    pub method: String,
    pub url: url::Url,
    /// Name, value, and whether the value is a secret (an `env:` header, say).
    pub headers: Vec<(String, String, bool)>,
    pub body: Option<Vec<u8>>,
}

impl OutgoingRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v, _)| v.as_str())
    }
}

/// A response, body complete; or, with status 0 (as HAR records it), a request that failed
/// without a response, the body saying why ([`RecordedResponse::failed`]).
#[derive(Debug, Clone)]
pub struct RecordedResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What a failure recorded without its reason replays with.
const UNKNOWN_FAILURE: &str = "net::ERR_FAILED";

impl RecordedResponse {
    /// A request that failed without a response: `error` says why (`net::ERR_CONNECTION_REFUSED`,
    /// `error trying to connect: ...`).
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            status: 0,
            headers: Vec::new(),
            body: error.into().into_bytes(),
        }
    }

    /// Why the request failed, when it failed without a response.
    pub fn failure(&self) -> Option<String> {
        (self.status == 0).then(|| String::from_utf8_lossy(&self.body).into_owned())
    }

    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Headers whose values are never written to a recording.
const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// `304 Not Modified`.
const NOT_MODIFIED: i64 = 304;

/// What a recording writes in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// Headers that describe the bytes on the wire, not the decoded body a recording keeps.
const WIRE_HEADERS: [&str; 3] = ["content-encoding", "content-length", "transfer-encoding"];

/// Collects exchanges for a HAR file; shared by the HTTP client and the browser's tabs.
#[derive(Default)]
pub struct Recorder {
    entries: Mutex<Vec<Entry>>,
    /// Values never written: wherever they appear (URL, header, body), `[redacted]` is. The
    /// profile's `env:` values from the start, tokens as their endpoint hands them out.
    secrets: Mutex<Vec<String>>,
    /// The login endpoint whose answers hold a token, and where in them.
    token: Option<TokenSource>,
}

/// Where a run gets its token: answers of `method url` hold it at `path`.
pub struct TokenSource {
    pub method: String,
    pub url: url::Url,
    pub path: serde_json_path::JsonPath,
}

/// Secrets shorter than this are not searched for: they would redact ordinary text.
const MIN_SECRET_CHARS: usize = 4;

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder that also writes `[redacted]` for every occurrence of `secrets` (the values
    /// of a profile's `env:` settings: a password in a login body, a key in a URL).
    pub fn with_secrets(secrets: Vec<String>) -> Self {
        let recorder = Self::default();
        recorder.add_secrets(secrets);
        recorder
    }

    /// Also keeps the tokens `source`'s answers hand out out of the recording: in those
    /// answers and wherever they appear later.
    pub fn redacting_tokens(mut self, source: TokenSource) -> Self {
        self.token = Some(source);
        self
    }

    fn add_secrets(&self, secrets: impl IntoIterator<Item = String>) {
        if let Ok(mut known) = self.secrets.lock() {
            for secret in secrets {
                if secret.chars().count() >= MIN_SECRET_CHARS && !known.contains(&secret) {
                    known.push(secret);
                }
            }
        }
    }

    /// The tokens in `response`, if it answers the token request.
    fn tokens_in(&self, request: &OutgoingRequest, response: &RecordedResponse) -> Vec<String> {
        let Some(source) = &self.token else {
            return Vec::new();
        };
        if !request.method.eq_ignore_ascii_case(&source.method) || request.url != source.url {
            return Vec::new();
        }
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(&response.body) else {
            return Vec::new();
        };
        source
            .path
            .query(&json)
            .all()
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    fn scrub(&self, text: &str, secrets: &[String]) -> String {
        let mut text = text.to_owned();
        for secret in secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    fn scrub_bytes(&self, body: &[u8], secrets: &[String]) -> Vec<u8> {
        match std::str::from_utf8(body) {
            Ok(text) if secrets.iter().any(|s| text.contains(s.as_str())) => {
                self.scrub(text, secrets).into_bytes()
            }
            _ => body.to_vec(),
        }
    }

    /// Entries so far.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps one exchange; secret header values are replaced by [`REDACTED`].
    pub fn record(&self, request: &OutgoingRequest, response: &RecordedResponse) {
        self.add_secrets(self.tokens_in(request, response));
        let secrets = self.secrets.lock().map(|s| s.clone()).unwrap_or_default();
        let entry = if secrets.is_empty() {
            entry(request, response)
        } else {
            let request = OutgoingRequest {
                method: request.method.clone(),
                url: url::Url::parse(&self.scrub(request.url.as_str(), &secrets))
                    .unwrap_or_else(|_| request.url.clone()),
                headers: request
                    .headers
                    .iter()
                    .map(|(n, v, secret)| (n.clone(), self.scrub(v, &secrets), *secret))
                    .collect(),
                body: request
                    .body
                    .as_deref()
                    .map(|b| self.scrub_bytes(b, &secrets)),
            };
            let response = RecordedResponse {
                status: response.status,
                headers: response
                    .headers
                    .iter()
                    .map(|(n, v)| (n.clone(), self.scrub(v, &secrets)))
                    .collect(),
                body: self.scrub_bytes(&response.body, &secrets),
            };
            entry(&request, &response)
        };
        if let Ok(mut entries) = self.entries.lock() {
            entries.push(entry);
        }
    }

    /// The HAR file of everything recorded, in the order the exchanges completed.
    pub fn har(&self) -> Har {
        let mut har = Har::new();
        har.log.entries = self.entries.lock().map(|e| e.clone()).unwrap_or_default();
        har
    }

    /// Writes the recording to `path` atomically.
    pub fn write(&self, path: &Path) -> Result<usize, HarError> {
        let har = self.har();
        har.write(path)?;
        Ok(har.log.entries.len())
    }
}

fn entry(request: &OutgoingRequest, response: &RecordedResponse) -> Entry {
    let request_headers = request
        .headers
        .iter()
        .map(|(name, value, secret)| NameValue {
            name: name.clone(),
            value: if *secret || is_secret(name) {
                REDACTED.to_owned()
            } else {
                value.clone()
            },
        })
        .collect();
    let response_headers: Vec<NameValue> = response
        .headers
        .iter()
        .filter(|(name, _)| !WIRE_HEADERS.iter().any(|w| name.eq_ignore_ascii_case(w)))
        .map(|(name, value)| NameValue {
            name: name.clone(),
            value: if is_secret(name) {
                REDACTED.to_owned()
            } else {
                value.clone()
            },
        })
        .collect();
    let error = response.failure();
    let body: &[u8] = if error.is_some() { &[] } else { &response.body };
    let mime = response.header("content-type").unwrap_or_default();
    let redirect_url = if (300..400).contains(&response.status) {
        response.header("location").unwrap_or_default().to_owned()
    } else {
        String::new()
    };
    Entry {
        started_date_time: iso_8601(std::time::SystemTime::now()),
        time: 0.0,
        request: har::Request {
            method: request.method.clone(),
            url: request.url.to_string(),
            http_version: "HTTP/1.1".to_owned(),
            cookies: Vec::new(),
            headers: request_headers,
            query_string: request
                .url
                .query_pairs()
                .map(|(n, v)| NameValue {
                    name: n.into_owned(),
                    value: v.into_owned(),
                })
                .collect(),
            post_data: request.body.as_ref().map(|body| PostData {
                mime_type: request
                    .header("content-type")
                    .unwrap_or_default()
                    .to_owned(),
                text: String::from_utf8_lossy(body).into_owned(),
            }),
            headers_size: -1,
            body_size: request.body.as_ref().map_or(0, |b| b.len() as i64),
        },
        response: har::Response {
            status: i64::from(response.status),
            status_text: http::StatusCode::from_u16(response.status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or_default()
                .to_owned(),
            http_version: "HTTP/1.1".to_owned(),
            cookies: Vec::new(),
            headers: response_headers,
            content: Content::from_body(mime, body),
            redirect_url,
            headers_size: -1,
            body_size: body.len() as i64,
            error,
        },
        cache: serde_json::Map::new(),
        timings: Timings::default(),
    }
}

/// `2026-11-30T13:32:22.123Z`: HAR's date format.
pub fn iso_8601(time: std::time::SystemTime) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    // Invariant: the format has only components every UTC date has.
    time::OffsetDateTime::from(time)
        .format(&format)
        .expect("a UTC date formats")
}

fn is_secret(name: &str) -> bool {
    SECRET_HEADERS.iter().any(|s| name.eq_ignore_ascii_case(s))
}

/// Answers requests from a recording.
pub struct Replayer {
    rules: MatchRules,
    entries: Vec<Entry>,
    /// Entries by request key, in recorded order, and how many times the key was asked.
    by_key: HashMap<RequestKey, (Vec<usize>, AtomicUsize)>,
    /// `[replay] ignore`: URLs whose absence from the recording is nobody's concern.
    ignored: Option<regex::RegexSet>,
    missed: Mutex<Vec<String>>,
}

impl Replayer {
    /// Indexes `har`'s entries. Entries without a response (status 0: blocked or failed in
    /// the browser or client that recorded them) replay as the same failure. `304 Not
    /// Modified` answers without the body are left out: a browser that saved them had the body
    /// in its cache, a replay has nothing to answer with. A 304 that DevTools saved with the
    /// cached body replays as a 200 (the replaying client sent no validator, so it expects the
    /// whole body).
    pub fn new(har: Har, rules: MatchRules) -> Self {
        let entries: Vec<Entry> = har
            .log
            .entries
            .into_iter()
            .filter(|e| e.response.status != NOT_MODIFIED || e.response.content.has_body())
            .map(|mut e| {
                if e.response.status == NOT_MODIFIED {
                    e.response.status = 200;
                }
                e
            })
            .collect();
        let mut by_key: HashMap<RequestKey, (Vec<usize>, AtomicUsize)> = HashMap::new();
        for (index, entry) in entries.iter().enumerate() {
            let Ok(url) = url::Url::parse(&entry.request.url) else {
                continue;
            };
            let post = entry.request.post_data.as_ref();
            let key = request_key(
                &rules,
                &entry.request.method,
                &url,
                post.map(|p| p.mime_type.as_str()),
                post.map(|p| p.text.as_bytes()),
            );
            by_key
                .entry(key)
                .or_insert_with(|| (Vec::new(), AtomicUsize::new(0)))
                .0
                .push(index);
        }
        // The patterns were checked with the profile; an unchecked bad one ignores nothing.
        let ignored = (!rules.ignore_urls.is_empty())
            .then(|| regex::RegexSet::new(&rules.ignore_urls).ok())
            .flatten();
        Self {
            rules,
            entries,
            by_key,
            ignored,
            missed: Mutex::new(Vec::new()),
        }
    }

    fn key_of(&self, request: &OutgoingRequest) -> RequestKey {
        request_key(
            &self.rules,
            &request.method,
            &request.url,
            request.header("content-type"),
            request.body.as_deref(),
        )
    }

    /// Whether the recording has an answer for `request` (a response or a failure).
    pub fn has(&self, request: &OutgoingRequest) -> bool {
        self.by_key.contains_key(&self.key_of(request))
    }

    /// Reads the recording at `path`.
    pub fn load(path: &Path, rules: MatchRules) -> Result<Self, HarError> {
        Ok(Self::new(Har::load(path)?, rules))
    }

    /// Whether the recording holds any image body (recorded with `--images keep` or
    /// `placeholder`); without one, a replayed run has nothing to download.
    pub fn has_image_bodies(&self) -> bool {
        self.entries.iter().any(Entry::has_image_body)
    }

    /// The recorded answer to `request`: with several recorded entries for its key, the nth
    /// request gets the nth, and the last one repeats. A request that is not in the recording
    /// gets a 404 and is remembered ([`Replayer::unmatched`]).
    pub fn answer(&self, request: &OutgoingRequest) -> RecordedResponse {
        self.answer_listing(request, true)
    }

    /// [`Replayer::answer`] for a request whose absence is nobody's concern (an image the
    /// browser asked for): not listed as unrecorded.
    pub fn answer_unlisted(&self, request: &OutgoingRequest) -> RecordedResponse {
        self.answer_listing(request, false)
    }

    fn answer_listing(&self, request: &OutgoingRequest, listed: bool) -> RecordedResponse {
        let key = self.key_of(request);
        let Some((indices, asked)) = self.by_key.get(&key) else {
            tracing::debug!(key = key.as_str(), "not in the recording");
            let ignored = self
                .ignored
                .as_ref()
                .is_some_and(|set| set.is_match(request.url.as_str()));
            if listed
                && !ignored
                && let Ok(mut missed) = self.missed.lock()
            {
                let line = format!("{} {}", request.method, crate::redact::redact(&request.url));
                if !missed.contains(&line) {
                    missed.push(line);
                }
            }
            return RecordedResponse {
                status: 404,
                headers: vec![("content-type".into(), "text/plain".into())],
                body: b"not in the recording".to_vec(),
            };
        };
        let nth = asked.fetch_add(1, Ordering::Relaxed);
        let entry = &self.entries[indices[nth.min(indices.len() - 1)]];
        if entry.response.is_failure() {
            let error = entry.response.error.as_deref().unwrap_or(UNKNOWN_FAILURE);
            return RecordedResponse::failed(error);
        }
        let mut body = entry.response.content.body();
        if let (Some(requested), Ok(recorded_url)) = (
            jsonp_callback(&self.rules, &request.url),
            url::Url::parse(&entry.request.url),
        ) && let Some(recorded) = jsonp_callback(&self.rules, &recorded_url)
            && let Some(rewritten) = rewrite_jsonp(&body, &recorded, &requested)
        {
            body = rewritten;
        }
        let mut headers: Vec<(String, String)> = entry
            .response
            .headers
            .iter()
            .filter(|h| {
                !WIRE_HEADERS.iter().any(|w| h.name.eq_ignore_ascii_case(w))
                    && h.value != REDACTED
                    // HTTP/2 pseudo-headers that DevTools lists with the others.
                    && !h.name.starts_with(':')
            })
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            && !entry.response.content.mime_type.is_empty()
        {
            headers.push((
                "content-type".into(),
                entry.response.content.mime_type.clone(),
            ));
        }
        if !entry.response.redirect_url.is_empty()
            && !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("location"))
        {
            headers.push(("location".into(), entry.response.redirect_url.clone()));
        }
        RecordedResponse {
            status: u16::try_from(entry.response.status).unwrap_or(502),
            headers,
            body,
        }
    }

    /// Requests that were not in the recording (`METHOD URL`), in the order first asked.
    pub fn unmatched(&self) -> Vec<String> {
        self.missed.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(url: &str) -> OutgoingRequest {
        OutgoingRequest {
            method: "GET".into(),
            url: url::Url::parse(url).unwrap(),
            headers: Vec::new(),
            body: None,
        }
    }

    fn ok(body: &str) -> RecordedResponse {
        RecordedResponse {
            status: 200,
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("Set-Cookie".into(), "sid=secret".into()),
            ],
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_nth_request_gets_the_nth_response_then_the_last_repeats() {
        let recorder = Recorder::new();
        recorder.record(&get("http://a.test/more"), &ok("1"));
        recorder.record(&get("http://a.test/more"), &ok("2"));
        let replayer = Replayer::new(recorder.har(), MatchRules::default());
        let bodies: Vec<_> = (0..3)
            .map(|_| replayer.answer(&get("http://a.test/more")).body)
            .collect();
        assert_eq!(bodies, [b"1".to_vec(), b"2".to_vec(), b"2".to_vec()]);
        assert!(replayer.unmatched().is_empty());
    }

    #[test]
    fn unrecorded_requests_get_404_and_are_listed_once() {
        let replayer = Replayer::new(Har::new(), MatchRules::default());
        assert_eq!(replayer.answer(&get("http://a.test/x")).status, 404);
        assert_eq!(replayer.answer(&get("http://a.test/x")).status, 404);
        assert_eq!(replayer.unmatched(), ["GET http://a.test/x"]);
    }

    #[test]
    fn a_not_modified_answer_replays_with_its_cached_body_or_not_at_all() {
        let recorder = Recorder::new();
        recorder.record(&get("http://a.test/cached"), &ok("the cached page"));
        recorder.record(&get("http://a.test/empty"), &ok(""));
        let mut har = recorder.har();
        for entry in &mut har.log.entries {
            entry.response.status = NOT_MODIFIED;
        }
        let replayer = Replayer::new(har, MatchRules::default());
        let cached = replayer.answer(&get("http://a.test/cached"));
        assert_eq!(cached.status, 200);
        assert_eq!(cached.body, b"the cached page");
        assert_eq!(replayer.answer(&get("http://a.test/empty")).status, 404);
        assert_eq!(replayer.unmatched(), ["GET http://a.test/empty"]);
    }

    #[test]
    fn a_failed_request_is_recorded_as_devtools_does_and_replays_as_the_same_failure() {
        let recorder = Recorder::new();
        let refused = "net::ERR_CONNECTION_REFUSED";
        recorder.record(
            &get("http://a.test/style.css"),
            &RecordedResponse::failed(refused),
        );
        let har = recorder.har();
        let response = &har.log.entries[0].response;
        assert_eq!(response.status, 0);
        assert_eq!(response.error.as_deref(), Some(refused));
        let text = serde_json::to_string(&har).unwrap();
        assert!(
            text.contains(r#""_error":"net::ERR_CONNECTION_REFUSED""#),
            "{text}"
        );
        let replayer = Replayer::new(har, MatchRules::default());
        let answer = replayer.answer(&get("http://a.test/style.css"));
        assert_eq!(answer.failure().as_deref(), Some(refused));
        assert!(replayer.unmatched().is_empty());
    }

    #[test]
    fn a_devtools_failure_without_its_reason_still_replays_as_a_failure() {
        let recorder = Recorder::new();
        recorder.record(&get("http://a.test/ad.js"), &ok("{}"));
        let mut har = recorder.har();
        har.log.entries[0].response.status = 0;
        let replayer = Replayer::new(har, MatchRules::default());
        let answer = replayer.answer(&get("http://a.test/ad.js"));
        assert_eq!(answer.failure().as_deref(), Some(UNKNOWN_FAILURE));
    }

    #[test]
    fn ignored_urls_missing_from_the_recording_get_404_without_being_listed() {
        let rules = MatchRules {
            ignore_urls: vec![r"/analytics/".into(), r"\.css$".into()],
            ..MatchRules::default()
        };
        let replayer = Replayer::new(Har::new(), rules);
        for url in ["http://a.test/analytics/hit?x=1", "http://a.test/site.css"] {
            assert_eq!(replayer.answer(&get(url)).status, 404);
        }
        assert!(replayer.unmatched().is_empty());
        assert_eq!(replayer.answer(&get("http://a.test/page")).status, 404);
        assert_eq!(replayer.unmatched(), ["GET http://a.test/page"]);
    }

    #[test]
    fn dates_are_iso_8601() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_796_045_542_123);
        assert_eq!(iso_8601(at), "2026-11-30T13:32:22.123Z");
        assert_eq!(iso_8601(std::time::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn env_values_are_redacted_wherever_they_appear() {
        let recorder = Recorder::with_secrets(vec!["hunter22".into(), "ab".into()]);
        let mut request = get("http://a.test/login?key=hunter22");
        request.method = "POST".into();
        request.body = Some(br#"{"user":"ab","password":"hunter22"}"#.to_vec());
        recorder.record(&request, &ok(r#"{"echo":"hunter22"}"#));
        let text = serde_json::to_string(&recorder.har()).unwrap();
        assert!(!text.contains("hunter22"), "{text}");
        // Too short to search for without redacting ordinary text.
        assert!(text.contains(r#"\"user\":\"ab\""#), "{text}");
    }

    #[test]
    fn tokens_from_the_login_answer_are_redacted_there_and_later() {
        let recorder = Recorder::new().redacting_tokens(TokenSource {
            method: "POST".into(),
            url: url::Url::parse("http://a.test/auth").unwrap(),
            path: serde_json_path::JsonPath::parse("$.access_token").unwrap(),
        });
        let mut login = get("http://a.test/auth");
        login.method = "POST".into();
        recorder.record(
            &login,
            &ok(r#"{"access_token":"tok-123456","expires_in":60}"#),
        );
        // The same answer to another request is not a token.
        recorder.record(
            &get("http://a.test/auth"),
            &ok(r#"{"access_token":"plain"}"#),
        );
        recorder.record(
            &get("http://a.test/api?token=tok-123456"),
            &ok(r#"{"you":"tok-123456"}"#),
        );
        let text = serde_json::to_string(&recorder.har()).unwrap();
        assert!(!text.contains("tok-123456"), "{text}");
        for redacted in [
            r#"{\"access_token\":\"[redacted]\",\"expires_in\":60}"#,
            "api?token=[redacted]",
            r#"{\"you\":\"[redacted]\"}"#,
        ] {
            assert!(text.contains(redacted), "{redacted} not in {text}");
        }
        assert!(text.contains("plain"), "{text}");
        assert!(text.contains("expires_in"), "{text}");
    }

    #[test]
    fn secrets_are_not_recorded() {
        let recorder = Recorder::new();
        let mut request = get("http://a.test/api");
        request.headers = vec![
            ("Authorization".into(), "Bearer abc".into(), false),
            ("X-Token".into(), "from-env".into(), true),
            ("Accept".into(), "application/json".into(), false),
        ];
        recorder.record(&request, &ok("{}"));
        let text = serde_json::to_string(&recorder.har()).unwrap();
        for secret in ["Bearer abc", "from-env", "sid=secret"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("application/json"));
    }
}
