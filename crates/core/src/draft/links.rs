//! The page's next-page link and "load more" button, found by the conventions sites follow:
//! `rel="next"`, a `next` class or label, texts like "Next", "Older", "›", "»".

use scraper::{ElementRef, Html, Selector};
use url::Url;

use super::images::is_stable_name;

/// A control found on the page, with the selector that finds it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub selector: String,
    /// Its text, trimmed, for the draft's comment.
    pub text: String,
}

/// Texts of next-page links, compared lowercased with whitespace collapsed.
const NEXT_TEXTS: [&str; 14] = [
    "next",
    "next page",
    "next »",
    "next ›",
    "next >",
    "older",
    "older posts",
    "older entries",
    "more posts",
    "›",
    "»",
    ">",
    "→",
    "next →",
];

/// Texts of buttons that load more items into the same page.
const MORE_TEXTS: [&str; 8] = [
    "load more",
    "show more",
    "see more",
    "view more",
    "more results",
    "more",
    "load more images",
    "load more photos",
];

/// The link to the next page of `page_url`, if the page has one that a selector can name.
pub fn next_link(html: &str, page_url: &Url) -> Option<Control> {
    let document = crate::page::parse_html(html);
    let links = select(&document, "a[href], link[href]");
    let leads_on = |e: &ElementRef<'_>| {
        let href = e.value().attr("href").unwrap_or_default().trim();
        let Ok(mut target) = page_url.join(href) else {
            return false;
        };
        target.set_fragment(None);
        let mut here = page_url.clone();
        here.set_fragment(None);
        matches!(target.scheme(), "http" | "https") && target != here
    };
    let candidates = links.into_iter().filter(leads_on);
    for element in candidates {
        let Some(selector) = next_selector(element) else {
            continue;
        };
        // The selector must find this very link first, as next_link pagination takes the first.
        let first = Selector::parse(&selector)
            .ok()
            .and_then(|s| document.select(&s).next());
        if first.is_some_and(|f| f.id() == element.id()) {
            return Some(Control {
                selector,
                text: text_of(element),
            });
        }
    }
    None
}

/// A selector naming `link` as a next-page link, if it is one.
fn next_selector(link: ElementRef<'_>) -> Option<String> {
    let value = link.value();
    let tag = value.name();
    if value.attr("rel").is_some_and(|rel| {
        rel.split_whitespace()
            .any(|r| r.eq_ignore_ascii_case("next"))
    }) {
        return Some(format!("{tag}[rel~=\"next\"]"));
    }
    if tag != "a" {
        return None;
    }
    if let Some(class) = value
        .classes()
        .find(|c| is_next_word(c) && is_stable_name(c))
    {
        return Some(format!("a.{class}"));
    }
    for attr in ["aria-label", "title"] {
        if let Some(label) = value
            .attr(attr)
            .filter(|l| is_next_word(l) && !l.contains('"'))
        {
            return Some(format!("a[{attr}=\"{label}\"]"));
        }
    }
    let parent = link.parent().and_then(ElementRef::wrap)?;
    if let Some(class) = parent
        .value()
        .classes()
        .find(|c| is_next_word(c) && is_stable_name(c))
    {
        return Some(format!(".{class} a"));
    }
    if NEXT_TEXTS.contains(&text_of(link).to_lowercase().as_str()) {
        // Only the text says "next": name it as the last link of its list, if the list has a
        // name of its own.
        let is_last = parent
            .children()
            .filter_map(ElementRef::wrap)
            .filter(|e| e.value().name() == "a")
            .last()
            .is_some_and(|last| last.id() == link.id());
        let scope = parent
            .value()
            .id()
            .filter(|id| is_stable_name(id))
            .map(|id| format!("#{id}"))
            .or_else(|| {
                parent
                    .value()
                    .classes()
                    .find(|c| is_stable_name(c))
                    .map(|c| format!(".{c}"))
            });
        if let (true, Some(scope)) = (is_last, scope) {
            return Some(format!("{scope} a:last-of-type"));
        }
    }
    None
}

fn is_next_word(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower == "next" || lower.starts_with("next") || lower.starts_with("older")
}

