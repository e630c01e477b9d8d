//! `[[follow]]` rules: the links of a page that lead to pages of another level (detail pages),
//! with the metadata each link passes down.

use std::collections::{BTreeMap, HashSet};

use super::dom::metadata_of;
use super::normalize_url;
use crate::page::ParsedPage;
use crate::profile::FollowRule;

/// A page a `[[follow]]` rule leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowLink {
    /// Absolute and normalised (no fragment); `http(s)` only.
    pub url: url::Url,
    /// The level whose rules apply to the linked page.
    pub level: String,
    /// The index of the rule that found it, in the rules given to [`follow_links`].
    pub rule: usize,
    /// Read from the link element by the rule's `metadata`.
    pub metadata: BTreeMap<String, String>,
}

/// Every link `rules` find on `page`, in document order per rule, each URL once per page (the
/// first rule and element that found it win). Links the rule's `allow` rejects are left out.
pub fn follow_links(rules: &[FollowRule], page: &ParsedPage) -> Vec<FollowLink> {
    let mut seen = HashSet::new();
    let mut links = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        for element in page.document.select(&rule.selector) {
            let Some(url) = element
                .value()
                .attr(&rule.attribute)
                .and_then(|raw| page.resolve(raw))
                .and_then(normalize_url)
            else {
                continue;
            };
            if rule
                .allow
                .as_ref()
                .is_some_and(|re| !re.is_match(url.as_str()))
            {
                continue;
            }
            if seen.insert(url.clone()) {
                links.push(FollowLink {
                    url,
                    level: rule.level.clone(),
                    rule: index,
                    metadata: metadata_of(element, &rule.metadata),
                });
            }
        }
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageSnapshot;
    use crate::profile::check;

    /// A found link as (URL, level, metadata pairs).
    type Found = (String, String, Vec<(String, String)>);

    fn links(follow: &str, html: &str) -> Vec<Found> {
        let source = format!(
            "name = \"t\"\nstart = [\"https://a.test/list/\"]\n{follow}\n[levels.photo]\n[[levels.photo.images]]\nselector = \"img\"\n[levels.album]\n[[levels.album.images]]\nselector = \"img\"\n"
        );
        let profile = check(&source).profile.expect("valid profile");
        let snapshot = PageSnapshot::html(
            url::Url::parse("https://a.test/list/page-1").unwrap(),
            html.to_owned(),
        );
        follow_links(&profile.follow, &ParsedPage::parse(&snapshot))
            .into_iter()
            .map(|l| (l.url.to_string(), l.level, l.metadata.into_iter().collect()))
            .collect()
    }

    #[test]
    fn links_are_resolved_normalised_and_reported_once() {
        let found = links(
            "[[follow]]\nselector = \"a.thumb\"\nlevel = \"photo\"\nmetadata = { title = \"@title\" }",
            r##"<a class="thumb" href="/p/1#top" title="One">1</a>
                <a class="thumb" href="../p/2" title=" Two ">2</a>
                <a class="thumb" href="/p/1">again</a>
                <a class="thumb" href="mailto:x@a.test">mail</a>
                <a class="thumb">no href</a>
                <a href="/p/3">not a thumb</a>"##,
        );
        assert_eq!(
            found,
            [
                (
                    "https://a.test/p/1".to_owned(),
                    "photo".to_owned(),
                    vec![("title".to_owned(), "One".to_owned())]
                ),
                (
                    "https://a.test/p/2".to_owned(),
                    "photo".to_owned(),
                    vec![("title".to_owned(), "Two".to_owned())]
                ),
            ]
        );
    }

    #[test]
    fn allow_and_attribute_choose_the_links_and_rules_name_their_level() {
        let found = links(
            "[[follow]]\nselector = \"[data-album]\"\nattribute = \"data-album\"\nlevel = \"album\"\n[[follow]]\nselector = \"a\"\nlevel = \"photo\"\nallow = \"/p/\\\\d+$\"",
            r#"<div data-album="/albums/7"></div><a href="/p/9">9</a><a href="/about">about</a>"#,
        );
        assert_eq!(
            found,
            [
                (
                    "https://a.test/albums/7".to_owned(),
                    "album".to_owned(),
                    vec![]
                ),
                ("https://a.test/p/9".to_owned(), "photo".to_owned(), vec![]),
            ]
        );
    }

    #[test]
    fn each_link_names_the_rule_that_found_it() {
        let source = "name = \"t\"\nstart = [\"https://a.test/\"]\n[[follow]]\nselector = \"a.album\"\nlevel = \"album\"\n[[follow]]\nselector = \"main  a[href]\"\nlevel = \"photo\"\n[levels.photo]\n[[levels.photo.images]]\nselector = \"img\"\n[levels.album]\n[[levels.album.images]]\nselector = \"img\"\n";
        let profile = check(source).profile.expect("valid profile");
        let snapshot = PageSnapshot::html(
            url::Url::parse("https://a.test/").unwrap(),
            r#"<main><a href="/p/1">1</a><a class="album" href="/a/1">a</a></main>"#.to_owned(),
        );
        let found: Vec<_> = follow_links(&profile.follow, &ParsedPage::parse(&snapshot))
            .into_iter()
            .map(|l| (l.rule, l.url.path().to_owned()))
            .collect();
        // The first rule's links come first, and a link both find is the first rule's.
        assert_eq!(found, [(0, "/a/1".to_owned()), (1, "/p/1".to_owned())]);
        let selectors: Vec<_> = profile.follow.iter().map(|r| r.selector_text()).collect();
        assert_eq!(selectors, ["a.album", "main a[href]"]);
    }
}
