//! The rights and provenance a page publishes for its images: its `rel="license"` link and its
//! schema.org JSON-LD (`license`, `creator`, `copyrightNotice`, `acquireLicensePage`,
//! `creditText`), on the page as a whole or on an `ImageObject` naming the image. Every value
//! keeps where it came from. Pure, bounded: a JSON-LD block over [`MAX_JSON_LD_BYTES`] is not
//! read, and a value is cut to [`MAX_VALUE_CHARS`].

use std::collections::BTreeMap;
use std::sync::LazyLock;

use scraper::Selector;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::normalize_url;
use crate::page::ParsedPage;

/// The largest JSON-LD block read, in bytes.
pub const MAX_JSON_LD_BYTES: usize = 256 * 1024;
/// The longest value kept, in characters.
pub const MAX_VALUE_CHARS: usize = 1000;
/// JSON-LD blocks read per page at most.
const MAX_BLOCKS: usize = 32;

/// The rights fields a profile may name (an `[[api]]` rule's `rights`).
pub use crate::profile::RIGHTS_FIELDS as FIELD_NAMES;

/// Adds to `into` the fields of `more` it does not have.
pub fn fill(into: &mut Option<Rights>, more: Option<Rights>) {
    let Some(more) = more else { return };
    let rights = into.get_or_insert_with(Rights::new);
    for (field, value) in more {
        rights.entry(field).or_insert(value);
    }
}

/// The rights fields, in the schema.org names the manifest uses (snake case).
const FIELDS: [(&str, &str); 5] = [
    ("license", "license"),
    ("creator", "creator"),
    ("copyrightNotice", "copyright_notice"),
    ("acquireLicensePage", "acquire_license_page"),
    ("creditText", "credit_text"),
];

/// One rights value and where it came from: `rel=license`, `json-ld` (the page's),
/// `json-ld image` (an `ImageObject` naming the image), `api`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sourced {
    pub value: String,
    pub from: String,
}

/// An image's rights: field (`license`, `creator`, `copyright_notice`, `acquire_license_page`,
/// `credit_text`) → its value and source.
pub type Rights = BTreeMap<String, Sourced>;

/// What a page says of the rights of its images.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRights {
    /// For every image of the page.
    page: Rights,
    /// For one image, by its normalised URL: an `ImageObject` whose `contentUrl` (or `url`)
    /// names it.
    images: BTreeMap<String, Rights>,
}

static LICENSE_LINK: LazyLock<Selector> =
    LazyLock::new(|| Selector::parse("a[rel~=license], link[rel~=license]").expect("valid"));
