//! A signed-in browser's storage state: the JSON Playwright writes with
//! `context.storageState({ path })` (and Puppeteer users keep the same way): the browser's
//! cookies, and each origin's localStorage.
//!
//! ```json
//! {"cookies": [{"name": "sid", "value": "…", "domain": ".example.com", "path": "/",
//!               "expires": 1767225600, "httpOnly": true, "secure": true, "sameSite": "Lax"}],
//!  "origins": [{"origin": "https://example.com",
//!               "localStorage": [{"name": "token", "value": "…"}]}]}
//! ```
//!
//! A cookie domain with a leading dot also covers subdomains; `expires` is Unix seconds, `-1`
//! for a session cookie. Values are secrets: never printed.

use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::cookies::FileCookie;
use crate::redact::Secret;

/// What a storage state holds.
#[derive(Debug, Clone, Default)]
pub struct StorageState {
    pub cookies: Vec<FileCookie>,
    pub origins: Vec<OriginStorage>,
}

/// One origin's localStorage.
#[derive(Debug, Clone)]
pub struct OriginStorage {
    /// `scheme://host[:port]`, as `location.origin` says it.
    pub origin: String,
    pub items: Vec<(String, Secret)>,
}

#[derive(Serialize, Deserialize)]
struct StateJson {
    #[serde(default)]
    cookies: Vec<CookieJson>,
    #[serde(default)]
    origins: Vec<OriginJson>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CookieJson {
    name: String,
    value: String,
    domain: String,
    #[serde(default = "root")]
    path: String,
    #[serde(default)]
    expires: Option<f64>,
    #[serde(default)]
    http_only: bool,
    #[serde(default)]
    secure: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    same_site: Option<String>,
}

fn root() -> String {
    "/".to_owned()
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OriginJson {
    origin: String,
    #[serde(default)]
    local_storage: Vec<ItemJson>,
}

#[derive(Serialize, Deserialize)]
struct ItemJson {
    name: String,
    value: String,
}

/// The storage state in `text`, or what is wrong with it (never quoting a value).
pub fn parse_storage_state(text: &str) -> Result<StorageState, String> {
    let json: StateJson = serde_json::from_str(text).map_err(|e| {
        // serde_json names the line and column; its message never holds the value itself
        // for a type mismatch, but a syntax error's may: keep the position only.
        format!(
            "not a storage state (JSON with `cookies` and `origins`): line {}, column {}: {}",
            e.line(),
            e.column(),
            match e.classify() {
                serde_json::error::Category::Data => "a field is missing or of the wrong type",
                serde_json::error::Category::Syntax => "not valid JSON",
                serde_json::error::Category::Eof => "the JSON ends too soon",
                serde_json::error::Category::Io => "unreadable",
            }
        )
    })?;
    let mut cookies = Vec::new();
    for (index, cookie) in json.cookies.into_iter().enumerate() {
        let place =
            |message: String| format!("cookie {} (`{}`): {message}", index + 1, cookie.name);
        let include_subdomains = cookie.domain.starts_with('.');
        let domain = cookie.domain.trim_start_matches('.').to_ascii_lowercase();
        if domain.is_empty() || url::Host::parse(&domain).is_err() {
            return Err(place(format!("`{}` is not a domain name", cookie.domain)));
        }
        if cookie.name.is_empty() {
            return Err(format!("cookie {} has no name", index + 1));
        }
        if !cookie.path.starts_with('/') {
            return Err(place(format!(
                "the path `{}` does not start with `/`",
                cookie.path
            )));
        }
        let expires = match cookie.expires {
            Some(at) if at.is_finite() && at > 0.0 => {
                Some(UNIX_EPOCH + Duration::from_secs_f64(at.min(LATEST_EXPIRY_SECS)))
            }
            _ => None,
        };
        cookies.push(FileCookie {
            domain,
            include_subdomains,
            path: cookie.path,
            secure: cookie.secure,
            http_only: cookie.http_only,
            expires,
            name: cookie.name,
            value: Secret::new(cookie.value),
        });
    }
    let mut origins = Vec::new();
    for origin in json.origins {
        let parsed = url::Url::parse(&origin.origin)
            .map_err(|_| format!("origin `{}` is not a URL", origin.origin))?;
        origins.push(OriginStorage {
            origin: parsed.origin().ascii_serialization(),
            items: origin
                .local_storage
                .into_iter()
                .map(|item| (item.name, Secret::new(item.value)))
                .collect(),
        });
    }
    Ok(StorageState { cookies, origins })
}

/// The latest expiry read (9999-12-31 23:59:59 UTC), as the cookies file reader has it.
const LATEST_EXPIRY_SECS: f64 = 253_402_300_799.0;

/// `state` as storage-state JSON, as [`parse_storage_state`] reads it (and Playwright does).
pub fn storage_state_json(state: &StorageState) -> String {
    let json = StateJson {
        cookies: state
            .cookies
            .iter()
            .map(|c| CookieJson {
                name: c.name.clone(),
                value: c.value.expose().clone(),
                domain: match c.include_subdomains {
                    true => format!(".{}", c.domain),
                    false => c.domain.clone(),
                },
                path: c.path.clone(),
                expires: Some(c.expires.map_or(-1.0, |at| {
                    at.duration_since(UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64().floor())
                })),
                http_only: c.http_only,
                secure: c.secure,
                same_site: Some("Lax".to_owned()),
            })
            .collect(),
        origins: state
            .origins
            .iter()
            .map(|o| OriginJson {
                origin: o.origin.clone(),
                local_storage: o
                    .items
                    .iter()
                    .map(|(name, value)| ItemJson {
                        name: name.clone(),
                        value: value.expose().clone(),
                    })
                    .collect(),
            })
            .collect(),
    };
    // Invariant: strings, numbers and booleans; it always serializes.
    serde_json::to_string_pretty(&json).expect("storage state serializes")
}

/// A script run before any of a page's own: on a page of one of `origins`, it puts that
/// origin's items into localStorage, each only where the page has none by that name (what the
/// site set during the run stays).
pub fn local_storage_script(origins: &[OriginStorage]) -> Option<String> {
    if origins.iter().all(|o| o.items.is_empty()) {
        return None;
    }
    let table: serde_json::Map<String, serde_json::Value> = origins
        .iter()
        .map(|o| {
            let items: Vec<[&str; 2]> = o
                .items
                .iter()
                .map(|(name, value)| [name.as_str(), value.expose().as_str()])
                .collect();
            (o.origin.clone(), serde_json::json!(items))
        })
        .collect();
    Some(format!(
        "(() => {{ const items = ({})[location.origin]; if (!items) return; \
         try {{ for (const [k, v] of items) if (localStorage.getItem(k) === null) localStorage.setItem(k, v); }} catch (e) {{}} }})();",
        serde_json::Value::Object(table)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = r#"{
      "cookies": [
        {"name": "sid", "value": "s3cr3t", "domain": ".example.test", "path": "/",
         "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"},
        {"name": "pref", "value": "dark", "domain": "127.0.0.1", "path": "/members",
         "expires": 4102444800.5, "httpOnly": false, "secure": true, "sameSite": "None"}
      ],
      "origins": [
        {"origin": "http://127.0.0.1:8080", "localStorage": [{"name": "token", "value": "t0k3n"}]}
      ]
    }"#;

    #[test]
    fn a_playwright_state_is_read_with_its_cookies_and_local_storage() {
        let state = parse_storage_state(STATE).unwrap();
        let sid = &state.cookies[0];
        assert_eq!(
            (
                sid.domain.as_str(),
                sid.include_subdomains,
                sid.http_only,
                sid.expires
            ),
            ("example.test", true, true, None)
        );
        let pref = &state.cookies[1];
        assert_eq!(
            (
                pref.domain.as_str(),
                pref.include_subdomains,
                pref.secure,
                pref.path.as_str()
            ),
            ("127.0.0.1", false, true, "/members")
        );
        assert_eq!(
            pref.expires,
            Some(UNIX_EPOCH + Duration::from_secs_f64(4102444800.5))
        );
        assert_eq!(state.origins[0].origin, "http://127.0.0.1:8080");
        assert_eq!(state.origins[0].items[0].1.expose(), "t0k3n");
        let printed = format!("{state:?}");
        assert!(
            !printed.contains("s3cr3t") && !printed.contains("t0k3n"),
            "{printed}"
        );
    }

    #[test]
    fn a_state_written_reads_back_the_same() {
        let state = parse_storage_state(STATE).unwrap();
        let again = parse_storage_state(&storage_state_json(&state)).unwrap();
        assert_eq!(again.cookies[0], state.cookies[0]);
        assert_eq!(again.cookies[1].name, "pref");
        assert_eq!(again.origins[0].items[0].0, "token");
    }

    #[test]
    fn a_broken_state_is_named_without_its_values() {
        let cases = [
            ("{\"cookies\": [{\"name\": \"a\"}]}", "a field is missing"),
            (
                "{\"cookies\": [{\"name\": \"sid\", \"value\": \"s3cr3t\", \"domain\": \"a b\"}]}",
                "cookie 1 (`sid`): `a b` is not a domain name",
            ),
            (
                "{\"origins\": [{\"origin\": \"nowhere\"}]}",
                "origin `nowhere` is not a URL",
            ),
            (
                "{\"cookies\": [{\"name\": \"s3cr3t\" ",
                "the JSON ends too soon",
            ),
        ];
        for (text, expected) in cases {
            let error = parse_storage_state(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(!error.contains("s3cr3t"), "{error}");
        }
    }

    #[test]
    fn the_local_storage_script_sets_only_its_own_origins_items() {
        let state = parse_storage_state(STATE).unwrap();
        let script = local_storage_script(&state.origins).unwrap();
        assert!(
            script.contains(r#"{"http://127.0.0.1:8080":[["token","t0k3n"]]}"#),
            "{script}"
        );
        assert!(script.contains("localStorage.getItem(k) === null"));
        assert_eq!(local_storage_script(&[]), None);
    }
}
