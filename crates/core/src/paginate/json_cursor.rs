//! `kind = "json_cursor"`: a JSON API paged by an opaque cursor, resumable by the last item's id.
//!
//! Pure: builds each request from the chain's position and reads each response: the items and
//! images (through the `[[api]]` rules, the same ones that read the JSON a browser captured),
//! the last item's id, the next cursor, the end of the chain, and whether the API says the
//! cursor sent has expired. `fetch::api` sends the requests; the crawl commits each page with
//! its checkpoint.

use std::cmp::Ordering;

use serde_json::Value;
use url::Url;

use super::{EndReason, NextPage, PagePosition};
use crate::extract::{ImageCandidate, extract_json_images};
use crate::page::CapturedJson;
use crate::profile::{ApiMethod, ApiPaging, ApiRule, IdOrder, JsonCursor};

/// One API call to make (headers are the fetch layer's business: they may hold secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    pub method: ApiMethod,
    pub url: Url,
    /// JSON text, for `POST`.
    pub body: Option<String>,
}

/// What one API response says.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiReading {
    /// The cursor sent is no longer accepted (`reason` says how the API said so).
    Expired { reason: String },
    /// A page of items.
    Page(ApiPage),
    /// Not a usable page: not JSON, an error status, or a field not where the profile says.
    Failed(String),
}

/// A page of items read from a response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiPage {
    /// Image URLs of the items, in item order, each once (not yet filtered).
    pub candidates: Vec<ImageCandidate>,
    pub items: u64,
    /// The id to resume after: the furthest id of the page in the API's `order`.
    pub last_id: Option<String>,
    /// The greatest id of the page.
    pub newest_id: Option<String>,
    pub next: NextPage,
}

/// The position of page `number` of the chain that starts at `start`: its key (`url`) names
/// the request, so every page of a chain has its own record.
pub fn position(
    api: &JsonCursor,
    start: &Url,
    number: i64,
    done: u64,
    cursor: Option<String>,
    after_id: Option<String>,
) -> PagePosition {
    let mut position = PagePosition {
        url: String::new(),
        number,
        done,
        cursor,
        after_id,
        offset: 0,
    };
    position.url = page_key(&request(api, start, &position), &position);
    position
}

/// The number of a chain's first page: `start` for numbered pages, else 1.
pub fn first_number(api: &JsonCursor) -> i64 {
    match api.paging {
        ApiPaging::Numbered { first } => first,
        ApiPaging::Cursor(_) => 1,
    }
}

/// Whether the requests of `api` carry `{offset}`: then a page's request depends on how many
/// items the pages before it held, which only reading them tells.
pub fn uses_offset(api: &JsonCursor) -> bool {
    api.request.contains(OFFSET)
        || api
            .body
            .as_ref()
            .is_some_and(|body| placeholder_path(body, OFFSET).is_some())
}

/// The request that fetches `position`.
pub fn request(api: &JsonCursor, start: &Url, position: &PagePosition) -> ApiRequest {
    let page = position.number.to_string();
    let offset = position.offset.to_string();
    let target = api.request.replace(PAGE, &page).replace(OFFSET, &offset);
    let mut url = start.join(&target).unwrap_or_else(|_| start.clone());
    let cursor = position.cursor.as_deref();
    let after_id = position.after_id.as_deref();
    match api.method {
        ApiMethod::Get => {
            if let Some(cursor) = cursor {
                url.query_pairs_mut().append_pair(&api.cursor_param, cursor);
            }
            if let (Some(id), Some(param)) = (after_id, &api.after_id) {
                url.query_pairs_mut().append_pair(param, id);
            }
            ApiRequest {
                method: ApiMethod::Get,
                url,
                body: None,
            }
        }
        ApiMethod::Post => {
            let mut body = api.body.clone().unwrap_or(Value::Null);
            fill(&mut body, "{cursor}", cursor);
            fill(&mut body, "{after_id}", after_id);
            fill_number(&mut body, PAGE, position.number.into());
            fill_number(&mut body, OFFSET, position.offset.into());
            ApiRequest {
                method: ApiMethod::Post,
                url,
                body: Some(body.to_string()),
            }
        }
    }
}

