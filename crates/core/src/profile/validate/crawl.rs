//! `[crawl]`: how many pages are in flight, in all and per host.

use toml::Spanned;

use super::Validator;
use crate::profile::raw::CrawlToml;
use crate::profile::{CrawlSettings, RenderMode, limits};

/// Pages in flight over all chains when the profile says nothing and pages are fetched over
/// plain HTTP: twice Scrapy's default, since a page costs the server one plain request.
const DEFAULT_CONCURRENCY: usize = 32;
/// Pages in flight to one host by default: as many as in all, since most jobs crawl one site;
/// a host that answers 429 or 503 or times out is slowed down whatever the limit.
const DEFAULT_PER_HOST: usize = 32;
/// Links followed from a start page by default: listing -> album -> photo, and a spare.
const DEFAULT_MAX_DEPTH: u32 = 4;
/// The deepest `max_depth`.
const MAX_DEPTH: u64 = 16;

impl Validator<'_> {
    /// `[crawl]`. With `render = "browser"` the default keeps every one of the `tabs` busy
    /// with a second page waiting for each, so no tab idles while a page is analysed.
    pub(super) fn crawl(
        &mut self,
        raw: CrawlToml,
        render: RenderMode,
        tabs: usize,
    ) -> Option<CrawlSettings> {
        let mut ok = true;
        let mut count = |value: Option<Spanned<u64>>, default: usize, name: &str| match value {
            None => default,
            Some(v) => match limits::count(name, *v.get_ref(), limits::MAX_PAGES_IN_FLIGHT) {
                Ok(n) => n as usize,
                Err(message) => {
                    self.error(v.span(), message);
                    ok = false;
                    default
                }
            },
        };
        let default_concurrency = match render {
            RenderMode::Browser => 2 * tabs.max(1),
            RenderMode::Static | RenderMode::Auto => DEFAULT_CONCURRENCY,
        };
        let concurrency = count(raw.concurrency, default_concurrency, "concurrency");
        let per_host = count(raw.per_host, DEFAULT_PER_HOST, "per_host");
        let adaptive = raw.adaptive.is_none_or(|a| *a.get_ref());
        let per_host_rps = self.per_host_rps(raw.per_host_rps, &mut ok);
        let max_depth = match raw.max_depth {
            None => DEFAULT_MAX_DEPTH,
            Some(v) if (1..=MAX_DEPTH).contains(v.get_ref()) => *v.get_ref() as u32,
            Some(v) => {
                self.error(
                    v.span(),
                    format!(
                        "`max_depth` must be between 1 and {MAX_DEPTH}, not {}",
                        v.get_ref()
                    ),
                );
                ok = false;
                DEFAULT_MAX_DEPTH
            }
        };
        Some(CrawlSettings {
            concurrency,
            per_host,
            adaptive,
            per_host_rps,
            max_depth,
        })
        .filter(|_| ok)
    }
}

#[cfg(test)]
mod tests {
    use crate::profile::{RenderMode, check};

    fn profile(render: &str, crawl: &str) -> crate::profile::Checked {
        check(&format!(
            "name = \"t\"\nstart = [\"https://a.test/\"]\nrender = \"{render}\"\n[[images]]\nselector = \"img\"\n{crawl}"
        ))
    }

    #[test]
    fn defaults_follow_the_render_mode() {
        let fetched = profile("static", "").profile.unwrap();
        assert_eq!(fetched.crawl.concurrency, 32);
        assert_eq!(fetched.crawl.per_host, 32);
        assert_eq!(fetched.crawl.per_host_rps, None);
        assert!(fetched.crawl.adaptive);
        let rendered = profile("browser", "[browser]\ntabs = 3\n").profile.unwrap();
        assert_eq!(rendered.render, RenderMode::Browser);
        assert_eq!(rendered.crawl.concurrency, 6);
    }

    #[test]
    fn a_window_can_be_pinned_at_per_host() {
        let pinned = profile("static", "[crawl]\nper_host = 4\nadaptive = false\n")
            .profile
            .unwrap();
        assert_eq!((pinned.crawl.per_host, pinned.crawl.adaptive), (4, false));
    }

    #[test]
    fn limits_out_of_range_are_errors_at_their_value() {
        let checked = profile(
            "static",
            "[crawl]\nconcurrency = 0\nper_host = 5000\nper_host_rps = -1\n",
        );
        assert!(checked.profile.is_none());
        let messages: Vec<_> = checked
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect();
        assert_eq!(
            messages,
            [
                "`concurrency` must be between 1 and 1024, not 0",
                "`per_host` must be between 1 and 1024, not 5000",
                "`per_host_rps` must be a positive number of at least 0.001, not -1",
            ]
        );
    }

    #[test]
    fn an_unknown_crawl_key_is_named() {
        let checked = profile("static", "[crawl]\nconcurency = 4\n");
        assert!(checked.profile.is_none());
        assert!(
            checked.diagnostics[0].message.contains("concurency"),
            "{:?}",
            checked.diagnostics
        );
    }
}
