//! Why a request failed: the classes kept distinct in state, `failures.jsonl` and the summary,
//! and how a reqwest error maps onto them.

use std::time::Duration;

pub use scrape_core::failure::{FailureClass, error_chain};

/// A failed attempt: its class and a one-line detail for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub class: FailureClass,
    pub detail: String,
    /// How long the server asked us to wait (`Retry-After`), if it did.
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub fn new(class: FailureClass, detail: impl Into<String>) -> Self {
        Self {
            class,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// Whether this failure says the host is overloaded (so it should be slowed down): 429,
    /// 503, a time-out, a reset connection.
    pub fn is_throttle(&self) -> bool {
        matches!(
            self.class,
            FailureClass::Http(429 | 503) | FailureClass::Timeout | FailureClass::Reset
        )
    }
}

/// Classifies a reqwest error by walking its causes. reqwest names the request's URL in its
/// message; any user name and password in it are removed from the detail.
pub fn classify(error: &reqwest::Error) -> Failure {
    let mut chain = error_chain(error);
    if let Some(url) = error.url()
        && (!url.username().is_empty() || url.password().is_some())
    {
        chain = chain.replace(url.as_str(), &crate::redact::redact(url));
    }
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
    Failure::new(class, chain)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_request_never_shows_the_urls_password() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Port 9 on loopback: nothing listens, the connection is refused at once.
        let error = reqwest::get("http://user:hunter2@127.0.0.1:9/x")
            .await
            .unwrap_err();
        let failed = classify(&error);
        assert_eq!(failed.class, FailureClass::Connect, "{failed:?}");
        assert!(!failed.detail.contains("hunter2"), "{}", failed.detail);
        assert!(failed.detail.contains("127.0.0.1:9/x"), "{}", failed.detail);
    }

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
            FailureClass::Memory,
            FailureClass::Disk,
        ] {
            assert!(!class.is_transient(), "{class:?}");
        }
        assert_eq!(FailureClass::Http(404).name(), "http_404");
    }
}
