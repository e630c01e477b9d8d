//! The demo site's JSON APIs, so the profiles of sites that page through JSON can be run,
//! recorded and replayed against the bundled site like the others:
//!
//! - `POST /spa/api/items`: what the single-page app (`/spa/`) posts when "Load more" is
//!   pressed: `{"cursor": null}` first, then the `next_cursor` of the previous answer; eight
//!   items in pages of 3, 3 and 2, images `/img/spa-{1..8}-800x600.jpg`.
//! - `POST /api/token`: a client-credentials login; `{"client_secret": "demo-secret"}` gets
//!   `{"access_token": "demo-…", "expires_in": 3600}`, anything else 401.
//! - `GET /api/photos?limit=N[&cursor=C | &before_id=ID]`: a feed of [`PHOTOS`] photos, newest
//!   (highest id) first, behind `Authorization: Bearer <a token from /api/token>`; opaque
//!   cursors, `before_id` to resume after an id; 401 without a valid token.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// Photos in the feed: ids `1..=PHOTOS`.
pub const PHOTOS: u64 = 24;
/// The secret `/api/token` wants.
pub const CLIENT_SECRET: &str = "demo-secret";
/// Items per page when the request names no `limit`, and the most it may name.
const DEFAULT_LIMIT: u64 = 10;
const MAX_LIMIT: u64 = 50;
const PHOTOGRAPHERS: [&str; 3] = ["Ana", "Bo", "Chen"];

/// The tokens `/api/token` handed out.
#[derive(Clone, Default)]
pub struct Tokens {
    issued: Arc<AtomicU64>,
}

impl Tokens {
    fn issue(&self) -> String {
        let n = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
        // Distinct per run of the server, so a token cannot be guessed from the last one.
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("demo-{n}-{salt:x}")
    }

    /// Whether `headers` carry a token this server issued.
    fn authorized(&self, headers: &HeaderMap) -> bool {
        let issued = self.issued.load(Ordering::Relaxed);
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer demo-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(n, _)| n.parse::<u64>().ok())
            .is_some_and(|n| (1..=issued).contains(&n))
    }
}

/// The single-page app's items: pages of 3, 3 and 2 behind cursors `c2` and `c3`.
pub fn spa_items(body: &str) -> Value {
    let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let (range, next) = match request["cursor"].as_str() {
        None => (1..=3, json!("c2")),
        Some("c2") => (4..=6, json!("c3")),
        _ => (7..=8, Value::Null),
    };
    let items: Vec<Value> = range
        .map(|k| {
            json!({
                "title": format!("Item {k}"),
                "image": { "url": format!("/img/spa-{k}-800x600.jpg") }
            })
        })
        .collect();
    json!({ "items": items, "next_cursor": next })
}

/// The image paths the single-page app's API lists.
pub fn spa_image_paths() -> Vec<String> {
    (1..=8)
        .map(|k| format!("/img/spa-{k}-800x600.jpg"))
        .collect()
}

/// The image path of photo `id` of the feed.
pub fn photo_image_path(id: u64) -> String {
    format!("/img/photo-{id}-640x480.jpg")
}

pub(super) async fn spa_items_handler(body: String) -> Response {
    json_response(StatusCode::OK, &spa_items(&body))
}

pub(super) async fn token_handler(tokens: Tokens, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    if request["client_secret"].as_str() != Some(CLIENT_SECRET) {
        return json_response(
            StatusCode::UNAUTHORIZED,
            &json!({ "error": "invalid_client" }),
        );
    }
    json_response(
        StatusCode::OK,
        &json!({ "access_token": tokens.issue(), "token_type": "Bearer", "expires_in": 3600 }),
    )
}

pub(super) async fn photos_handler(tokens: Tokens, headers: HeaderMap, uri: Uri) -> Response {
    if !tokens.authorized(&headers) {
        return json_response(
            StatusCode::UNAUTHORIZED,
            &json!({ "error": "a bearer token from /api/token is needed" }),
        );
    }
    let mut limit = DEFAULT_LIMIT;
    let mut before = PHOTOS + 1;
    for (name, value) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        let parsed = match name.as_ref() {
            "limit" => value
                .parse()
                .ok()
                .map(|n: u64| limit = n.clamp(1, MAX_LIMIT)),
            "before_id" => value.parse().ok().map(|id| before = id),
            "cursor" => cursor_id(&value).map(|id| before = id),
            _ => Some(()),
        };
        if parsed.is_none() {
            return json_response(
                StatusCode::BAD_REQUEST,
                &json!({ "error": format!("bad `{name}`") }),
            );
        }
    }
    json_response(StatusCode::OK, &photos_page(before, limit))
}

/// Up to `limit` photos with ids below `before`, newest first, and the cursor of the rest.
fn photos_page(before: u64, limit: u64) -> Value {
    let ids: Vec<u64> = (1..before.min(PHOTOS + 1))
        .rev()
        .take(limit as usize)
        .collect();
    let items: Vec<Value> = ids
        .iter()
        .map(|&id| {
            json!({
                "id": id,
                "title": format!("Photo {id}"),
                "user": { "name": PHOTOGRAPHERS[(id % 3) as usize] },
                "urls": { "full": photo_image_path(id) }
            })
        })
        .collect();
    let next = match ids.last() {
        Some(&last) if last > 1 => json!(URL_SAFE_NO_PAD.encode(format!("before:{last}"))),
        _ => Value::Null,
    };
    json!({ "data": { "items": items }, "next_cursor": next })
}

/// The id a cursor of [`photos_page`] continues before.
fn cursor_id(cursor: &str) -> Option<u64> {
    let text = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    std::str::from_utf8(&text)
        .ok()?
        .strip_prefix("before:")?
        .parse()
        .ok()
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feed_pages_through_every_photo_newest_first() {
        let mut seen = Vec::new();
        let mut before = PHOTOS + 1;
        loop {
            let page = photos_page(before, 10);
            let items = page["data"]["items"].as_array().unwrap();
            seen.extend(items.iter().map(|i| i["id"].as_u64().unwrap()));
            match page["next_cursor"].as_str() {
                Some(cursor) => before = cursor_id(cursor).unwrap(),
                None => break,
            }
        }
        assert_eq!(seen, (1..=PHOTOS).rev().collect::<Vec<_>>());
    }

    #[test]
    fn only_issued_tokens_are_accepted() {
        let tokens = Tokens::default();
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert!(!tokens.authorized(&with("Bearer demo-1-abc")));
        let token = tokens.issue();
        assert!(tokens.authorized(&with(&format!("Bearer {token}"))));
        assert!(!tokens.authorized(&with("Bearer demo-2-abc")));
        assert!(!tokens.authorized(&HeaderMap::new()));
    }

    #[test]
    fn the_app_pages_in_three_requests() {
        let first = spa_items("{\"cursor\":null}");
        assert_eq!(first["next_cursor"], "c2");
        let last = spa_items("{\"cursor\":\"c3\"}");
        assert_eq!(last["items"].as_array().unwrap().len(), 2);
        assert!(last["next_cursor"].is_null());
    }
}
