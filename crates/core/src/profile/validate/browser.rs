//! `[browser]`: tabs and processes, what a page waits for, and the durations of a page.

use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::Validator;
use crate::profile::limits::page_time;
use crate::profile::raw::{BrowserToml, Quantity, WaitToml};
use crate::profile::{BrowserProfile, PageWait, parse_bytes, parse_duration};

/// The smallest `memory_limit`: Chromium takes a few hundred MiB before it renders anything.
pub const MIN_MEMORY_LIMIT_BYTES: u64 = 256 << 20;

impl Validator<'_> {
    /// A duration of `[browser]` (or of another table), `default` when unset.
    pub(super) fn browser_duration(
        &mut self,
        value: Option<Spanned<Quantity>>,
        default: Duration,
        allow_zero: bool,
    ) -> Option<Duration> {
        let Some(v) = value else { return Some(default) };
        let parsed = match v.get_ref() {
            Quantity::Text(t) if allow_zero => parse_duration(t),
            Quantity::Text(t) => page_time(t),
            Quantity::Number(_) => Err("a duration needs a unit (write e.g. \"2s\")".to_owned()),
        };
        match parsed {
            Ok(d) => Some(d),
            Err(m) => {
                self.error(v.span(), m);
                None
            }
        }
    }

    /// `memory_limit`: a size of at least [`MIN_MEMORY_LIMIT_BYTES`]. `None` when invalid
    /// (reported).
    fn memory_limit(&mut self, v: &Spanned<Quantity>) -> Option<u64> {
        let parsed = match v.get_ref() {
            Quantity::Number(n) => Ok(*n),
            Quantity::Text(t) => parse_bytes(t),
        };
        match parsed {
            Ok(n) if n >= MIN_MEMORY_LIMIT_BYTES => Some(n),
            Ok(n) => {
                self.error(
                    v.span(),
                    format!(
                        "a `memory_limit` of {n} bytes is below {} MiB: Chromium needs more than that to render any page",
                        MIN_MEMORY_LIMIT_BYTES >> 20
                    ),
                );
                None
            }
            Err(m) => {
                self.error(v.span(), m);
                None
            }
        }
    }

    /// `[browser]`.
    pub(super) fn browser(&mut self, raw: BrowserToml) -> Option<BrowserProfile> {
        let mut ok = true;
        let mut count = |v: &Option<Spanned<u64>>,
                         default: u64,
                         name: &str,
                         min: u64,
                         max: u64,
                         this: &mut Self| match v {
            None => default,
            Some(v) if (min..=max).contains(v.get_ref()) => *v.get_ref(),
            Some(v) => {
                this.error(
                    v.span(),
                    format!(
                        "`{name}` must be between {min} and {max}, not {}",
                        v.get_ref()
                    ),
                );
                ok = false;
                default
            }
        };
        let tabs = count(&raw.tabs, 2, "tabs", 1, 64, self) as usize;
        let processes = count(&raw.processes, 1, "processes", 1, 16, self) as usize;
        let recycle_after =
            count(&raw.recycle_after, 100, "recycle_after", 1, 1_000_000, self) as u32;
        let max_clicks = count(&raw.max_clicks, 20, "max_clicks", 1, 100_000, self) as u32;
        let scroll = count(&raw.scroll, 0, "scroll", 0, 100_000, self) as u32;
        if let Some(selector) = raw.wait_for.as_ref().or(raw.click.as_ref()) {
            let _ = self.selector(selector);
        }
        if let (Some(wait_for), Some(click)) = (&raw.wait_for, &raw.click)
            && wait_for.span() != click.span()
        {
            let _ = self.selector(click);
        }
        for selector in [&raw.scroll_element, &raw.scroll_end].into_iter().flatten() {
            let _ = self.selector(selector);
        }
        for selector in raw.dismiss.iter().flatten() {
            let _ = self.selector(selector);
        }
        let memory_limit_bytes = match &raw.memory_limit {
            None => Some(None),
            Some(v) => self.memory_limit(v).map(Some),
        };
        let page_timeout = self.browser_duration(raw.page_timeout, Duration::from_secs(60), false);
        let settle = self.browser_duration(raw.settle, Duration::from_secs(2), false);
        let delay = match raw.delay {
            None => Some(None),
            Some(v) => self
                .browser_duration(Some(v), Duration::ZERO, true)
                .map(Some),
        };
        let wait = match raw.wait.map(|w| w.into_inner()) {
            None | Some(WaitToml::NetworkIdle) => PageWait::NetworkIdle,
            Some(WaitToml::Load) => PageWait::Load,
        };
        if !ok {
            return None;
        }
        Some(BrowserProfile {
            executable: raw.executable.map(|e| PathBuf::from(e.into_inner())),
            tabs,
            processes,
            recycle_after,
            block_stylesheets: raw.block_stylesheets.unwrap_or(false),
            memory_limit_bytes: memory_limit_bytes?,
            page_timeout: page_timeout?,
            wait,
            wait_for: raw.wait_for.map(|w| w.into_inner()),
            delay: delay?,
            script: raw.script.map(|s| s.into_inner()),
            dismiss: raw
                .dismiss
                .unwrap_or_default()
                .into_iter()
                .map(Spanned::into_inner)
                .collect(),
            click: raw.click.map(|c| c.into_inner()),
            max_clicks,
            scroll,
            settle: settle?,
            scroll_element: raw.scroll_element.map(|s| s.into_inner()),
            scroll_end: raw.scroll_end.map(|s| s.into_inner()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::HEAD;
    use crate::profile::check;

    #[test]
    fn browser_processes_default_to_one_and_stay_between_one_and_sixteen() {
        let checked = check(&format!("{HEAD}[browser]\nprocesses = 3\n"));
        assert_eq!(checked.profile.unwrap().browser.processes, 3);
        assert_eq!(check(HEAD).profile.unwrap().browser.processes, 1);
        for value in [0, 17] {
            let source = format!("{HEAD}[browser]\nprocesses = {value}\n");
            let found = check(&source).diagnostics;
            assert_eq!(found.len(), 1, "{value}: {found:?}");
            let rendered = found[0].render("p.toml", &source).to_string();
            assert!(
                rendered.starts_with(&format!(
                    "p.toml:6:13: error: `processes` must be between 1 and 16, not {value}"
                )),
                "{rendered}"
            );
        }
    }

    #[test]
    fn memory_limit_is_a_size_of_at_least_256_mib() {
        let limit = |text: &str| {
            check(&format!("{HEAD}[browser]\nmemory_limit = {text}\n"))
                .profile
                .map(|p| p.browser.memory_limit_bytes)
        };
        assert_eq!(limit("\"2GiB\""), Some(Some(2 << 30)));
        assert_eq!(limit("536870912"), Some(Some(512 << 20)));
        assert_eq!(
            check(HEAD).profile.unwrap().browser.memory_limit_bytes,
            None
        );
        let source = format!("{HEAD}[browser]\nmemory_limit = \"100MB\"\n");
        let found = check(&source).diagnostics;
        assert_eq!(found.len(), 1, "{found:?}");
        let rendered = found[0].render("p.toml", &source).to_string();
        assert!(
            rendered.starts_with(
                "p.toml:6:16: error: a `memory_limit` of 100000000 bytes is below 256 MiB"
            ),
            "{rendered}"
        );
        assert!(limit("\"lots\"").is_none());
    }
}
