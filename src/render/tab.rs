//! One page rendered on one tab: navigate, wait, act, snapshot. The pool decides which tab and
//! what to do when this fails.

use std::time::Duration;

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::browser::{
    SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::emulation::SetFocusEmulationEnabledParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::inspector::{
    EnableParams as InspectorEnable, EventTargetCrashed,
};
use chromiumoxide::cdp::browser_protocol::network::{
    BlockPattern, CookieParam, Headers, SetBlockedUrLsParams, SetCookiesParams,
    SetExtraHttpHeadersParams, SetUserAgentOverrideParams, TimeSinceEpoch,
};
use chromiumoxide::cdp::browser_protocol::page::{
    AddScriptToEvaluateOnNewDocumentParams, CaptureScreenshotFormat, CaptureScreenshotParams,
    EventJavascriptDialogOpening, GetLayoutMetricsParams, HandleJavaScriptDialogParams, Viewport,
};
use chromiumoxide::cdp::browser_protocol::target::{CreateTargetParams, GetTargetInfoParams};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::error::CdpError;
use chromiumoxide::{Browser, Page};
use futures_util::StreamExt;
use serde_json::json;
use tokio::time::Instant;

use std::sync::Arc;

use super::capture::{Capture, Captured};
use super::intercept::{Interception, Interceptor};
use super::navigate::{DocumentResponses, Loaded, Navigation, Until};
use super::{Action, Blocking, BrowserSettings, Dismiss, RenderError, RenderRequest, Wait};
use crate::net::session::cookies::FileCookie;
use crate::net::session::storage_state::local_storage_script;
use crate::page::PageSnapshot;
use crate::proxy::ProxyEndpoint;
use crate::replay::{Network, Recorder};
use crate::wall::is_sign_in_url;

const RECORD_JS: &str = include_str!("js/record.js");

/// The page-side scripts, each with what it shares with the others put in place: `__PRELUDE__`
/// (prelude.js: shadow-root selectors, the content measure, the settle wait), `__DEEP__` alone
/// in the snapshot.
struct Scripts {
    scroll: String,
    click: String,
    /// After a click: the settle wait, then the requests the click started, then the page's
    /// content, for the click loop to tell new content from a slide that came back.
    settled: String,
    wait_selector: String,
    snapshot: String,
    /// On a refresh, before the actions: the images the job knows on the page.
    known: String,
    /// After a click on a refresh: whether enough clicks in a row brought only known images.
    known_round: String,
}

static SCRIPTS: std::sync::LazyLock<Scripts> = std::sync::LazyLock::new(|| {
    let deep = include_str!("js/deep.js");
    let prelude = include_str!("js/prelude.js")
        .replace("__DEEP__", deep)
        .replace("__SETTLE__", include_str!("js/settle.js"));
    let with_prelude = |script: &str| script.replace("__PRELUDE__", &prelude);
    Scripts {
        scroll: with_prelude(include_str!("js/scroll.js")),
        click: with_prelude(include_str!("js/click.js")),
        settled: with_prelude(
            "async ({ base, grow, maxMs, quietMs, since, settleMs, endMs }) => { __PRELUDE__
  const settled = await settle({ base, grow, maxMs, quietMs });
  if (busy(since, quietMs)) await answered({ since, quietMs, settleMs, end: Date.now() + endMs });
  return { settled, seen: seen(), elements: elements() };
}",
        ),
        wait_selector: with_prelude(include_str!("js/wait_selector.js")),
        snapshot: include_str!("js/snapshot.js").replace("__DEEP__", deep),
        known: include_str!("js/known.js").to_owned(),
        known_round: with_prelude("() => { __PRELUDE__\n  return knownRound();\n}"),
    }
});

/// Time given, past the page's deadline, to snapshot what was rendered by then.
pub(crate) const SNAPSHOT_GRACE: Duration = Duration::from_secs(5);

/// A tab of the pool.
pub(crate) struct Tab {
    pub(crate) page: Page,
    /// Pages rendered on it so far.
    pub(crate) pages: u32,
    /// The browser launch it belongs to; a tab of an earlier browser is dead.
    pub(crate) generation: u64,
    /// Blocked resources and, replaying, every request of the tab are answered here.
    _interception: Option<Interception>,
}