static JSON_LD: LazyLock<Selector> =
    LazyLock::new(|| Selector::parse(r#"script[type="application/ld+json"]"#).expect("valid"));

impl PageRights {
    /// What `page` publishes.
    pub fn of(page: &ParsedPage) -> Self {
        let mut rights = PageRights::default();
        let objects: Vec<Value> = page
            .document
            .select(&JSON_LD)
            .take(MAX_BLOCKS)
            .filter_map(|script| {
                let text: String = script.text().collect();
                (text.len() <= MAX_JSON_LD_BYTES)
                    .then(|| serde_json::from_str::<Value>(&text).ok())
                    .flatten()
            })
            .flat_map(flatten)
            .collect();
        for object in &objects {
            let image_urls: Vec<String> = ["contentUrl", "url"]
                .iter()
                .filter_map(|key| object.get(*key).and_then(Value::as_str))
                .filter_map(|u| page.resolve(u).and_then(normalize_url))
                .map(|u| u.to_string())
                .collect();
            let is_image = types(object).any(|t| t == "ImageObject" || t == "Photograph");
            match (is_image, image_urls.is_empty()) {
                (true, false) => {
                    for url in image_urls {
                        let found = rights.images.entry(url).or_default();
                        read_fields(object, "json-ld image", found, page);
                    }
                }
                _ => read_fields(object, "json-ld", &mut rights.page, page),
            }
        }
        if !rights.page.contains_key("license")
            && let Some(href) = page
                .document
                .select(&LICENSE_LINK)
                .find_map(|a| a.value().attr("href"))
                .and_then(|h| page.resolve(h))
        {
            rights.page.insert(
                "license".to_owned(),
                Sourced {
                    value: bounded(href.as_str()),
                    from: "rel=license".to_owned(),
                },
            );
        }
        rights
    }

    /// The rights of the image at `url` (normalised): what an `ImageObject` says of it, else
    /// what the page says; `None` when the page says nothing.
    pub fn for_image(&self, url: &str) -> Option<Rights> {
        let mut rights = self.page.clone();
        if let Some(own) = self.images.get(url) {
            rights.extend(own.clone());
        }
        (!rights.is_empty()).then_some(rights)
    }
}

/// The objects of a JSON-LD document: itself, the members of an array, of `@graph`.
fn flatten(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items.into_iter().flat_map(flatten).collect(),
        Value::Object(mut object) => {
            let graph = object.remove("@graph");
            let mut found = vec![Value::Object(object)];
            if let Some(graph) = graph {
                found.extend(flatten(graph));
            }
            found
        }
        _ => Vec::new(),
    }
}

/// The `@type`s of an object.
fn types(object: &Value) -> impl Iterator<Item = &str> {
    let types = object.get("@type");
    let list: Vec<&str> = match types {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    list.into_iter()
}

/// Adds the rights fields of `object` that `into` has not, as from `from`.
fn read_fields(object: &Value, from: &str, into: &mut Rights, page: &ParsedPage) {
    for (key, field) in FIELDS {
        if into.contains_key(field) {
            continue;
        }
        let Some(value) = object.get(key).and_then(|v| text_of(v, key, page)) else {
            continue;
        };
        into.insert(
            field.to_owned(),
            Sourced {
                value,
                from: from.to_owned(),
            },
        );
    }
}

/// A value as text: a string (a URL resolved for `license` and `acquireLicensePage`), an
/// object's `name` (a person) or `url`/`@id` (a licence), the members of an array joined by
/// `; `.
fn text_of(value: &Value, key: &str, page: &ParsedPage) -> Option<String> {
    let text = match value {
        Value::String(s) if matches!(key, "license" | "acquireLicensePage") => page
            .resolve(s)
            .map_or_else(|| s.trim().to_owned(), |u| u.to_string()),
        Value::String(s) => s.split_whitespace().collect::<Vec<_>>().join(" "),
        Value::Object(o) => ["name", "url", "@id"]
            .iter()
            .find_map(|k| o.get(*k).and_then(|v| text_of(v, key, page)))?,
        Value::Array(items) => items
            .iter()
            .take(16)
            .filter_map(|v| text_of(v, key, page))
            .collect::<Vec<_>>()
            .join("; "),
        _ => return None,
    };
    (!text.is_empty()).then(|| bounded(&text))
}

/// The licence an HTTP response names in its `Link` headers (RFC 8288): the target of the
/// first link whose `rel` holds `license`, resolved against `base` (`from`: `link header`).
pub fn link_license<'a>(
    values: impl IntoIterator<Item = &'a str>,
    base: &url::Url,
) -> Option<Rights> {
    let target = values
        .into_iter()
        .flat_map(link_values)
        .find_map(|(target, params)| {
            let rel = params
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("rel"))?;
            rel.1
                .split_ascii_whitespace()
                .any(|r| r.eq_ignore_ascii_case("license"))
                .then_some(target)
        })?;
    let href = base.join(target).ok()?;
    let license = Sourced {
        value: bounded(href.as_str()),
        from: "link header".to_owned(),
    };
    Some(Rights::from([("license".to_owned(), license)]))
}

/// The links of one `Link` header value: each `<target>` with its parameters (names as
/// written, values unquoted). A comma or a semicolon inside `<...>` or quotes does not split.
fn link_values(value: &str) -> Vec<(&str, Vec<(&str, &str)>)> {
    let mut links = Vec::new();
    let mut rest = value;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>').map(|c| open + c) else {
            break;
        };
        let target = &rest[open + 1..close];
        rest = &rest[close + 1..];
        // The parameters run to the next comma outside quotes.
        let (mut quoted, mut end) = (false, rest.len());
        for (i, c) in rest.char_indices() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let params = rest[..end]
            .split(';')
            .filter_map(|param| {
                let (name, value) = param.split_once('=')?;
                Some((name.trim(), value.trim().trim_matches('"')))
            })
            .collect();
        links.push((target.trim(), params));
        rest = &rest[end..];
    }
    links
}

