//! The Fetch-domain interceptor of a tab: one per tab, for everything that must answer a request
//! before it reaches the network.
//!
//! - **Blocked images** (by resource type, so `/photo?id=1`, `/img/2/` and `/185x278` are caught
//!   as well as `.jpg`) are answered with a 1x1 GIF: the page sees its images load, so `onerror`
//!   fallbacks never fire (no retry loops, no fallback replacing the real `src`), network idle
//!   comes, and layout scripts waiting for images (masonry, imagesLoaded) go on. The icons the
//!   browser fetches itself (`<link rel="icon">`, typed `Other`) get the same. Blocked media
//!   and fonts fail as blocked by the client. Media and fonts with a known file extension are
//!   blocked by URL pattern first (`Network.setBlockedURLs`, no round trip per request): only
//!   the others reach this stage. Images never are: a URL-blocked image fires `onerror`.
//! - **Replay**: every request is paused and fulfilled from the recording, so nothing reaches the
//!   network; a request that failed while recording fails again (`net::ERR_FAILED`). Images,
//!   media and fonts get their recorded answer when there is one, else the
//!   stub or failure above, and are not listed as unrecorded: fetching image bytes is the
//!   download stage's business, not the page's. A header value with a line break (several
//!   headers of one name, joined) is split into one header per line: CDP refuses a value with a
//!   newline, and the request would hang until the page timed out.
//!
//! - **A proxy with credentials**: its challenges come as `Fetch.authRequired`, which only
//!   requests paused by the Fetch domain get, so every request of the tab is paused: blocked
//!   ones get their stub or failure as above, the others go on. chromiumoxide's handler answers
//!   the challenges with the credentials; its browser connection is made with request
//!   interception on ([`answers_every_request`]), so the handler leaves the paused requests to
//!   this interceptor instead of continuing them itself. A replay uses no proxy, so the two
//!   never meet.

use std::sync::Arc;

use base64::Engine;
use chromiumoxide::cdp::browser_protocol::fetch::{
    EnableParams, EventRequestPaused, FailRequestParams, FulfillRequestParams, HeaderEntry,
    RequestPattern, RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{self, ErrorReason, ResourceType};
use chromiumoxide::error::CdpError;
use chromiumoxide::listeners::EventStream;
use chromiumoxide::{Binary, Page};
use futures_util::StreamExt;

use super::{Blocking, BrowserSettings};
use crate::proxy::{ProxyCredentials, ProxyEndpoint};
use crate::replay::{Network, OutgoingRequest, RecordedResponse, Replayer};
use chromiumoxide::auth::Credentials;

/// The smallest valid GIF: one transparent pixel (43 bytes). Every image decoder takes it.
pub(crate) const STUB_GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// What the interceptor does with a tab's requests.
#[derive(Clone)]
pub(crate) struct Interceptor {
    /// Replaying: every request is answered from this recording.
    pub(crate) replayer: Option<Arc<Replayer>>,
    pub(crate) block: Blocking,
    /// Through a proxy with credentials: every request is paused (the proxy's challenges come
    /// only for those), and the challenges are handed to chromiumoxide's handler.
    pub(crate) proxy_login: bool,
}

/// The credentials the tabs of a browser process going through `proxy` answer its challenges
/// with: none when replaying (nothing reaches the network).
pub(crate) fn proxy_credentials<'a>(
    settings: &BrowserSettings,
    proxy: Option<&'a ProxyEndpoint>,
) -> Option<&'a ProxyCredentials> {
    match &settings.network {
        Network::Replay(_) => None,
        Network::Live | Network::Record(_) => proxy.and_then(ProxyEndpoint::credentials),
    }
}

/// Whether the tabs of a browser process going through `proxy` answer every paused request
/// themselves: then chromiumoxide's handler, which answers the proxy's challenges, must not
/// continue them on its own (its `request_intercept`).
pub(crate) fn answers_every_request(
    settings: &BrowserSettings,
    proxy: Option<&ProxyEndpoint>,
) -> bool {
    proxy_credentials(settings, proxy).is_some()
}

/// The answer to one paused request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Fulfilled with this response.
    Respond(RecordedResponse),
    /// Failed as blocked by the client.
    Block,
    /// Failed as on a network error: the request failed while recording.
    Fail,
}

impl Interceptor {
    /// Whether a tab needs the Fetch domain at all.
    pub(crate) fn is_needed(&self) -> bool {
        self.replayer.is_some() || self.proxy_login || !self.resource_types().is_empty()
    }

    /// Resource types answered here instead of loaded.
    fn resource_types(&self) -> Vec<ResourceType> {
        let mut types = Vec::new();
        if self.block.images {
            types.push(ResourceType::Image);
        }
        if self.block.media {
            types.push(ResourceType::Media);
        }
        if self.block.fonts {
            types.push(ResourceType::Font);
        }
        types
    }

