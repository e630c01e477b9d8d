//! Secrets kept out of what is shown: URL credentials removed before a URL reaches a log, a
//! message or an output file. A leaf module: it imports nothing of the crate, so everything
//! can use it without closing a cycle.

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
    fn credentials_are_redacted() {
        let url = url::Url::parse("https://user:secret@a.test/x?y=1").unwrap();
        assert_eq!(redact(&url), "https://a.test/x?y=1");
        let plain = url::Url::parse("https://a.test/x").unwrap();
        assert_eq!(redact(&plain), "https://a.test/x");
    }
}
