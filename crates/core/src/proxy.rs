//! Proxies: the endpoints a run's requests go through, and which one the next request takes.
//!
//! Pure: [`ProxyEndpoint`] is a checked proxy URL (its credentials kept apart, so showing an
//! endpoint never shows them); [`Rotation`] picks proxies round robin over the healthy ones and
//! benches one after repeated failures. The HTTP side (`transport`) holds one client per
//! endpoint and reports each answer back; the browser takes one endpoint when it starts.

use std::fmt;
use std::time::{Duration, Instant};

use crate::redact::Secret;

/// How a proxy is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyScheme {
    /// An HTTP proxy (`CONNECT` for `https://` targets).
    Http,
    /// An HTTP proxy reached over TLS.
    Https,
    /// SOCKS5, host names resolved locally.
    Socks5,
    /// SOCKS5, host names resolved by the proxy.
    Socks5h,
}

impl ProxyScheme {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "http" => Some(Self::Http),
            "https" => Some(Self::Https),
            "socks5" => Some(Self::Socks5),
            "socks5h" => Some(Self::Socks5h),
            _ => None,
        }
    }

    /// Whether this is a SOCKS proxy.
    pub fn is_socks(self) -> bool {
        matches!(self, Self::Socks5 | Self::Socks5h)
    }
}

/// A user name and password for a proxy. Never shown: `Debug` prints neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyCredentials {
    pub username: Secret,
    pub password: Secret,
}

/// One proxy: a URL without credentials (safe to show) and, apart, its credentials if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEndpoint {
    url: url::Url,
    scheme: ProxyScheme,
    credentials: Option<ProxyCredentials>,
}

impl ProxyEndpoint {
    /// Parses `http://host:port`, `https://`, `socks5://` or `socks5h://`; a user name and
    /// password in the URL become the endpoint's credentials.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let mut url = url::Url::parse(text)
            .map_err(|e| format!("`{}` is not a proxy URL: {e}", without_userinfo_text(text)))?;
        let shown = crate::redact::redact(&url);
        let Some(scheme) = ProxyScheme::from_name(url.scheme()) else {
            return Err(format!(
                "`{shown}` uses `{}:`; a proxy is http://, https://, socks5:// or socks5h://",
                url.scheme()
            ));
        };
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("`{shown}` has no host"));
        }
        if url.port_or_known_default().is_none() {
            return Err(format!("`{shown}` has no port"));
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "`{shown}` has a path or query; a proxy URL is scheme://host:port"
            ));
        }
        let credentials = (!url.username().is_empty()).then(|| ProxyCredentials {
            username: Secret::new(decode(url.username())),
            password: Secret::new(url.password().map(decode).unwrap_or_default()),
        });
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Ok(Self {
            url,
            scheme,
            credentials,
        })
    }

    /// The proxy's URL, without credentials.
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    pub fn scheme(&self) -> ProxyScheme {
        self.scheme
    }

    /// `scheme://host:port`, the form Chromium's `--proxy-server` takes.
    pub fn server(&self) -> String {
        let host = self.url.host_str().unwrap_or_default();
        let port = self.url.port_or_known_default().unwrap_or_default();
        // Chromium resolves host names through a SOCKS5 proxy itself: `socks5h` is `socks5`.
        let scheme = match self.scheme {
            ProxyScheme::Socks5h => "socks5",
            _ => self.url.scheme(),
        };
        format!("{scheme}://{host}:{port}")
    }

    pub fn credentials(&self) -> Option<&ProxyCredentials> {
        self.credentials.as_ref()
    }

    /// Gives the endpoint `credentials` unless its URL had its own.
    pub fn with_default_credentials(mut self, credentials: Option<&ProxyCredentials>) -> Self {
        if self.credentials.is_none() {
            self.credentials = credentials.cloned();
        }
        self
    }
}

impl fmt::Display for ProxyEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.server())
    }
}

/// `text` with its `%XX` escapes decoded (URLs keep user names and passwords escaped).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// `text` with anything between `://` and `@` left out, for messages about a URL that does not
/// parse (its credentials must not be shown either).
fn without_userinfo_text(text: &str) -> String {
    match (text.find("://"), text.rfind('@')) {
        (Some(start), Some(at)) if at > start => {
            format!("{}{}", &text[..start + 3], &text[at + 1..])
        }
        _ => text.to_owned(),
    }
}

