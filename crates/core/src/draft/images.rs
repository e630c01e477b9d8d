//! Gallery images in a page's DOM: image-bearing elements grouped by the repeated container
//! they sit in, the largest groups turned into short CSS selectors.
//!
//! An element bears an image when it is an `<img>` with a real (not `data:`) URL in one of the
//! attributes the extractor reads, or has a CSS background image (inline `style`, or the
//! computed one the browser copies into `data-scrape-background`). Its container is the nearest
//! element, itself or an ancestor, repeated among its siblings (same tag, a shared class): the
//! `figure`s of a gallery, the `li`s of a grid. Logos, icons and ads sit in no such container
//! and are left out.

use std::collections::{BTreeMap, BTreeSet};

use scraper::{ElementRef, Html, Selector};

use crate::extract::css::background_image_urls;
use crate::extract::srcset::parse_srcset;

/// How far above an image its repeated container may be.
const MAX_CONTAINER_DEPTH: usize = 5;

/// Attributes of an `<img>` that hold its URL, as the extractor's defaults read them.
const URL_ATTRIBUTES: [&str; 4] = ["data-src", "data-lazy", "data-original", "src"];
const SRCSET_ATTRIBUTES: [&str; 2] = ["data-srcset", "srcset"];

/// Which classes a selector may name, besides being stable ([`is_stable_name`]) and not a
/// state (`lazy`, `active`): those a script added after the page loaded (`are-images-ready`)
/// are not in the served HTML, and a static run never sees them.
#[derive(Debug, Clone, Copy)]
pub enum ClassNames<'a> {
    /// Any; those the server sent (when known) first.
    Prefer(Option<&'a BTreeSet<String>>),
    /// Only those the server sent.
    Only(&'a BTreeSet<String>),
}

impl ClassNames<'_> {
    /// The class of `element` a selector names, if one may be.
    fn pick<'e>(self, element: ElementRef<'e>) -> Option<&'e str> {
        let usable = |c: &&str| {
            is_stable_name(c) && !is_state_class(c) && on_every_alike_sibling(element, c)
        };
        let served = |c: &&str| match self {
            Self::Prefer(None) => true,
            Self::Prefer(Some(set)) | Self::Only(set) => set.contains(*c),
        };
        let mut classes = element.value().classes().filter(usable);
        match self {
            Self::Only(_) => classes.find(served),
            Self::Prefer(_) => {
                let all: Vec<&str> = classes.collect();
                all.iter().copied().find(served).or(all.first().copied())
            }
        }
    }
}

/// A repeated group of image-bearing elements and the selector that finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageGroup {
    pub selector: String,
    /// Where the containers are, as written at the start of the selector (`.gallery figure`).
    pub base: String,
    /// Image-bearing elements in the group.
    pub elements: usize,
    /// Containers they sit in.
    pub containers: usize,
    /// The container, as written in the selector (`figure`, `div.item`).
    pub container: String,
    /// Whether every `<img>` of the group has a non-empty `alt` (worth keeping as a title).
    pub all_have_alt: bool,
    /// One image URL of the group, as written in the page.
    pub example: String,
}

/// The gallery groups of `html`, largest first: the largest, and any other holding at least
/// half as many images (and two or more); selectors name classes as `names` allows.
pub fn image_groups(html: &str, names: ClassNames<'_>) -> Vec<ImageGroup> {
    let document = crate::page::parse_html(html);
    let mut groups: BTreeMap<(String, String), Vec<(ElementRef<'_>, ElementRef<'_>)>> =
        BTreeMap::new();
    for element in document
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
    {
        if image_url(element).is_none() {
            continue;
        }
        let Some(container) = repeated_container(element) else {
            continue;
        };
        let Some(parent) = container.parent().and_then(ElementRef::wrap) else {
            continue;
        };
        let key = (path_signature(parent, names), element_key(container, names));
        groups.entry(key).or_default().push((element, container));
    }
    let mut drafted: Vec<ImageGroup> = groups
        .values()
        .filter_map(|members| group_selector(&document, members, names))
        .collect();
    drafted.sort_by_key(|g| std::cmp::Reverse(g.elements));
    let largest = drafted.first().map_or(0, |g| g.elements);
    drafted.retain(|g| g.elements >= 2 && g.elements * 2 >= largest);
    drafted
}