/// A button (or link that stays on the page) that loads more items, if a selector names it.
pub fn load_more_button(html: &str) -> Option<Control> {
    let document = crate::page::parse_html(html);
    let controls = select(
        &document,
        "button, a, [role=button], input[type=button], input[type=submit]",
    );
    for element in controls {
        let text = match element.value().name() {
            "input" => element
                .value()
                .attr("value")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            _ => text_of(element),
        };
        if !MORE_TEXTS.contains(&text.to_lowercase().as_str()) {
            continue;
        }
        // A link to another page is pagination, not a button.
        if element.value().name() == "a"
            && element.value().attr("href").is_some_and(|h| {
                !h.trim().is_empty() && !h.starts_with('#') && !h.starts_with("javascript:")
            })
        {
            continue;
        }
        let value = element.value();
        let tag = value.name();
        let selector = value
            .id()
            .filter(|id| is_stable_name(id))
            .map(|id| format!("#{id}"))
            .or_else(|| {
                value
                    .classes()
                    .find(|c| is_stable_name(c))
                    .map(|c| format!("{tag}.{c}"))
            })
            .unwrap_or_else(|| tag.to_owned());
        let first = Selector::parse(&selector)
            .ok()
            .and_then(|s| document.select(&s).next());
        if first.is_some_and(|f| f.id() == element.id()) {
            return Some(Control { selector, text });
        }
    }
    None
}

fn select<'a>(document: &'a Html, css: &str) -> Vec<ElementRef<'a>> {
    // Invariant: the callers' selectors are constants, valid.
    let selector = Selector::parse(css).expect("valid selector");
    document.select(&selector).collect()
}

fn text_of(element: ElementRef<'_>) -> String {
    element
        .text()
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("http://a.test/gallery/").unwrap()
    }

    #[test]
    fn next_links_are_found_by_each_convention() {
        let cases = [
            (r#"<a href="/p2" rel="next">2</a>"#, r#"a[rel~="next"]"#),
            (
                r#"<head><link rel="next" href="/p2"></head>"#,
                r#"link[rel~="next"]"#,
            ),
            (
                r#"<a class="btn next-page" href="/p2">→</a>"#,
                "a.next-page",
            ),
            (
                r#"<a aria-label="Next page" href="/p2">›</a>"#,
                r#"a[aria-label="Next page"]"#,
            ),
            (
                r#"<ul><li class="next"><a href="/p2">x</a></li></ul>"#,
                ".next a",
            ),
            (
                r#"<div class="pages"><a href="/p1">1</a><a href="/p2">Older</a></div>"#,
                ".pages a:last-of-type",
            ),
        ];
        for (html, expected) in cases {
            let found = next_link(html, &url()).unwrap_or_else(|| panic!("none in {html}"));
            assert_eq!(found.selector, expected, "{html}");
        }
    }

    #[test]
    fn links_to_this_page_or_elsewhere_than_http_are_not_next() {
        for html in [
            r#"<a href="/gallery/" rel="next">again</a>"#,
            r##"<a href="#top" rel="next">top</a>"##,
            r#"<a href="mailto:x@a.test" class="next">mail</a>"#,
            r#"<a href="/about">Next steps in photography</a>"#,
        ] {
            assert_eq!(next_link(html, &url()), None, "{html}");
        }
    }

    #[test]
    fn the_demo_gallery_link_is_found() {
        let html = r#"<nav class="pages"> <a class="next" rel="next" href="/gallery/page-2.html">Next</a></nav>"#;
        let found = next_link(html, &url()).unwrap();
        assert_eq!(found.selector, r#"a[rel~="next"]"#);
        assert_eq!(found.text, "Next");
    }

    #[test]
    fn load_more_buttons_are_found_and_pagination_links_are_not() {
        let spa =
            r#"<div id="app"><ul></ul><button id="more" type="button">Load more</button></div>"#;
        assert_eq!(load_more_button(spa).unwrap().selector, "#more");
        let classed = r##"<a href="#" class="btn">Show   more</a>"##;
        assert_eq!(load_more_button(classed).unwrap().selector, "a.btn");
        assert_eq!(load_more_button(r#"<a href="/page/2">More</a>"#), None);
        assert_eq!(load_more_button("<button>Buy</button>"), None);
    }
}