impl Tab {
    /// A new blank tab with the pool's blocking, user agent and headers, answering the
    /// challenges of `proxy` (its browser process's) with its credentials.
    pub(crate) async fn open(
        browser: &Browser,
        settings: &BrowserSettings,
        proxy: Option<&ProxyEndpoint>,
        generation: u64,
    ) -> Result<Self, CdpError> {
        // A window of its own: Chromium gives animation frames (and so IntersectionObserver
        // callbacks, which lazy galleries and infinite scroll depend on) to the tab in front of
        // each window only. Tabs sharing one window starved beside each other (2-5 frames in
        // 1.5 s against ~90), focus emulation and the background flags notwithstanding.
        let mut target = CreateTargetParams::new("about:blank");
        target.new_window = Some(true);
        target.background = Some(false);
        let page = browser.new_page(target).await?;
        deny_downloads(browser, &page).await?;
        // Inspector.targetCrashed tells a crashed renderer from a slow one.
        page.execute(InspectorEnable::default()).await?;
        answer_dialogs(&page).await?;
        // Every tab of the pool also reports itself focused (`document.hasFocus()`), as the
        // page a person is looking at does.
        page.execute(SetFocusEmulationEnabledParams::new(true))
            .await?;
        // In every document before its own scripts: the page's requests in flight, and every
        // image element ever mounted (virtualized lists remove them again).
        page.execute(AddScriptToEvaluateOnNewDocumentParams::new(RECORD_JS))
            .await?;
        // A tab through a proxy with credentials pauses every request (see `intercept`).
        let credentials = super::intercept::proxy_credentials(settings, proxy);
        let by_url_only = settings.block.by_url_only;
        let patterns = settings.block.url_patterns(by_url_only);
        if !patterns.is_empty() {
            let patterns = patterns
                .into_iter()
                .map(|p| BlockPattern::new(p, true))
                .collect();
            page.execute(SetBlockedUrLsParams {
                url_patterns: Some(patterns),
            })
            .await?;
        }
        if let Some(agent) = &settings.user_agent {
            page.execute(SetUserAgentOverrideParams::new(agent.clone()))
                .await?;
        }
        if !settings.headers.is_empty() {
            let headers: serde_json::Map<String, serde_json::Value> = settings
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            page.execute(SetExtraHttpHeadersParams::new(Headers::new(
                serde_json::Value::Object(headers),
            )))
            .await?;
        }
        if !settings.cookies.is_empty() {
            let cookies = settings.cookies.iter().map(cookie_param).collect();
            page.execute(SetCookiesParams::new(cookies)).await?;
        }
        if let Some(script) = local_storage_script(&settings.local_storage) {
            page.execute(AddScriptToEvaluateOnNewDocumentParams::new(script))
                .await?;
        }
        let interceptor = Interceptor {
            replayer: match &settings.network {
                Network::Replay(replayer) => Some(Arc::clone(replayer)),
                Network::Live | Network::Record(_) => None,
            },
            block: if by_url_only {
                Blocking::NONE
            } else {
                settings.block
            },
            proxy_login: credentials.is_some(),
        };
        if let Some(credentials) = credentials {
            super::intercept::answer_proxy_challenges(&page, credentials).await?;
        }
        let interception = match interceptor.is_needed() {
            true => Some(interceptor.start(&page).await?),
            false => None,
        };
        Ok(Self {
            page,
            pages: 0,
            generation,
            _interception: interception,
        })
    }
}

