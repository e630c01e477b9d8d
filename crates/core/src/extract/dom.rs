//! `[[images]]` rules applied to a parsed page's DOM.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use ego_tree::NodeId;
use scraper::{ElementRef, Selector};

use super::srcset::{SrcsetCandidate, parse_srcset, pick_candidates};
use super::{ImageCandidate, css, normalize_url};
use crate::page::ParsedPage;
use crate::profile::{ImageRule, ImageSource, MetadataSource};

/// Every image URL the rules find on `page`, in document order per rule, each URL once.
///
/// For each matched element the rule's sources are tried in order and the first that yields a
/// usable URL wins, so a lazy image's `data-src` is preferred to its placeholder `src`. An
/// element followed by a `<noscript>` holding what the rule matches is a placeholder for it:
/// only the original inside the `<noscript>` is taken.
pub fn extract_images(rules: &[ImageRule], page: &ParsedPage) -> Vec<ImageCandidate> {
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for rule in rules {
        let placeholders = noscript_placeholders(&rule.selector, page);
        for element in page.document.select(&rule.selector) {
            if placeholders.contains(&element.id()) {
                continue;
            }
            let Some((source, urls)) = rule.sources.iter().find_map(|s| {
                let urls = urls_from(element, s, rule, page);
                (!urls.is_empty()).then_some((s, urls))
            }) else {
                continue;
            };
            let metadata = metadata_of(element, &rule.metadata);
            for url in urls {
                if seen.insert(url.as_str().to_owned()) {
                    found.push(ImageCandidate {
                        url,
                        rule: rule.name.clone(),
                        attribute: source.name().to_owned(),
                        metadata: metadata.clone(),
                    });
                }
            }
        }
    }
    found
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
        ImageSource::Picture => {
            let Some(picture) = enclosing_picture(element) else {
                return Vec::new();
            };
            let candidates = picture
                .children()
                .filter_map(ElementRef::wrap)
                .filter(|child| child.value().name() == "source")
                .filter_map(|source| source.value().attr("srcset"))
                .flat_map(parse_srcset)
                .collect();
            resolve_candidates(candidates, rule, &resolve)
        }
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
    fn picture_sources_are_read() {
        let html = r#"<picture><source srcset="a.webp 1x, b.webp 2x"><img src="c.jpg"></picture>"#;
        let r = "[[images]]\nselector = \"picture img\"\nattributes = [\"picture\", \"src\"]";
        assert_eq!(
            found(r, html),
            pairs(&[("http://a.test/g/b.webp", "picture")])
        );
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
}
