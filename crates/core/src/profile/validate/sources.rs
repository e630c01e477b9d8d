//! Where a profile's pages come from: `start` (chains) and `sitemap` (sitemap files, or a
//! site's robots.txt standing for its sitemaps). At least one of the two.

use std::ops::Range;

use toml::Spanned;

use super::{Validator, parse_http_url};
use crate::profile::Diagnostic;

/// The checked sources, and where the robots.txt entry of `sitemap` is (for the checks that
/// need robots.txt read).
pub(super) struct Sources {
    pub start: Vec<url::Url>,
    pub sitemap: Vec<url::Url>,
    pub robots_entry: Option<Range<usize>>,
}

type UrlList = Spanned<Vec<Spanned<String>>>;

impl Validator<'_> {
    /// `start` and `sitemap`: each an absolute `http(s)` URL, at least one of them given.
    pub(super) fn sources(
        &mut self,
        start: Option<&UrlList>,
        sitemap: Option<&UrlList>,
    ) -> Option<Sources> {
        if start.is_none() && sitemap.is_none() {
            self.diagnostics.push(
                Diagnostic::error(None, "the profile has neither `start` nor `sitemap`")
                    .with_hint("add start = [\"https://...\"] (the first pages of chains) or sitemap = [\"https://.../sitemap.xml\"]"),
            );
            return None;
        }
        let start = match start {
            Some(list) => self.url_list("start", list),
            None => Some(Vec::new()),
        };
        let sitemap_urls = match sitemap {
            Some(list) => self.url_list("sitemap", list),
            None => Some(Vec::new()),
        };
        let robots_entry = sitemap.and_then(|list| {
            list.get_ref()
                .iter()
                .find(|item| {
                    parse_http_url(item.get_ref()).is_ok_and(|u| crate::profile::is_robots_txt(&u))
                })
                .map(Spanned::span)
        });
        Some(Sources {
            start: start?,
            sitemap: sitemap_urls?,
            robots_entry,
        })
    }

    /// A list of absolute `http(s)` URLs named `key`, not empty.
    fn url_list(&mut self, key: &str, list: &UrlList) -> Option<Vec<url::Url>> {
        if list.get_ref().is_empty() {
            self.error(list.span(), format!("`{key}` lists no URL"));
            return None;
        }
        let mut urls = Vec::new();
        let mut ok = true;
        for item in list.get_ref() {
            match parse_http_url(item.get_ref()) {
                Ok(url) => urls.push(url),
                Err(message) => {
                    self.error(item.span(), message);
                    ok = false;
                }
            }
        }
        ok.then_some(urls)
    }
}

#[cfg(test)]
mod tests {
    use super::super::check;

    fn messages(source: &str) -> Vec<String> {
        check(source)
            .diagnostics
            .into_iter()
            .map(|d| format!("{} {}", d.message, d.hint.unwrap_or_default()))
            .collect()
    }

    const RULES: &str = "[[images]]\nselector = \"img\"\n";

    #[test]
    fn a_sitemap_alone_is_a_profile_and_its_urls_are_kept_in_order() {
        let checked = check(&format!(
            "name = \"t\"\nsitemap = [\"https://a.test/sitemap.xml\", \"https://a.test/robots.txt\"]\n{RULES}"
        ));
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        let p = checked.profile.unwrap();
        assert!(p.start.is_empty());
        let urls: Vec<_> = p.sitemap.iter().map(|u| u.as_str()).collect();
        assert_eq!(
            urls,
            ["https://a.test/sitemap.xml", "https://a.test/robots.txt"]
        );
        assert!(crate::profile::is_robots_txt(&p.sitemap[1]));
        assert!(!crate::profile::is_robots_txt(&p.sitemap[0]));
    }

    #[test]
    fn a_sitemap_profile_needs_no_rule_of_its_own() {
        let checked = check("name = \"t\"\nsitemap = [\"https://a.test/s.xml\"]\n");
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        let checked = check("name = \"t\"\nstart = [\"https://a.test/\"]\n");
        assert!(
            checked.profile.is_none(),
            "a start page without rules finds nothing"
        );
    }

    #[test]
    fn the_problems_of_start_and_sitemap_are_told() {
        let cases = [
            (
                "name = \"t\"\n",
                "the profile has neither `start` nor `sitemap`",
            ),
            ("name = \"t\"\nsitemap = []\n", "`sitemap` lists no URL"),
            ("name = \"t\"\nstart = []\n", "`start` lists no URL"),
            (
                "name = \"t\"\nsitemap = [\"/sitemap.xml\"]\n",
                "`/sitemap.xml` is not a valid URL",
            ),
            (
                "name = \"t\"\nsitemap = [\"ftp://a.test/s.xml\"]\n",
                "only http and https are supported",
            ),
            (
                "name = \"t\"\nsitemap = [\"https://a.test/s.xml\"]\n[pagination]\nkind = \"next_link\"\nselector = \"a\"\n",
                "`[pagination]` walks from `start` pages, and the profile has none",
            ),
            (
                "name = \"t\"\nsitemap = [\"https://a.test/robots.txt\"]\n[politeness]\nrobots = \"ignore\"\n",
                "a robots.txt in `sitemap` is read for its `Sitemap:` lines",
            ),
        ];
        for (source, expected) in cases {
            let found = messages(&format!("{source}{RULES}"));
            assert!(
                found.iter().any(|m| m.contains(expected)),
                "{source:?}: {found:?}"
            );
            assert!(
                check(&format!("{source}{RULES}")).profile.is_none(),
                "{source:?}"
            );
        }
    }
}
