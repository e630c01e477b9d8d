//! JSON capture: `fetch`/XHR responses whose URL matches a capture rule, with their bodies;
//! and, when a run is recorded, every document, script, stylesheet and `fetch`/XHR exchange of
//! the page for the recording (request headers and POST body, response status, headers, body).
//!
//! Network domain events (`requestWillBeSent`, `responseReceived`, `loadingFinished`,
//! `loadingFailed`) are read from listeners registered before navigation. chromiumoxide gives
//! one stream per event type and they are not ordered relative to each other, so the streams
//! are polled `biased` in protocol order and each request's state is tracked until it has both
//! its response and its end, whichever comes first. Bodies are taken with
//! `Network.getResponseBody` as soon as a request finishes (before a later navigation evicts
//! them).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent, EventResponseReceived,
    GetRequestPostDataParams, GetResponseBodyParams, RequestId, ResourceType,
};
use chromiumoxide::listeners::EventStream;
use futures_util::StreamExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::intercept::header_pairs;
use crate::page::CapturedJson;
use crate::replay::{OutgoingRequest, RecordedResponse, Recorder};

/// Capturing for one page; [`Capture::finish`] returns what was captured.
pub(crate) struct Capture {
    stop: Option<oneshot::Sender<Instant>>,
    task: tokio::task::JoinHandle<Captured>,
}

/// What a page's capture got: the responses read, in request order, how many matching
/// responses finished but whose bodies the browser no longer had, and how many were left
/// unread past [`MAX_CAPTURED_BYTES`].
#[derive(Default)]
pub(crate) struct Captured {
    pub json: Vec<CapturedJson>,
    pub lost: usize,
    pub unread: usize,
}

/// The JSON one page's `[[api]]` rules capture, in all (bodies counted unpacked, as a single
/// response's limit is): past it, answers are not read and the page is rendered in part. Parsed,
/// the worst JSON (arrays of small numbers) takes about 36 bytes a byte: about 1.1 GB.
pub(crate) const MAX_CAPTURED_BYTES: usize = 32 << 20;

struct Streams {
    sent: EventStream<EventRequestWillBeSent>,
    received: EventStream<EventResponseReceived>,
    finished: EventStream<EventLoadingFinished>,
    failed: EventStream<EventLoadingFailed>,
}

enum Event {
    Sent(std::sync::Arc<EventRequestWillBeSent>),
    Received(std::sync::Arc<EventResponseReceived>),
    Finished(std::sync::Arc<EventLoadingFinished>),
    Failed(std::sync::Arc<EventLoadingFailed>),
    /// A stream ended: the tab is gone.
    Closed,
}

impl Streams {
    async fn next(&mut self) -> Event {
        // Protocol order: a request is sent, answered, then finishes or fails.
        tokio::select! {
            biased;
            e = self.sent.next() => e.map_or(Event::Closed, Event::Sent),
            e = self.received.next() => e.map_or(Event::Closed, Event::Received),
            e = self.finished.next() => e.map_or(Event::Closed, Event::Finished),
            e = self.failed.next() => e.map_or(Event::Closed, Event::Failed),
        }
    }
}

/// A matching (or recorded) request on its way.
struct Pending {
    seq: usize,
    url: String,
    method: String,
    has_post_data: bool,
    status: Option<u16>,
    finished: bool,
    /// Its JSON body goes to the snapshot.
    capture: bool,
    /// The exchange goes to the recording.
    record: bool,
    request_headers: Vec<(String, String)>,
    response_headers: Vec<(String, String)>,
}

/// What the recording keeps of a page: what is needed to load it again.
fn is_recorded(kind: Option<&ResourceType>) -> bool {
    matches!(
        kind,
        Some(
            ResourceType::Document
                | ResourceType::Script
                | ResourceType::Stylesheet
                | ResourceType::Fetch
                | ResourceType::Xhr
        )
    )
}

impl Capture {
    /// Starts listening on `page`; call before navigating. `None` when there is nothing to
    /// capture or record.
    pub(crate) async fn start(
        page: &Page,
        rules: &[regex::Regex],
        sink: Option<UnboundedSender<CapturedJson>>,
        recorder: Option<Arc<Recorder>>,
    ) -> Result<Option<Self>, chromiumoxide::error::CdpError> {
        if rules.is_empty() && recorder.is_none() {
            return Ok(None);
        }
        let streams = Streams {
            sent: page.event_listener::<EventRequestWillBeSent>().await?,
            received: page.event_listener::<EventResponseReceived>().await?,
            finished: page.event_listener::<EventLoadingFinished>().await?,
            failed: page.event_listener::<EventLoadingFailed>().await?,
        };
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(run(
            page.clone(),
            rules.to_vec(),
            sink,
            recorder,
            streams,
            stopped,
        ));
        Ok(Some(Self {
            stop: Some(stop),
            task,
        }))
    }

