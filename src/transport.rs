//! The HTTP side shared by page fetching and downloads: one client, failure classes, back-off.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::profile::DownloadSettings;
use crate::session::Session;

/// Builds the one HTTP client of a run: rustls, connection reuse, HTTP/2 where offered, the
/// session's cookie jar when it has one.
pub fn build_client(
    settings: &DownloadSettings,
    session: &Session,
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
    if let Some(jar) = &session.cookies {
        builder = builder.cookie_provider(Arc::clone(jar));
    }
    builder
        .user_agent(&settings.user_agent)
        .default_headers(headers)
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.timeout)
        .pool_max_idle_per_host(settings.per_host.max(1))
        .redirect(reqwest::redirect::Policy::limited(10))
        .tcp_nodelay(true)
        .build()
}

/// Why a request did not give a usable result; kept distinct in state, failures and summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureClass {
    Http(u16),
    Timeout,
    Connect,
    Dns,
    Reset,
    Redirect,
    Truncated,
    NotAnImage,
    TooLarge,
    TooSmall,
    Disk,
    Other,
}

impl FailureClass {
    /// The stable name stored in state and `failures.jsonl`: `http_404`, `timeout`, ...
    pub fn name(self) -> String {
        match self {
            Self::Http(code) => format!("http_{code}"),
            Self::Timeout => "timeout".into(),
            Self::Connect => "connect".into(),
            Self::Dns => "dns".into(),
            Self::Reset => "reset".into(),
            Self::Redirect => "redirect".into(),
            Self::Truncated => "truncated".into(),
            Self::NotAnImage => "not_an_image".into(),
            Self::TooLarge => "too_large".into(),
            Self::TooSmall => "too_small".into(),
            Self::Disk => "disk".into(),
            Self::Other => "other".into(),
        }
    }

    /// Whether trying again later may succeed (time-outs, resets, 429, 5xx).
    pub fn is_transient(self) -> bool {
        match self {
            Self::Http(code) => matches!(code, 408 | 425 | 429 | 500..=599),
            Self::Timeout | Self::Connect | Self::Reset | Self::Truncated => true,
            Self::Dns
            | Self::Redirect
            | Self::NotAnImage
            | Self::TooLarge
            | Self::TooSmall
            | Self::Disk
            | Self::Other => false,
        }
    }
}

/// A failed attempt: its class and a one-line detail for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub class: FailureClass,
    pub detail: String,
    /// How long the server asked us to wait (`Retry-After`), if it did.
    pub retry_after: Option<Duration>,
}

impl Failed {
    pub fn new(class: FailureClass, detail: impl Into<String>) -> Self {
        Self {
            class,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// Whether this failure says the host is overloaded (so it should be slowed down).
    pub fn is_throttle(&self) -> bool {
        matches!(
            self.class,
            FailureClass::Http(429 | 503) | FailureClass::Timeout
        )
    }
}

/// Classifies a reqwest error by walking its causes.
pub fn classify(error: &reqwest::Error) -> Failed {
    let chain = error_chain(error);
    let class = if error.is_timeout() {
        FailureClass::Timeout
    } else if error.is_redirect() {
        FailureClass::Redirect
    } else if chain.contains("dns error") || chain.contains("failed to lookup address") {
        FailureClass::Dns
    } else if error.is_connect() {
        FailureClass::Connect
    } else if ended_early(error) {
        FailureClass::Truncated
    } else if error.is_body() || error.is_decode() || error.is_request() {
        FailureClass::Reset
    } else {
        FailureClass::Other
    };
    Failed::new(class, chain)
}

/// Whether the connection closed before the body was complete: hyper reports a body shorter
/// than its `Content-Length`, or a chunked body without its last chunk, as an `UnexpectedEof`
/// I/O error somewhere in the chain (a real reset is `ConnectionReset`).
fn ended_early(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof)
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// `error` and its sources, joined with `: `, with URL credentials removed.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

/// Exponential back-off with full jitter: attempt 1 waits up to `base`, doubling to `cap`.
pub fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let ceiling = exp.min(cap);
    ceiling.mul_f64(0.5 + fastrand::f64() * 0.5)
}

/// A URL with any user name and password removed, for logs and output.
pub fn redact(url: &url::Url) -> String {
    if url.username().is_empty() && url.password().is_none() {
        return url.to_string();
    }
    let mut clean = url.clone();
    let _ = clean.set_username("");
    let _ = clean.set_password(None);
    clean.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_classes_are_the_ones_worth_retrying() {
        for class in [
            FailureClass::Http(503),
            FailureClass::Http(429),
            FailureClass::Timeout,
            FailureClass::Reset,
        ] {
            assert!(class.is_transient(), "{class:?}");
        }
        for class in [
            FailureClass::Http(404),
            FailureClass::NotAnImage,
            FailureClass::TooLarge,
            FailureClass::Disk,
        ] {
            assert!(!class.is_transient(), "{class:?}");
        }
        assert_eq!(FailureClass::Http(404).name(), "http_404");
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let base = Duration::from_millis(100);
        let cap = Duration::from_secs(2);
        for attempt in 1..20 {
            let wait = backoff(attempt, base, cap);
            assert!(wait <= cap, "attempt {attempt}: {wait:?}");
        }
        assert!(backoff(1, base, cap) <= base);
        assert!(backoff(4, base, cap) >= Duration::from_millis(400));
    }

    #[test]
    fn credentials_are_redacted() {
        let url = url::Url::parse("https://user:secret@a.test/x?y=1").unwrap();
        assert_eq!(redact(&url), "https://a.test/x?y=1");
    }
}
