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
    /// How it was recognised, for the draft's comment (`rel=next`, `next class`, ...).
    pub convention: &'static str,
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

/// Texts of buttons that load more items into the same page, compared lowercased with
/// whitespace collapsed and a trailing count or arrow left out ("Load more (24)", "More ↓").
const MORE_TEXTS: [&str; 16] = [
    "load more",
    "show more",
    "see more",
    "view more",
    "more results",
    "more",
    "load more images",
    "load more photos",
    "load more items",
    "load more posts",
    "show more images",
    "show more photos",
    "show more results",
    "add content",
    "add more",
    "get more",
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
        let Some((selector, convention)) = next_selector(element) else {
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
                convention,
            });
        }
    }
    None
}

/// One way sites mark their next-page link, and the selector that names a link marked so.
struct NextConvention {
    /// What the draft's comment says about the link.
    name: &'static str,
    selector: fn(ElementRef<'_>) -> Option<String>,
}

/// The conventions, most telling first: the first that names a link decides its selector.
const NEXT_CONVENTIONS: [NextConvention; 5] = [
    // `<a rel="next">`, `<link rel="next">`.
    NextConvention {
        name: "rel=next",
        selector: by_rel,
    },
    // `<a class="next">`, `class="next-page"`, `class="pagination__next"`, `class="nav-older"`.
    NextConvention {
        name: "next class",
        selector: by_class,
    },
    // `aria-label="Next page"`, `title="Next"`.
    NextConvention {
        name: "next label",
        selector: by_label,
    },
    // `<li class="next"><a>`.
    NextConvention {
        name: "next class on the parent",
        selector: by_parent_class,
    },
    // The text alone: "Next", "Next ›", "»", "Older posts", as the last link of its parent.
    NextConvention {
        name: "next text",
        selector: by_text,
    },
];

/// A selector naming `link` as a next-page link, if it is one, and the convention's name.
fn next_selector(link: ElementRef<'_>) -> Option<(String, &'static str)> {
    NEXT_CONVENTIONS
        .iter()
        .find_map(|c| (c.selector)(link).map(|selector| (selector, c.name)))
}

fn by_rel(link: ElementRef<'_>) -> Option<String> {
    let value = link.value();
    value
        .attr("rel")
        .is_some_and(|rel| {
            rel.split_whitespace()
                .any(|r| r.eq_ignore_ascii_case("next"))
        })
        .then(|| format!("{}[rel~=\"next\"]", value.name()))
}

fn by_class(link: ElementRef<'_>) -> Option<String> {
    let value = link.value();
    if value.name() != "a" {
        return None;
    }
    value
        .classes()
        .find(|c| is_next_class(c))
        .map(|class| format!("a.{class}"))
}

fn by_label(link: ElementRef<'_>) -> Option<String> {
    let value = link.value();
    if value.name() != "a" {
        return None;
    }
    ["aria-label", "title"].into_iter().find_map(|attr| {
        value
            .attr(attr)
            .filter(|l| is_next_word(l) && !l.contains('"'))
            .map(|label| format!("a[{attr}=\"{label}\"]"))
    })
}

fn by_parent_class(link: ElementRef<'_>) -> Option<String> {
    if link.value().name() != "a" {
        return None;
    }
    let parent = link.parent().and_then(ElementRef::wrap)?;
    parent
        .value()
        .classes()
        .find(|c| is_next_class(c))
        .map(|class| format!(".{class} a"))
}

fn by_text(link: ElementRef<'_>) -> Option<String> {
    if link.value().name() != "a" || !NEXT_TEXTS.contains(&text_of(link).to_lowercase().as_str()) {
        return None;
    }
    // Only the text says "next": name it as the last link of its parent, the parent by its
    // id or class, or by its tag when it has neither (`p > a:last-of-type`).
    let parent = link.parent().and_then(ElementRef::wrap)?;
    let is_last = parent
        .children()
        .filter_map(ElementRef::wrap)
        .filter(|e| e.value().name() == "a")
        .last()
        .is_some_and(|last| last.id() == link.id());
    if !is_last {
        return None;
    }
    let scope = parent
        .value()
        .id()
        .filter(|id| is_stable_name(id))
        .map(|id| format!("#{id} a:last-of-type"))
        .or_else(|| {
            parent
                .value()
                .classes()
                .find(|c| is_stable_name(c))
                .map(|c| format!(".{c} a:last-of-type"))
        })
        .unwrap_or_else(|| format!("{} > a:last-of-type", parent.value().name()));
    Some(scope)
}

fn is_next_word(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower == "next" || lower.starts_with("next") || lower.starts_with("older")
}

/// A class naming a next-page link: one of its words (split at `-` and `_`, so BEM's
/// `pagination__next` counts) is "next" or "older", and it is a stable name.
fn is_next_class(class: &str) -> bool {
    is_stable_name(class)
        && class
            .split(['-', '_'])
            .any(|word| word.eq_ignore_ascii_case("next") || word.eq_ignore_ascii_case("older"))
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
        if !is_more_text(&text) {
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
            return Some(Control {
                selector,
                text,
                convention: "load-more text",
            });
        }
    }
    None
}

