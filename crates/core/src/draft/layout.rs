//! What the rendered page's layout says that its HTML alone does not: which element scrolls
//! the gallery, which overlays are fixed over the page, where images hide from selectors
//! (frames, shadow roots) or come from stylesheets.
//!
//! `scrape new-profile` runs a small script in the rendered page that marks elements with the
//! attributes below before the DOM is read; this module reads those marks (and the HTML) as
//! plain data, so every decision is made here, testable on HTML written by hand.

use std::collections::BTreeSet;

use scraper::{ElementRef, Selector};
use url::Url;

use super::ImageGroup;
use super::links::unique_selector;

/// On an element whose content scrolls inside it (`overflow` `auto` or `scroll`, content
/// taller than its box).
pub const SCROLLS_ATTRIBUTE: &str = "data-scrape-scrolls";
/// On a visible element laid out with `position: fixed` (banners, dialogs, sticky bars).
pub const FIXED_ATTRIBUTE: &str = "data-scrape-fixed";
/// On the host of an open shadow root: how many images its shadow trees hold.
pub const SHADOW_IMAGES_ATTRIBUTE: &str = "data-scrape-shadow-images";
/// Where the browser copies an element's computed `background-image` (see `[[images]]`
/// `attributes = ["style"]`).
const BACKGROUND_ATTRIBUTE: &str = "data-scrape-background";

/// The innermost scrolling element holding at least two of the gallery's images, named by a
/// selector that finds it first: `[browser] scroll_element`.
pub fn scroll_container(html: &str, groups: &[ImageGroup]) -> Option<String> {
    let gallery = groups.first()?;
    let document = crate::page::parse_html(html);
    let images = Selector::parse(&gallery.selector).ok()?;
    let scrolling = Selector::parse(&format!("[{SCROLLS_ATTRIBUTE}]")).ok()?;
    let holding: Vec<ElementRef<'_>> = document
        .select(&scrolling)
        .filter(|e| e.select(&images).nth(1).is_some())
        .collect();
    // The innermost: no other holder inside it.
    let innermost = holding.iter().find(|e| {
        !holding
            .iter()
            .any(|other| other.id() != e.id() && other.ancestors().any(|a| a.id() == e.id()))
    })?;
    unique_selector(&document, *innermost)
}

/// What the draft cannot read itself, each said as a sentence for the draft's header and the
/// command's output: frames, images in shadow roots, images from stylesheets.
pub fn hidden_content(html: &str, page_url: &Url, groups: &[ImageGroup]) -> Vec<String> {
    let document = crate::page::parse_html(html);
    let mut notes = Vec::new();

    // Invariant: constant, valid selectors.
    let frames = Selector::parse("iframe, frame").expect("valid selector");
    let sources: Vec<Option<Url>> = document
        .select(&frames)
        .map(|f| {
            f.value()
                .attr("src")
                .and_then(|s| page_url.join(s.trim()).ok())
        })
        .collect();
    if !sources.is_empty() {
        let cross = sources
            .iter()
            .flatten()
            .filter(|u| u.origin() != page_url.origin())
            .count();
        let example = sources
            .iter()
            .flatten()
            .find(|u| matches!(u.scheme(), "http" | "https"))
            .map_or_else(String::new, |u| format!(", e.g. {u}"));
        notes.push(format!(
            "found {} iframe(s){example}: a same-origin frame's content is read with a page rendered in the browser (`render = \"browser\"`, in `div[data-scrape-frame]`), a cross-origin one's is not; to read one alone, start at a frame's URL or follow it (`[[follow]]` with `selector = \"iframe\"`, `attribute = \"src\"`)",
            sources.len()
        ));
        if cross > 0 {
            notes.push(format!(
                "{cross} of the iframes are cross-origin: cross-origin frames are not read"
            ));
        }
    }

    let hosts = Selector::parse(&format!("[{SHADOW_IMAGES_ATTRIBUTE}]")).expect("valid selector");
    for host in document.select(&hosts) {
        let count: usize = host
            .value()
            .attr(SHADOW_IMAGES_ATTRIBUTE)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if count == 0 {
            continue;
        }
        let name = unique_selector(&document, host).unwrap_or_else(|| host.value().name().into());
        notes.push(format!(
            "{count} image(s) live in the open shadow root of `{name}`: the engine sees into open shadow roots of a page rendered in the browser (`render = \"browser\"`; closed roots too when the page's script attaches them); check with `scrape probe` that a rule finds them"
        ));
    }

    let from_stylesheets = stylesheet_backgrounds(&document, groups);
    if from_stylesheets > 0 {
        notes.push(format!(
            "{from_stylesheets} gallery image(s) are CSS backgrounds set by stylesheets: only a page rendered in the browser shows them (`render = \"browser\"`, not `static`)"
        ));
    }
    notes
}

