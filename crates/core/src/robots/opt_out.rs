//! Opt-out signals a site puts on its pages and images: the `X-Robots-Tag` response header and
//! `<meta name="robots">`, with directives such as `noai` and `noimageai`.
//!
//! A header value may name the crawler it is for (`X-Robots-Tag: otherbot: noai`); such a
//! directive applies only to the crawler with that product token. Directives without a name
//! apply to every crawler.

use scraper::{Html, Selector};

/// Directives that carry a value after a colon; a name before a colon that is one of these
/// is a directive, not a user agent (`unavailable_after: 25 Jun 2010 15:00:00 PST`).
const VALUED: &[&str] = &[
    "unavailable_after",
    "max-snippet",
    "max-image-preview",
    "max-video-preview",
];

/// The first directive of `watched` (lowercase names) that the `X-Robots-Tag` header
/// `values` apply to the crawler `agent`, if any.
pub fn header_opt_out<'a>(
    values: impl IntoIterator<Item = &'a str>,
    agent: &str,
    watched: &[String],
) -> Option<String> {
    values
        .into_iter()
        .find_map(|value| header_value_opt_out(value, agent, watched))
}

fn header_value_opt_out(value: &str, agent: &str, watched: &[String]) -> Option<String> {
    // Directives before any `name:` apply to every crawler; a `name:` switches to that crawler
    // for the directives after it.
    let mut applies = true;
    for part in value.split(',') {
        let mut directive = part.trim();
        if let Some((name, rest)) = directive.split_once(':')
            && is_crawler_name(name.trim())
        {
            applies = name.trim().eq_ignore_ascii_case(agent);
            directive = rest.trim();
        }
        if applies && let Some(found) = watched_directive(directive, watched) {
            return Some(found);
        }
    }
    None
}

/// Whether the text before a colon names a crawler: a product token (a letter, then letters,
/// digits, `-` and `_`) that is not a directive with a value. Anything else is a directive or
/// the rest of one: an HTTP date has a comma of its own (`unavailable_after: Wed, 03 Dec 2031
/// 13:09:53 GMT`), and its `03 Dec 2031 13` must not switch the directives after it to
/// another crawler.
fn is_crawler_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        && !VALUED.iter().any(|d| d.eq_ignore_ascii_case(name))
}

/// Where a page says that it opts out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptOutSource {
    /// `<meta name="robots">`, or `<meta name="AGENT">` for the crawler's own token.
    MetaRobots,
    /// The `X-Robots-Tag` header of the page's response: the same directives in another
    /// place, for sites that send it on every response.
    XRobotsTag,
}

impl OptOutSource {
    /// Words for logs, the summary and `scrape probe`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::MetaRobots => "meta robots",
            Self::XRobotsTag => "X-Robots-Tag",
        }
    }
}

/// A page that opts out: the directive of `[politeness] opt_out` it carries, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageOptOut {
    pub directive: String,
    pub source: OptOutSource,
}

/// The opt-out of a page: the first directive of `watched` that its response's `X-Robots-Tag`
/// headers (`robots_tags`) or else its meta robots apply to the crawler `agent`, if any.
pub fn page_opt_out(
    robots_tags: &[String],
    document: &Html,
    agent: &str,
    watched: &[String],
) -> Option<PageOptOut> {
    let header =
        header_opt_out(robots_tags.iter().map(String::as_str), agent, watched).map(|directive| {
            PageOptOut {
                directive,
                source: OptOutSource::XRobotsTag,
            }
        });
    header.or_else(|| {
        meta_opt_out(document, agent, watched).map(|directive| PageOptOut {
            directive,
            source: OptOutSource::MetaRobots,
        })
    })
}

/// The first directive of `watched` in the page's `<meta name="robots">` or `<meta
/// name="AGENT">` (the crawler's own product token), if any.
pub fn meta_opt_out(document: &Html, agent: &str, watched: &[String]) -> Option<String> {
    if watched.is_empty() {
        return None;
    }
    // Invariant: a constant, valid selector.
    let selector = Selector::parse("meta[name][content]").expect("valid selector");
    document.select(&selector).find_map(|meta| {
        let name = meta.attr("name")?.trim();
        if !(name.eq_ignore_ascii_case("robots") || name.eq_ignore_ascii_case(agent)) {
            return None;
        }
        meta.attr("content")?
            .split(',')
            .find_map(|d| watched_directive(d.trim(), watched))
    })
}

/// Whether the HTML text may hold one of `watched`: a quick look that spares parsing pages that
/// cannot opt out (one case-insensitive literal search, not a parse).
pub fn may_opt_out(html: &str, watched: &[String]) -> bool {
    let words: Vec<String> = watched
        .iter()
        .filter(|w| !w.is_empty())
        .map(|w| regex::escape(w))
        .collect();
    if words.is_empty() {
        return false;
    }
    regex::RegexBuilder::new(&words.join("|"))
        .case_insensitive(true)
        .build()
        // Escaped literals always compile; if they did not, look closer rather than miss one.
        .map_or(true, |any| any.is_match(html))
}