/// The page record's key: the URL of a GET; for a POST, whose URL never changes, the URL with
/// the cursor (or the id) as its fragment.
fn page_key(request: &ApiRequest, position: &PagePosition) -> String {
    if request.method == ApiMethod::Get {
        return request.url.to_string();
    }
    let mut url = request.url.clone();
    let fragment = match (&position.cursor, &position.after_id) {
        (Some(cursor), _) => Some(format!("cursor={cursor}")),
        (None, Some(id)) => Some(format!("after_id={id}")),
        (None, None) if position.number > 1 || position.offset > 0 => Some(format!(
            "page={}&offset={}",
            position.number, position.offset
        )),
        (None, None) => None,
    };
    url.set_fragment(fragment.as_deref());
    url.to_string()
}

/// The page number placeholder of numbered API pages.
const PAGE: &str = "{page}";
/// The item offset placeholder of numbered API pages.
const OFFSET: &str = "{offset}";

/// Replaces every string value equal to `placeholder` with the number `value`.
fn fill_number(json: &mut Value, placeholder: &str, value: serde_json::Number) {
    match json {
        Value::String(s) if s == placeholder => *json = Value::Number(value),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| fill_number(v, placeholder, value.clone())),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| fill_number(v, placeholder, value.clone())),
        _ => {}
    }
}

/// Replaces every string value equal to `placeholder` with `value` (`null` when absent).
fn fill(json: &mut Value, placeholder: &str, value: Option<&str>) {
    match json {
        Value::String(s) if s == placeholder => {
            *json = value.map_or(Value::Null, |v| Value::String(v.to_owned()));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill(v, placeholder, value)),
        Value::Object(map) => map.values_mut().for_each(|v| fill(v, placeholder, value)),
        _ => {}
    }
}

/// Whether `url` is the API endpoint of `api_url` (same origin and path; the query may differ).
pub fn same_endpoint(url: &Url, api_url: &Url) -> bool {
    url.origin() == api_url.origin() && url.path() == api_url.path()
}

/// The cursor a request the page made itself sent, read where the profile puts it: the
/// `cursor_param` query parameter of a `GET`, the place of `"{cursor}"` in a `POST` body.
/// `None` for a first page.
pub fn sent_cursor(api: &JsonCursor, url: &Url, body: Option<&str>) -> Option<String> {
    match api.method {
        ApiMethod::Get => url
            .query_pairs()
            .find(|(name, _)| *name == api.cursor_param)
            .map(|(_, value)| value.into_owned())
            .filter(|value| !value.is_empty()),
        ApiMethod::Post => {
            let path = placeholder_path(api.body.as_ref()?, "{cursor}")?;
            let sent: Value = serde_json::from_str(body?).ok()?;
            let mut at = &sent;
            for step in &path {
                at = match step {
                    Step::Key(key) => at.get(key)?,
                    Step::Index(index) => at.get(index)?,
                };
            }
            id_text(at)
        }
    }
}

/// One step into a JSON value.
enum Step {
    Key(String),
    Index(usize),
}

/// Where the string value `placeholder` is in `json`.
fn placeholder_path(json: &Value, placeholder: &str) -> Option<Vec<Step>> {
    match json {
        Value::String(s) if s == placeholder => Some(Vec::new()),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            let mut path = placeholder_path(v, placeholder)?;
            path.insert(0, Step::Index(i));
            Some(path)
        }),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let mut path = placeholder_path(v, placeholder)?;
            path.insert(0, Step::Key(k.clone()));
            Some(path)
        }),
        _ => None,
    }
}