/// The image URL an element bears, as written (not resolved), if any.
pub fn image_url(element: ElementRef<'_>) -> Option<String> {
    let value = element.value();
    let real = |url: &str| {
        let url = url.trim();
        (!url.is_empty() && !url.starts_with("data:")).then(|| url.to_owned())
    };
    if value.name() == "img" {
        let from_srcset = SRCSET_ATTRIBUTES
            .iter()
            .filter_map(|a| value.attr(a))
            .flat_map(parse_srcset)
            .find_map(|c| real(&c.url));
        let from_url = || {
            URL_ATTRIBUTES
                .iter()
                .filter_map(|a| value.attr(a))
                .find_map(real)
        };
        let from_picture = || {
            let picture = element.parent().and_then(ElementRef::wrap)?;
            (picture.value().name() == "picture")
                .then(|| {
                    picture
                        .children()
                        .filter_map(ElementRef::wrap)
                        .filter(|s| s.value().name() == "source")
                        .flat_map(|s| SRCSET_ATTRIBUTES.map(|a| s.value().attr(a)))
                        .flatten()
                        .flat_map(parse_srcset)
                        .find_map(|c| real(&c.url))
                })
                .flatten()
        };
        if let Some(url) = from_srcset.or_else(from_url).or_else(from_picture) {
            return Some(url);
        }
    }
    ["style", "data-scrape-background"]
        .iter()
        .filter_map(|a| value.attr(a))
        .flat_map(background_image_urls)
        .find_map(|url| real(&url))
}

/// The element itself or its nearest ancestor that repeats among its siblings.
fn repeated_container(element: ElementRef<'_>) -> Option<ElementRef<'_>> {
    let mut current = element;
    for _ in 0..=MAX_CONTAINER_DEPTH {
        if matches!(current.value().name(), "body" | "html") {
            return None;
        }
        let parent = current.parent().and_then(ElementRef::wrap)?;
        let alike = parent
            .children()
            .filter_map(ElementRef::wrap)
            .filter(|sibling| alike(*sibling, current))
            .count();
        if alike >= 2 {
            return Some(current);
        }
        current = parent;
    }
    None
}

/// Same tag, and a class in common unless neither has one.
fn alike(a: ElementRef<'_>, b: ElementRef<'_>) -> bool {
    if a.value().name() != b.value().name() {
        return false;
    }
    let classes = |e: ElementRef<'_>| {
        e.value()
            .classes()
            .map(str::to_owned)
            .collect::<BTreeSet<_>>()
    };
    let (ca, cb) = (classes(a), classes(b));
    (ca.is_empty() && cb.is_empty()) || !ca.is_disjoint(&cb)
}

/// `tag` plus its first class `names` allows: how a container is keyed and written.
fn element_key(element: ElementRef<'_>, names: ClassNames<'_>) -> String {
    let tag = element.value().name();
    match names.pick(element) {
        Some(class) => format!("{tag}.{class}"),
        None => tag.to_owned(),
    }
}

/// The chain of keys from the root to `element`, so two lists with the same containers in
/// different places are different groups.
fn path_signature(element: ElementRef<'_>, names: ClassNames<'_>) -> String {
    let mut parts = vec![element_key(element, names)];
    let mut current = element;
    while let Some(parent) = current.parent().and_then(ElementRef::wrap) {
        parts.push(element_key(parent, names));
        current = parent;
    }
    parts.reverse();
    parts.join(">")
}

/// A short selector for where the group's containers are: the parent's `#id` or `.class`, or
/// the nearest ancestor's that has one, followed by the parent's tag.
fn scope_selector(parent: ElementRef<'_>, names: ClassNames<'_>) -> String {
    let own = |e: ElementRef<'_>| -> Option<String> {
        if let Some(id) = e.value().id().filter(|id| is_stable_name(id)) {
            return Some(format!("#{id}"));
        }
        names.pick(e).map(|c| format!(".{c}"))
    };
    if let Some(selector) = own(parent) {
        return selector;
    }
    let mut current = parent;
    while let Some(ancestor) = current.parent().and_then(ElementRef::wrap) {
        if matches!(ancestor.value().name(), "body" | "html") {
            break;
        }
        if let Some(selector) = own(ancestor) {
            return format!("{selector} {}", parent.value().name());
        }
        current = ancestor;
    }
    parent.value().name().to_owned()
}

