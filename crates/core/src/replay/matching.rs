//! Which recorded request answers a request: the request key (pure).
//!
//! Two requests share a key when they have the same method, scheme, host, port and path, the
//! same query parameters in any order, and the same body, where:
//!
//! - cache-busting parameters are left out: [`ALWAYS_IGNORED`] whatever their value, and
//!   [`IGNORED_WHEN_RANDOM`] (`t`, `r`, `v`) when their value is a number (a timestamp or
//!   `Math.random()`); a profile adds its own names with `[replay] ignore_params`;
//! - the JSONP callback parameter (`[replay] jsonp_param`, default `callback`) counts by name
//!   only, and the recorded body's callback name is rewritten to the requested one
//!   ([`rewrite_jsonp`]);
//! - JSON bodies compare as JSON (key order and whitespace do not matter), without the paths
//!   listed in `[replay] ignore_body_paths`; form bodies compare as sorted parameters; other
//!   bodies byte for byte.

/// Query parameters that are cache-busters whatever their value.
pub const ALWAYS_IGNORED: [&str; 12] = [
    "_",
    "_t",
    "_ts",
    "ts",
    "timestamp",
    "cb",
    "cachebust",
    "cachebuster",
    "cache_bust",
    "nocache",
    "rand",
    "random",
];

/// Query parameters that are cache-busters when their value is a number.
pub const IGNORED_WHEN_RANDOM: [&str; 3] = ["t", "r", "v"];

/// How requests are matched, from the profile's `[replay]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchRules {
    /// More query parameters to leave out, whatever their value.
    pub ignore_params: Vec<String>,
    /// JSON body paths to leave out, as dotted paths (`variables.requestId`, `$.a.b`).
    pub ignore_body_paths: Vec<Vec<String>>,
    /// The query parameter that names a JSONP callback.
    pub jsonp_param: String,
    /// URL regexes (`[replay] ignore`): a request to a matching URL that is not in the
    /// recording is answered 404 without counting as unrecorded.
    pub ignore_urls: Vec<String>,
}

impl Default for MatchRules {
    fn default() -> Self {
        Self {
            ignore_params: Vec::new(),
            ignore_body_paths: Vec::new(),
            jsonp_param: "callback".to_owned(),
            ignore_urls: Vec::new(),
        }
    }
}

impl From<&crate::profile::ReplaySettings> for MatchRules {
    fn from(settings: &crate::profile::ReplaySettings) -> Self {
        Self {
            ignore_params: settings.ignore_params.clone(),
            ignore_body_paths: settings
                .ignore_body_paths
                .iter()
                .map(|p| Self::body_path(p))
                .collect(),
            jsonp_param: settings.jsonp_param.clone(),
            ignore_urls: settings.ignore.clone(),
        }
    }
}

impl MatchRules {
    /// Splits a dotted body path (`$.variables.requestId` or `variables.requestId`).
    pub fn body_path(text: &str) -> Vec<String> {
        let text = text.trim();
        let text = text.strip_prefix("$.").unwrap_or(text);
        text.split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn ignores(&self, name: &str, value: &str) -> bool {
        ALWAYS_IGNORED.contains(&name)
            || self.ignore_params.iter().any(|p| p == name)
            || (IGNORED_WHEN_RANDOM.contains(&name) && looks_random(value))
    }
}

/// A number (a timestamp, `Math.random()`), the values cache-busters take.
fn looks_random(value: &str) -> bool {
    !value.is_empty()
        && value.chars().all(|c| c.is_ascii_digit() || c == '.')
        && value.chars().any(|c| c.is_ascii_digit())
}

/// The key of one request; equal keys answer each other.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey(String);

impl RequestKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The key of a request. `content_type` and `body` are the request's (POST, PUT, ...).
pub fn request_key(
    rules: &MatchRules,
    method: &str,
    url: &url::Url,
    content_type: Option<&str>,
    body: Option<&[u8]>,
) -> RequestKey {
    let mut params: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(name, value)| !rules.ignores(name, value))
        .map(|(name, value)| {
            if *name == rules.jsonp_param {
                (name.into_owned(), String::new())
            } else {
                (name.into_owned(), value.into_owned())
            }
        })
        .collect();
    params.sort();
    let query = form_text(&params);
    let mut key = format!(
        "{} {}://{}:{}{}",
        method.to_ascii_uppercase(),
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or(0),
        url.path()
    );
    if !query.is_empty() {
        key.push('?');
        key.push_str(&query);
    }
    if let Some(body) = body.filter(|b| !b.is_empty()) {
        key.push(' ');
        key.push_str(&body_key(rules, content_type, body));
    }
    RequestKey(key)
}

