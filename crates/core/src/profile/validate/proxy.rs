//! `[proxy]`: the proxies, their credentials and when a failing one is benched.

use std::path::PathBuf;

use toml::Spanned;

use super::Validator;
use crate::profile::raw::ProxyToml;
use crate::profile::{Diagnostic, ProxySettings};
use crate::proxy::ProxyEndpoint;

impl Validator<'_> {
    /// `[proxy]`.
    pub(super) fn proxy(&mut self, raw: ProxyToml) -> Option<ProxySettings> {
        let mut ok = true;
        let defaults = ProxySettings::default();
        let mut endpoints = Vec::new();
        for text in &raw.urls {
            match ProxyEndpoint::parse(text.get_ref()) {
                Ok(endpoint) => endpoints.push(endpoint),
                Err(message) => {
                    self.diagnostics.push(
                        Diagnostic::error(Some(text.span()), message)
                            .with_hint("write e.g. \"http://proxy.example:8080\" or \"socks5://proxy.example:1080\""),
                    );
                    ok = false;
                }
            }
        }
        let file = match &raw.file {
            Some(f) if f.get_ref().trim().is_empty() => {
                self.error(f.span(), "`file` is empty");
                ok = false;
                None
            }
            Some(f) => Some(PathBuf::from(f.get_ref().trim())),
            None => None,
        };
        let mut credential = |value: &Option<Spanned<String>>, what: &str| match value {
            None => None,
            Some(v) => {
                let source = self.env_or_literal(v, what);
                ok &= source.is_some();
                source
            }
        };
        let username = credential(&raw.username, "`username`");
        let password = credential(&raw.password, "`password`");
        match (&raw.username, &raw.password) {
            (Some(_), None) | (None, Some(_)) => {
                let span = raw
                    .username
                    .as_ref()
                    .or(raw.password.as_ref())
                    .map(Spanned::span);
                self.diagnostics.push(
                    Diagnostic::error(span, "`username` and `password` go together")
                        .with_hint("set both, e.g. password = \"env:PROXY_PASSWORD\""),
                );
                ok = false;
            }
            _ => {}
        }
        let max_failures = match &raw.max_failures {
            None => defaults.max_failures,
            Some(v) if (1..=u64::from(u32::MAX)).contains(v.get_ref()) => *v.get_ref() as u32,
            Some(v) => {
                self.error(v.span(), "`max_failures` must be at least 1");
                ok = false;
                defaults.max_failures
            }
        };
        let cooldown = self.browser_duration(raw.cooldown, defaults.cooldown, true);
        ok &= cooldown.is_some();
        ok.then(|| ProxySettings {
            endpoints,
            file,
            username,
            password,
            max_failures,
            cooldown: cooldown.unwrap_or(defaults.cooldown),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::super::test_support::{HEAD, messages};
    use crate::profile::{HeaderSource, ProxySettings, check};

    #[test]
    fn proxies_are_checked_with_their_credentials_and_bench_settings() {
        let checked = check(&format!(
            "{HEAD}[proxy]\nurls = [\"http://p.test:8080\", \"socks5h://q.test:1080\"]\n\
             file = \"more.txt\"\nusername = \"env:PROXY_USER\"\npassword = \"hunter2\"\n\
             max_failures = 2\ncooldown = \"5s\"\n"
        ));
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        let proxy = checked.profile.unwrap().download.proxy;
        let servers: Vec<_> = proxy.endpoints.iter().map(|e| e.server()).collect();
        assert_eq!(servers, ["http://p.test:8080", "socks5://q.test:1080"]);
        assert_eq!(proxy.file, Some(PathBuf::from("more.txt")));
        assert_eq!(proxy.username, Some(HeaderSource::Env("PROXY_USER".into())));
        assert_eq!(
            (proxy.max_failures, proxy.cooldown),
            (2, Duration::from_secs(5))
        );
        assert!(!format!("{proxy:?}").contains("hunter2"));
        assert_eq!(
            check(HEAD).profile.unwrap().download.proxy,
            ProxySettings::default()
        );
        for (rest, expected) in [
            ("urls = [\"ftp://p.test:21\"]", "uses `ftp:`"),
            ("urls = [\"socks5://p.test\"]", "has no port"),
            ("password = \"x\"", "`username` and `password` go together"),
            ("max_failures = 0", "`max_failures` must be at least 1"),
            ("cooldown = 5", "a duration needs a unit"),
            ("file = \" \"", "`file` is empty"),
        ] {
            let found = messages(&format!("[proxy]\n{rest}\n"));
            assert!(
                found.len() == 1 && found[0].contains(expected),
                "{rest}: {found:?}"
            );
        }
    }
}