fn group_selector(
    document: &Html,
    members: &[(ElementRef<'_>, ElementRef<'_>)],
    names: ClassNames<'_>,
) -> Option<ImageGroup> {
    let (first, first_container) = members.first()?;
    let parent = first_container.parent().and_then(ElementRef::wrap)?;
    let container = element_key(*first_container, names);
    let base = format!("{} {container}", scope_selector(parent, names));
    // In order of first appearance, each once.
    let mut parts: Vec<String> = Vec::new();
    for (element, container) in members {
        let inner = if element.id() == container.id() {
            String::new()
        } else if element.value().name() == "img" {
            " img".to_owned()
        } else {
            format!(" {}", element_key(*element, names))
        };
        if !parts.contains(&inner) {
            parts.push(inner);
        }
    }
    let selector = parts
        .iter()
        .map(|inner| format!("{base}{inner}"))
        .collect::<Vec<_>>()
        .join(", ");
    // The selector must find the group's elements; a scope too clever for the selector
    // engine, or one that misses members, is no draft.
    let parsed = Selector::parse(&selector).ok()?;
    let matched: BTreeSet<_> = document.select(&parsed).map(|e| e.id()).collect();
    if !members.iter().all(|(e, _)| matched.contains(&e.id())) {
        return None;
    }
    let containers: BTreeSet<_> = members.iter().map(|(_, c)| c.id()).collect();
    let images: Vec<_> = members
        .iter()
        .filter(|(e, _)| e.value().name() == "img")
        .collect();
    Some(ImageGroup {
        selector,
        base,
        elements: members.len(),
        containers: containers.len(),
        container,
        all_have_alt: !images.is_empty()
            && images
                .iter()
                .all(|(e, _)| e.value().attr("alt").is_some_and(|a| !a.trim().is_empty())),
        example: image_url(*first).unwrap_or_default(),
    })
}

/// An id or class worth writing into a selector: a plain CSS identifier that does not look
/// generated (hashes, long numbers, CSS-in-JS prefixes).
pub fn is_stable_name(name: &str) -> bool {
    let mut chars = name.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let longest_digits = name
        .split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    let generated = ["css-", "sc-", "jsx-", "svelte-", "ng-", "emotion-"]
        .iter()
        .any(|p| name.starts_with(p));
    starts_well && plain && name.len() <= 40 && longest_digits < 3 && !generated
}

/// Classes that say what state an element is in, not what it is: lazy loaders and scroll
/// effects add them once an element was on screen (`entered`, `lazyloaded`, `is-visible`), so
/// a selector naming one finds only the items that were in view when the page was read.
///
/// A class is a state when it is one of [`STATE_CLASSES`], or a state word with an `is-` or
/// `has-` prefix (`is-loaded`, `has-entered`), or ends in `-loaded`, `-visible`, `-active` or
/// `-in-view` (`image-loaded`, `fade-in-view`).
pub fn is_state_class(class: &str) -> bool {
    let class = class.to_ascii_lowercase();
    if STATE_CLASSES.contains(&class.as_str()) {
        return true;
    }
    if let Some(rest) = class
        .strip_prefix("is-")
        .or_else(|| class.strip_prefix("has-"))
    {
        return !rest.is_empty();
    }
    [
        "-loaded", "-visible", "-active", "-in-view", "-entered", "-shown",
    ]
    .iter()
    .any(|suffix| class.ends_with(suffix))
}

