//! Loading a page into a tab: the navigation, then the wait for the main document's `load` (or
//! network idle), with frames kept from failing the page.
//!
//! chromiumoxide's own `goto` waits until every frame of the page has fired `load`, child frames
//! included: a lazy `<iframe>` below the fold never loads until it is scrolled to, so such a page
//! failed after the protocol's request timeout with nothing taken. Here the navigation is started
//! by the page itself (`location.href`, as a link would), and only the main frame is waited for.
//! A frame that holds up the main document's `load` (a frame whose server never answers) is
//! given [`FRAME_PATIENCE`] once the document itself has arrived: when the only requests still in
//! flight are those of child frames, the page goes on without them and the frames are named in
//! the log. A slow request of the main frame itself is waited for, up to the page's deadline.

use std::collections::HashMap;
use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent, EventResponseReceived,
    RequestId, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    EventFrameNavigated, EventLifecycleEvent, FrameId, GetFrameTreeParams,
};
use chromiumoxide::error::CdpError;
use chromiumoxide::listeners::EventStream;
use futures_util::{FutureExt, Stream, StreamExt};
use tokio::time::Instant;

use super::RenderError;

/// How long a page whose document has arrived waits for frames that hold up its `load`.
pub(crate) const FRAME_PATIENCE: Duration = Duration::from_secs(10);

/// Documents the main frame may commit by itself (script redirects, reloads) before the page
/// counts as restless: one that reloads itself without end is taken as it is, once.
const RESTLESS_COMMITS: u32 = 10;

/// How a navigation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loaded {
    /// The main document reached the event waited for (or only frames held it up).
    Ready,
    /// The main frame kept navigating by itself (a page that reloads without end): there is
    /// nothing steadier to wait for.
    Restless,
    /// The page's deadline came first.
    OutOfTime,
}

/// The lifecycle event a page is waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// The `load` event of the main document.
    Load,
    /// No request of the main frame for 500 ms, after `load`.
    NetworkIdle,
}

impl Until {
    fn event(self) -> &'static str {
        match self {
            Until::Load => "load",
            Until::NetworkIdle => "networkIdle",
        }
    }
}

/// One event of the page, as the wait reads them.
enum Event {
    Navigated(std::sync::Arc<EventFrameNavigated>),
    Lifecycle(std::sync::Arc<EventLifecycleEvent>),
    Request(std::sync::Arc<EventRequestWillBeSent>),
    Finished(RequestId),
    Failed(std::sync::Arc<EventLoadingFailed>),
}

/// The listeners of one navigation, registered before it starts (or the first events are lost).
pub(crate) struct Navigation {
    events: std::pin::Pin<Box<dyn Stream<Item = Event> + Send>>,
    main: FrameId,
}

/// A request in flight: its frame, URL and kind.
struct InFlight {
    frame: Option<FrameId>,
    url: String,
    document: bool,
}

impl Navigation {
    /// Listens to `page` for the navigation about to start.
    pub(crate) async fn listen(page: &Page) -> Result<Self, CdpError> {
        let tree = page.execute(GetFrameTreeParams::default()).await?;
        let main = tree.result.frame_tree.frame.id.clone();
        let navigated = page.event_listener::<EventFrameNavigated>().await?;
        let lifecycle = page.event_listener::<EventLifecycleEvent>().await?;
        let requests = page.event_listener::<EventRequestWillBeSent>().await?;
        let finished = page.event_listener::<EventLoadingFinished>().await?;
        let failed = page.event_listener::<EventLoadingFailed>().await?;
        let events = futures_util::stream::select_all([
            navigated.map(Event::Navigated).boxed(),
            lifecycle.map(Event::Lifecycle).boxed(),
            requests.map(Event::Request).boxed(),
            finished
                .map(|e| Event::Finished(e.request_id.clone()))
                .boxed(),
            failed.map(Event::Failed).boxed(),
        ]);
        Ok(Self {
            events: Box::pin(events),
            main,
        })
    }