fn form_text(params: &[(String, String)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish()
}

/// A body in a canonical form: JSON with sorted keys and ignored paths removed, sorted form
/// parameters, or the bytes as they are.
fn body_key(rules: &MatchRules, content_type: Option<&str>, body: &[u8]) -> String {
    let essence = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(body) {
        for path in &rules.ignore_body_paths {
            remove_path(&mut json, path);
        }
        return format!("json:{}", canonical_json(&json));
    }
    if essence == "application/x-www-form-urlencoded" {
        let mut pairs: Vec<(String, String)> = url::form_urlencoded::parse(body)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        pairs.sort();
        return format!("form:{}", form_text(&pairs));
    }
    format!("bytes:{}", String::from_utf8_lossy(body))
}

fn remove_path(value: &mut serde_json::Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = value;
    for name in parents {
        match at.get_mut(name.as_str()) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(object) = at.as_object_mut() {
        object.remove(last.as_str());
    }
}

/// JSON text with object keys sorted at every level.
fn canonical_json(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::Value::String(k.clone()),
                        canonical_json(&map[k])
                    )
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

/// The JSONP callback name a request asks for, if it names one.
pub fn jsonp_callback(rules: &MatchRules, url: &url::Url) -> Option<String> {
    url.query_pairs()
        .find(|(name, _)| *name == rules.jsonp_param)
        .map(|(_, value)| value.into_owned())
        .filter(|v| !v.is_empty())
}

/// A recorded JSONP body `recorded(...)` made into `requested(...)`; `None` when the body does
/// not start with the recorded callback (after whitespace and a `/**/` guard).
pub fn rewrite_jsonp(body: &[u8], recorded: &str, requested: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let trimmed = text.trim_start();
    let rest = trimmed
        .strip_prefix("/**/")
        .map_or(trimmed, str::trim_start);
    let after = rest.strip_prefix(recorded)?;
    if !after.trim_start().starts_with('(') {
        return None;
    }
    let prefix = &text[..text.len() - rest.len()];
    let mut out = String::with_capacity(text.len() + requested.len());
    out.push_str(prefix);
    out.push_str(requested);
    out.push_str(after);
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(method: &str, url: &str) -> RequestKey {
        request_key(
            &MatchRules::default(),
            method,
            &url::Url::parse(url).unwrap(),
            None,
            None,
        )
    }

    fn json_key(rules: &MatchRules, body: &str) -> RequestKey {
        request_key(
            rules,
            "POST",
            &url::Url::parse("http://a.test/graphql").unwrap(),
            Some("application/json"),
            Some(body.as_bytes()),
        )
    }

    #[test]
    fn reordered_query_parameters_match() {
        assert_eq!(
            key("GET", "http://a.test/p?b=2&a=1"),
            key("GET", "http://a.test/p?a=1&b=2")
        );
        assert_ne!(
            key("GET", "http://a.test/p?a=1"),
            key("GET", "http://a.test/p?a=2")
        );
    }

    #[test]
    fn cache_busters_are_left_out() {
        let cases = [
            (
                "http://a.test/p?page=2&_=1700000000000",
                "http://a.test/p?page=2",
            ),
            (
                "http://a.test/p?page=2&t=0.123",
                "http://a.test/p?page=2&t=0.9",
            ),
            ("http://a.test/p?cb=xyz&page=2", "http://a.test/p?page=2"),
            (
                "http://a.test/p?page=2&timestamp=5",
                "http://a.test/p?timestamp=6&page=2",
            ),
        ];
        for (a, b) in cases {
            assert_eq!(key("GET", a), key("GET", b), "{a} vs {b}");
        }
        // `t` that is not a number is a real parameter (a tag, say).
        assert_ne!(
            key("GET", "http://a.test/p?t=cats"),
            key("GET", "http://a.test/p?t=dogs")
        );
    }

    #[test]
    fn profile_params_are_left_out_too() {
        let rules = MatchRules {
            ignore_params: vec!["session".into()],
            ..MatchRules::default()
        };
        let at = |u: &str| request_key(&rules, "GET", &url::Url::parse(u).unwrap(), None, None);
        assert_eq!(
            at("http://a.test/?session=1&x=1"),
            at("http://a.test/?x=1&session=2")
        );
    }

    #[test]
    fn method_host_port_and_path_count() {
        assert_ne!(
            key("GET", "http://a.test/p"),
            key("POST", "http://a.test/p")
        );
        assert_ne!(
            key("GET", "http://a.test/p"),
            key("GET", "http://a.test:81/p")
        );
        assert_ne!(key("GET", "http://a.test/p"), key("GET", "http://b.test/p"));
        assert_eq!(
            key("GET", "http://a.test:80/p"),
            key("GET", "http://a.test/p#x")
        );
    }

    #[test]
    fn json_bodies_compare_structurally_without_ignored_paths() {
        let rules = MatchRules {
            ignore_body_paths: vec![MatchRules::body_path("$.variables.requestId")],
            ..MatchRules::default()
        };
        let a = r#"{"query":"q","variables":{"after":"c2","first":10,"requestId":"1"}}"#;
        let b =
            r#"{ "variables": {"requestId": "999", "first": 10, "after": "c2"}, "query": "q" }"#;
        assert_eq!(json_key(&rules, a), json_key(&rules, b));
        let c = r#"{"query":"q","variables":{"after":"c3","first":10}}"#;
        assert_ne!(json_key(&rules, a), json_key(&rules, c));
    }

    #[test]
    fn form_bodies_compare_as_sorted_parameters() {
        let at = |body: &str| {
            request_key(
                &MatchRules::default(),
                "POST",
                &url::Url::parse("http://a.test/more").unwrap(),
                Some("application/x-www-form-urlencoded; charset=UTF-8"),
                Some(body.as_bytes()),
            )
        };
        assert_eq!(at("page=2&size=10"), at("size=10&page=2"));
        assert_ne!(at("page=2&size=10"), at("page=3&size=10"));
    }

    #[test]
    fn jsonp_callback_names_do_not_count_and_are_rewritten() {
        assert_eq!(
            key("GET", "http://a.test/api?callback=jQuery123_456&page=1"),
            key("GET", "http://a.test/api?page=1&callback=jQuery999_1")
        );
        let rules = MatchRules::default();
        let url = url::Url::parse("http://a.test/api?callback=cb2").unwrap();
        assert_eq!(jsonp_callback(&rules, &url).as_deref(), Some("cb2"));
        assert_eq!(
            rewrite_jsonp(b"/**/ cb1({\"a\":1});", "cb1", "cb2").unwrap(),
            b"/**/ cb2({\"a\":1});"
        );
        assert_eq!(rewrite_jsonp(b"cb1 ({});", "cb1", "x").unwrap(), b"x ({});");
        assert_eq!(rewrite_jsonp(b"{\"a\":1}", "cb1", "cb2"), None);
    }
}