    /// The request-stage patterns to pause: every request when replaying or logging in to a
    /// proxy, else the blocked resource types, and the icons the browser fetches itself (`<link rel="icon">`), which
    /// come as `Other` with an image extension.
    fn patterns(&self) -> Vec<RequestPattern> {
        let pattern = |url: &str, resource_type| RequestPattern {
            url_pattern: Some(url.to_owned()),
            resource_type,
            request_stage: Some(RequestStage::Request),
        };
        if self.replayer.is_some() || self.proxy_login {
            return vec![pattern("*", None)];
        }
        let mut patterns: Vec<RequestPattern> = self
            .resource_types()
            .into_iter()
            .map(|t| pattern("*", Some(t)))
            .collect();
        if self.block.images {
            for ext in Blocking::IMAGE_EXTENSIONS {
                for url in [format!("*.{ext}"), format!("*.{ext}?*")] {
                    patterns.push(pattern(&url, Some(ResourceType::Other)));
                }
            }
        }
        patterns
    }

    /// The answer to a paused request of `kind`.
    pub(crate) fn answer(&self, kind: &ResourceType, request: &OutgoingRequest) -> Option<Answer> {
        // The browser's own icon requests are images the page never showed.
        let icon = *kind == ResourceType::Other && is_icon(&request.url);
        let kind = if icon && self.block.images {
            &ResourceType::Image
        } else {
            kind
        };
        let blocked = self.resource_types().contains(kind);
        let Some(replayer) = &self.replayer else {
            return blocked.then(|| stub(kind));
        };
        if !icon
            && !matches!(
                kind,
                ResourceType::Image | ResourceType::Media | ResourceType::Font
            )
        {
            let recorded = replayer.answer(request);
            return Some(match recorded.failure() {
                Some(_) => Answer::Fail,
                None => Answer::Respond(recorded),
            });
        }
        let recorded = replayer.answer_unlisted(request);
        if (200..300).contains(&recorded.status) && !recorded.body.is_empty() {
            return Some(Answer::Respond(recorded));
        }
        Some(stub(kind))
    }

    /// Pauses the requests of `page` this interceptor answers, from now on, until dropped.
    pub(crate) async fn start(self, page: &Page) -> Result<Interception, CdpError> {
        // The listener before the domain: a request paused with nobody listening would hang.
        let paused = page.event_listener::<EventRequestPaused>().await?;
        page.execute(EnableParams {
            patterns: Some(self.patterns()),
            handle_auth_requests: Some(self.proxy_login),
        })
        .await?;
        let task = tokio::spawn(answer_all(page.clone(), self, paused));
        Ok(Interception { task })
    }
}

/// `/favicon.ico`, or a path with an image extension.
fn is_icon(url: &url::Url) -> bool {
    let path = url.path().to_ascii_lowercase();
    path == "/favicon.ico"
        || path
            .rsplit_once('.')
            .is_some_and(|(_, ext)| Blocking::IMAGE_EXTENSIONS.contains(&ext))
}

/// A blocked request's stand-in: an image gets [`STUB_GIF`]; media and fonts fail.
fn stub(kind: &ResourceType) -> Answer {
    match kind {
        ResourceType::Image => Answer::Respond(RecordedResponse {
            status: 200,
            headers: vec![
                ("content-type".into(), "image/gif".into()),
                ("cache-control".into(), "no-store".into()),
            ],
            body: STUB_GIF.to_vec(),
        }),
        _ => Answer::Block,
    }
}

