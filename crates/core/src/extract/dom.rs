//! `[[images]]` rules applied to a parsed page's DOM.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use ego_tree::NodeId;
use scraper::{ElementRef, Selector};

use super::srcset::{Descriptor, SrcsetCandidate, parse_srcset, pick_by, pick_candidates};
use super::{ImageCandidate, caption_text, css, normalize_url};
use crate::page::ParsedPage;
use crate::profile::{CaptionSource, ImageRule, ImageSource, MetadataSource};

/// Every image URL the rules find on `page`, in document order per rule, each URL once.
///
/// For each matched element the rule's sources are tried in order and the first that yields a
/// usable URL wins, so a lazy image's `data-src` is preferred to its placeholder `src`. An
/// element followed by a `<noscript>` holding what the rule matches is a placeholder for it:
/// only the original inside the `<noscript>` is taken. With `"picture"` among the sources, an
/// element in a `<picture>` stands for the whole picture (see [`picture_urls`]).
pub fn extract_images(rules: &[ImageRule], page: &ParsedPage) -> Vec<ImageCandidate> {
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for rule in rules {
        let placeholders = noscript_placeholders(&rule.selector, page);
        for element in page.document.select(&rule.selector) {
            if placeholders.contains(&element.id()) {
                continue;
            }
            let urls = picture_urls(element, rule, page)
                .filter(|urls| !urls.is_empty())
                .or_else(|| {
                    rule.sources.iter().find_map(|s| {
                        let urls = urls_from(element, s, rule, page);
                        (!urls.is_empty()).then(|| {
                            let attribute = s.name().to_owned();
                            urls.into_iter().map(|u| (u, attribute.clone())).collect()
                        })
                    })
                });
            let Some(urls) = urls else {
                continue;
            };
            let metadata = metadata_of(element, &rule.metadata);
            let caption = caption_of(element, rule.caption.as_ref());
            for (url, attribute) in urls {
                if seen.insert(url.as_str().to_owned()) {
                    found.push(ImageCandidate {
                        url,
                        rule: rule.name.clone(),
                        attribute,
                        metadata: metadata.clone(),
                        caption: caption.clone(),
                        rights: None,
                    });
                }
            }
        }
    }
    found
}

/// The URLs of the `<picture>` `element` is or sits in, each with the attribute it came from,
/// when the rule reads `"picture"`; `None` otherwise.
///
/// A picture is one image offered in several files, so every `<source>` and the fallback
/// `<img>` is read, each like an `<img>`: the rule's attributes in order, the first that yields
/// a usable URL wins (a lazy `data-srcset` before a placeholder `srcset`), and a `<source>`'s
/// `srcset` is read even when the rule does not name it. `pick` then chooses among the
/// candidates of all of them, so the largest file is taken wherever the page wrote it. The
/// attribute of a candidate from another element than the matched one names that element:
/// `source[data-srcset]`.
fn picture_urls(
    element: ElementRef<'_>,
    rule: &ImageRule,
    page: &ParsedPage,
) -> Option<Vec<(url::Url, String)>> {
    if !rule.sources.contains(&ImageSource::Picture) {
        return None;
    }
    let picture = enclosing_picture(element)?;
    let resolve = |raw: &str| page.resolve(raw).and_then(normalize_url);
    let srcset = ImageSource::Srcset("srcset".to_owned());
    let mut candidates: Vec<(SrcsetCandidate, String)> = Vec::new();
    for member in picture.children().filter_map(ElementRef::wrap) {
        let tag = member.value().name();
        if !matches!(tag, "source" | "img") {
            continue;
        }
        let own_srcset = (tag == "source" && !rule.sources.contains(&srcset)).then_some(&srcset);
        let read = rule.sources.iter().chain(own_srcset).find_map(|source| {
            let found = member_candidates(member, source, &resolve);
            (!found.is_empty()).then_some((source, found))
        });
        let Some((source, found)) = read else {
            continue;
        };
        let attribute = if member.id() == element.id() {
            source.name().to_owned()
        } else {
            format!("{tag}[{}]", source.name())
        };
        candidates.extend(found.into_iter().map(|c| (c, attribute.clone())));
    }
    let picked = pick_by(candidates, rule.pick, |(c, _)| &c.descriptor);
    Some(
        picked
            .into_iter()
            .filter_map(|(c, attribute)| Some((resolve(&c.url)?, attribute)))
            .collect(),
    )
}