/// Whether a button's text says it loads more: one of [`MORE_TEXTS`], once a trailing count
/// (`(24)`, `24`) or arrow is left out.
fn is_more_text(text: &str) -> bool {
    let lower = text.to_lowercase();
    let core = lower.trim_end_matches(|c: char| {
        c.is_ascii_digit() || c.is_whitespace() || "()[]+…↓→›»>.".contains(c)
    });
    MORE_TEXTS.contains(&core)
}

/// A selector whose first match in `document` is `element`: its `#id` or `tag.class`, either
/// or its tag under the nearest ancestor with an id or class, or its bare tag; `None` when
/// none of these finds it first.
pub(super) fn unique_selector(document: &Html, element: ElementRef<'_>) -> Option<String> {
    let own = |e: ElementRef<'_>| -> Vec<String> {
        let value = e.value();
        let tag = value.name();
        let mut names = Vec::new();
        if let Some(id) = value.id().filter(|id| is_stable_name(id)) {
            names.push(format!("#{id}"));
        }
        names.extend(
            value
                .classes()
                .filter(|c| is_stable_name(c) && !super::images::is_state_class(c))
                .map(|c| format!("{tag}.{c}")),
        );
        names
    };
    let finds_it_first = |selector: &str| {
        Selector::parse(selector)
            .ok()
            .and_then(|s| document.select(&s).next())
            .is_some_and(|first| first.id() == element.id())
    };
    let mut tried = own(element);
    let tag = element.value().name().to_owned();
    let scope = element
        .ancestors()
        .filter_map(ElementRef::wrap)
        .take_while(|a| !matches!(a.value().name(), "body" | "html"))
        .find_map(|a| own(a).into_iter().next());
    if let Some(scope) = scope {
        let scoped: Vec<String> = tried
            .iter()
            .chain(std::iter::once(&tag))
            .map(|s| format!("{scope} {s}"))
            .collect();
        tried.extend(scoped);
    }
    tried.push(tag);
    tried.into_iter().find(|s| finds_it_first(s))
}

/// The text a control shows, or its label when it shows none (an icon button).
pub(super) fn label_of(element: ElementRef<'_>) -> String {
    let value = element.value();
    let text = match value.name() {
        "input" => value.attr("value").unwrap_or_default().trim().to_owned(),
        _ => text_of(element),
    };
    if !text.is_empty() {
        return text;
    }
    ["aria-label", "title"]
        .into_iter()
        .find_map(|a| value.attr(a))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `element` is a link to another page (not `#`, not `javascript:`): pagination or a
/// detail page, never a control of this one.
pub(super) fn leads_elsewhere(element: ElementRef<'_>) -> bool {
    element.value().name() == "a"
        && element.value().attr("href").is_some_and(|h| {
            let h = h.trim();
            !h.is_empty() && !h.starts_with('#') && !h.starts_with("javascript:")
        })
}

/// Texts, labels and class words of a carousel's "next slide" control.
const SLIDE_NEXT_TEXTS: [&str; 9] = ["next", "›", "»", "→", ">", "❯", "〉", "next slide", "⟩"];

/// Class and id words of a slide container.
const SLIDE_WORDS: [&str; 8] = [
    "slide", "slides", "slider", "carousel", "swiper", "slick", "glide", "splide",
];

/// A carousel's "next" control: a button (not a link to another page) labelled next, `›` or
/// `→`. `sure` when a slide container (`slider`, `carousel`, `swiper`, ... or
/// `aria-roledescription="carousel"`) sits beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carousel {
    pub control: Control,
    pub sure: bool,
}