/// Answers every dialog a page of the tab opens (`alert`, `confirm`, `prompt`) as a person
/// going on to the gallery would: accepted, a prompt with its default text. An open dialog
/// blocks the page's scripts, and with them every wait and the snapshot, until it is answered.
/// The task ends with the tab (its event stream ends).
async fn answer_dialogs(page: &Page) -> Result<(), CdpError> {
    let mut dialogs = page
        .event_listener::<EventJavascriptDialogOpening>()
        .await?;
    let tab = page.clone();
    tokio::spawn(async move {
        while let Some(dialog) = dialogs.next().await {
            tracing::debug!(kind = ?dialog.r#type, url = %dialog.url, "answering a dialog of the page");
            let mut answer = HandleJavaScriptDialogParams::new(true);
            answer.prompt_text = Some(dialog.default_prompt.clone().unwrap_or_default());
            if let Err(error) = tab.execute(answer).await {
                tracing::debug!(%error, "a dialog could not be answered (the page went on)");
            }
        }
    });
    Ok(())
}

/// Refuses every download in the browser context of `page`'s tab. A page can start one (a link
/// with `download`, a blob URL, an attachment in a frame) and Chromium would save it to
/// `~/Downloads`, outside the output folder, under a name and of a size the page chooses.
async fn deny_downloads(browser: &Browser, page: &Page) -> Result<(), CdpError> {
    let info = browser
        .execute(GetTargetInfoParams {
            target_id: Some(page.target_id().clone()),
        })
        .await?;
    browser
        .execute(SetDownloadBehaviorParams {
            behavior: SetDownloadBehaviorBehavior::Deny,
            browser_context_id: info.result.target_info.browser_context_id.clone(),
            download_path: None,
            events_enabled: None,
        })
        .await?;
    Ok(())
}

/// A cookie as CDP takes it: a host-only cookie is given by URL (no domain), a domain cookie
/// by its domain, which then covers the subdomains.
fn cookie_param(cookie: &FileCookie) -> CookieParam {
    let mut param = CookieParam::new(cookie.name.clone(), cookie.value.expose().clone());
    if cookie.include_subdomains {
        param.domain = Some(cookie.domain.clone());
    } else {
        let scheme = if cookie.secure { "https" } else { "http" };
        let host = match url::Host::parse(&cookie.domain) {
            Ok(url::Host::Ipv6(ip)) => format!("[{ip}]"),
            _ => cookie.domain.clone(),
        };
        param.url = Some(format!("{scheme}://{host}{}", cookie.path));
    }
    param.path = Some(cookie.path.clone());
    param.secure = Some(cookie.secure);
    param.http_only = Some(cookie.http_only);
    param.expires = cookie.expires.and_then(|at| {
        at.duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| TimeSinceEpoch::new(d.as_secs_f64()))
    });
    param
}

/// Puts the cookies `jar` holds for `url` into the browser before `page` opens it: sent to
/// `url`'s host on every path, as the run's own requests send them.
pub(crate) async fn share_cookies(
    page: &Page,
    jar: &reqwest::cookie::Jar,
    url: &url::Url,
) -> Result<(), CdpError> {
    use reqwest::cookie::CookieStore;
    let Some(header) = jar.cookies(url) else {
        return Ok(());
    };
    let origin = url.origin().ascii_serialization();
    let cookies: Vec<CookieParam> = header
        .to_str()
        .unwrap_or_default()
        .split(';')
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            let mut param = CookieParam::new(name.to_owned(), value.to_owned());
            param.url = Some(format!("{origin}/"));
            param.path = Some("/".to_owned());
            Some(param)
        })
        .collect();
    if !cookies.is_empty() {
        page.execute(SetCookiesParams::new(cookies)).await?;
    }
    Ok(())
}

/// Renders `request` on `page`, racing every step against a renderer crash. The caller bounds
/// the whole with the page timeout; `deadline` is that same instant, handed to in-page waits.
/// With `screenshot` (a height cap in CSS pixels), a PNG of the rendered page is taken too.
pub(crate) async fn render(
    page: &Page,
    request: &RenderRequest,
    deadline: Instant,
    screenshot: Option<u32>,
    recorder: Option<Arc<Recorder>>,
) -> Result<(PageSnapshot, Option<Vec<u8>>), RenderError> {
    let url = request.url.as_str();
    let cdp = |source: CdpError| RenderError::Cdp {
        url: url.to_owned(),
        source,
    };
    let mut crashed = page
        .event_listener::<EventTargetCrashed>()
        .await
        .map_err(cdp)?;
    let steps = tokio::select! {
        result = render_steps(page, request, deadline, screenshot, recorder) => Some(result),
        _ = crashed.next() => None,
    };
    match steps {
        None => Err(RenderError::TabCrashed {
            url: url.to_owned(),
        }),
        // A renderer that dies aborts the navigation before its crash is told: a moment for
        // the crash event, so the page is retried as a crash rather than failed.
        Some(Err(e @ RenderError::Navigation { .. })) => {
            match tokio::time::timeout(CRASH_TOLD_WITHIN, crashed.next()).await {
                Ok(Some(_)) => Err(RenderError::TabCrashed {
                    url: url.to_owned(),
                }),
                _ => Err(e),
            }
        }
        Some(result) => result,
    }
}