/// The usable candidates of one `<source>` or `<img>` of a picture from one attribute: a
/// srcset's, or a single URL as a candidate without a descriptor (counted as `1x`).
fn member_candidates(
    member: ElementRef<'_>,
    source: &ImageSource,
    resolve: &impl Fn(&str) -> Option<url::Url>,
) -> Vec<SrcsetCandidate> {
    let (ImageSource::Url(attr) | ImageSource::Srcset(attr)) = source else {
        return Vec::new();
    };
    let Some(value) = member.value().attr(attr).filter(|v| !is_json(v)) else {
        return Vec::new();
    };
    let candidates = match source {
        ImageSource::Srcset(_) => parse_srcset(value),
        _ => vec![SrcsetCandidate {
            url: value.trim().to_owned(),
            descriptor: Descriptor::None,
        }],
    };
    candidates
        .into_iter()
        .filter(|c| resolve(&c.url).is_some())
        .collect()
}

/// The elements `selector` matches that a `<noscript>` right after them (or after the element
/// holding them) replaces with something `selector` also matches: a lazy-loading page's
/// placeholder, often a blurred thumbnail, whose original only the `<noscript>` holds.
fn noscript_placeholders(selector: &Selector, page: &ParsedPage) -> HashSet<NodeId> {
    // Invariant: a valid selector.
    static NOSCRIPT: LazyLock<Selector> =
        LazyLock::new(|| Selector::parse("noscript").expect("a valid selector"));
    let mut placeholders = HashSet::new();
    for noscript in page.document.select(&NOSCRIPT) {
        if noscript.select(selector).next().is_none() {
            continue;
        }
        let Some(previous) = noscript.prev_siblings().find_map(ElementRef::wrap) else {
            continue;
        };
        if selector.matches(&previous) {
            placeholders.insert(previous.id());
        }
        placeholders.extend(previous.select(selector).map(|e| e.id()));
    }
    placeholders
}

/// A lazy attribute holding JSON (`data-src="{&quot;default&quot;: ...}"`) is no URL: the
/// rule's next source is tried instead.
fn is_json(value: &str) -> bool {
    let value = value.trim();
    (value.starts_with('{') && value.ends_with('}'))
        || (value.starts_with('[') && value.ends_with(']'))
}

fn urls_from(
    element: ElementRef<'_>,
    source: &ImageSource,
    rule: &ImageRule,
    page: &ParsedPage,
) -> Vec<url::Url> {
    let resolve = |raw: &str| page.resolve(raw).and_then(normalize_url);
    match source {
        ImageSource::Url(attr) => element
            .value()
            .attr(attr)
            .filter(|value| !is_json(value))
            .and_then(resolve)
            .into_iter()
            .collect(),
        ImageSource::Srcset(attr) => element
            .value()
            .attr(attr)
            .filter(|value| !is_json(value))
            .map(|value| resolve_candidates(parse_srcset(value), rule, &resolve))
            .unwrap_or_default(),
        // Read as a whole by `picture_urls`, before any other source.
        ImageSource::Picture => Vec::new(),
        // The browser copies computed backgrounds (from stylesheets and scripts) into
        // `data-scrape-background`, written as a declaration, so one parser reads both.
        ImageSource::Style => ["style", "data-scrape-background"]
            .iter()
            .filter_map(|attr| element.value().attr(attr))
            .map(|style| {
                css::background_image_urls(style)
                    .iter()
                    .filter_map(|u| resolve(u))
                    .collect::<Vec<_>>()
            })
            .find(|urls| !urls.is_empty())
            .unwrap_or_default(),
    }
}

/// Picks among the srcset candidates that resolve to downloadable URLs, so a `data:`
/// placeholder never wins over a real image.
fn resolve_candidates(
    candidates: Vec<SrcsetCandidate>,
    rule: &ImageRule,
    resolve: &impl Fn(&str) -> Option<url::Url>,
) -> Vec<url::Url> {
    let usable = candidates
        .into_iter()
        .filter(|c| resolve(&c.url).is_some())
        .collect();
    pick_candidates(usable, rule.pick)
        .iter()
        .filter_map(|c| resolve(&c.url))
        .collect()
}

