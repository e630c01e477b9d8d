//! A page's validators: the `ETag` and `Last-Modified` its response carried, kept so a later
//! fetch of the page can ask for it only if it changed (`If-None-Match`, `If-Modified-Since`).

use serde::{Deserialize, Serialize};

/// The longest validator kept, in bytes; a longer one is dropped, as a malformed one is.
pub const MAX_VALIDATOR_BYTES: usize = 512;

/// The validators of one page response; either may be missing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validators {
    /// The `ETag` header, as sent (quotes and a `W/` prefix included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The `Last-Modified` header, as sent (an HTTP date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

impl Validators {
    /// The validators of a response whose `ETag` and `Last-Modified` headers have these raw
    /// values: each kept when it is [`kept`].
    pub fn from_headers(etag: Option<&[u8]>, last_modified: Option<&[u8]>) -> Self {
        Self {
            etag: etag.and_then(kept),
            last_modified: last_modified.and_then(kept),
        }
    }

    /// No validator at all: nothing to ask a conditional request with.
    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    /// The headers of a request for the page only if it changed: `If-None-Match` with the
    /// `ETag`, `If-Modified-Since` with the `Last-Modified` date.
    pub fn conditional_headers(&self) -> Vec<(&'static str, &str)> {
        let etag = self.etag.as_deref().map(|v| ("if-none-match", v));
        let date = self
            .last_modified
            .as_deref()
            .map(|v| ("if-modified-since", v));
        etag.into_iter().chain(date).collect()
    }
}

/// `value` as a validator worth keeping: visible ASCII and spaces (what a header value sent
/// back must be), trimmed, not empty and at most [`MAX_VALIDATOR_BYTES`] long.
pub fn kept(value: &[u8]) -> Option<String> {
    let value = value.trim_ascii();
    let fits = !value.is_empty() && value.len() <= MAX_VALIDATOR_BYTES;
    let visible = value.iter().all(|b| (0x20..0x7f).contains(b));
    (fits && visible)
        .then(|| std::str::from_utf8(value).ok().map(str::to_owned))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_validator_is_kept_only_when_it_can_be_sent_back() {
        let long = "x".repeat(MAX_VALIDATOR_BYTES + 1);
        let longest = "x".repeat(MAX_VALIDATOR_BYTES);
        let cases: [(&[u8], Option<&str>); 7] = [
            (b"\"abc\"", Some("\"abc\"")),
            (b" W/\"abc\" ", Some("W/\"abc\"")),
            (
                b"Wed, 21 Oct 2015 07:28:00 GMT",
                Some("Wed, 21 Oct 2015 07:28:00 GMT"),
            ),
            (b"", None),
            (b"\"a\nb\"", None),
            ("\"é\"".as_bytes(), None),
            (long.as_bytes(), None),
        ];
        for (value, expected) in cases {
            assert_eq!(kept(value).as_deref(), expected, "{value:?}");
        }
        assert_eq!(kept(longest.as_bytes()), Some(longest));
    }

    #[test]
    fn the_conditional_headers_are_those_of_the_validators_there_are() {
        let both =
            Validators::from_headers(Some(b"\"v1\""), Some(b"Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(
            both.conditional_headers(),
            [
                ("if-none-match", "\"v1\""),
                ("if-modified-since", "Wed, 21 Oct 2015 07:28:00 GMT")
            ]
        );
        let etag = Validators::from_headers(Some(b"\"v1\""), Some(b"bad\x01date"));
        assert_eq!(etag.conditional_headers(), [("if-none-match", "\"v1\"")]);
        let none = Validators::from_headers(None, Some(b""));
        assert!(none.is_empty());
        assert!(none.conditional_headers().is_empty());
    }
}
