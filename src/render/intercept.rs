//! Replay in the browser: every request of a tab is paused in the Fetch domain (request stage,
//! all URLs) and fulfilled from the recording, so nothing reaches the network. Images, media
//! and fonts are still blocked by URL pattern first (`Network.setBlockedURLs`) and never get
//! here; those that do (extensionless URLs) are answered but not listed as unrecorded: fetching
//! image bytes is the download stage's business, not the page's.
//!
//! Live through a proxy with credentials, the Fetch domain answers the proxy's challenges
//! instead (a replay uses no proxy, so the two never meet).

use std::sync::Arc;

use base64::Engine;
use chromiumoxide::cdp::browser_protocol::fetch::{
    EnableParams, EventRequestPaused, FulfillRequestParams, HeaderEntry, RequestPattern,
    RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{self, ResourceType};
use chromiumoxide::error::CdpError;
use chromiumoxide::listeners::EventStream;
use chromiumoxide::{Binary, Page};
use futures_util::StreamExt;

use crate::proxy::ProxyCredentials;
use crate::replay::{OutgoingRequest, Replayer};
use chromiumoxide::auth::Credentials;

/// Answers a tab's requests from a recording while the tab lives.
pub(crate) struct Interception {
    task: tokio::task::JoinHandle<()>,
}

impl Interception {
    /// Pauses every request of `page` from now on and answers it from `replayer`.
    pub(crate) async fn start(page: &Page, replayer: Arc<Replayer>) -> Result<Self, CdpError> {
        // The listener before the domain: a request paused with nobody listening would hang.
        let paused = page.event_listener::<EventRequestPaused>().await?;
        let pattern = RequestPattern {
            url_pattern: Some("*".to_owned()),
            resource_type: None,
            request_stage: Some(RequestStage::Request),
        };
        page.execute(EnableParams {
            patterns: Some(vec![pattern]),
            handle_auth_requests: None,
        })
        .await?;
        let task = tokio::spawn(answer_all(page.clone(), replayer, paused));
        Ok(Self { task })
    }
}

impl Drop for Interception {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer_all(
    page: Page,
    replayer: Arc<Replayer>,
    mut paused: EventStream<EventRequestPaused>,
) {
    while let Some(event) = paused.next().await {
        let request = outgoing(&event.request);
        let listed = !matches!(
            event.resource_type,
            ResourceType::Image | ResourceType::Media | ResourceType::Font
        );
        let reply = if listed {
            replayer.answer(&request)
        } else {
            replayer.answer_unlisted(&request)
        };
        let mut params =
            FulfillRequestParams::new(event.request_id.clone(), i64::from(reply.status));
        params.response_headers = Some(
            reply
                .headers
                .iter()
                .map(|(name, value)| HeaderEntry {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect(),
        );
        params.body = Some(Binary::from(
            base64::engine::general_purpose::STANDARD.encode(&reply.body),
        ));
        // Each answer on its own task: a page's requests are not serialised on CDP round trips.
        let page = page.clone();
        tokio::spawn(async move {
            if let Err(e) = page.execute(params).await {
                tracing::debug!(error = %e, "a paused request could not be answered");
            }
        });
    }
}

/// Answers the proxy's authentication challenges of `page` with `credentials` from now on.
/// chromiumoxide's handler does it (Fetch with `handleAuthRequests`, paused requests continued
/// at once): a second listener would race it with a conflicting answer.
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
