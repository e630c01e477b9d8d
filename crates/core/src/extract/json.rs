//! `[[api]]` rules applied to the JSON responses a page fetched: RFC 9535 JSONPath for the
//! items, each item's image URL(s), id and metadata.
//!
//! Pure: takes captured responses and returns candidates, like the DOM rules.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::{ImageCandidate, caption_text, normalize_url};
use crate::page::CapturedJson;
use crate::profile::ApiRule;

/// Every image URL the rules find in `responses`, in response and item order, each URL once.
/// Relative URLs resolve against the response's own URL.
pub fn extract_json_images(rules: &[ApiRule], responses: &[CapturedJson]) -> Vec<ImageCandidate> {
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    for response in responses {
        let Ok(base) = url::Url::parse(&response.url) else {
            continue;
        };
        for rule in rules.iter().filter(|r| r.url.is_match(&response.url)) {
            for item in rule.items.query(&response.body).all() {
                let metadata = metadata_of(rule, item);
                let caption = rule
                    .caption
                    .as_ref()
                    .and_then(|path| path.query(item).first().and_then(as_text))
                    .and_then(|text| caption_text(&text));
                let rights = rights_of(rule, item);
                for value in rule.image.query(item).all() {
                    let Some(text) = value.as_str() else { continue };
                    let Some(url) = base.join(text.trim()).ok().and_then(normalize_url) else {
                        continue;
                    };
                    if seen.insert(url.as_str().to_owned()) {
                        found.push(ImageCandidate {
                            url,
                            rule: rule.name.clone(),
                            attribute: "json".to_owned(),
                            metadata: metadata.clone(),
                            caption: caption.clone(),
                            rights: rights.clone(),
                        });
                    }
                }
            }
        }
    }
    found
}

/// The rights fields the rule reads from `item` (`from`: `api`); `None` when it has none.
fn rights_of(rule: &ApiRule, item: &Value) -> Option<super::rights::Rights> {
    let rights: super::rights::Rights = rule
        .rights
        .iter()
        .filter_map(|(field, path)| {
            let text = path.query(item).first().and_then(as_text)?;
            let value: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            (!value.is_empty()).then(|| {
                let value = value.chars().take(super::rights::MAX_VALUE_CHARS).collect();
                let from = "api".to_owned();
                (field.clone(), super::rights::Sourced { value, from })
            })
        })
        .collect();
    (!rights.is_empty()).then_some(rights)
}

/// Each item's `id` (as `id`) and metadata fields, as text; absent values are left out.
fn metadata_of(rule: &ApiRule, item: &Value) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    let named = rule
        .id
        .iter()
        .map(|p| ("id", p))
        .chain(rule.metadata.iter().map(|(n, p)| (n.as_str(), p)));
    for (name, path) in named {
        if let Some(text) = path.query(item).first().and_then(as_text) {
            fields.insert(name.to_owned(), text);
        }
    }
    fields
}

fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_rules: &str) -> Vec<ApiRule> {
        let source = format!(
            "name = \"t\"\nstart = [\"http://a.test/\"]\nrender = \"browser\"\n[[images]]\nselector = \"img\"\n{toml_rules}"
        );
        let checked = crate::profile::check(&source);
        assert!(
            checked.diagnostics.iter().all(|d| !d.is_error()),
            "{:?}",
            checked.diagnostics
        );
        checked.profile.unwrap().api
    }

    fn response(url: &str, body: &str) -> CapturedJson {
        CapturedJson {
            url: url.into(),
            method: "POST".into(),
            request_body: None,
            status: 200,
            body: serde_json::from_str(body).unwrap(),
        }
    }

    #[test]
    fn items_images_ids_and_metadata_come_from_json_paths() {
        let r = rules(
            "[[api]]\nname = \"photos\"\nurl = \"/api/photos\"\nitems = \"$.data.items[*]\"\nimage = \"$.urls.full\"\nid = \"$.id\"\nmetadata = { title = \"$.title\", author = \"$.user.name\" }",
        );
        let body = r#"{"data":{"items":[
            {"id": 7, "title": "Cat", "user": {"name": "ann"}, "urls": {"full": "/img/7.jpg"}},
            {"id": "8", "urls": {"full": "https://cdn.test/8.jpg"}},
            {"id": 9, "urls": {}}
        ]}}"#;
        let found = extract_json_images(&r, &[response("http://a.test/api/photos?page=1", body)]);
        let urls: Vec<_> = found.iter().map(|c| c.url.as_str()).collect();
        assert_eq!(urls, ["http://a.test/img/7.jpg", "https://cdn.test/8.jpg"]);
        assert_eq!(
            found[0].metadata.get("title").map(String::as_str),
            Some("Cat")
        );
        assert_eq!(
            found[0].metadata.get("author").map(String::as_str),
            Some("ann")
        );
        assert_eq!(found[0].metadata.get("id").map(String::as_str), Some("7"));
        assert_eq!(found[1].metadata.get("id").map(String::as_str), Some("8"));
        assert_eq!(found[0].rule, "photos");
    }

    #[test]
    fn an_api_rule_reads_each_items_caption_from_its_json_path() {
        let r = rules(
            "[[api]]\nurl = \"/api/\"\nitems = \"$[*]\"\nimage = \"$.src\"\ncaption = \"$.description\"",
        );
        let body = r#"[{"src": "/1.jpg", "description": "  A  fox\n in snow "},
                       {"src": "/2.jpg", "description": ""}, {"src": "/3.jpg"}]"#;
        let found = extract_json_images(&r, &[response("http://a.test/api/", body)]);
        let captions: Vec<_> = found.iter().map(|c| c.caption.as_deref()).collect();
        assert_eq!(captions, [Some("A fox in snow"), None, None]);
    }

    #[test]
    fn an_api_rule_reads_each_items_rights_from_its_json_paths() {
        let r = rules(
            "[[api]]\nurl = \"/api/\"\nitems = \"$[*]\"\nimage = \"$.src\"\nrights = { license = \"$.license.url\", creator = \"$.user.name\" }",
        );
        let body = r#"[{"src": "/1.jpg", "license": {"url": "https://l.test/by"}, "user": {"name": "Ann"}},
                       {"src": "/2.jpg"}]"#;
        let found = extract_json_images(&r, &[response("http://a.test/api/", body)]);
        let rights = found[0].rights.as_ref().expect("rights");
        assert_eq!(rights["license"].value, "https://l.test/by");
        assert_eq!(rights["creator"].value, "Ann");
        assert_eq!(rights["creator"].from, "api");
        assert_eq!(found[1].rights, None);
        let checked = crate::profile::check(
            "name = \"x\"\nstart = [\"http://a.test/\"]\nrender = \"browser\"\n[[images]]\nselector = \"img\"\n[[api]]\nurl = \"/api/\"\nitems = \"$[*]\"\nimage = \"$.src\"\nrights = { licence = \"$.l\" }",
        );
        assert!(
            checked.profile.is_none(),
            "an unknown rights field is an error"
        );
        assert!(
            checked
                .diagnostics
                .iter()
                .any(|d| d.message.contains("`licence` is not a rights field")),
            "{:?}",
            checked.diagnostics
        );
    }

    #[test]
    fn responses_of_other_urls_are_ignored_and_urls_reported_once() {
        let r = rules("[[api]]\nurl = \"/api/\"\nitems = \"$[*]\"\nimage = \"$.src\"");
        let body =
            r#"[{"src": "/a.jpg"}, {"src": "/a.jpg#x"}, {"src": "data:image/png;base64,AA"}]"#;
        let found = extract_json_images(
            &r,
            &[
                response("http://a.test/api/1", body),
                response("http://a.test/other", body),
            ],
        );
        let urls: Vec<_> = found.iter().map(|c| c.url.as_str()).collect();
        assert_eq!(urls, ["http://a.test/a.jpg"]);
    }

    #[test]
    fn an_image_path_may_select_several_urls_per_item() {
        let r = rules("[[api]]\nurl = \"api\"\nitems = \"$.items[*]\"\nimage = \"$.sizes[*].url\"");
        let body = r#"{"items":[{"sizes":[{"url":"/s.jpg"},{"url":"/l.jpg"}]}]}"#;
        let found = extract_json_images(&r, &[response("http://a.test/api", body)]);
        assert_eq!(found.len(), 2);
    }
}