/// An API response as received.
#[derive(Debug, Clone, Copy)]
pub struct Reply<'a> {
    /// After redirects.
    pub url: &'a Url,
    pub status: u16,
    pub body: &'a [u8],
}

/// The reply to the request for `position` of the chain that starts at `start`, as the API's
/// paging fields and the `[[api]]` rules read it.
pub fn read(
    api: &JsonCursor,
    rules: &[ApiRule],
    max_pages: Option<u64>,
    start: &Url,
    position: &PagePosition,
    reply: Reply<'_>,
) -> ApiReading {
    let Reply { url, status, body } = reply;
    let sent_cursor = position.cursor.is_some();
    if sent_cursor && api.expired_status.contains(&status) {
        return ApiReading::Expired {
            reason: format!("HTTP {status}"),
        };
    }
    let json: Value = match serde_json::from_slice(body) {
        Ok(json) => json,
        Err(_) if !(200..300).contains(&status) => {
            return ApiReading::Failed(format!("HTTP {status}"));
        }
        Err(e) => return ApiReading::Failed(format!("the response is not JSON: {e}")),
    };
    if sent_cursor
        && let Some(path) = &api.expired_match
        && !path.query(&json).is_empty()
    {
        return ApiReading::Expired {
            reason: format!("`{path}` matched"),
        };
    }
    if !(200..300).contains(&status) {
        return ApiReading::Failed(format!("HTTP {status}"));
    }
    let Some(rule) = rules.iter().find(|r| r.url.is_match(url.as_str())) else {
        return ApiReading::Failed(format!(
            "no `[[api]]` rule's `url` matches `{}`",
            crate::redact::redact(url)
        ));
    };
    if let Err(problem) = items_shape(rule, &json) {
        return ApiReading::Failed(problem);
    }
    let items = rule.items.query(&json).all();
    let (last_id, newest_id) = match page_ids(api, rule, &items) {
        Ok(ids) => ids,
        Err(problem) => return ApiReading::Failed(problem),
    };
    let item_count = items.len() as u64;
    let next_cursor = match &api.paging {
        ApiPaging::Numbered { .. } => None,
        ApiPaging::Cursor(path) => match path.query(&json).first() {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(other) => {
                return ApiReading::Failed(format!(
                    "`{path}` selects {}, not a cursor (a string or a number)",
                    kind_of(other)
                ));
            }
        },
    };
    let has_more = match &api.has_more {
        None => true,
        Some(path) => match path.query(&json).first() {
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return ApiReading::Failed(format!(
                    "`{path}` selects {}, not true or false",
                    kind_of(other)
                ));
            }
            None => {
                return ApiReading::Failed(format!(
                    "`{path}` selects nothing in the response (expected true or false)"
                ));
            }
        },
    };
    let next = if max_pages.is_some_and(|max| position.done + 1 >= max) {
        NextPage::End(EndReason::MaxPages)
    } else if item_count == 0 {
        NextPage::End(EndReason::EmptyPage)
    } else if !has_more {
        NextPage::End(EndReason::NoMorePages)
    } else if let ApiPaging::Numbered { .. } = api.paging {
        match position.number.checked_add(1) {
            // No number is left for a next page.
            None => NextPage::End(EndReason::LastPageNumber),
            Some(number) => {
                let mut next = self::position(api, start, number, position.done + 1, None, None);
                next.offset = position.offset + item_count;
                next.url = page_key(&request(api, start, &next), &next);
                NextPage::Fetch(next)
            }
        }
    } else {
        match next_cursor {
            None => NextPage::End(EndReason::NoCursor),
            Some(c) if position.cursor.as_deref() == Some(c.as_str()) => {
                NextPage::End(EndReason::Loop)
            }
            Some(c) => NextPage::Fetch(self::position(
                api,
                start,
                position.number + 1,
                position.done + 1,
                Some(c),
                None,
            )),
        }
    };
    let captured = CapturedJson {
        url: url.to_string(),
        method: api.method.as_str().into(),
        request_body: None,
        status,
        body: json,
    };
    ApiReading::Page(ApiPage {
        candidates: extract_json_images(rules, std::slice::from_ref(&captured)),
        items: item_count,
        last_id,
        newest_id,
        next,
    })
}