/// `directive` if it is one of `watched` (case-insensitively), as written in `watched`.
/// `none` means `noindex, nofollow`, so it counts when `noindex` is watched.
fn watched_directive(directive: &str, watched: &[String]) -> Option<String> {
    let directive = directive.trim();
    let found = watched
        .iter()
        .find(|w| w.eq_ignore_ascii_case(directive))
        .cloned();
    found.or_else(|| {
        (directive.eq_ignore_ascii_case("none") && watched.iter().any(|w| w == "noindex"))
            .then(|| "none".to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched() -> Vec<String> {
        vec!["noai".into(), "noimageai".into()]
    }

    #[test]
    fn header_directives_for_every_crawler_opt_out() {
        let cases = [
            ("noai", Some("noai")),
            ("NoImageAI", Some("noimageai")),
            ("noindex, noai", Some("noai")),
            ("noindex", None),
            ("all", None),
            ("", None),
            (
                "unavailable_after: 25 Jun 2010 15:00:00 PST, noai",
                Some("noai"),
            ),
            ("max-image-preview: large", None),
            (
                "unavailable_after: Wed, 03 Dec 2031 13:09:53 GMT, noai",
                Some("noai"),
            ),
            (
                "unavailable_after: Wednesday, 03-Dec-31 13:09:53 GMT, noimageai",
                Some("noimageai"),
            ),
            ("unavailable_after: 2031-12-03, noai", Some("noai")),
        ];
        for (value, expected) in cases {
            assert_eq!(
                header_opt_out([value], "scrape", &watched()).as_deref(),
                expected,
                "{value}"
            );
        }
    }

    #[test]
    fn header_directives_for_a_named_crawler_apply_only_to_it() {
        let w = watched();
        assert_eq!(header_opt_out(["otherbot: noai"], "scrape", &w), None);
        assert_eq!(
            header_opt_out(["Scrape: noai"], "scrape", &w).as_deref(),
            Some("noai")
        );
        assert_eq!(
            header_opt_out(["scrape: noindex, otherbot: noai"], "scrape", &w),
            None
        );
        assert_eq!(
            header_opt_out(["otherbot: noindex", "noimageai"], "scrape", &w).as_deref(),
            Some("noimageai")
        );
        assert_eq!(
            header_opt_out(["scrape-2_b: noai"], "scrape-2_b", &w).as_deref(),
            Some("noai")
        );
        assert_eq!(
            header_opt_out(
                ["otherbot: unavailable_after: Wed, 03 Dec 2031 13:09:53 GMT, noai"],
                "scrape",
                &w
            ),
            None
        );
    }

    #[test]
    fn none_counts_only_when_noindex_is_watched() {
        assert_eq!(header_opt_out(["none"], "scrape", &watched()), None);
        let with_noindex = vec!["noindex".to_owned()];
        assert_eq!(
            header_opt_out(["none"], "scrape", &with_noindex).as_deref(),
            Some("none")
        );
    }

    #[test]
    fn meta_robots_and_the_crawlers_own_meta_opt_out() {
        let w = watched();
        let page = |html: &str| Html::parse_document(html);
        let cases = [
            (
                r#"<meta name="robots" content="noai, noimageai">"#,
                Some("noai"),
            ),
            (
                r#"<meta name="ROBOTS" content="noimageai">"#,
                Some("noimageai"),
            ),
            (r#"<meta name="scrape" content="noai">"#, Some("noai")),
            (r#"<meta name="otherbot" content="noai">"#, None),
            (r#"<meta name="robots" content="noindex, nofollow">"#, None),
            (r#"<meta name="description" content="noai">"#, None),
            ("<p>noai</p>", None),
        ];
        for (html, expected) in cases {
            assert_eq!(
                meta_opt_out(&page(html), "scrape", &w).as_deref(),
                expected,
                "{html}"
            );
        }
        let html = r#"<meta name="robots" content="noai">"#;
        assert_eq!(meta_opt_out(&page(html), "scrape", &[]), None);
    }

    #[test]
    fn a_page_opts_out_by_its_header_or_its_meta_robots() {
        let w = watched();
        let with_meta = Html::parse_document(r#"<meta name="robots" content="noimageai">"#);
        let without = Html::parse_document("<p>a gallery</p>");
        let header = |value: &str| vec![value.to_owned()];
        let found = |tags: &[String], document: &Html| {
            page_opt_out(tags, document, "scrape", &w).map(|o| (o.directive, o.source))
        };
        assert_eq!(
            found(&header("noai, noimageai"), &without),
            Some(("noai".to_owned(), OptOutSource::XRobotsTag))
        );
        assert_eq!(
            found(&header("otherbot: noai"), &with_meta),
            Some(("noimageai".to_owned(), OptOutSource::MetaRobots))
        );
        assert_eq!(found(&header("noindex"), &without), None);
        assert_eq!(found(&[], &without), None);
    }

    #[test]
    fn the_quick_look_finds_watched_words_in_any_case() {
        assert!(may_opt_out(
            r#"<META NAME=robots CONTENT="NOAI">"#,
            &watched()
        ));
        assert!(!may_opt_out("<p>a gallery</p>", &watched()));
        assert!(!may_opt_out("<p>noai</p>", &[]));
    }
}
