//! `[[api]]` rules from the JSON responses a page fetched: the array whose objects hold image
//! URLs, the field holding the URL, and a URL pattern that matches every page of the API.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::page::CapturedJson;

/// How deep inside an item the image URL may be (`$.image.url` is 2).
const MAX_FIELD_DEPTH: usize = 3;

/// How deep inside a response the item array may be.
const MAX_ARRAY_DEPTH: usize = 4;

/// File extensions of image URLs.
const IMAGE_EXTENSIONS: [&str; 8] = ["jpg", "jpeg", "png", "gif", "webp", "avif", "bmp", "jxl"];

/// One drafted `[[api]]` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiDraft {
    /// A regex for the responses' URLs (digits generalised, the query left free).
    pub url: String,
    /// JSONPath of the items (`$.items[*]`).
    pub items: String,
    /// JSONPath, relative to an item, of its image URL (`$.image.url`).
    pub image: String,
    /// JSONPath of the item's id, when items have one.
    pub id: Option<String>,
    /// JSONPath of a title-like field, when items have one.
    pub title: Option<String>,
    /// The method and path of the first response, for the draft's comment.
    pub seen: String,
    /// Responses and items that matched.
    pub responses: usize,
    pub items_found: usize,
    /// One image URL, as the JSON holds it.
    pub example: String,
}

/// The rules for `responses`: one per URL pattern whose responses hold image URLs in an array.
pub fn api_rules(responses: &[CapturedJson]) -> Vec<ApiDraft> {
    let mut rules: BTreeMap<(String, String, String), ApiDraft> = BTreeMap::new();
    for response in responses {
        let Some(found) = best_array(&response.body) else {
            continue;
        };
        let Ok(url) = url::Url::parse(&response.url) else {
            continue;
        };
        let has_query = url.query().is_some();
        let pattern = format!(
            "{}{}",
            generalised(url.path()),
            if has_query { r"(\?|$)" } else { "$" }
        );
        let key = (pattern.clone(), found.items.clone(), found.image.clone());
        let rule = rules.entry(key).or_insert_with(|| ApiDraft {
            url: pattern,
            items: found.items.clone(),
            image: found.image.clone(),
            id: found.id.clone(),
            title: found.title.clone(),
            seen: format!("{} {}", response.method, url.path()),
            responses: 0,
            items_found: 0,
            example: found.example.clone(),
        });
        rule.responses += 1;
        rule.items_found += found.count;
    }
    let mut rules: Vec<ApiDraft> = rules.into_values().collect();
    // One rule per URL pattern: where a pattern's responses disagree, the one with most items.
    rules.sort_by_key(|r| std::cmp::Reverse(r.items_found));
    let mut seen_patterns = Vec::new();
    rules.retain(|r| {
        let fresh = !seen_patterns.contains(&r.url);
        seen_patterns.push(r.url.clone());
        fresh
    });
    rules
}

struct ArrayFound {
    items: String,
    image: String,
    id: Option<String>,
    title: Option<String>,
    count: usize,
    example: String,
}

/// The array of objects in `body` with the most items holding an image URL at one field.
fn best_array(body: &Value) -> Option<ArrayFound> {
    let mut arrays = Vec::new();
    collect_arrays(body, "$".to_owned(), 0, &mut arrays);
    arrays
        .into_iter()
        .filter_map(|(path, items)| {
            let objects: Vec<&serde_json::Map<String, Value>> =
                items.iter().filter_map(Value::as_object).collect();
            if objects.is_empty() {
                return None;
            }
            let (image, count, example) = image_field(&objects)?;
            let field = |names: &[&str], ok: fn(&Value) -> bool| {
                names.iter().find_map(|name| {
                    objects
                        .iter()
                        .all(|o| o.get(*name).is_some_and(ok))
                        .then(|| field_path(&["$", name]))
                })
            };
            Some(ArrayFound {
                items: format!("{path}[*]"),
                image,
                id: field(&["id", "uuid", "key"], |v| v.is_string() || v.is_number()),
                title: field(&["title", "alt", "caption", "name", "description"], |v| {
                    v.as_str().is_some_and(|s| !s.trim().is_empty())
                }),
                count,
                example,
            })
        })
        .max_by_key(|a| a.count)
}

fn collect_arrays<'a>(
    value: &'a Value,
    path: String,
    depth: usize,
    out: &mut Vec<(String, &'a Vec<Value>)>,
) {
    if depth > MAX_ARRAY_DEPTH {
        return;
    }
    match value {
        Value::Array(items) => out.push((path, items)),
        Value::Object(map) => {
            for (key, child) in map {
                collect_arrays(child, join_key(&path, key), depth + 1, out);
            }
        }
        _ => {}
    }
}

/// The field (a relative JSONPath) holding an image URL in the most items, at least half of
/// them; ties go to names that promise the largest picture. Returns it, how many items have
/// it, and one URL.
fn image_field(objects: &[&serde_json::Map<String, Value>]) -> Option<(String, usize, String)> {
    let mut counts: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for object in objects {
        let mut fields = Vec::new();
        image_fields(object, "$".to_owned(), 1, &mut fields);
        for (path, url) in fields {
            counts.entry(path).or_insert((0, url)).0 += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, (n, _))| n * 2 >= objects.len())
        .max_by_key(|(path, (n, _))| (*n, name_rank(path)))
        .map(|(path, (n, url))| (path, n, url))
}

fn image_fields(
    object: &serde_json::Map<String, Value>,
    path: String,
    depth: usize,
    out: &mut Vec<(String, String)>,
) {
    for (key, value) in object {
        let here = join_key(&path, key);
        match value {
            Value::String(s) if looks_like_image_url(s) => out.push((here, s.clone())),
            Value::Object(inner) if depth < MAX_FIELD_DEPTH => {
                image_fields(inner, here, depth + 1, out);
            }
            _ => {}
        }
    }
}