/// An `items` path ending in `[*]` must find an array: an empty list is an empty page, a
/// missing one is a response of another shape.
fn items_shape(rule: &ApiRule, json: &Value) -> Result<(), String> {
    let text = rule.items.to_string();
    let Some(parent) = text.strip_suffix("[*]") else {
        return Ok(());
    };
    let Ok(path) = serde_json_path::JsonPath::parse(parent) else {
        return Ok(());
    };
    match path.query(json).first() {
        Some(Value::Array(_)) => Ok(()),
        Some(other) => Err(format!(
            "`{parent}` selects {}, not the array of items (`items` = `{text}` of `[[api]]` rule `{}`)",
            kind_of(other),
            rule.name
        )),
        None => Err(format!(
            "`{parent}` selects nothing in the response: no array of items (`items` = `{text}` of `[[api]]` rule `{}`)",
            rule.name
        )),
    }
}

/// The furthest id of `items` in the API's order, and the greatest. Every item needs an id
/// when the profile resumes by id: one without would make the resume point a guess.
fn page_ids(
    api: &JsonCursor,
    rule: &ApiRule,
    items: &[&Value],
) -> Result<(Option<String>, Option<String>), String> {
    let Some(id_path) = &rule.id else {
        return Ok((None, None));
    };
    let mut ids = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match id_path.query(item).first().and_then(id_text) {
            Some(id) => ids.push(id),
            None if api.after_id.is_some() => {
                return Err(format!(
                    "item {index} has no id at `{id_path}` (the `id` of `[[api]]` rule `{}`)",
                    rule.name
                ));
            }
            None => {}
        }
    }
    let newest = ids.iter().max_by(|a, b| compare_ids(a, b)).cloned();
    let furthest = match api.order {
        IdOrder::Ascending => newest.clone(),
        IdOrder::Descending => ids.into_iter().min_by(|a, b| compare_ids(a, b)),
    };
    Ok((furthest, newest))
}