    /// The page's main frame.
    pub(crate) fn main_frame(&self) -> FrameId {
        self.main.clone()
    }

    /// Starts the navigation to `url` and waits for the main document's `until` event, bounded
    /// by `deadline`; a document the page itself navigates to (a script redirect) is waited for
    /// in its place.
    pub(crate) async fn go(
        mut self,
        page: &Page,
        url: &str,
        until: Until,
        deadline: Instant,
    ) -> Result<Loaded, RenderError> {
        let script = format!("location.href = {}", serde_json::Value::from(url));
        page.evaluate_expression(script)
            .await
            .map_err(|source| RenderError::Cdp {
                url: url.to_owned(),
                source,
            })?;
        let mut loader = None;
        // When to look whether only frames hold the page up: FRAME_PATIENCE after the document
        // arrived, then every second while the main frame still has requests in flight.
        let mut patience: Option<Instant> = None;
        let mut loaded = false;
        let mut in_flight: HashMap<RequestId, InFlight> = HashMap::new();
        // Requests whose end was heard before their start (the event streams are merged, not
        // ordered), with their failure if they failed.
        let mut ended: HashMap<RequestId, Option<std::sync::Arc<EventLoadingFailed>>> =
            HashMap::new();
        let mut document_error: Option<String> = None;
        let mut commits = 0;
        loop {
            let until_at = patience.unwrap_or(deadline).min(deadline);
            let event = match tokio::time::timeout_at(until_at, self.events.next()).await {
                Ok(Some(event)) => event,
                Ok(None) => {
                    return Err(RenderError::TabCrashed {
                        url: url.to_owned(),
                    });
                }
                Err(_) if Instant::now() >= deadline => return Ok(Loaded::OutOfTime),
                Err(_) => {
                    // Only frames hold the page up: go on without them.
                    let main_busy = in_flight
                        .values()
                        .any(|r| r.frame.as_ref() == Some(&self.main));
                    if main_busy {
                        patience = Some(Instant::now() + Duration::from_secs(1));
                        continue;
                    }
                    let frames: Vec<&str> = in_flight
                        .values()
                        .filter(|r| r.document)
                        .map(|r| r.url.as_str())
                        .collect();
                    tracing::warn!(
                        url,
                        frames = ?frames,
                        waited = ?FRAME_PATIENCE,
                        loaded,
                        "frames of the page did not finish loading; going on without them"
                    );
                    return Ok(Loaded::Ready);
                }
            };
            match event {
                Event::Navigated(e) if e.frame.id == self.main && e.frame.parent_id.is_none() => {
                    if e.frame.unreachable_url.is_some() {
                        return Err(RenderError::Navigation {
                            url: url.to_owned(),
                            reason: document_error
                                .take()
                                .unwrap_or_else(|| "the page could not be reached".into()),
                        });
                    }
                    loader = Some(e.frame.loader_id.clone());
                    loaded = false;
                    commits += 1;
                    if commits > RESTLESS_COMMITS {
                        tracing::warn!(
                            url,
                            commits,
                            "the page keeps navigating by itself; taking it as it is"
                        );
                        return Ok(Loaded::Restless);
                    }
                }
                Event::Lifecycle(e) if e.frame_id == self.main => {
                    if Some(&e.loader_id) != loader.as_ref() {
                        continue;
                    }
                    match e.name.as_str() {
                        "DOMContentLoaded" => patience = Some(Instant::now() + FRAME_PATIENCE),
                        "load" => loaded = true,
                        _ => {}
                    }
                    if e.name == until.event() {
                        return Ok(Loaded::Ready);
                    }
                }
                Event::Request(e) => {
                    let request = InFlight {
                        frame: e.frame_id.clone(),
                        url: e.request.url.clone(),
                        document: e.r#type == Some(ResourceType::Document),
                    };
                    match ended.remove(&e.request_id) {
                        None => {
                            in_flight.insert(e.request_id.clone(), request);
                        }
                        Some(None) => {}
                        Some(Some(failed)) => {
                            self.on_failure(
                                Some(request),
                                &failed,
                                loader.is_some(),
                                url,
                                &mut document_error,
                            )?;
                        }
                    }
                }
                // A known request is taken out by the guard itself.
                Event::Finished(id) if in_flight.remove(&id).is_none() => {
                    ended.insert(id, None);
                }
                Event::Failed(e) => match in_flight.remove(&e.request_id) {
                    None => {
                        ended.insert(e.request_id.clone(), Some(e));
                    }
                    request => {
                        self.on_failure(request, &e, loader.is_some(), url, &mut document_error)?;
                    }
                },
                _ => {}
            }
        }
    }