/// The page's carousel "next" control, if one is found and a selector names it.
pub fn carousel_next(html: &str) -> Option<Carousel> {
    let document = crate::page::parse_html(html);
    let controls = select(&document, "button, a, [role=button]");
    for element in controls {
        if leads_elsewhere(element) {
            continue;
        }
        let value = element.value();
        let label = label_of(element).to_lowercase();
        let by_label = ["aria-label", "title"].into_iter().any(|a| {
            value
                .attr(a)
                .is_some_and(|l| l.trim().to_lowercase().starts_with("next"))
        });
        let by_class = value
            .classes()
            .any(|c| c.split(['-', '_']).any(|w| w.eq_ignore_ascii_case("next")))
            || value
                .id()
                .is_some_and(|id| id.split(['-', '_']).any(|w| w.eq_ignore_ascii_case("next")));
        if !(SLIDE_NEXT_TEXTS.contains(&label.as_str()) || by_label || by_class) {
            continue;
        }
        let Some(selector) = unique_selector(&document, element) else {
            continue;
        };
        let sure = element
            .ancestors()
            .filter_map(ElementRef::wrap)
            .take(3)
            .any(|a| {
                a.descendants()
                    .filter_map(ElementRef::wrap)
                    .any(is_slide_container)
            });
        return Some(Carousel {
            control: Control {
                selector,
                text: label_of(element),
                convention: "next-slide control",
            },
            sure,
        });
    }
    None
}

fn is_slide_container(element: ElementRef<'_>) -> bool {
    let value = element.value();
    let words = |name: &str| {
        name.split(['-', '_'])
            .any(|w| SLIDE_WORDS.contains(&w.to_ascii_lowercase().as_str()))
    };
    value
        .attr("aria-roledescription")
        .is_some_and(|r| r.eq_ignore_ascii_case("carousel"))
        || value.classes().any(words)
        || value.id().is_some_and(words)
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

    /// Each convention of [`NEXT_CONVENTIONS`], on a link marked only that way.
    #[test]
    fn each_next_link_convention_is_found_case_by_case() {
        let cases: [(&str, &str, &str); 12] = [
            (
                "rel=next",
                r#"<p><a rel="next" href="/p2">2</a></p>"#,
                r#"a[rel~="next"]"#,
            ),
            (
                "next class",
                r#"<p><a class="next" href="/p2">Next</a></p>"#,
                "a.next",
            ),
            (
                "next class",
                r#"<p><a class="pagination__next" href="/p2">Next</a></p>"#,
                "a.pagination__next",
            ),
            (
                "next class",
                r#"<p><a class="nav-older" href="/p2">x</a></p>"#,
                "a.nav-older",
            ),
            (
                "next label",
                r#"<p><a aria-label="Next page" href="/p2">›</a></p>"#,
                r#"a[aria-label="Next page"]"#,
            ),
            (
                "next class on the parent",
                r#"<ul><li class="next"><a href="/p2">x</a></li></ul>"#,
                ".next a",
            ),
            (
                "next text",
                r#"<p><a href="/p2">Next</a></p>"#,
                "p > a:last-of-type",
            ),
            (
                "next text",
                r#"<p class="nav"><a href="/p1">1</a><a href="/p2">Next ›</a></p>"#,
                ".nav a:last-of-type",
            ),
            (
                "next text",
                r#"<div id="pages"><a href="/p2">»</a></div>"#,
                "#pages a:last-of-type",
            ),
            (
                "next text",
                r#"<p><a href="/p2">Older posts</a></p>"#,
                "p > a:last-of-type",
            ),
            (
                "next class",
                r#"<nav class="pagination"><a href="/n0">1</a> <a class="pagination__next" href="/p2">Next</a></nav>"#,
                "a.pagination__next",
            ),
            (
                "next class",
                r#"<div class="g"><a href="/photo">x</a></div><a class="next" href="/p2">Next</a>"#,
                "a.next",
            ),
        ];
        for (convention, html, expected) in cases {
            assert!(
                NEXT_CONVENTIONS.iter().any(|c| c.name == convention),
                "{convention}"
            );
            let found = next_link(html, &url()).unwrap_or_else(|| panic!("none in {html}"));
            assert_eq!(found.selector, expected, "{convention}: {html}");
            assert_eq!(found.convention, convention, "{html}");
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