/// `text` cut to [`MAX_VALUE_CHARS`].
fn bounded(text: &str) -> String {
    text.chars().take(MAX_VALUE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageSnapshot;

    fn rights_of(html: &str, image: &str) -> Option<Vec<(String, String, String)>> {
        let page = ParsedPage::parse(&PageSnapshot::html(
            url::Url::parse("http://a.test/gallery/").unwrap(),
            html.to_owned(),
        ));
        PageRights::of(&page)
            .for_image(image)
            .map(|r| r.into_iter().map(|(k, s)| (k, s.value, s.from)).collect())
    }

    fn field(name: &str, value: &str, from: &str) -> (String, String, String) {
        (name.to_owned(), value.to_owned(), from.to_owned())
    }

    #[test]
    fn a_responses_link_header_names_its_licence() {
        let base = url::Url::parse("http://a.test/img/1.jpg").unwrap();
        let license = |values: &[&str]| {
            link_license(values.iter().copied(), &base)
                .and_then(|r| r.get("license").map(|s| (s.value.clone(), s.from.clone())))
        };
        assert_eq!(license(&[]), None);
        assert_eq!(license(&[r#"</next>; rel="next""#]), None);
        assert_eq!(
            license(&[
                r#"</a,b>; rel="next"; title="x, y; z", <https://creativecommons.org/licenses/by/4.0/>; rel="alternate LICENSE""#
            ]),
            Some((
                "https://creativecommons.org/licenses/by/4.0/".to_owned(),
                "link header".to_owned()
            ))
        );
        assert_eq!(
            license(&["<x>; rel=next", "</terms>;rel=license"]).map(|l| l.0),
            Some("http://a.test/terms".to_owned())
        );
        assert_eq!(license(&["<unclosed; rel=license"]), None);
    }

    #[test]
    fn a_pages_license_link_and_json_ld_give_every_image_its_rights_with_their_source() {
        let img = "http://a.test/img/1.jpg";
        assert_eq!(rights_of("<p>nothing</p>", img), None);
        assert_eq!(
            rights_of(r#"<a rel="license" href="/licence">CC</a>"#, img),
            Some(vec![field(
                "license",
                "http://a.test/licence",
                "rel=license"
            )])
        );
        let page_ld = r#"<script type="application/ld+json">
            {"@context": "https://schema.org", "@graph": [{"@type": "WebPage",
             "license": "https://creativecommons.org/licenses/by/4.0/",
             "creator": [{"@type": "Person", "name": "Ann  Lee"}, "Bo"],
             "copyrightNotice": "© 2026 Ann Lee"}]}
            </script><a rel="license" href="/other">x</a>"#;
        assert_eq!(
            rights_of(page_ld, img),
            Some(vec![
                field("copyright_notice", "© 2026 Ann Lee", "json-ld"),
                field("creator", "Ann Lee; Bo", "json-ld"),
                field(
                    "license",
                    "https://creativecommons.org/licenses/by/4.0/",
                    "json-ld"
                ),
            ])
        );
        let image_ld = r#"<script type="application/ld+json">
            [{"@type": "ImageObject", "contentUrl": "/img/1.jpg", "creditText": "Photo: Cy",
              "license": {"@id": "https://example.org/l"}, "acquireLicensePage": "/buy"},
             {"@type": "WebPage", "license": "https://creativecommons.org/publicdomain/zero/1.0/"}]
            </script>"#;
        assert_eq!(
            rights_of(image_ld, img),
            Some(vec![
                field("acquire_license_page", "http://a.test/buy", "json-ld image"),
                field("credit_text", "Photo: Cy", "json-ld image"),
                field("license", "https://example.org/l", "json-ld image"),
            ])
        );
        assert_eq!(
            rights_of(image_ld, "http://a.test/img/2.jpg"),
            Some(vec![field(
                "license",
                "https://creativecommons.org/publicdomain/zero/1.0/",
                "json-ld"
            )]),
            "another image has the page's"
        );
    }

    #[test]
    fn malformed_or_oversized_json_ld_is_passed_over() {
        let img = "http://a.test/img/1.jpg";
        let broken = r#"<script type="application/ld+json">{"license": </script>"#;
        assert_eq!(rights_of(broken, img), None);
        let huge = format!(
            r#"<script type="application/ld+json">{{"license": "x", "pad": "{}"}}</script>"#,
            "y".repeat(MAX_JSON_LD_BYTES)
        );
        assert_eq!(rights_of(&huge, img), None);
        let long = format!(
            r#"<script type="application/ld+json">{{"creditText": "{}"}}</script>"#,
            "z".repeat(5000)
        );
        let rights = rights_of(&long, img).unwrap();
        assert_eq!(rights[0].1.chars().count(), MAX_VALUE_CHARS);
    }
}