/// A bad line of a proxy list: its number (from 1) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListLineError {
    pub line: usize,
    pub message: String,
}

/// The proxies of a list file: one URL a line; blank lines and `#` comments are skipped.
pub fn parse_proxy_list(text: &str) -> Result<Vec<ProxyEndpoint>, ListLineError> {
    let mut endpoints = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line
            .split_once('#')
            .map_or(line, |(before, _)| before)
            .trim();
        if line.is_empty() {
            continue;
        }
        let endpoint = ProxyEndpoint::parse(line).map_err(|message| ListLineError {
            line: index + 1,
            message,
        })?;
        endpoints.push(endpoint);
    }
    Ok(endpoints)
}

/// Which proxy the next request takes: round robin over the healthy ones. A proxy that fails
/// `max_failures` times in a row is benched for `cooldown`, then tried again (one more failure
/// benches it again). When every proxy is benched, the one benched longest ago is used: a run
/// never waits for a proxy. Time comes from the caller (`now`), so tests need no clock.
#[derive(Debug, Clone)]
pub struct Rotation {
    health: Vec<Health>,
    next: usize,
    max_failures: u32,
    cooldown: Duration,
}

#[derive(Debug, Clone, Default)]
struct Health {
    /// Failures in a row.
    failures: u32,
    /// Since when the proxy is benched.
    benched_at: Option<Instant>,
}

impl Rotation {
    /// A rotation over `count` proxies (at least 1).
    pub fn new(count: usize, max_failures: u32, cooldown: Duration) -> Self {
        Self {
            health: vec![Health::default(); count.max(1)],
            next: 0,
            max_failures: max_failures.max(1),
            cooldown,
        }
    }

    /// The proxy for the next request.
    pub fn pick(&mut self, now: Instant) -> usize {
        self.return_rested(now);
        let count = self.health.len();
        let healthy = (0..count)
            .map(|offset| (self.next + offset) % count)
            .find(|&i| self.health[i].benched_at.is_none());
        let chosen = healthy.unwrap_or_else(|| self.benched_longest());
        self.next = (chosen + 1) % count;
        chosen
    }

    /// The first healthy proxy, without moving the rotation on (the browser's, at launch).
    pub fn first_healthy(&mut self, now: Instant) -> usize {
        self.return_rested(now);
        (0..self.health.len())
            .find(|&i| self.health[i].benched_at.is_none())
            .unwrap_or_else(|| self.benched_longest())
    }

    /// Proxy `index` answered: its count of failures starts again.
    pub fn succeeded(&mut self, index: usize) {
        if let Some(health) = self.health.get_mut(index) {
            *health = Health::default();
        }
    }

    /// Proxy `index` failed at `now`; returns whether that benched it.
    pub fn failed(&mut self, index: usize, now: Instant) -> bool {
        let max_failures = self.max_failures;
        let Some(health) = self.health.get_mut(index) else {
            return false;
        };
        health.failures = health.failures.saturating_add(1);
        if health.failures >= max_failures && health.benched_at.is_none() {
            health.benched_at = Some(now);
            return true;
        }
        false
    }

    /// Whether proxy `index` is benched now.
    pub fn is_benched(&self, index: usize) -> bool {
        self.health
            .get(index)
            .is_some_and(|h| h.benched_at.is_some())
    }

    /// Back from the bench after `cooldown`, one failure away from it.
    fn return_rested(&mut self, now: Instant) {
        for health in &mut self.health {
            if health
                .benched_at
                .is_some_and(|at| now.saturating_duration_since(at) >= self.cooldown)
            {
                health.benched_at = None;
                health.failures = self.max_failures - 1;
            }
        }
    }

