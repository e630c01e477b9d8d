//! `kind = "next_link"`: follow the first element matching a selector.

use scraper::Selector;

use super::{EndReason, NextPage, PagePosition};
use crate::extract::normalize_url;
use crate::page::ParsedPage;

pub(super) fn next(
    selector: &Selector,
    attribute: &str,
    current: &PagePosition,
    page: &ParsedPage,
) -> NextPage {
    let target = page
        .document
        .select(selector)
        .filter_map(|element| element.value().attr(attribute))
        .find_map(|href| page.resolve(href).and_then(normalize_url));
    match target {
        None => NextPage::End(EndReason::NoNextLink),
        Some(url) if url == page.url || url.as_str() == current.url => {
            NextPage::End(EndReason::Loop)
        }
        Some(url) => NextPage::Fetch(PagePosition {
            url: url.to_string(),
            number: current.number + 1,
            done: current.done + 1,
            cursor: None,
            after_id: None,
            offset: 0,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageSnapshot;

    fn page(html: &str) -> ParsedPage {
        ParsedPage::parse(&PageSnapshot::html(
            url::Url::parse("http://a.test/g/1").unwrap(),
            html.into(),
        ))
    }

    fn position() -> PagePosition {
        PagePosition {
            url: "http://a.test/g/1".into(),
            number: 1,
            done: 0,
            cursor: None,
            after_id: None,
            offset: 0,
        }
    }

    #[test]
    fn follows_the_first_matching_link() {
        let sel = Selector::parse("a.next").unwrap();
        let next = next(
            &sel,
            "href",
            &position(),
            &page(r#"<a class="next" href="2#top">n</a><a class="next" href="3">"#),
        );
        assert_eq!(
            next,
            NextPage::Fetch(PagePosition {
                url: "http://a.test/g/2".into(),
                number: 2,
                done: 1,
                cursor: None,
                after_id: None,
                offset: 0,
            })
        );
    }

    #[test]
    fn ends_without_a_link_or_on_a_self_link() {
        let sel = Selector::parse("a.next").unwrap();
        assert_eq!(
            next(&sel, "href", &position(), &page("<p>")),
            NextPage::End(EndReason::NoNextLink)
        );
        assert_eq!(
            next(
                &sel,
                "href",
                &position(),
                &page(r#"<a class="next" href="1">"#)
            ),
            NextPage::End(EndReason::Loop)
        );
    }
}