    /// A request of the page failed: the main document's ends the navigation when it never
    /// commits (a download, a refused connection without an error page); one that commits
    /// an error page is reported then, with this reason. A frame's is logged.
    fn on_failure(
        &self,
        request: Option<InFlight>,
        e: &EventLoadingFailed,
        committed: bool,
        url: &str,
        document_error: &mut Option<String>,
    ) -> Result<(), RenderError> {
        let main_document = request
            .as_ref()
            .is_some_and(|r| r.document && r.frame.as_ref() == Some(&self.main));
        if main_document && !committed {
            *document_error = Some(e.error_text.clone());
            if e.error_text.contains("ERR_ABORTED") {
                return Err(RenderError::Navigation {
                    url: url.to_owned(),
                    reason: e.error_text.clone(),
                });
            }
        } else if let Some(r) = request.filter(|r| r.document) {
            tracing::warn!(url, frame = %r.url, error = %e.error_text, "a frame of the page failed to load");
        }
        Ok(())
    }
}

/// The responses to the main frame's document requests of one navigation, heard on a stream of
/// their own and read once the page is taken, so the wait for the page reads only the events
/// it waits on.
pub(crate) struct DocumentResponses {
    responses: EventStream<EventResponseReceived>,
    main: FrameId,
}

impl DocumentResponses {
    /// Listens to `page` for the responses to the navigation about to start in its frame
    /// `main` (see [`Navigation::main_frame`]).
    pub(crate) async fn listen(page: &Page, main: FrameId) -> Result<Self, CdpError> {
        Ok(Self {
            responses: page.event_listener::<EventResponseReceived>().await?,
            main,
        })
    }

    /// The `X-Robots-Tag` values of the main document's response (the last one's, after
    /// redirects and reloads), as a page fetched over plain HTTP is read by its own response
    /// headers.
    pub(crate) fn robots_tags(mut self) -> Vec<String> {
        let mut robots_tags = Vec::new();
        while let Some(Some(e)) = self.responses.next().now_or_never() {
            if e.r#type == ResourceType::Document && e.frame_id.as_ref() == Some(&self.main) {
                robots_tags = header_values(e.response.headers.inner(), "x-robots-tag");
            }
        }
        robots_tags
    }
}

/// The values of the header `name` (matched case-insensitively) in the headers object of a
/// CDP response, where Chromium joins repeated headers with line breaks.
fn header_values(headers: &serde_json::Value, name: &str) -> Vec<String> {
    let Some(headers) = headers.as_object() else {
        return Vec::new();
    };
    headers
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case(name))
        .filter_map(|(_, value)| value.as_str())
        .flat_map(|value| value.split('\n'))
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_headers_joined_by_chromium_are_read_one_by_one() {
        let headers = serde_json::json!({
            "Content-Type": "text/html",
            "X-Robots-Tag": "noindex\notherbot: noai",
        });
        assert_eq!(
            header_values(&headers, "x-robots-tag"),
            ["noindex", "otherbot: noai"]
        );
        assert!(header_values(&headers, "link").is_empty());
    }
}