/// Answers a tab's paused requests while the tab lives.
pub(crate) struct Interception {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Interception {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer_all(
    page: Page,
    interceptor: Interceptor,
    mut paused: EventStream<EventRequestPaused>,
) {
    while let Some(event) = paused.next().await {
        let request = outgoing(&event.request);
        let id = event.request_id.clone();
        let page = page.clone();
        // A request paused by a pattern this interceptor did not set (none today) goes on.
        let answer = interceptor.answer(&event.resource_type, &request);
        // Each answer on its own task: a page's requests are not serialised on CDP round trips.
        tokio::spawn(async move {
            let sent = match answer {
                Some(Answer::Respond(reply)) => page.execute(fulfil(id, &reply)).await.map(|_| ()),
                Some(Answer::Block) => page
                    .execute(FailRequestParams::new(id, ErrorReason::BlockedByClient))
                    .await
                    .map(|_| ()),
                Some(Answer::Fail) => page
                    .execute(FailRequestParams::new(id, ErrorReason::Failed))
                    .await
                    .map(|_| ()),
                None => page
                    .execute(
                        chromiumoxide::cdp::browser_protocol::fetch::ContinueRequestParams::new(id),
                    )
                    .await
                    .map(|_| ()),
            };
            if let Err(e) = sent {
                tracing::debug!(error = %e, "a paused request could not be answered");
            }
        });
    }
}

/// `Fetch.fulfillRequest` with `reply`.
fn fulfil(
    id: chromiumoxide::cdp::browser_protocol::fetch::RequestId,
    reply: &RecordedResponse,
) -> FulfillRequestParams {
    let mut params = FulfillRequestParams::new(id, i64::from(reply.status));
    params.response_headers = Some(header_entries(&reply.headers));
    params.body = Some(Binary::from(
        base64::engine::general_purpose::STANDARD.encode(&reply.body),
    ));
    params
}

/// Headers as CDP takes them: a value with line breaks (HAR files join repeated headers such as
/// `Set-Cookie` with `\n`) becomes one header per non-empty line, each line trimmed.
pub(crate) fn header_entries(headers: &[(String, String)]) -> Vec<HeaderEntry> {
    headers
        .iter()
        .flat_map(|(name, value)| {
            value
                .split(['\r', '\n'])
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .map(move |line| HeaderEntry {
                    name: name.clone(),
                    value: line.to_owned(),
                })
        })
        .collect()
}

/// Answers the proxy's authentication challenges of `page` with `credentials` from now on.
/// chromiumoxide's handler does it (it answers every `Fetch.authRequired` of the tab, so a
/// second listener would race it with a conflicting answer); the paused requests are this
/// interceptor's, as the handler was told with [`answers_every_request`].
pub(crate) async fn answer_proxy_challenges(
    page: &Page,
    credentials: &ProxyCredentials,
) -> Result<(), CdpError> {
    page.authenticate(Credentials {
        username: credentials.username.expose().clone(),
        password: credentials.password.expose().clone(),
    })
    .await
}

/// The paused request as the replayer matches it: method, URL, headers, body.
pub(crate) fn outgoing(request: &network::Request) -> OutgoingRequest {
    let headers = header_pairs(&request.headers)
        .into_iter()
        .map(|(name, value)| (name, value, false))
        .collect();
    let body = request.post_data_entries.as_ref().map(|entries| {
        let mut body = Vec::new();
        for bytes in entries.iter().filter_map(|e| e.bytes.as_ref()) {
            let text: &str = bytes.as_ref();
            if let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(text) {
                body.extend_from_slice(&decoded);
            }
        }
        body
    });
    OutgoingRequest {
        method: request.method.clone(),
        url: url::Url::parse(&request.url)
            .unwrap_or_else(|_| url::Url::parse("about:blank").expect("a valid URL")),
        headers,
        body,
    }
}

/// CDP's header object as name/value pairs.
pub(crate) fn header_pairs(headers: &network::Headers) -> Vec<(String, String)> {
    headers
        .inner()
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(name, value)| {
                    let value = match value {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (name.clone(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(url: &str) -> OutgoingRequest {
        OutgoingRequest {
            method: "GET".into(),
            url: url::Url::parse(url).unwrap(),
            headers: Vec::new(),
            body: None,
        }
    }

    #[test]
    fn blocked_images_of_any_url_get_a_one_pixel_gif_and_media_fail() {
        let live = Interceptor {
            replayer: None,
            block: Blocking::default(),
            proxy_login: false,
        };
        for url in [
            "https://h/photo?id=1",
            "https://h/img/2/",
            "https://h/185x278",
        ] {
            let Some(Answer::Respond(reply)) = live.answer(&ResourceType::Image, &get(url)) else {
                panic!("{url} is not stubbed");
            };
            assert_eq!((reply.status, reply.body.as_slice()), (200, STUB_GIF));
            assert_eq!(reply.header("content-type"), Some("image/gif"));
        }
        assert!(matches!(
            live.answer(&ResourceType::Media, &get("https://h/v")),
            Some(Answer::Block)
        ));
        assert!(
            live.answer(&ResourceType::Script, &get("https://h/a.js"))
                .is_none()
        );
        assert!(
            matches!(
                live.answer(
                    &ResourceType::Other,
                    &get("https://h/img/favicon-32x32.png")
                ),
                Some(Answer::Respond(_))
            ),
            "the browser's own icon request is stubbed too"
        );
    }

    #[test]
    fn the_stub_is_a_valid_one_pixel_gif() {
        let size = imagesize::blob_size(STUB_GIF).unwrap();
        assert_eq!((size.width, size.height), (1, 1));
    }

    #[test]
    fn a_header_with_line_breaks_becomes_one_header_per_line() {
        let entries = header_entries(&[
            ("set-cookie".into(), "a=1\nb=2\r\n".into()),
            ("content-type".into(), "text/html".into()),
        ]);
        let pairs: Vec<(&str, &str)> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("set-cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("content-type", "text/html")
            ]
        );
    }
}
