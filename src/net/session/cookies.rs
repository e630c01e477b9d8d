//! Cookies from a Netscape (curl, browser-extension) cookies file, into the run's cookie jar.
//!
//! One cookie a line, seven tab-separated fields: domain, include subdomains (`TRUE`/`FALSE`),
//! path, secure (`TRUE`/`FALSE`), expiry (Unix seconds, 0 for a session cookie), name, value.
//! `#HttpOnly_` before the domain marks an HTTP-only cookie; other lines starting with `#` are
//! comments. The jar sends each cookie only to requests whose host, path and scheme match, as a
//! browser would; expired cookies are left out.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::cookie::Jar;

use crate::redact::Secret;

/// One cookie of a cookies file. Its value is a secret: never printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCookie {
    /// Without a leading dot.
    pub domain: String,
    pub include_subdomains: bool,
    pub path: String,
    pub secure: bool,
    pub http_only: bool,
    /// `None` for a session cookie.
    pub expires: Option<SystemTime>,
    pub name: String,
    pub value: Secret,
}

/// A line that is not a cookie: its 1-based number and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

/// The cookies of a Netscape cookies file's text, or the first line that is not one.
pub fn parse_cookies(text: &str) -> Result<Vec<FileCookie>, LineError> {
    let mut cookies = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let (line, http_only) = match line.strip_prefix("#HttpOnly_") {
            Some(rest) => (rest, true),
            None => (line, false),
        };
        if line.trim().is_empty() || (!http_only && line.starts_with('#')) {
            continue;
        }
        let error = |message: String| LineError {
            line: index + 1,
            message,
        };
        let fields: Vec<&str> = line.split('\t').collect();
        // A cookie with an empty value may lose its trailing tab.
        let [domain, subdomains, path, secure, expiry, name, value] = match fields.as_slice() {
            [d, s, p, sec, e, n, v] => [*d, *s, *p, *sec, *e, *n, *v],
            [d, s, p, sec, e, n] => [*d, *s, *p, *sec, *e, *n, ""],
            _ => {
                return Err(error(format!(
                    "expected 7 tab-separated fields (domain, include subdomains, path, secure, expiry, name, value), found {}",
                    fields.len()
                )));
            }
        };
        let flag = |text: &str, what: &str| match text.to_ascii_uppercase().as_str() {
            "TRUE" => Ok(true),
            "FALSE" => Ok(false),
            _ => Err(error(format!("{what} is `{text}`, not TRUE or FALSE"))),
        };
        let domain = domain.trim().trim_start_matches('.').to_ascii_lowercase();
        if domain.is_empty() || url::Host::parse(&domain).is_err() {
            return Err(error(format!("`{domain}` is not a domain name")));
        }
        if !path.starts_with('/') {
            return Err(error(format!("the path `{path}` does not start with `/`")));
        }
        let expiry: u64 = expiry
            .trim()
            .parse()
            .map_err(|_| error(format!("the expiry `{expiry}` is not a number of seconds")))?;
        if name.is_empty() {
            return Err(error("the cookie has no name".to_owned()));
        }
        cookies.push(FileCookie {
            domain,
            include_subdomains: flag(subdomains, "include subdomains")?,
            path: path.to_owned(),
            secure: flag(secure, "secure")?,
            http_only,
            expires: (expiry > 0)
                .then(|| UNIX_EPOCH + Duration::from_secs(expiry.min(LATEST_EXPIRY_SECS))),
            name: name.to_owned(),
            value: Secret::new(value.to_owned()),
        });
    }
    Ok(cookies)
}

/// The latest expiry an HTTP date can say (9999-12-31 23:59:59 UTC), in Unix seconds: a later
/// one in a cookies file means "never" as much as this one does, and is read as this one.
const LATEST_EXPIRY_SECS: u64 = 253_402_300_799;

/// Puts `cookies` into `jar`, leaving out those expired at `now`; how many went in.
pub fn fill_jar(jar: &Jar, cookies: &[FileCookie], now: SystemTime) -> usize {
    let mut added = 0;
    for cookie in cookies {
        if cookie.expires.is_some_and(|at| at <= now) {
            continue;
        }
        let is_ip = matches!(
            url::Host::parse(&cookie.domain),
            Ok(url::Host::Ipv4(_) | url::Host::Ipv6(_))
        );
        let host = match url::Host::parse(&cookie.domain) {
            Ok(url::Host::Ipv6(ip)) => format!("[{ip}]"),
            _ => cookie.domain.clone(),
        };
        let scheme = if cookie.secure { "https" } else { "http" };
        let Ok(url) = url::Url::parse(&format!("{scheme}://{host}{}", cookie.path)) else {
            continue;
        };
        let mut set = format!(
            "{}={}; Path={}",
            cookie.name,
            cookie.value.expose(),
            cookie.path
        );
        // Without `Domain`, a cookie is host-only; an address has no subdomains.
        if cookie.include_subdomains && !is_ip {
            set.push_str(&format!("; Domain={}", cookie.domain));
        }
        if cookie.secure {
            set.push_str("; Secure");
        }
        if cookie.http_only {
            set.push_str("; HttpOnly");
        }
        if let Some(at) = cookie.expires {
            set.push_str(&format!("; Expires={}", httpdate::fmt_http_date(at)));
        }
        jar.add_cookie_str(&set, &url);
        added += 1;
    }
    added
}