/// The gallery elements whose image is a background only the computed style shows (no
/// `url(...)` in their own `style`).
fn stylesheet_backgrounds(document: &scraper::Html, groups: &[ImageGroup]) -> usize {
    let mut seen = BTreeSet::new();
    for group in groups {
        let Ok(selector) = Selector::parse(&group.selector) else {
            continue;
        };
        for element in document.select(&selector) {
            let value = element.value();
            let computed = value.attr(BACKGROUND_ATTRIBUTE).is_some();
            let inline = value.attr("style").is_some_and(|s| s.contains("url("));
            if computed && !inline && value.name() != "img" {
                seen.insert(element.id());
            }
        }
    }
    seen.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draft::{ClassNames, image_groups};

    fn groups(html: &str) -> Vec<ImageGroup> {
        image_groups(html, ClassNames::Prefer(None))
    }

    #[test]
    fn the_scroll_container_is_the_innermost_scrolling_element_holding_the_gallery() {
        // (case, html, expected selector).
        let cases: [(&str, &str, Option<&str>); 4] = [
            (
                "a marked list holding the images",
                r#"<div class="page" data-scrape-scrolls><div id="results" data-scrape-scrolls>
                   <figure><img src="/1.jpg"></figure><figure><img src="/2.jpg"></figure></div></div>"#,
                Some("#results"),
            ),
            (
                "no element marked: the window scrolls",
                r#"<div id="results"><figure><img src="/1.jpg"></figure><figure><img src="/2.jpg"></figure></div>"#,
                None,
            ),
            (
                "a scrolling sidebar without the gallery",
                r#"<nav class="side" data-scrape-scrolls><a href="/x">x</a></nav>
                   <div id="g"><figure><img src="/1.jpg"></figure><figure><img src="/2.jpg"></figure></div>"#,
                None,
            ),
            (
                "a container named by its class",
                r#"<main><section class="feed" data-scrape-scrolls>
                   <figure><img src="/1.jpg"></figure><figure><img src="/2.jpg"></figure></section></main>"#,
                Some("section.feed"),
            ),
        ];
        for (case, html, expected) in cases {
            assert_eq!(
                scroll_container(html, &groups(html)).as_deref(),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn frames_shadow_roots_and_stylesheet_backgrounds_are_said() {
        let url = Url::parse("http://a.test/g/").unwrap();
        // (case, html, a phrase each note must hold, in order).
        let cases: [(&str, &str, &[&str]); 4] = [
            (
                "a same-origin and a cross-origin frame",
                r#"<iframe src="/embed/1"></iframe><iframe src="https://other.test/x"></iframe>"#,
                &[
                    "found 2 iframe(s), e.g. http://a.test/embed/1",
                    "1 of the iframes are cross-origin",
                ],
            ),
            (
                "an open shadow root with images",
                r#"<photo-grid id="grid" data-scrape-shadow-images="12"></photo-grid>"#,
                &["12 image(s) live in the open shadow root of `#grid`"],
            ),
            (
                "tiles whose background comes from a stylesheet",
                r#"<div id="t"><div class="tile" data-scrape-background="background-image: url(&quot;/1.jpg&quot;)"></div>
                   <div class="tile" data-scrape-background="background-image: url(&quot;/2.jpg&quot;)"></div></div>"#,
                &["2 gallery image(s) are CSS backgrounds set by stylesheets"],
            ),
            (
                "inline backgrounds need no browser",
                r#"<div id="t"><div class="tile" style="background-image:url(/1.jpg)" data-scrape-background="background-image: url(&quot;/1.jpg&quot;)"></div>
                   <div class="tile" style="background-image:url(/2.jpg)"></div></div>"#,
                &[],
            ),
        ];
        for (case, html, phrases) in cases {
            let notes = hidden_content(html, &url, &groups(html));
            assert_eq!(notes.len(), phrases.len(), "{case}: {notes:?}");
            for (note, phrase) in notes.iter().zip(phrases.iter()) {
                assert!(note.contains(phrase), "{case}: {note}");
            }
        }
    }
}