/// Classes lazy loaders, animation libraries and sliders add or toggle as an element's state.
pub const STATE_CLASSES: &[&str] = &[
    "lazy",
    "lazyload",
    "lazyloading",
    "lazyloaded",
    "lazy-loaded",
    "loaded",
    "loading",
    "loaded-image",
    "entered",
    "exited",
    "applied",
    "inview",
    "in-view",
    "visible",
    "invisible",
    "hidden",
    "active",
    "current",
    "selected",
    "show",
    "shown",
    "showing",
    "fade",
    "fade-in",
    "fadein",
    "faded",
    "in",
    "animated",
    "animate",
    "aos-animate",
    "revealed",
    "ready",
    "complete",
    "done",
    "error",
    "focus",
    "hover",
    "open",
];

/// Whether every sibling alike `element` (same tag, a class in common) has `class` too: a
/// class only some items of a list carry (the ones a lazy loader reached) says nothing about
/// what the items are, and naming it would find only those.
fn on_every_alike_sibling(element: ElementRef<'_>, class: &str) -> bool {
    let Some(parent) = element.parent().and_then(ElementRef::wrap) else {
        return true;
    };
    parent
        .children()
        .filter_map(ElementRef::wrap)
        .filter(|sibling| alike(*sibling, element))
        .all(|sibling| sibling.value().classes().any(|c| c == class))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANY: ClassNames<'static> = ClassNames::Prefer(None);

    #[test]
    fn classes_a_script_added_are_never_named_in_a_static_draft_and_avoided_in_a_browser_one() {
        // metafizzy's demos: imagesLoaded adds `are-images-ready` to the grid once loaded.
        let served = r#"<body><div id="x"><div class="grid"><div class="grid__item"><img src="/1.jpg"></div>
            <div class="grid__item"><img src="/2.jpg"></div></div></div></body>"#;
        let rendered = served
            .replace(r#"class="grid""#, r#"class="are-images-ready grid""#)
            .replace(r#"class="grid__item""#, r#"class="is-loaded grid__item""#);
        let classes: BTreeSet<String> = ["grid", "grid__item"].map(str::to_owned).into();
        let selector = |html: &str, names| image_groups(html, names)[0].selector.clone();
        assert!(
            selector(&rendered, ANY).starts_with(".are-images-ready "),
            "without the served page, the first stable class"
        );
        assert_eq!(
            selector(&rendered, ClassNames::Prefer(Some(&classes))),
            ".grid div.grid__item img"
        );
        assert_eq!(
            selector(&rendered, ClassNames::Only(&classes)),
            ".grid div.grid__item img"
        );
        let none = BTreeSet::new();
        assert_eq!(
            selector(&rendered, ClassNames::Only(&none)),
            "#x div div img",
            "no served class: tags and ids only"
        );
    }

    const DEMO_LIKE: &str = r#"<html><body>
      <header><img class="logo" src="/img/logo.png"><nav><img src="/img/home.png"></nav></header>
      <main><section class="gallery">
        <figure><img src="/img/a.jpg" alt="A"><figcaption>A</figcaption></figure>
        <figure><img class="lazy" src="data:image/gif;base64,R0l=" data-src="/img/b.jpg" alt="B"></figure>
        <figure><picture><source srcset="/img/c-1.jpg 1x"><img src="data:," alt="C"></picture></figure>
        <figure><div class="tile" style="background-image: url('/img/d.gif')"></div></figure>
      </section>
      <aside class="ad"><img src="/img/ad.gif"></aside></main>
      <footer><img src="/img/badge.gif"></footer></body></html>"#;

    #[test]
    fn the_repeated_figures_are_the_gallery_and_logos_and_ads_are_not() {
        let groups = image_groups(DEMO_LIKE, ANY);
        assert_eq!(groups.len(), 1, "{groups:#?}");
        let g = &groups[0];
        assert_eq!(g.selector, ".gallery figure img, .gallery figure div.tile");
        assert_eq!((g.elements, g.containers), (4, 4));
        assert_eq!(g.container, "figure");
        assert!(g.all_have_alt, "every <img> has an alt");
        assert_eq!(g.example, "/img/a.jpg");
    }

    #[test]
    fn repeated_images_are_their_own_containers() {
        let html = r#"<body><div id="tiles">
            <div class="tile" style="background-image:url(/1.jpg)"></div>
            <div class="tile" data-scrape-background="background-image: url(&quot;/2.jpg&quot;)"></div>
            <div class="tile" style="background-image:url(/3.jpg)"></div>
          </div><div id="banner" style="background-image:url(/hero.jpg)"></div></body>"#;
        let groups = image_groups(html, ANY);
        assert_eq!(groups.len(), 1, "{groups:#?}");
        assert_eq!(groups[0].selector, "#tiles div.tile");
        assert_eq!(groups[0].elements, 3);
    }

    #[test]
    fn state_classes_and_generated_names_stay_out_of_selectors() {
        let html = r#"<body><div class="css-1x9f3k2"><div id="grid-839201">
            <div class="item"><img class="lazy loaded" src="/1.jpg" alt="one"></div>
            <div class="item"><img class="lazy" src="/2.jpg" alt="two"></div>
          </div></div></body>"#;
        let groups = image_groups(html, ANY);
        assert_eq!(groups[0].selector, "div div.item img");
        assert!(groups[0].all_have_alt);
    }

    #[test]
    fn a_smaller_second_gallery_is_kept_and_a_tiny_one_dropped() {
        let figures = |n: usize, class: &str| {
            let items: String = (0..n)
                .map(|i| format!("<li><img src=\"/{class}/{i}.jpg\"></li>"))
                .collect();
            format!("<ul class=\"{class}\">{items}</ul>")
        };
        let html = format!(
            "<body>{}{}{}</body>",
            figures(10, "main"),
            figures(6, "related"),
            figures(2, "tiny")
        );
        let groups = image_groups(&html, ANY);
        let selectors: Vec<_> = groups.iter().map(|g| g.selector.as_str()).collect();
        assert_eq!(selectors, [".main li img", ".related li img"]);
    }

    #[test]
    fn classes_lazy_loaders_add_are_never_named() {
        let items = |classes: &dyn Fn(usize) -> &'static str| -> String {
            let items: String = (0..39)
                .map(|i| {
                    format!(
                        r#"<div class="{}"><img src="/img/{i}.jpg"></div>"#,
                        classes(i)
                    )
                })
                .collect();
            format!(r#"<body><section class="gallery">{items}</section></body>"#)
        };
        // (case, page, expected selector of the one group).
        let cases: [(&str, String, &str); 4] = [
            (
                "a class on the items that were on screen only",
                items(&|i| if i < 9 { "entered item" } else { "item" }),
                ".gallery div.item img",
            ),
            (
                "a state class on every item",
                items(&|_| "is-visible item"),
                ".gallery div.item img",
            ),
            (
                "a listed state class before the item's own",
                items(&|_| "lazyloaded loaded-image photo"),
                ".gallery div.photo img",
            ),
            (
                "an unknown class on some items",
                items(&|i| if i % 2 == 0 { "item wide" } else { "item" }),
                ".gallery div.item img",
            ),
        ];
        for (case, html, expected) in cases {
            let groups = image_groups(&html, ANY);
            assert_eq!(groups.len(), 1, "{case}: {groups:#?}");
            assert_eq!(groups[0].selector, expected, "{case}");
            assert_eq!(groups[0].elements, 39, "{case}");
        }
        for state in [
            "entered",
            "applied",
            "is-loaded",
            "fade-in",
            "image-loaded",
            "in-view",
        ] {
            assert!(is_state_class(state), "{state}");
        }
        for name in ["item", "photo", "gallery__item", "thumb", "card"] {
            assert!(!is_state_class(name), "{name}");
        }
    }

    #[test]
    fn placeholders_alone_bear_no_image() {
        let html = r#"<body><ul><li><img src="data:image/gif;base64,R0l="></li>
            <li><img src="data:image/gif;base64,R0l="></li></ul></body>"#;
        assert!(image_groups(html, ANY).is_empty());
    }

    #[test]
    fn stable_names_are_plain_identifiers() {
        for good in ["gallery", "photo-grid", "item_2", "next"] {
            assert!(is_stable_name(good), "{good}");
        }
        for bad in ["css-1x9f3k2", "a1234", "1col", "has space", "sc-bdVaJa", ""] {
            assert!(!is_stable_name(bad), "{bad}");
        }
    }
}