/// The greater of two ids (numerically when both are integers).
pub fn newer_id(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if compare_ids(&a, &b) == Ordering::Less {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

/// Whether a newest-first page whose furthest (least) id is `least` reaches `known`, the
/// newest id of the walks before: the items from there on are known.
pub fn reaches_known_id(least: &str, known: &str) -> bool {
    compare_ids(least, known) != Ordering::Greater
}

/// Numerically when both ids are integers, else as text.
fn compare_ids(a: &str, b: &str) -> Ordering {
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Pagination, Profile};

    fn profile(pagination: &str, api: &str) -> Profile {
        let source = format!(
            "name = \"t\"\nstart = [\"http://a.test/g/\"]\n[pagination]\nkind = \"json_cursor\"\n{pagination}\n[[api]]\n{api}\n"
        );
        let checked = crate::profile::check(&source);
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        checked.profile.unwrap()
    }

    fn rest() -> Profile {
        profile(
            "request = \"/api?limit=2\"\ncursor = \"$.next\"\nafter_id = \"before\"\norder = \"descending\"",
            "url = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\nid = \"$.id\"",
        )
    }

    fn cursor_of(p: &Profile) -> &JsonCursor {
        match &p.pagination {
            Pagination::JsonCursor(c) => c,
            other => panic!("not json_cursor: {other:?}"),
        }
    }

    fn start() -> Url {
        Url::parse("http://a.test/g/").unwrap()
    }

    fn read_body(p: &Profile, position: &PagePosition, status: u16, body: &str) -> ApiReading {
        let url = request(cursor_of(p), &start(), position).url;
        let reply = Reply {
            url: &url,
            status,
            body: body.as_bytes(),
        };
        read(cursor_of(p), &p.api, p.max_pages, &start(), position, reply)
    }

    fn with_cursor(p: &Profile, cursor: &str) -> PagePosition {
        position(cursor_of(p), &start(), 2, 1, Some(cursor.into()), None)
    }

    #[test]
    fn get_requests_carry_the_cursor_or_the_id_as_query_parameters() {
        let p = rest();
        let c = cursor_of(&p);
        let cases = [
            (None, None, "http://a.test/api?limit=2"),
            (Some("x y"), None, "http://a.test/api?limit=2&cursor=x+y"),
            (None, Some("7"), "http://a.test/api?limit=2&before=7"),
        ];
        for (cursor, id, expected) in cases {
            let at = position(
                c,
                &start(),
                1,
                0,
                cursor.map(Into::into),
                id.map(Into::into),
            );
            assert_eq!(at.url, expected);
            assert_eq!(request(c, &start(), &at).url.as_str(), expected);
        }
    }

    #[test]
    fn post_bodies_get_the_cursor_and_pages_get_distinct_keys() {
        let p = profile(
            "request = \"/graphql\"\nmethod = \"POST\"\nbody = '{\"v\": {\"after\": \"{cursor}\", \"before\": \"{after_id}\", \"n\": 3}}'\ncursor = \"$.end\"\nafter_id = \"before\"",
            "url = \"/graphql\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\nid = \"$.id\"",
        );
        let c = cursor_of(&p);
        let first = position(c, &start(), 1, 0, None, None);
        let body: Value =
            serde_json::from_str(&request(c, &start(), &first).body.unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"v": {"after": null, "before": null, "n": 3}})
        );
        let second = position(c, &start(), 2, 1, Some("abc".into()), None);
        let body: Value =
            serde_json::from_str(&request(c, &start(), &second).body.unwrap()).unwrap();
        assert_eq!(body["v"]["after"], "abc");
        assert_eq!(first.url, "http://a.test/graphql");
        assert_eq!(second.url, "http://a.test/graphql#cursor=abc");
    }

    #[test]
    fn a_page_gives_images_the_furthest_id_and_the_next_cursor() {
        let p = rest();
        let at = position(cursor_of(&p), &start(), 1, 0, None, None);
        let body = r#"{"items": [{"id": 10, "src": "/i/10.jpg"}, {"id": 9, "src": "/i/9.jpg"}], "next": "c9"}"#;
        let ApiReading::Page(page) = read_body(&p, &at, 200, body) else {
            panic!("a page")
        };
        let urls: Vec<_> = page.candidates.iter().map(|c| c.url.as_str()).collect();
        assert_eq!(urls, ["http://a.test/i/10.jpg", "http://a.test/i/9.jpg"]);
        assert_eq!((page.items, page.last_id.as_deref()), (2, Some("9")));
        let NextPage::Fetch(next) = page.next else {
            panic!("a next page")
        };
        assert_eq!(
            (next.number, next.done, next.cursor.as_deref()),
            (2, 1, Some("c9"))
        );
    }

    #[test]
    fn the_chain_ends_on_each_documented_condition() {
        let p = rest();
        let at = with_cursor(&p, "c0");
        let cases = [
            (
                r#"{"items": [{"id": 1, "src": "/a"}], "next": null}"#,
                EndReason::NoCursor,
            ),
            (
                r#"{"items": [{"id": 1, "src": "/a"}]}"#,
                EndReason::NoCursor,
            ),
            (
                r#"{"items": [{"id": 1, "src": "/a"}], "next": ""}"#,
                EndReason::NoCursor,
            ),
            (r#"{"items": [], "next": "c1"}"#, EndReason::EmptyPage),
            (
                r#"{"items": [{"id": 1, "src": "/a"}], "next": "c0"}"#,
                EndReason::Loop,
            ),
        ];
        for (body, reason) in cases {
            match read_body(&p, &at, 200, body) {
                ApiReading::Page(page) => assert_eq!(page.next, NextPage::End(reason), "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn expiry_is_read_only_for_requests_that_carried_a_cursor() {
        let p = rest();
        let first = position(cursor_of(&p), &start(), 1, 0, None, None);
        assert_eq!(
            read_body(&p, &with_cursor(&p, "old"), 410, "{}"),
            ApiReading::Expired {
                reason: "HTTP 410".into()
            }
        );
        assert_eq!(
            read_body(&p, &first, 410, "{}"),
            ApiReading::Failed("HTTP 410".into())
        );
        assert_eq!(
            read_body(&p, &with_cursor(&p, "old"), 500, "oops"),
            ApiReading::Failed("HTTP 500".into())
        );
    }

    #[test]
    fn broken_responses_fail_naming_the_jsonpath() {
        let p = rest();
        let at = with_cursor(&p, "c");
        let cases = [
            ("{\"items\": [", "not JSON"),
            (r#"{"results": []}"#, "selects nothing in the response"),
            (
                r#"{"items": {"a": 1}}"#,
                "selects an object, not the array of items",
            ),
            (
                r#"{"items": [{"src": "/a"}], "next": "x"}"#,
                "item 0 has no id at `$.id`",
            ),
            (
                r#"{"items": [{"id": 1, "src": "/a"}], "next": {"x": 1}}"#,
                "`$.next` selects an object, not a cursor",
            ),
        ];
        for (body, expected) in cases {
            match read_body(&p, &at, 200, body) {
                ApiReading::Failed(message) => {
                    assert!(message.contains(expected), "{body}: {message}")
                }
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn has_more_false_ends_and_a_missing_has_more_fails() {
        let p = profile(
            "request = \"/api\"\ncursor = \"$.info.end\"\nhas_more = \"$.info.more\"\nexpired_match = \"$.errors[*]\"",
            "url = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"",
        );
        let at = with_cursor(&p, "c");
        let page = read_body(
            &p,
            &at,
            200,
            r#"{"items": [{"src": "/a"}], "info": {"end": "d", "more": false}}"#,
        );
        assert!(
            matches!(
                page,
                ApiReading::Page(ApiPage {
                    next: NextPage::End(EndReason::NoMorePages),
                    ..
                })
            ),
            "{page:?}"
        );
        let failed = read_body(
            &p,
            &at,
            200,
            r#"{"items": [{"src": "/a"}], "info": {"end": "d"}}"#,
        );
        assert!(
            matches!(&failed, ApiReading::Failed(m) if m.contains("$.info.more")),
            "{failed:?}"
        );
        let expired = read_body(&p, &at, 200, r#"{"errors": [{"code": "gone"}]}"#);
        assert!(matches!(expired, ApiReading::Expired { .. }), "{expired:?}");
    }

    #[test]
    fn the_resume_id_is_the_furthest_in_the_apis_order() {
        assert_eq!(compare_ids("9", "10"), Ordering::Less);
        assert_eq!(compare_ids("b", "a"), Ordering::Greater);
        let p = profile(
            "request = \"/api\"\ncursor = \"$.next\"\nafter_id = \"after\"",
            "url = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\nid = \"$.id\"",
        );
        let at = position(cursor_of(&p), &start(), 1, 0, None, None);
        let body = r#"{"items": [{"id": "9", "src": "/a"}, {"id": "10", "src": "/b"}, {"id": "2", "src": "/c"}], "next": "x"}"#;
        let ApiReading::Page(page) = read_body(&p, &at, 200, body) else {
            panic!("a page")
        };
        assert_eq!(page.last_id.as_deref(), Some("10"));
        assert_eq!(page.newest_id.as_deref(), Some("10"));
    }

    #[test]
    fn the_cursor_a_captured_request_sent_is_read_where_the_profile_puts_it() {
        let p = rest();
        let c = cursor_of(&p);
        let url = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            sent_cursor(c, &url("http://a.test/api?limit=2&cursor=abc"), None).as_deref(),
            Some("abc")
        );
        assert_eq!(
            sent_cursor(c, &url("http://a.test/api?limit=2"), None),
            None
        );
        assert!(same_endpoint(
            &url("http://a.test/api?x=1"),
            &url("http://a.test/api?limit=2")
        ));
        assert!(!same_endpoint(
            &url("http://a.test/api/2"),
            &url("http://a.test/api")
        ));
        let p = profile(
            "request = \"/graphql\"\nmethod = \"POST\"\nbody = '{\"v\": {\"list\": [0, {\"after\": \"{cursor}\"}]}}'\ncursor = \"$.end\"",
            "url = \"/graphql\"\nitems = \"$.items[*]\"\nimage = \"$.src\"",
        );
        let c = cursor_of(&p);
        let at = url("http://a.test/graphql");
        let sent = |body: &str| sent_cursor(c, &at, Some(body));
        assert_eq!(
            sent(r#"{"v": {"list": [0, {"after": "xyz"}]}}"#).as_deref(),
            Some("xyz")
        );
        assert_eq!(sent(r#"{"v": {"list": [0, {"after": null}]}}"#), None);
        assert_eq!(sent("not json"), None);
    }

    #[test]
    fn a_newest_first_walk_knows_when_it_reaches_the_known_id() {
        assert!(reaches_known_id("9", "10"));
        assert!(reaches_known_id("10", "10"));
        assert!(!reaches_known_id("11", "10"));
        assert!(!reaches_known_id("100", "99"), "numerically");
        assert_eq!(
            newer_id(Some("9".into()), Some("10".into())).as_deref(),
            Some("10")
        );
        assert_eq!(newer_id(None, Some("3".into())).as_deref(), Some("3"));
        assert_eq!(newer_id(Some("3".into()), None).as_deref(), Some("3"));
    }
}

#[cfg(test)]
mod numbered_tests {
    use super::*;
    use crate::profile::{Pagination, Profile};

    fn profile(pagination: &str) -> Profile {
        let source = format!(
            "name = \"t\"\nstart = [\"http://a.test/g/\"]\n[pagination]\nkind = \"json_cursor\"\n{pagination}\n[[api]]\nurl = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\n"
        );
        let checked = crate::profile::check(&source);
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        checked.profile.unwrap()
    }

    fn api(p: &Profile) -> &JsonCursor {
        match &p.pagination {
            Pagination::JsonCursor(c) => c,
            other => panic!("not json_cursor: {other:?}"),
        }
    }

    /// Reads `items` image names as the reply to `position`; the next position.
    fn next_after(p: &Profile, position: &PagePosition, items: &[&str]) -> NextPage {
        let start = Url::parse("http://a.test/g/").unwrap();
        let url = request(api(p), &start, position).url;
        let body = serde_json::json!({
            "items": items.iter().map(|i| serde_json::json!({ "src": format!("/img/{i}.jpg") })).collect::<Vec<_>>()
        })
        .to_string();
        let reply = Reply {
            url: &url,
            status: 200,
            body: body.as_bytes(),
        };
        match read(api(p), &p.api, p.max_pages, &start, position, reply) {
            ApiReading::Page(page) => page.next,
            other => panic!("not a page: {other:?}"),
        }
    }

    #[test]
    fn page_numbers_and_offsets_fill_the_url_page_by_page_until_an_empty_page() {
        let p = profile("request = \"/api?page={page}&from={offset}&limit=2\"\nstart = 0");
        let first = crate::paginate::first_page(&p.pagination, &p.start[0]);
        let start = Url::parse("http://a.test/g/").unwrap();
        assert_eq!(
            request(api(&p), &start, &first).url.as_str(),
            "http://a.test/api?page=0&from=0&limit=2"
        );
        let NextPage::Fetch(second) = next_after(&p, &first, &["a", "b"]) else {
            panic!("a full page goes on")
        };
        assert_eq!(
            request(api(&p), &start, &second).url.as_str(),
            "http://a.test/api?page=1&from=2&limit=2"
        );
        assert_eq!(second.url, "http://a.test/api?page=1&from=2&limit=2");
        assert_eq!(
            next_after(&p, &second, &[]),
            NextPage::End(EndReason::EmptyPage)
        );
    }

    #[test]
    fn numbered_pages_end_at_the_last_page_number_there_is() {
        let p = profile(&format!(
            "request = \"/api?page={{page}}\"\nstart = {}",
            i64::MAX
        ));
        let first = crate::paginate::first_page(&p.pagination, &p.start[0]);
        assert_eq!(first.number, i64::MAX);
        assert_eq!(
            next_after(&p, &first, &["a"]),
            NextPage::End(EndReason::LastPageNumber)
        );
    }

    #[test]
    fn a_graphql_body_gets_the_page_as_a_number_and_each_page_its_own_key() {
        let p = profile(
            "request = \"/api\"\nmethod = \"POST\"\nbody = '{\"query\": \"q\", \"variables\": {\"page\": \"{page}\", \"first\": 2}}'",
        );
        let start = Url::parse("http://a.test/g/").unwrap();
        let first = crate::paginate::first_page(&p.pagination, &start);
        let sent: Value =
            serde_json::from_str(&request(api(&p), &start, &first).body.unwrap()).unwrap();
        assert_eq!(sent["variables"]["page"], 1);
        let NextPage::Fetch(second) = next_after(&p, &first, &["a"]) else {
            panic!("a page with items goes on")
        };
        let sent: Value =
            serde_json::from_str(&request(api(&p), &start, &second).body.unwrap()).unwrap();
        assert_eq!(sent["variables"]["page"], 2);
        assert_ne!(first.url, second.url, "each page has its own record");
    }

    #[test]
    fn a_cursor_and_a_page_number_together_are_an_error() {
        let source = "name = \"t\"\nstart = [\"http://a.test/\"]\n[pagination]\nkind = \"json_cursor\"\nrequest = \"/api?page={page}\"\ncursor = \"$.next\"\n[[api]]\nurl = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\n";
        let checked = crate::profile::check(source);
        assert!(checked.profile.is_none());
        assert!(
            checked.diagnostics[0]
                .message
                .starts_with("`cursor` and a \"{page}\""),
            "{:?}",
            checked.diagnostics
        );
    }

    #[test]
    fn only_requests_that_carry_an_offset_use_one() {
        let cases = [
            ("request = \"/api?page={page}\"", false),
            ("request = \"/api?from={offset}\"", true),
            (
                "request = \"/api\"\nmethod = \"POST\"\nbody = '{\"v\": {\"page\": \"{page}\"}}'",
                false,
            ),
            (
                "request = \"/api\"\nmethod = \"POST\"\nbody = '{\"v\": [{\"skip\": \"{offset}\"}]}'",
                true,
            ),
        ];
        for (pagination, expected) in cases {
            assert_eq!(
                uses_offset(api(&profile(pagination))),
                expected,
                "{pagination}"
            );
        }
    }

    #[test]
    fn page_n_of_a_numbered_api_is_its_own_request() {
        let p = profile(
            "request = \"/api\"\nmethod = \"POST\"\nbody = '{\"variables\": {\"page\": \"{page}\"}}'",
        );
        let start = Url::parse("http://a.test/g/").unwrap();
        let page = crate::paginate::numbered_page(&p.pagination, &start, 15).unwrap();
        assert_eq!((page.number, page.done, page.offset), (15, 14, 0));
        let sent: Value =
            serde_json::from_str(&request(api(&p), &start, &page).body.unwrap()).unwrap();
        assert_eq!(sent["variables"]["page"], 15);
        let NextPage::Fetch(next) = next_after(&p, &page, &["a"]) else {
            panic!("a page with items goes on")
        };
        assert_eq!(next.number, 16);
    }
}