    /// Stops capturing: events already delivered are handled, requests still in flight are
    /// awaited until `deadline`; returns what was captured.
    pub(crate) async fn finish(mut self, deadline: Instant) -> Captured {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(deadline);
        }
        (&mut self.task).await.unwrap_or_default()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    page: Page,
    rules: Vec<regex::Regex>,
    sink: Option<UnboundedSender<CapturedJson>>,
    recorder: Option<Arc<Recorder>>,
    mut streams: Streams,
    mut stopped: oneshot::Receiver<Instant>,
) -> Captured {
    let mut pending: HashMap<RequestId, Pending> = HashMap::new();
    let mut captured: Vec<(usize, CapturedJson)> = Vec::new();
    let mut lost = 0;
    let (mut kept_bytes, mut unread) = (0usize, 0usize);
    let mut seq = 0;
    let mut deadline: Option<Instant> = None;
    loop {
        let event = match deadline {
            None => tokio::select! {
                e = streams.next() => e,
                d = &mut stopped => {
                    deadline = Some(d.unwrap_or_else(|_| Instant::now()));
                    continue;
                }
            },
            Some(deadline) => {
                // Draining: take what is already delivered; wait only for requests in flight.
                let wait = if pending.is_empty() {
                    Duration::ZERO
                } else {
                    deadline.saturating_duration_since(Instant::now())
                };
                match tokio::time::timeout(wait, streams.next()).await {
                    Ok(e) => e,
                    Err(_) => break,
                }
            }
        };
        let done = match event {
            Event::Closed => break,
            Event::Sent(e) => {
                let is_api = matches!(e.r#type, Some(ResourceType::Fetch | ResourceType::Xhr));
                if let Some(p) = pending.get_mut(&e.request_id) {
                    // A redirect: the same request goes on to a new URL.
                    if let (true, Some(recorder), Some(hop)) =
                        (p.record, &recorder, &e.redirect_response)
                    {
                        recorder.record(
                            &outgoing(p, None),
                            &RecordedResponse {
                                status: u16::try_from(hop.status).unwrap_or(302),
                                headers: header_pairs(&hop.headers),
                                body: Vec::new(),
                            },
                        );
                    }
                    p.url = e.request.url.clone();
                    p.request_headers = header_pairs(&e.request.headers);
                } else {
                    let capture = is_api && rules.iter().any(|r| r.is_match(&e.request.url));
                    let record = recorder.is_some() && is_recorded(e.r#type.as_ref());
                    if capture || record {
                        seq += 1;
                        pending.insert(
                            e.request_id.clone(),
                            Pending {
                                seq,
                                url: e.request.url.clone(),
                                method: e.request.method.clone(),
                                has_post_data: e.request.has_post_data.unwrap_or(false),
                                status: None,
                                finished: false,
                                capture,
                                record,
                                request_headers: header_pairs(&e.request.headers),
                                response_headers: Vec::new(),
                            },
                        );
                    }
                }
                None
            }
            Event::Received(e) => pending.get_mut(&e.request_id).and_then(|p| {
                p.status = u16::try_from(e.response.status).ok();
                p.response_headers = header_pairs(&e.response.headers);
                if !p
                    .response_headers
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
                {
                    p.response_headers
                        .push(("content-type".into(), e.response.mime_type.clone()));
                }
                p.finished.then(|| e.request_id.clone())
            }),
            Event::Finished(e) => pending.get_mut(&e.request_id).and_then(|p| {
                p.finished = true;
                p.status.is_some().then(|| e.request_id.clone())
            }),
            Event::Failed(e) => {
                // A failure of the page's own (a refused connection, an unknown host) is kept
                // as one, so a replay fails it again instead of missing it; a request the page
                // cancelled was never answered either way.
                if let Some(request) = pending.remove(&e.request_id)
                    && let (true, Some(recorder)) = (request.record, &recorder)
                    && !e.canceled.unwrap_or(false)
                {
                    recorder.record(
                        &outgoing(&request, None),
                        &RecordedResponse::failed(e.error_text.clone()),
                    );
                }
                None
            }
        };
        let Some((id, request)) = done.and_then(|id| pending.remove(&id).map(|r| (id, r))) else {
            continue;
        };
        let Some((body, request_body)) = read_exchange(&page, id, &request).await else {
            lost += usize::from(request.capture);
            continue;
        };
        if let (true, Some(recorder)) = (request.record, &recorder) {
            recorder.record(
                &outgoing(
                    &request,
                    request_body.as_ref().map(|b| b.as_bytes().to_vec()),
                ),
                &RecordedResponse {
                    status: request.status.unwrap_or(0),
                    headers: request.response_headers.clone(),
                    body: body.clone(),
                },
            );
        }
        if expects_body(&request) && body.is_empty() {
            tracing::warn!(url = %request.url, "the browser gave no body for a captured response: its images are missing from the page");
            lost += 1;
            continue;
        }
        if request.capture && kept_bytes.saturating_add(body.len()) > MAX_CAPTURED_BYTES {
            if unread == 0 {
                tracing::warn!(url = %request.url, "the page's captured JSON passed {} MiB: the answers after it are not read", MAX_CAPTURED_BYTES >> 20);
            }
            unread += 1;
            continue;
        }
        if request.capture
            && let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body)
        {
            kept_bytes += body.len();
            let json = CapturedJson {
                url: request.url.clone(),
                method: request.method.clone(),
                request_body,
                status: request.status.unwrap_or(0),
                body: json,
            };
            if let Some(sink) = &sink {
                // A caller that stopped listening only wants the snapshot.
                let _ = sink.send(json.clone());
            }
            captured.push((request.seq, json));
        }
    }
    captured.sort_by_key(|(seq, _)| *seq);
    Captured {
        json: captured.into_iter().map(|(_, json)| json).collect(),
        lost,
        unread,
    }
}

/// How many times a finished request's body is asked for: the waits between double from
/// 50 ms, 1.55 s in all (a loaded machine can take that long to hand over a fulfilled body).
const BODY_TRIES: u32 = 6;

/// The response body, and the request body of a POST.
async fn read_exchange(
    page: &Page,
    id: RequestId,
    request: &Pending,
) -> Option<(Vec<u8>, Option<String>)> {
    // Chromium now and then answers "No resource with given identifier found" for a request
    // that has finished; asked again a moment later, it has the body.
    let mut tries = 0;
    let reply = loop {
        tries += 1;
        match page.execute(GetResponseBodyParams::new(id.clone())).await {
            // A captured answer that has a body but came with none is one the browser has not
            // handed over yet.
            Ok(reply)
                if expects_body(request) && reply.result.body.is_empty() && tries < BODY_TRIES =>
            {
                tracing::debug!(url = %request.url, "empty response body, asking again");
                tokio::time::sleep(Duration::from_millis(50u64 << (tries - 1))).await;
            }
            Ok(reply) => break reply,
            Err(e) if tries < BODY_TRIES => {
                tracing::debug!(url = %request.url, error = %e, "response body unavailable, asking again");
                tokio::time::sleep(Duration::from_millis(50u64 << (tries - 1))).await;
            }
            Err(e) => {
                if request.capture {
                    tracing::warn!(url = %request.url, error = %e, "the browser lost a captured response's body: its images are missing from the page");
                } else {
                    tracing::debug!(url = %request.url, error = %e, "response body unavailable");
                }
                return None;
            }
        }
    };
    let body = if reply.result.base64_encoded {
        base64::engine::general_purpose::STANDARD
            .decode(&reply.result.body)
            .ok()?
    } else {
        reply.result.body.clone().into_bytes()
    };
    let request_body = if request.has_post_data {
        // `Request.postData` is gone from the protocol version chromiumoxide 0.9.1 speaks.
        page.execute(GetRequestPostDataParams::new(id))
            .await
            .ok()
            .map(|r| r.result.post_data.clone())
    } else {
        None
    };
    Some((body, request_body))
}

/// Whether `request` is captured and its answer has a body: a 200 whose `content-length`, if
/// it says one, is not 0 (a 204, or an empty answer the server announced, has none).
fn expects_body(request: &Pending) -> bool {
    request.capture
        && request.status == Some(200)
        && !request
            .response_headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("content-length") && v.trim() == "0")
}

/// The request of `pending` for the recording.
fn outgoing(pending: &Pending, body: Option<Vec<u8>>) -> OutgoingRequest {
    OutgoingRequest {
        method: pending.method.clone(),
        url: url::Url::parse(&pending.url)
            .unwrap_or_else(|_| url::Url::parse("about:blank").expect("a valid URL")),
        headers: pending
            .request_headers
            .iter()
            .map(|(n, v)| (n.clone(), v.clone(), false))
            .collect(),
        body,
    }
}
