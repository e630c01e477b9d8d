//! Secrets kept out of what is shown: URL credentials removed before a URL reaches a log, a
//! message or an output file, and [`Secret`] values that `Debug` never prints. A leaf module:
//! it imports nothing of the crate, so everything can use it without closing a cycle.

use std::fmt;

/// A value that is never shown: its `Debug` prints `<redacted>`, so a struct holding one
/// (a cookie, a header value, a login body, proxy credentials) derives `Debug` and can still be
/// logged. [`Secret::expose`] where the value is sent.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret<T = String>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// The value itself, for where it is sent.
    pub fn expose(&self) -> &T {
        &self.0
    }

    /// The value, to fill in before it is sent (an `env:` value read at start).
    pub fn expose_mut(&mut self) -> &mut T {
        &mut self.0
    }

    /// The value itself, leaving the wrapper.
    pub fn into_exposed(self) -> T {
        self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
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
    fn a_secret_is_never_printed_by_debug() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Login {
            user: &'static str,
            password: Secret,
        }
        let login = Login {
            user: "ann",
            password: Secret::new("hunter2".to_owned()),
        };
        assert_eq!(
            format!("{login:?}"),
            "Login { user: \"ann\", password: <redacted> }"
        );
        assert_eq!(login.password.expose(), "hunter2");
    }

    #[test]
    fn credentials_are_redacted() {
        let url = url::Url::parse("https://user:secret@a.test/x?y=1").unwrap();
        assert_eq!(redact(&url), "https://a.test/x?y=1");
        let plain = url::Url::parse("https://a.test/x").unwrap();
        assert_eq!(redact(&plain), "https://a.test/x");
    }
}