    fn benched_longest(&self) -> usize {
        (0..self.health.len())
            .min_by_key(|&i| self.health[i].benched_at)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOLDOWN: Duration = Duration::from_secs(60);

    fn picks(rotation: &mut Rotation, now: Instant, n: usize) -> Vec<usize> {
        (0..n).map(|_| rotation.pick(now)).collect()
    }

    #[test]
    fn healthy_proxies_take_turns() {
        let mut rotation = Rotation::new(3, 3, COOLDOWN);
        assert_eq!(
            picks(&mut rotation, Instant::now(), 7),
            [0, 1, 2, 0, 1, 2, 0]
        );
    }

    #[test]
    fn a_proxy_is_benched_after_max_failures_in_a_row_only() {
        let now = Instant::now();
        let mut rotation = Rotation::new(2, 3, COOLDOWN);
        assert!(!rotation.failed(0, now));
        assert!(!rotation.failed(0, now));
        rotation.succeeded(0);
        assert!(!rotation.failed(0, now));
        assert!(!rotation.failed(0, now));
        assert!(
            rotation.failed(0, now),
            "the third failure in a row benches"
        );
        assert!(rotation.is_benched(0));
        assert_eq!(picks(&mut rotation, now, 3), [1, 1, 1]);
    }

    #[test]
    fn a_benched_proxy_returns_after_the_cooldown_one_failure_from_the_bench() {
        let start = Instant::now();
        let mut rotation = Rotation::new(2, 2, COOLDOWN);
        rotation.failed(0, start);
        rotation.failed(0, start);
        let almost = start + COOLDOWN - Duration::from_millis(1);
        assert_eq!(picks(&mut rotation, almost, 2), [1, 1]);
        let later = start + COOLDOWN;
        assert_eq!(picks(&mut rotation, later, 2), [0, 1]);
        assert!(rotation.failed(0, later), "one failure benches it again");
        assert_eq!(picks(&mut rotation, later, 2), [1, 1]);
    }

    #[test]
    fn with_every_proxy_benched_the_one_benched_longest_ago_is_used() {
        let start = Instant::now();
        let mut rotation = Rotation::new(3, 1, COOLDOWN);
        rotation.failed(1, start);
        rotation.failed(2, start + Duration::from_secs(1));
        rotation.failed(0, start + Duration::from_secs(2));
        let now = start + Duration::from_secs(3);
        assert_eq!(picks(&mut rotation, now, 2), [1, 1]);
        assert_eq!(rotation.first_healthy(now), 1);
    }

    #[test]
    fn the_browser_takes_the_first_healthy_proxy_without_moving_the_rotation() {
        let now = Instant::now();
        let mut rotation = Rotation::new(3, 1, COOLDOWN);
        rotation.failed(0, now);
        assert_eq!(rotation.first_healthy(now), 1);
        assert_eq!(picks(&mut rotation, now, 3), [1, 2, 1]);
    }

    #[test]
    fn proxy_urls_are_checked_and_keep_credentials_apart() {
        let p = ProxyEndpoint::parse("http://user:p%40ss@proxy.test:8080").unwrap();
        assert_eq!(p.url().as_str(), "http://proxy.test:8080/");
        assert_eq!(p.to_string(), "http://proxy.test:8080");
        let c = p.credentials().unwrap();
        assert_eq!(
            (c.username.expose().as_str(), c.password.expose().as_str()),
            ("user", "p@ss")
        );
        assert!(!format!("{p:?}").contains("p%40ss") && !format!("{p:?}").contains("p@ss"));
        assert_eq!(
            ProxyEndpoint::parse("socks5h://h.test:1080")
                .unwrap()
                .server(),
            "socks5://h.test:1080"
        );
        for (text, expected) in [
            ("ftp://h.test:21", "uses `ftp:`"),
            ("socks5://h.test", "has no port"),
            ("http://h.test:8080/path", "has a path"),
            ("nothing", "is not a proxy URL"),
        ] {
            let error = ProxyEndpoint::parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let error = ProxyEndpoint::parse("ftp://u:secret@h.test:21").unwrap_err();
        assert!(!error.contains("secret"), "{error}");
        let error = ProxyEndpoint::parse("http://u:secret@:80").unwrap_err();
        assert!(!error.contains("secret"), "{error}");
    }

    #[test]
    fn a_proxy_list_skips_comments_and_names_its_bad_line() {
        let list = "# proxies\n\nhttp://a.test:1  # first\nsocks5://b.test:2\n";
        let endpoints = parse_proxy_list(list).unwrap();
        let servers: Vec<_> = endpoints.iter().map(ProxyEndpoint::server).collect();
        assert_eq!(servers, ["http://a.test:1", "socks5://b.test:2"]);
        let error = parse_proxy_list("http://a.test:1\nnot a proxy\n").unwrap_err();
        assert_eq!(error.line, 2);
    }
}