/// How long after a failed navigation the crash of its renderer may still be told.
const CRASH_TOLD_WITHIN: Duration = Duration::from_secs(1);

async fn render_steps(
    page: &Page,
    request: &RenderRequest,
    deadline: Instant,
    screenshot: Option<u32>,
    recorder: Option<Arc<Recorder>>,
) -> Result<(PageSnapshot, Option<Vec<u8>>), RenderError> {
    let url = request.url.as_str();
    let cdp = |source: CdpError| RenderError::Cdp {
        url: url.to_owned(),
        source,
    };
    // Listeners before navigation, or the first events are lost.
    let navigation = Navigation::listen(page).await.map_err(cdp)?;
    let documents = DocumentResponses::listen(page, navigation.main_frame())
        .await
        .map_err(cdp)?;
    let capture = Capture::start(page, &request.capture, request.captured.clone(), recorder)
        .await
        .map_err(cdp)?;

    // Navigation, wait and actions until the deadline; what was rendered by then is taken.
    let step = std::sync::atomic::AtomicUsize::new(0);
    let partial = match tokio::time::timeout_at(
        deadline,
        load_and_act(page, request, deadline, navigation, &step),
    )
    .await
    {
        Ok(Ok(None)) => None,
        Ok(Ok(Some(short))) => Some(short),
        Ok(Err(e)) => return Err(e),
        Err(_) => Some(format!(
            "the page timed out while {}",
            STEPS[step
                .load(std::sync::atomic::Ordering::Relaxed)
                .min(STEPS.len() - 1)]
        )),
    };

    let snapshot = read_snapshot(page, url).await?;
    let final_url = snapshot["url"]
        .as_str()
        .and_then(|u| url::Url::parse(u).ok())
        .unwrap_or_else(|| request.url.clone());
    if partial.is_some() && final_url.scheme() == "about" {
        // Not even the document arrived: there is nothing to take.
        return Err(RenderError::Timeout {
            url: url.to_owned(),
            timeout: Duration::ZERO,
        });
    }
    let status = snapshot["status"].as_u64().unwrap_or(0);
    if status >= 400 {
        return Err(RenderError::Status {
            url: url.to_owned(),
            status: u16::try_from(status).unwrap_or(u16::MAX),
        });
    }
    let html = snapshot["html"].as_str().unwrap_or_default().to_owned();
    tracing::debug!(url, removed = %snapshot["removed"], "image elements mounted and removed again, added to the snapshot");
    if let Some(frames) = snapshot["frames"].as_array().filter(|f| !f.is_empty()) {
        tracing::info!(url, frames = %serde_json::Value::from(frames.clone()), "cross-origin frames are not read into the page; follow them with a [[follow]] rule on `iframe` to read them");
    }
    let png = match screenshot {
        Some(max_height) => Some(capture_png(page, url, max_height).await?),
        None => None,
    };
    let captured = match capture {
        Some(capture) => capture.finish(deadline).await,
        None => Captured::default(),
    };
    // A response the profile captures whose body the browser lost is a page rendered in part:
    // the rerun renders it again rather than the run missing its images for good.
    let partial = partial
        .or_else(|| {
            (captured.lost > 0).then(|| {
                format!(
                    "the browser lost the body of {} captured response(s)",
                    captured.lost
                )
            })
        })
        .or_else(|| {
            (captured.unread > 0).then(|| {
                format!(
                    "{} captured response(s) past {} MiB of captured JSON were not read",
                    captured.unread,
                    super::capture::MAX_CAPTURED_BYTES >> 20
                )
            })
        });
    let json = captured.json;
    if let Some(reason) = &partial {
        tracing::warn!(url, %reason, "page rendered in part: taking what was rendered and captured by its deadline");
    }
    let snapshot = PageSnapshot {
        url: final_url,
        html,
        json,
        partial,
        robots_tags: documents.robots_tags(),
        validators: Default::default(),
    };
    Ok((snapshot, png))
}

