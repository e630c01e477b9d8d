//! `[session.token]`: a token fetched from a login or refresh endpoint and sent with every API
//! request. It is fetched when the run starts (tokens are never stored, so every run begins
//! with a fresh one), again once it is older than `refresh_after` (a long pause), and again
//! when the API answers 401 or 403 (once per failing request). The token is a sensitive header
//! value: never logged, stored or printed, and errors about its reply never quote the reply.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::paginate::json_cursor::ApiRequest;

/// The token of a run and how to get a new one.
pub struct TokenKeeper {
    /// The token request, its `env:` values read (it may hold a password: not `Debug`).
    pub request: ApiRequest,
    /// Headers of the token request, sensitive.
    pub headers: HeaderMap,
    path: serde_json_path::JsonPath,
    header: HeaderName,
    format: String,
    refresh_after: Option<Duration>,
    /// The token held and when it was fetched; one fetch at a time.
    pub held: tokio::sync::Mutex<Option<HeldToken>>,
}

/// A token as sent, and when it was fetched.
pub struct HeldToken {
    pub value: HeaderValue,
    pub fetched: SystemTime,
}

impl TokenKeeper {
    pub fn new(
        request: ApiRequest,
        headers: HeaderMap,
        path: serde_json_path::JsonPath,
        header: HeaderName,
        format: String,
        refresh_after: Option<Duration>,
    ) -> Self {
        Self {
            request,
            headers,
            path,
            header,
            format,
            refresh_after,
            held: tokio::sync::Mutex::new(None),
        }
    }

    /// The header that carries the token.
    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    /// The held token, if it may still be sent at `now`: not older than `refresh_after`, and
    /// not the one the API just `rejected`.
    pub fn usable(
        &self,
        held: Option<&HeldToken>,
        rejected: Option<&HeaderValue>,
        now: SystemTime,
    ) -> Option<HeaderValue> {
        let held = held?;
        if rejected == Some(&held.value) {
            return None;
        }
        // A clock set back counts as no time passed.
        let age = now.duration_since(held.fetched).unwrap_or(Duration::ZERO);
        if self.refresh_after.is_some_and(|limit| age >= limit) {
            return None;
        }
        Some(held.value.clone())
    }

    /// The header value carrying the token in a token reply, or why there is none (the reply
    /// itself is never quoted: it holds the secret).
    pub fn read_reply(&self, status: u16, body: &[u8]) -> Result<HeaderValue, String> {
        let url = crate::redact::redact(&self.request.url);
        if !(200..300).contains(&status) {
            return Err(format!(
                "the token request to `{url}` answered HTTP {status}"
            ));
        }
        let json: Value = serde_json::from_slice(body)
            .map_err(|_| format!("the reply to the token request `{url}` is not JSON"))?;
        let token = match self.path.query(&json).first() {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(format!(
                    "`{}` selects no token (a non-empty string) in the reply to `{url}`",
                    self.path
                ));
            }
        };
        let mut value = HeaderValue::from_str(&self.format.replace("{token}", &token))
            .map_err(|_| format!("the token from `{url}` is not valid header text"))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// Replaces every string value `"env:NAME"` of `json` with `value(NAME)`; the first error of
/// `value`, if any.
pub fn fill_env<E>(json: &mut Value, value: &impl Fn(&str) -> Result<String, E>) -> Result<(), E> {
    match json {
        Value::String(s) => {
            if let Some(variable) = s.strip_prefix("env:") {
                *s = value(variable)?;
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|v| fill_env(v, value)),
        Value::Object(map) => map.values_mut().try_for_each(|v| fill_env(v, value)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ApiMethod;

    fn keeper(refresh_after: Option<Duration>) -> TokenKeeper {
        TokenKeeper::new(
            ApiRequest {
                method: ApiMethod::Post,
                url: url::Url::parse("http://a.test/auth").unwrap(),
                body: Some("{}".into()),
            },
            HeaderMap::new(),
            serde_json_path::JsonPath::parse("$.access_token").unwrap(),
            HeaderName::from_static("authorization"),
            "Bearer {token}".into(),
            refresh_after,
        )
    }

    #[test]
    fn a_held_token_is_reused_until_it_is_old_or_rejected() {
        let k = keeper(Some(Duration::from_secs(600)));
        let fetched = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let held = HeldToken {
            value: HeaderValue::from_static("Bearer a"),
            fetched,
        };
        let other = HeaderValue::from_static("Bearer b");
        let cases = [
            (None, 0, None, false),
            (Some(&held), 0, None, true),
            (Some(&held), 599, None, true),
            (Some(&held), 600, None, false),
            (Some(&held), 60 * 60 * 24, None, false),
            (Some(&held), 5, Some(&held.value), false),
            (Some(&held), 5, Some(&other), true),
        ];
        for (held, after, rejected, usable) in cases {
            let now = fetched + Duration::from_secs(after);
            assert_eq!(
                k.usable(held, rejected, now).is_some(),
                usable,
                "{after}s, rejected {rejected:?}"
            );
        }
        let forever = keeper(None);
        let now = fetched + Duration::from_secs(60 * 60 * 24 * 365);
        assert!(forever.usable(Some(&held), None, now).is_some());
    }

    #[test]
    fn the_token_reply_is_read_without_quoting_it() {
        let k = keeper(None);
        let value = k
            .read_reply(200, br#"{"access_token": "s3cret", "expires_in": 60}"#)
            .unwrap();
        assert_eq!(value.to_str().unwrap(), "Bearer s3cret");
        assert!(value.is_sensitive());
        let cases: [(u16, &[u8], &str); 4] = [
            (500, b"s3cret", "answered HTTP 500"),
            (200, b"s3cret", "is not JSON"),
            (
                200,
                br#"{"token": "s3cret"}"#,
                "`$.access_token` selects no token",
            ),
            (200, br#"{"access_token": ""}"#, "selects no token"),
        ];
        for (status, body, expected) in cases {
            let message = k.read_reply(status, body).unwrap_err();
            assert!(message.contains(expected), "{message}");
            assert!(!message.contains("s3cret"), "{message}");
        }
    }
}