/// The `<picture>` an `<img>` sits in, or the element itself when the rule matched the picture.
fn enclosing_picture(element: ElementRef<'_>) -> Option<ElementRef<'_>> {
    if element.value().name() == "picture" {
        return Some(element);
    }
    element
        .parent()
        .and_then(ElementRef::wrap)
        .filter(|p| p.value().name() == "picture")
}

/// How far up from an image a caption is looked for: its `<figure>`, or the item around it.
const CAPTION_ANCESTORS: usize = 4;

static FIGCAPTION: LazyLock<Selector> =
    LazyLock::new(|| Selector::parse("figcaption").expect("a valid selector"));

/// The caption of the image `element`: from the rule's `caption` source when it names one;
/// else the first of its `alt`, its `title`, the `<figcaption>` of the `<figure>` it sits in
/// (four levels up at most) and its `aria-label` that is not empty.
pub fn caption_of(element: ElementRef<'_>, source: Option<&CaptionSource>) -> Option<String> {
    let attribute = |name: &str| element.value().attr(name).and_then(caption_text);
    let text_of = |found: ElementRef<'_>| caption_text(&found.text().collect::<Vec<_>>().join(" "));
    match source {
        Some(CaptionSource::Element(MetadataSource::Attribute(name))) => attribute(name),
        Some(CaptionSource::Element(MetadataSource::Text)) => text_of(element),
        Some(CaptionSource::Near(selector)) => element
            .ancestors()
            .filter_map(ElementRef::wrap)
            .take(CAPTION_ANCESTORS)
            .find_map(|ancestor| ancestor.select(selector).next())
            .and_then(text_of),
        None => attribute("alt")
            .or_else(|| attribute("title"))
            .or_else(|| {
                element
                    .ancestors()
                    .filter_map(ElementRef::wrap)
                    .take(CAPTION_ANCESTORS)
                    .find(|a| a.value().name() == "figure")
                    .and_then(|figure| figure.select(&FIGCAPTION).next())
                    .and_then(text_of)
            })
            .or_else(|| attribute("aria-label")),
    }
}

pub(super) fn metadata_of(
    element: ElementRef<'_>,
    fields: &[(String, MetadataSource)],
) -> BTreeMap<String, String> {
    fields
        .iter()
        .filter_map(|(name, source)| {
            let value = match source {
                MetadataSource::Attribute(attr) => element.value().attr(attr)?.trim().to_owned(),
                MetadataSource::Text => element
                    .text()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            (!value.is_empty()).then(|| (name.clone(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageSnapshot;

    fn rules(toml_rules: &str) -> Vec<ImageRule> {
        let source = format!("name = \"t\"\nstart = [\"http://a.test/\"]\n{toml_rules}");
        let checked = crate::profile::check(&source);
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        checked.profile.unwrap().images
    }

    fn found(rules_toml: &str, html: &str) -> Vec<(String, String)> {
        let page = ParsedPage::parse(&PageSnapshot::html(
            url::Url::parse("http://a.test/g/page.html").unwrap(),
            html.to_owned(),
        ));
        extract_images(&rules(rules_toml), &page)
            .into_iter()
            .map(|c| (c.url.to_string(), c.attribute))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_noscript_original_replaces_the_placeholder_before_it() {
        let html = r#"<figure><img src="/blur/60/a.png?q=20"><noscript><img src="/full/a.png"></noscript></figure>
            <div class="lazy"><img src="/blur/b.png"></div><noscript><img src="/full/b.png"></noscript>
            <img src="/alone.png">"#;
        assert_eq!(
            found("[[images]]\nselector = \"img\"", html),
            pairs(&[
                ("http://a.test/full/a.png", "src"),
                ("http://a.test/full/b.png", "src"),
                ("http://a.test/alone.png", "src"),
            ])
        );
        assert_eq!(
            found("[[images]]\nselector = \"noscript img\"", html),
            pairs(&[
                ("http://a.test/full/a.png", "src"),
                ("http://a.test/full/b.png", "src"),
            ]),
            "rules can name the noscript content"
        );
    }

    #[test]
    fn a_json_value_in_a_lazy_attribute_gives_way_to_the_next_source() {
        let html = r#"<img data-src="{&quot;default&quot;:&quot;//img.test/a.jpg?w=88&quot;}" src="https://img.test/a.jpg?w=176">
            <img data-srcset="[1, 2]" src="/b.jpg">"#;
        let r =
            "[[images]]\nselector = \"img\"\nattributes = [\"data-srcset\", \"data-src\", \"src\"]";
        assert_eq!(
            found(r, html),
            pairs(&[
                ("https://img.test/a.jpg?w=176", "src"),
                ("http://a.test/b.jpg", "src"),
            ])
        );
    }

    #[test]
    fn lazy_attribute_wins_over_placeholder_src() {
        let html =
            r#"<img src="data:image/gif;base64,R0lGOD" data-src="/big/1.jpg"><img src="2.jpg">"#;
        assert_eq!(
            found("[[images]]\nselector = \"img\"", html),
            pairs(&[
                ("http://a.test/big/1.jpg", "data-src"),
                ("http://a.test/g/2.jpg", "src")
            ])
        );
    }

    #[test]
    fn srcset_largest_width_is_picked() {
        let html = r#"<img srcset="s.jpg 320w, l.jpg 1280w, m.jpg 640w" src="s.jpg">"#;
        assert_eq!(
            found("[[images]]\nselector = \"img\"", html),
            pairs(&[("http://a.test/g/l.jpg", "srcset")])
        );
    }

    #[test]
    fn picture_takes_the_largest_candidate_of_every_source_and_the_fallback() {
        const DEFAULT: &str = "[[images]]\nselector = \"picture img\"";
        // (case, rule, html, expected (url, attribute) pairs).
        type Case = (
            &'static str,
            &'static str,
            &'static str,
            &'static [(&'static str, &'static str)],
        );
        let cases: [Case; 10] = [
            (
                "a lazy source's data-srcset beats the img's",
                DEFAULT,
                r#"<picture><source data-srcset="p1-440.jpg 440w, p1-660.webp 660w">
                   <img data-srcset="p1-220.jpg 220w, p1-440.jpg 440w"></picture>"#,
                &[("http://a.test/g/p1-660.webp", "source[data-srcset]")],
            ),
            (
                "a source's srcset beats the img's",
                DEFAULT,
                r#"<picture><source srcset="p2-660.jpg 660w"><img srcset="p2-440.jpg 440w"></picture>"#,
                &[("http://a.test/g/p2-660.jpg", "source[srcset]")],
            ),
            (
                "the fallback img wins when it is the largest",
                DEFAULT,
                r#"<picture><source srcset="a-330.jpg 330w"><img srcset="a-990.jpg 990w" src="a.jpg"></picture>"#,
                &[("http://a.test/g/a-990.jpg", "srcset")],
            ),
            (
                "widths rank above the img's densities and its lazy src",
                DEFAULT,
                r#"<picture><source type="image/webp" data-srcset="/i/p-660.webp 660w, /i/p-330.webp 330w">
                   <img data-src="/i/p-220.jpg" data-srcset="/i/p-220.jpg 1x, /i/p-440.jpg 2x"></picture>"#,
                &[("http://a.test/i/p-660.webp", "source[data-srcset]")],
            ),
            (
                "a source's placeholder srcset gives way to its lazy data-srcset",
                DEFAULT,
                r#"<picture><source srcset="data:image/gif;base64,R0l=" data-srcset="big.webp 2x">
                   <img src="small.jpg"></picture>"#,
                &[("http://a.test/g/big.webp", "source[data-srcset]")],
            ),
            (
                "a rule matching the picture names the img it took",
                "[[images]]\nselector = \"picture\"",
                r#"<picture><source srcset="s.webp 100w"><img srcset="i.jpg 900w"></picture>"#,
                &[("http://a.test/g/i.jpg", "img[srcset]")],
            ),
            (
                "first takes the first source's first candidate",
                "[[images]]\nselector = \"picture img\"\npick = \"first\"",
                r#"<picture><source srcset="a.webp 1x, b.webp 2x"><img srcset="c.jpg 900w"></picture>"#,
                &[("http://a.test/g/a.webp", "source[srcset]")],
            ),
            (
                "all takes every candidate of every element in order",
                "[[images]]\nselector = \"picture img\"\npick = \"all\"",
                r#"<picture><source data-srcset="a.webp 1x, b.webp 2x"><img src="c.jpg"></picture>"#,
                &[
                    ("http://a.test/g/a.webp", "source[data-srcset]"),
                    ("http://a.test/g/b.webp", "source[data-srcset]"),
                    ("http://a.test/g/c.jpg", "src"),
                ],
            ),
            (
                "a source's srcset is read where the rule names only src",
                "[[images]]\nselector = \"picture img\"\nattributes = [\"picture\", \"src\"]",
                r#"<picture><source srcset="a.webp 1x, b.webp 2x"><img src="c.jpg"></picture>"#,
                &[("http://a.test/g/b.webp", "source[srcset]")],
            ),
            (
                "without picture among the attributes the img is read alone",
                "[[images]]\nselector = \"picture img\"\nattributes = [\"srcset\", \"src\"]",
                r#"<picture><source srcset="big.webp 900w"><img srcset="i.jpg 300w"></picture>"#,
                &[("http://a.test/g/i.jpg", "srcset")],
            ),
        ];
        let mut failures = Vec::new();
        for (case, rule, html, expected) in cases {
            let got = found(rule, html);
            if got != pairs(expected) {
                failures.push(format!("{case}: got {got:?}, expected {expected:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn inline_background_image_is_read() {
        let html = r#"<div class="tile" style="background-image: url('/t/1.png')"></div>"#;
        let r = "[[images]]\nselector = \".tile\"\nattributes = [\"style\"]";
        assert_eq!(found(r, html), pairs(&[("http://a.test/t/1.png", "style")]));
    }

    #[test]
    fn the_same_url_is_reported_once_per_page() {
        let html =
            r#"<img src="/a.jpg"><img src="/a.jpg#x"><a href="/a.jpg"><img src="/b.jpg"></a>"#;
        let r = "[[images]]\nselector = \"img\"\nattributes = [\"src\"]";
        assert_eq!(
            found(r, html),
            pairs(&[
                ("http://a.test/a.jpg", "src"),
                ("http://a.test/b.jpg", "src")
            ])
        );
    }

    #[test]
    fn metadata_comes_from_attributes_and_text() {
        let page = ParsedPage::parse(&PageSnapshot::html(
            url::Url::parse("http://a.test/").unwrap(),
            r#"<figure><img src="a.jpg" alt=" Cat "></figure>"#.to_owned(),
        ));
        let r = rules(
            "[[images]]\nselector = \"img\"\nmetadata = { title = \"@alt\", missing = \"@title\" }",
        );
        let c = &extract_images(&r, &page)[0];
        assert_eq!(c.metadata.get("title").map(String::as_str), Some("Cat"));
        assert!(!c.metadata.contains_key("missing"));
    }

    #[test]
    fn a_caption_is_the_best_text_a_reader_would_take_for_the_image() {
        // (markup, the rule's `caption` if any, the caption expected)
        let cases: [(&str, Option<&str>, Option<&str>); 10] = [
            (
                r#"<img src="a.jpg" alt=" A  cat " title="t">"#,
                None,
                Some("A cat"),
            ),
            (
                r#"<img src="a.jpg" alt="" title="The title">"#,
                None,
                Some("The title"),
            ),
            (
                r#"<figure><div><img src="a.jpg"></div><figcaption> Seen <b>at</b> dusk </figcaption></figure>"#,
                None,
                Some("Seen at dusk"),
            ),
            (
                r#"<img src="a.jpg" aria-label="Labelled">"#,
                None,
                Some("Labelled"),
            ),
            (r#"<img src="a.jpg">"#, None, None),
            (
                r#"<img src="a.jpg" alt="alt" data-caption="Named">"#,
                Some("@data-caption"),
                Some("Named"),
            ),
            (
                r#"<img src="a.jpg" alt="alt">"#,
                Some("@data-caption"),
                None,
            ),
            (
                r#"<div class="card"><img src="a.jpg" alt="alt"><p class="desc">Near it</p></div>"#,
                Some("p.desc"),
                Some("Near it"),
            ),
            (
                r#"<div><div><div><div><div><img src="a.jpg"></div></div></div></div><p class="desc">Far</p></div>"#,
                Some("p.desc"),
                None,
            ),
            (
                &format!(r#"<img src="a.jpg" alt="{}">"#, "word ".repeat(1000)),
                None,
                Some(&"word ".repeat(400)[..1999]),
            ),
        ];
        for (markup, caption, expected) in cases {
            let page = ParsedPage::parse(&PageSnapshot::html(
                url::Url::parse("http://a.test/").unwrap(),
                format!("<body>{markup}</body>"),
            ));
            let caption = caption
                .map(|c| format!("\ncaption = \"{c}\""))
                .unwrap_or_default();
            let r = rules(&format!("[[images]]\nselector = \"img\"{caption}"));
            let found = extract_images(&r, &page);
            assert_eq!(found[0].caption.as_deref(), expected, "{markup}");
        }
    }
}