/// The page's DOM as the extractor reads it (snapshot.js). A page navigating at that moment (a
/// reload, a script redirect) has no document, or destroys the context the script runs in: it
/// is read again once the next document is there, a few times. (A document still being parsed
/// is waited for by the script itself.)
async fn read_snapshot(page: &Page, url: &str) -> Result<serde_json::Value, RenderError> {
    const ATTEMPTS: u32 = 5;
    let mut attempt = 1;
    loop {
        let read = evaluate(page, url, &SCRIPTS.snapshot, json!({})).await;
        match read {
            Ok(snapshot) if snapshot["html"].as_str().is_some_and(|h| !h.is_empty()) => {
                return Ok(snapshot);
            }
            Ok(_) | Err(RenderError::Script { .. } | RenderError::Cdp { .. })
                if attempt < ATTEMPTS =>
            {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// What a page was doing, for the message of a page that ran out of time (indexes of the
/// step counter of [`load_and_act`]).
const STEPS: [&str; 3] = [
    "loading",
    "waiting for it to be ready",
    "scrolling, clicking or running its script",
];

/// Navigates, waits and runs the actions; `step` says how far it got. `Some(reason)` when the
/// page was left incomplete on purpose (it ran out of time loading or scrolling).
async fn load_and_act(
    page: &Page,
    request: &RenderRequest,
    deadline: Instant,
    navigation: Navigation,
    step: &std::sync::atomic::AtomicUsize,
) -> Result<Option<String>, RenderError> {
    use std::sync::atomic::Ordering;
    let url = request.url.as_str();
    let until = match request.wait {
        Wait::NetworkIdle => Until::NetworkIdle,
        _ => Until::Load,
    };
    match navigation.go(page, url, until, deadline).await? {
        Loaded::Ready => {}
        // Waits and actions would only be cut short by the next reload.
        Loaded::Restless => return Ok(None),
        Loaded::OutOfTime => return Ok(Some("the page timed out while loading".into())),
    }
    step.store(1, Ordering::Relaxed);
    // Sent to a sign-in page (the session ended): what the profile waits for never comes
    // there, and the page is read as it is, a sign-in wall, at once.
    let landed = page.url().await.ok().flatten();
    if let Some(landed) = landed.and_then(|l| url::Url::parse(&l).ok())
        && is_sign_in_url(&landed)
        && !is_sign_in_url(&request.url)
    {
        return Ok(None);
    }

    match &request.wait {
        Wait::NetworkIdle => {}
        Wait::Selector { css } => {
            // An overlay to dismiss may be what hides the element: either one ends the wait.
            let either = std::iter::once(css)
                .chain(&request.dismiss.selectors)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            if !wait_for_selector(page, url, &either, deadline).await? {
                return Ok(Some(format!("the page timed out waiting for `{css}`")));
            }
        }
        Wait::Delay(delay) => tokio::time::sleep(*delay).await,
    }
    if !request.dismiss.selectors.is_empty() {
        dismiss(page, url, &request.dismiss, deadline).await?;
        if let Wait::Selector { css } = &request.wait
            && !wait_for_selector(page, url, css, deadline).await?
        {
            return Ok(Some(format!("the page timed out waiting for `{css}`")));
        }
    }
    step.store(2, Ordering::Relaxed);

    let known = match &request.known {
        Some(known) if !request.actions.is_empty() => {
            let args = json!({ "urls": known.urls, "rounds": known.rounds.max(1) });
            evaluate(page, url, &SCRIPTS.known, args).await?.as_bool() == Some(true)
        }
        _ => false,
    };
    for action in &request.actions {
        if let Some(short) = run_action(page, url, action, known, deadline).await? {
            return Ok(Some(short));
        }
    }
    Ok(None)
}

/// Whether an element matches `css` before `deadline`.
async fn wait_for_selector(
    page: &Page,
    url: &str,
    css: &str,
    deadline: Instant,
) -> Result<bool, RenderError> {
    let found = evaluate(
        page,
        url,
        &SCRIPTS.wait_selector,
        json!({ "css": css, "timeoutMs": remaining_ms(deadline) }),
    )
    .await?;
    Ok(found == json!(true))
}

/// A PNG of the whole page (`Page.captureScreenshot` beyond the viewport), as wide as the
/// page's content and at most `max_height` CSS pixels tall.
async fn capture_png(page: &Page, url: &str, max_height: u32) -> Result<Vec<u8>, RenderError> {
    let cdp = |source: CdpError| RenderError::Cdp {
        url: url.to_owned(),
        source,
    };
    let metrics = page
        .execute(GetLayoutMetricsParams::default())
        .await
        .map_err(cdp)?;
    let content = &metrics.result.css_content_size;
    let viewport = &metrics.result.css_layout_viewport;
    let width = content.width.max(viewport.client_width as f64).ceil();
    let height = content
        .height
        .max(viewport.client_height as f64)
        .min(f64::from(max_height.max(1)))
        .ceil();
    let params = CaptureScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Png)
        .clip(Viewport {
            x: 0.0,
            y: 0.0,
            width,
            height,
            scale: 1.0,
        })
        .capture_beyond_viewport(true)
        .build();
    let shot = page.execute(params).await.map_err(cdp)?;
    base64::engine::general_purpose::STANDARD
        .decode(AsRef::<str>::as_ref(&shot.result.data))
        .map_err(|e| RenderError::Script {
            url: url.to_owned(),
            message: format!("the screenshot is not base64: {e}"),
        })
}

/// Runs one action; `Some(reason)` when it ran out of the page's time (the page is partial).
/// Runs one action; with `known` (a refresh that knows images of the page), scrolling and
/// clicking stop once rounds in a row bring only those.
async fn run_action(
    page: &Page,
    url: &str,
    action: &Action,
    known: bool,
    deadline: Instant,
) -> Result<Option<String>, RenderError> {
    match action {
        Action::Scroll {
            max_scrolls,
            settle,
            element,
            end,
        } => {
            let started = Instant::now();
            let done = evaluate(
                page,
                url,
                &SCRIPTS.scroll,
                json!({
                    "maxScrolls": max_scrolls,
                    "settleMs": settle.as_millis() as u64,
                    "quietMs": quiet_ms(*settle),
                    "deadlineMs": remaining_ms(deadline),
                    "element": element,
                    "end": end,
                }),
            )
            .await?;
            let scrolls = done["scrolls"].as_u64().unwrap_or(0);
            let steps = done["steps"].as_u64().unwrap_or(0);
            let stop = done["stop"].as_str().unwrap_or("unknown");
            let why = match stop {
                "no growth" => "no new content came at the bottom, with the network quiet",
                "cap" => "the `scroll` limit of rounds was reached",
                "end marker" => "an element matches `scroll_end`",
                "known" => "a refresh met only images the job knows, round after round",
                "time" => "the page's time ran out",
                _ => stop,
            };
            tracing::info!(url, scrolls, steps, stop, took = ?started.elapsed(), "scrolling stopped: {why}");
            match stop {
                "time" => {
                    return Ok(Some(format!(
                        "the page timed out while scrolling ({scrolls} scrolls)"
                    )));
                }
                "no element" => {
                    return Err(RenderError::Script {
                        url: url.to_owned(),
                        message: format!(
                            "no element matches the scroll element `{}`",
                            element.as_deref().unwrap_or_default()
                        ),
                    });
                }
                _ => {}
            }
        }
        Action::Click {
            selector,
            max_clicks,
            settle,
        } => {
            let (clicks, stop) =
                click_until_exhausted(page, url, selector, *max_clicks, *settle, known, deadline)
                    .await?;
            tracing::info!(url, selector, clicks, "clicking stopped: {stop}");
        }
        Action::Script(source) => {
            evaluate_expression(page, url, source.clone()).await?;
        }
    }
    Ok(None)
}

/// What the page holds, as the click loop compares it: distinct image URLs ever shown and the
/// most elements it had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Content {
    seen: u64,
    elements: u64,
}

impl Content {
    fn of(value: &serde_json::Value) -> Self {
        Self {
            seen: value["seen"].as_u64().unwrap_or(0),
            elements: value["elements"].as_u64().unwrap_or(0),
        }
    }

    /// Whether `self` has more than `high` (the most seen so far) and so is new content.
    fn exceeds(self, high: Content) -> bool {
        self.seen > high.seen || self.elements > high.elements
    }

    fn max(self, other: Content) -> Content {
        Content {
            seen: self.seen.max(other.seen),
            elements: self.elements.max(other.elements),
        }
    }
}

/// Clicks `selector` while each click brings new content: new image URLs (a carousel's next
/// slide, even one that replaces the last) or more elements than the page ever had ("load
/// more"). Stops when a click brings nothing new (a slide came back: the carousel went round),
/// the control is gone, hidden or disabled, after `max_clicks`, when the page's time is up, or
/// on a refresh (`known`) once clicks in a row brought only images the job knows. Returns the
/// clicks made and why it stopped.
async fn click_until_exhausted(
    page: &Page,
    url: &str,
    selector: &str,
    max_clicks: u32,
    settle: Duration,
    known: bool,
    deadline: Instant,
) -> Result<(u32, &'static str), RenderError> {
    let mut clicks = 0;
    let mut high: Option<Content> = None;
    loop {
        if clicks >= max_clicks {
            return Ok((clicks, "`max_clicks` reached"));
        }
        if Instant::now() >= deadline {
            return Ok((clicks, "the page's time ran out"));
        }
        let Some(clicked) = click(page, url, selector, Change::Growth, settle, deadline).await?
        else {
            return Ok((clicks, "the control is gone, hidden or disabled"));
        };
        clicks += 1;
        let before = *high.get_or_insert(clicked.before);
        if !clicked.after.exceeds(before) {
            return Ok((
                clicks,
                "the last click brought nothing new (a slide came back, or nothing came)",
            ));
        }
        high = Some(before.max(clicked.after));
        if known
            && evaluate(page, url, &SCRIPTS.known_round, json!({}))
                .await?
                .as_bool()
                == Some(true)
        {
            return Ok((
                clicks,
                "a refresh met only images the job knows, click after click",
            ));
        }
    }
}

/// What a click changed.
struct Clicked {
    /// Whether the page changed as asked within the settle time.
    settled: bool,
    before: Content,
    after: Content,
}

/// What a click waits for before the page counts as settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// Elements or image URLs added ("load more", a carousel's next slide).
    Growth,
    /// Any change (an overlay removed).
    Any,
}

/// Clicks the first element matching `selector` (in the document or a shadow root) as a person
/// would: scrolled into the middle of the view, then real mouse events
/// (`Input.dispatchMouseEvent`: moved, pressed, released) at its centre, so handlers that want a
/// trusted event (`event.isTrusted`) or listen for `mousedown`/`pointerup` react. An element
/// without a box, or whose centre another element covers (a fixed overlay), is clicked from
/// script instead (`el.click()`). Every click of a page goes through here.
///
/// `None` when nothing matches, or the element is hidden or disabled; else what the click
/// changed within `settle` (and the requests it started, bounded by `deadline`).
async fn click(
    page: &Page,
    url: &str,
    selector: &str,
    change: Change,
    settle: Duration,
    deadline: Instant,
) -> Result<Option<Clicked>, RenderError> {
    let ready = evaluate(page, url, &SCRIPTS.click, json!({ "selector": selector })).await?;
    match ready["state"].as_str() {
        Some("point") => {
            let x = ready["x"].as_f64().unwrap_or_default();
            let y = ready["y"].as_f64().unwrap_or_default();
            press(page, url, x, y).await?;
            tracing::debug!(url, selector, x, y, "clicked with mouse events");
        }
        Some("clicked") => {
            tracing::debug!(url, selector, how = %ready["how"], "clicked from script");
        }
        _ => {
            tracing::debug!(url, selector, why = %ready["why"], "nothing to click");
            return Ok(None);
        }
    }
    // Counted from before the click: a change the click made at once is not missed. Each
    // evaluation stands alone (chromiumoxide may run two in different worlds of the page,
    // which share the DOM but not `window`).
    let after = evaluate(
        page,
        url,
        &SCRIPTS.settled,
        json!({
            "base": ready["base"].as_u64().unwrap_or_default(),
            "grow": change == Change::Growth,
            "maxMs": (settle.as_millis() as u64).min(remaining_ms(deadline)),
            "quietMs": quiet_ms(settle),
            "since": ready["at"].as_u64().unwrap_or_default(),
            "settleMs": settle.as_millis() as u64,
            "endMs": remaining_ms(deadline),
        }),
    )
    .await?;
    Ok(Some(Clicked {
        settled: after["settled"] == json!(true),
        before: Content::of(&ready),
        after: Content::of(&after),
    }))
}

/// A left click at `(x, y)` (CSS pixels of the view): the mouse moved there, pressed, released.
async fn press(page: &Page, url: &str, x: f64, y: f64) -> Result<(), RenderError> {
    for kind in [
        DispatchMouseEventType::MouseMoved,
        DispatchMouseEventType::MousePressed,
        DispatchMouseEventType::MouseReleased,
    ] {
        let mut event = DispatchMouseEventParams::new(kind.clone(), x, y);
        if kind != DispatchMouseEventType::MouseMoved {
            event.button = Some(MouseButton::Left);
            event.click_count = Some(1);
            event.buttons = Some(i64::from(kind == DispatchMouseEventType::MousePressed));
        }
        page.execute(event)
            .await
            .map_err(|source| RenderError::Cdp {
                url: url.to_owned(),
                source,
            })?;
    }
    Ok(())
}

/// Clicks away what `dismiss` names (consent banners, "accept" dialogs) that is on the page,
/// each once, in order, waiting after each for the page to change.
async fn dismiss(
    page: &Page,
    url: &str,
    dismiss: &Dismiss,
    deadline: Instant,
) -> Result<(), RenderError> {
    for selector in &dismiss.selectors {
        if let Some(clicked) =
            click(page, url, selector, Change::Any, dismiss.settle, deadline).await?
        {
            tracing::info!(
                url,
                selector,
                changed = clicked.settled,
                "dismissed an overlay"
            );
        }
    }
    Ok(())
}

/// How long the DOM must stay unchanged after growing to count as settled: a quarter of the
/// settle time, within 50..=300 ms (long enough for a lazy-loader's follow-up mutations).
fn quiet_ms(settle: Duration) -> u64 {
    (settle.as_millis() as u64 / 4).clamp(50, 300)
}

fn remaining_ms(deadline: Instant) -> u64 {
    deadline
        .saturating_duration_since(Instant::now())
        .as_millis() as u64
}

/// Calls the function expression `function` with `argument`, awaiting a returned promise.
pub(crate) async fn evaluate(
    page: &Page,
    url: &str,
    function: &str,
    argument: serde_json::Value,
) -> Result<serde_json::Value, RenderError> {
    evaluate_expression(page, url, format!("({function})({argument})")).await
}

/// How often a script is sent again to the page's new document when the page navigated by
/// itself before the script could start.
const CONTEXT_LOST_RETRIES: u32 = 3;

/// Whether `error` says the document a script was sent to was gone before the script started:
/// the page navigated (a reload, a script redirect) between learning its context and running
/// the script. A script the navigation cut off while it ran is not sent again: an action may
/// have done its part (a click that navigates) and would do it twice.
fn context_lost(error: &CdpError) -> bool {
    matches!(error, CdpError::Chrome(error)
        if error.message.contains("Cannot find context with specified id"))
}

async fn evaluate_expression(
    page: &Page,
    url: &str,
    expression: String,
) -> Result<serde_json::Value, RenderError> {
    let params = EvaluateParams::builder()
        .expression(expression)
        .await_promise(true)
        .return_by_value(true)
        .build()
        .map_err(|message| RenderError::Script {
            url: url.to_owned(),
            message,
        })?;
    let mut answer = page.evaluate_expression(params.clone()).await;
    let mut retries = 0;
    while let Err(error) = &answer
        && context_lost(error)
        && retries < CONTEXT_LOST_RETRIES
    {
        // The new document's context reaches the page a moment after its navigation.
        retries += 1;
        tokio::time::sleep(Duration::from_millis(100 * u64::from(retries))).await;
        tracing::debug!(
            url,
            retries,
            "the page navigated before a script started; sending it again"
        );
        answer = page.evaluate_expression(params.clone()).await;
    }
    match answer {
        Ok(result) => Ok(result.value().cloned().unwrap_or(serde_json::Value::Null)),
        Err(CdpError::JavascriptException(details)) => Err(RenderError::Script {
            url: url.to_owned(),
            message: details
                .exception
                .as_ref()
                .and_then(|e| e.description.clone())
                .unwrap_or_else(|| details.text.clone()),
        }),
        Err(source) => Err(RenderError::Cdp {
            url: url.to_owned(),
            source,
        }),
    }
}