/// Larger pictures first: `original`/`full`/`large` over `url`/`src` over thumbnails.
fn name_rank(path: &str) -> i32 {
    let lower = path.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if has(&["thumb", "small", "preview", "icon", "avatar", "tiny"]) {
        0
    } else if has(&["original", "full", "large", "hd", "raw", "big"]) {
        3
    } else if has(&["url", "src", "image", "img", "photo", "href"]) {
        2
    } else {
        1
    }
}

/// A string that is one URL (absolute or relative, no spaces) whose path ends in an image
/// file extension.
pub fn looks_like_image_url(text: &str) -> bool {
    let text = text.trim();
    if text.is_empty() || text.contains(char::is_whitespace) || text.starts_with("data:") {
        return false;
    }
    let base = url::Url::parse("http://base.invalid/").expect("valid URL");
    let Ok(url) = base.join(text) else {
        return false;
    };
    if !matches!(url.scheme(), "http" | "https") {
        return false;
    }
    url.path()
        .rsplit_once('.')
        .is_some_and(|(_, ext)| IMAGE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}

fn join_key(path: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{path}.{key}")
    } else {
        format!(
            "{path}['{}']",
            key.replace('\\', "\\\\").replace('\'', "\\'")
        )
    }
}

fn field_path(parts: &[&str]) -> String {
    parts[1..]
        .iter()
        .fold(parts[0].to_owned(), |path, key| join_key(&path, key))
}

/// A regex for `path` and its siblings: runs of digits match any digits (`page-1.json` and
/// `page-2.json` are one API), everything else literally.
fn generalised(path: &str) -> String {
    let mut out = String::new();
    let mut in_digits = false;
    for c in path.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push_str(r"\d+");
            }
            in_digits = true;
            continue;
        }
        in_digits = false;
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response(url: &str, method: &str, body: Value) -> CapturedJson {
        CapturedJson {
            url: url.to_owned(),
            method: method.to_owned(),
            request_body: None,
            status: 200,
            body,
        }
    }

    #[test]
    fn numbered_pages_of_one_api_make_one_rule() {
        let page = |n: u32| {
            response(
                &format!("http://a.test/infinite/api/page-{n}.json"),
                "GET",
                json!({ "page": n, "items": [
                    { "title": "P1", "src": "/img/1-640x480.jpg", "srcset": "/img/1-320x240.jpg 320w" },
                    { "title": "P2", "src": "/img/2-640x480.jpg", "srcset": "/img/2-320x240.jpg 320w" },
                ], "next": 2 }),
            )
        };
        let rules = api_rules(&[page(1), page(2), page(3)]);
        assert_eq!(rules.len(), 1, "{rules:#?}");
        let r = &rules[0];
        assert_eq!(r.url, r"/infinite/api/page-\d+\.json$");
        assert!(
            regex::Regex::new(&r.url)
                .unwrap()
                .is_match("http://a.test/infinite/api/page-12.json")
        );
        assert_eq!(
            (r.items.as_str(), r.image.as_str()),
            ("$.items[*]", "$.src")
        );
        assert_eq!(r.title.as_deref(), Some("$.title"));
        assert_eq!(r.id, None);
        assert_eq!((r.responses, r.items_found), (3, 6));
    }

    #[test]
    fn nested_image_fields_and_ids_are_found() {
        let body = json!({ "data": { "items": [
            { "id": 1, "title": "a", "image": { "url": "https://cdn.test/a.jpg", "thumb": "https://cdn.test/a-t.jpg" } },
            { "id": 2, "title": "b", "image": { "url": "https://cdn.test/b.jpg", "thumb": "https://cdn.test/b-t.jpg" } },
        ], "next_cursor": "x" }, "user": { "avatar": "https://cdn.test/me.png" } });
        let rules = api_rules(&[response(
            "http://a.test/spa/api/items?cursor=x",
            "POST",
            body,
        )]);
        let r = &rules[0];
        assert_eq!(r.url, r"/spa/api/items(\?|$)");
        assert_eq!(r.items, "$.data.items[*]");
        assert_eq!(r.image, "$.image.url");
        assert_eq!(r.id.as_deref(), Some("$.id"));
        assert_eq!(r.seen, "POST /spa/api/items");
    }

    #[test]
    fn responses_without_image_urls_make_no_rule() {
        let body = json!({ "items": [{ "title": "a", "link": "/posts/1" }], "count": 1 });
        assert!(api_rules(&[response("http://a.test/api", "GET", body)]).is_empty());
        assert!(api_rules(&[response("http://a.test/api", "GET", json!([1, 2]))]).is_empty());
    }

    #[test]
    fn image_urls_are_told_from_other_strings() {
        for good in ["/img/a.jpg", "https://cdn.test/x/y.PNG?w=200", "b.webp"] {
            assert!(looks_like_image_url(good), "{good}");
        }
        for bad in [
            "/posts/1",
            "a.jpg 2x, b.jpg 1x",
            "data:image/png;base64,AA",
            "mailto:a.jpg",
            "",
        ] {
            assert!(!looks_like_image_url(bad), "{bad}");
        }
    }

    #[test]
    fn odd_keys_are_quoted_in_paths() {
        assert_eq!(join_key("$", "full-size"), "$['full-size']");
        assert_eq!(join_key("$", "url"), "$.url");
        assert_eq!(generalised("/a.b/v2/x"), r"/a\.b/v\d+/x");
    }
}