#[cfg(test)]
mod tests {
    use reqwest::cookie::CookieStore;

    use super::*;

    const FILE: &str = "# Netscape HTTP Cookie File\n\
        # a comment\n\
        \n\
        .example.test\tTRUE\t/\tFALSE\t0\tsid\tabc\n\
        #HttpOnly_api.example.test\tFALSE\t/v2\tTRUE\t4102444800\ttoken\tt0k\n\
        example.test\tFALSE\t/\tFALSE\t1000000000\told\tgone\n\
        127.0.0.1\tFALSE\t/img\tFALSE\t0\tlocal\tyes\n\
        example.test\tFALSE\t/\tFALSE\t0\tempty\n";

    fn sent(jar: &Jar, url: &str) -> Vec<String> {
        let header = jar.cookies(&url::Url::parse(url).unwrap());
        let mut names: Vec<String> = header
            .map(|h| {
                h.to_str()
                    .unwrap()
                    .split("; ")
                    .map(|pair| pair.split('=').next().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn a_cookies_file_is_read_with_its_flags() {
        let cookies = parse_cookies(FILE).unwrap();
        assert_eq!(cookies.len(), 5);
        assert_eq!(
            (cookies[0].domain.as_str(), cookies[0].include_subdomains),
            ("example.test", true)
        );
        let token = &cookies[1];
        assert!(token.http_only && token.secure && token.expires.is_some());
        assert_eq!(
            (token.path.as_str(), token.value.expose().as_str()),
            ("/v2", "t0k")
        );
        assert_eq!(cookies[4].value.expose(), "");
        assert!(
            !format!("{token:?}").contains("t0k"),
            "values are not printed"
        );
    }

    #[test]
    fn cookies_are_sent_where_domain_path_and_scheme_match() {
        let jar = Jar::default();
        let added = fill_jar(&jar, &parse_cookies(FILE).unwrap(), SystemTime::now());
        assert_eq!(added, 4, "the expired cookie is left out");
        let cases = [
            ("http://example.test/a", vec!["empty", "sid"]),
            ("http://www.example.test/a", vec!["sid"]),
            ("http://api.example.test/v2/x", vec!["sid"]),
            ("https://api.example.test/v2/x", vec!["sid", "token"]),
            ("https://api.example.test/v1", vec!["sid"]),
            ("http://other.test/", vec![]),
            ("http://127.0.0.1:8080/img/a.jpg", vec!["local"]),
            ("http://127.0.0.1:8080/api", vec![]),
        ];
        for (url, expected) in cases {
            assert_eq!(sent(&jar, url), expected, "{url}");
        }
    }

    #[test]
    fn a_line_that_is_not_a_cookie_is_named() {
        let cases = [
            ("a.test\tTRUE\t/\n", 1, "expected 7 tab-separated fields"),
            (
                "# c\na.test\tYES\t/\tFALSE\t0\tn\tv\n",
                2,
                "include subdomains is `YES`",
            ),
            (
                "a.test\tTRUE\tx\tFALSE\t0\tn\tv\n",
                1,
                "does not start with `/`",
            ),
            (
                "a.test\tTRUE\t/\tFALSE\tsoon\tn\tv\n",
                1,
                "is not a number of seconds",
            ),
            ("a.test\tTRUE\t/\tFALSE\t0\t\tv\n", 1, "has no name"),
            (
                "a test\tTRUE\t/\tFALSE\t0\tn\tv\n",
                1,
                "is not a domain name",
            ),
        ];
        for (text, line, expected) in cases {
            let error = parse_cookies(text).unwrap_err();
            assert_eq!(error.line, line, "{text:?}");
            assert!(
                error.message.contains(expected),
                "{text:?}: {}",
                error.message
            );
        }
    }

    #[test]
    fn an_expiry_after_the_year_9999_is_read_as_the_last_second_of_it() {
        for expiry in [
            "253402300800",
            "9223372036854775808",
            "18446744073709551615",
        ] {
            let line = format!("example.test\tFALSE\t/\tFALSE\t{expiry}\tsid\tv\n");
            let cookies = parse_cookies(&line).unwrap();
            let latest = UNIX_EPOCH + Duration::from_secs(LATEST_EXPIRY_SECS);
            assert_eq!(cookies[0].expires, Some(latest), "{expiry}");
            let jar = Jar::default();
            assert_eq!(fill_jar(&jar, &cookies, SystemTime::now()), 1);
        }
    }
}
