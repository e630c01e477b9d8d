//! Signing in in the browser, for `scrape login`: Chromium opens the sign-in page (with a
//! window, for a person to sign in; or headless, its form filled by the profile's
//! `[session.login]` fields), waits until the site shows the visitor signed in, and hands back
//! the browser's storage state: every cookie it holds (those set by scripts included) and the
//! localStorage of the origin it ended on. Values are secrets: never logged.

use std::time::{Duration, Instant, UNIX_EPOCH};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::storage::GetCookiesParams;
use serde_json::json;

use super::browser::BrowserProcess;
use super::tab::{Tab, evaluate};
use super::{BrowserSettings, RenderError};
use crate::net::session::cookies::FileCookie;
use crate::net::session::{OriginStorage, StorageState};
use crate::profile::LoginSuccess;
use crate::redact::Secret;

/// A sign-in to carry out in the browser.
pub struct BrowserSignIn<'a> {
    /// The sign-in page.
    pub page: url::Url,
    /// Fields to fill (name, value) and the form holding them; empty: a person signs in.
    pub fields: Vec<(String, String)>,
    pub form: Option<String>,
    pub success: &'a LoginSuccess,
    /// How long to wait for the site to show the visitor signed in; `None`: until `done`.
    pub patience: Option<Duration>,
}

/// Fills the form of `sign_in.fields` on a page (the first form holding all of them, or the
/// one `form` selects) and presses its button; `null`, or why it could not.
const FILL_JS: &str = r#"({ form, fields }) => {
  const names = Object.keys(fields);
  const named = (f, n) => f.querySelector(`[name="${CSS.escape(n)}"]`);
  const forms = [...document.querySelectorAll(form || 'form')];
  const chosen = forms.find(f => names.every(n => named(f, n)));
  if (!chosen) return `no form on the page has fields named ${names.join(', ')}`;
  for (const [n, v] of Object.entries(fields)) {
    const input = named(chosen, n);
    input.focus();
    input.value = v;
    input.dispatchEvent(new Event('input', { bubbles: true }));
    input.dispatchEvent(new Event('change', { bubbles: true }));
  }
  setTimeout(() => chosen.requestSubmit ? chosen.requestSubmit() : chosen.submit(), 0);
  return null;
}"#;

/// Where the page is and what it shows, for telling a signed-in page.
const LOOK_JS: &str = r#"({ selector }) => ({
  href: location.href,
  origin: location.origin,
  shows: selector ? document.querySelector(selector) !== null : null,
  password: document.querySelector('input[type=password i]') !== null,
  storage: (() => { try { return Object.entries(localStorage); } catch (e) { return []; } })(),
})"#;

/// Signs in as `sign_in` says in a browser launched with `settings` (its `window` decides
/// whether a person sees it); `done`, when given, ends the wait early (a person pressed
/// Enter). The browser's storage state once the site shows the visitor signed in.
pub async fn sign_in(
    settings: &BrowserSettings,
    sign_in: BrowserSignIn<'_>,
    mut done: Option<tokio::sync::oneshot::Receiver<()>>,
) -> Result<StorageState, RenderError> {
    let process = BrowserProcess::launch(settings, None).await?;
    let result = async {
        let browser = process.browser().ok_or(RenderError::Closed)?;
        let tab = Tab::open(browser, settings, None, 0)
            .await
            .map_err(|source| cdp(&sign_in.page, source))?;
        let page = &tab.page;
        page.goto(sign_in.page.as_str())
            .await
            .map_err(|source| cdp(&sign_in.page, source))?;
        if !sign_in.fields.is_empty() {
            let fields: serde_json::Map<String, serde_json::Value> = sign_in
                .fields
                .iter()
                .map(|(n, v)| (n.clone(), json!(v)))
                .collect();
            let filled = evaluate(
                page,
                sign_in.page.as_str(),
                FILL_JS,
                json!({ "form": sign_in.form, "fields": fields }),
            )
            .await?;
            if let Some(why) = filled.as_str() {
                return Err(failed(&sign_in.page, why.to_owned()));
            }
        }
        let began = Instant::now();
        loop {
            if let Some(look) = signed_in_look(page, &sign_in).await? {
                return state_of(page, look).await;
            }
            if sign_in.patience.is_some_and(|p| began.elapsed() > p) {
                return Err(failed(
                    &sign_in.page,
                    "the site did not show the visitor signed in in time (a wrong name or password?)"
                        .to_owned(),
                ));
            }
            let person = async {
                match done.as_mut() {
                    Some(done) => done.await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
                true = person => {
                    // A person says the sign-in is done: take the state as it is.
                    let look = look(page, &sign_in).await?;
                    return state_of(page, look).await;
                }
            }
        }
    }
    .await;
    process.shutdown().await;
    result
}

/// What [`LOOK_JS`] reads.
struct Look {
    href: String,
    origin: String,
    storage: Vec<(String, String)>,
}

async fn look(
    page: &Page,
    sign_in: &BrowserSignIn<'_>,
) -> Result<(Look, serde_json::Value), RenderError> {
    let selector = sign_in.success.selector.as_ref().map(|s| s.text.clone());
    let value = evaluate(
        page,
        sign_in.page.as_str(),
        LOOK_JS,
        json!({ "selector": selector }),
    )
    .await?;
    let storage = value["storage"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|pair| {
                    Some((pair[0].as_str()?.to_owned(), pair[1].as_str()?.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((
        Look {
            href: value["href"].as_str().unwrap_or_default().to_owned(),
            origin: value["origin"].as_str().unwrap_or_default().to_owned(),
            storage,
        },
        value,
    ))
}

/// The page's look when it shows the visitor signed in, by the profile's `success_*` keys
/// (each given must hold), or else by having left the sign-in page for one that asks no
/// password. `None` while it does not (a page between two documents is not read).
async fn signed_in_look(
    page: &Page,
    sign_in: &BrowserSignIn<'_>,
) -> Result<Option<(Look, serde_json::Value)>, RenderError> {
    let (look, value) = match look(page, sign_in).await {
        Ok(read) => read,
        Err(RenderError::Script { .. } | RenderError::Cdp { .. }) => return Ok(None),
        Err(other) => return Err(other),
    };
    let success = sign_in.success;
    let mut holds = true;
    if success.selector.is_some() {
        holds &= value["shows"].as_bool() == Some(true);
    }
    if let Some(part) = &success.url {
        holds &= look.href.contains(part.as_str());
    }
    if let Some(name) = &success.cookie {
        holds &= cookies(page, &sign_in.page)
            .await?
            .iter()
            .any(|c| &c.name == name);
    }
    let named = success.selector.is_some() || success.url.is_some() || success.cookie.is_some();
    if !named {
        holds &= look.href != sign_in.page.as_str() && value["password"].as_bool() == Some(false);
    }
    Ok(holds.then_some((look, value)))
}

/// The storage state of the browser showing `page`: every cookie, and the localStorage of the
/// page's origin.
async fn state_of(
    page: &Page,
    (look, _): (Look, serde_json::Value),
) -> Result<StorageState, RenderError> {
    let at = url::Url::parse(&look.href)
        .unwrap_or_else(|_| url::Url::parse("about:blank").expect("valid URL"));
    let origins = match look.origin.starts_with("http") {
        true => vec![OriginStorage {
            origin: look.origin.clone(),
            items: look
                .storage
                .into_iter()
                .map(|(k, v)| (k, Secret::new(v)))
                .collect(),
        }],
        false => Vec::new(),
    };
    Ok(StorageState {
        cookies: cookies(page, &at).await?,
        origins,
    })
}

/// Every cookie the browser holds.
async fn cookies(page: &Page, at: &url::Url) -> Result<Vec<FileCookie>, RenderError> {
    let all = page
        .execute(GetCookiesParams::default())
        .await
        .map_err(|source| cdp(at, source))?;
    Ok(all
        .result
        .cookies
        .iter()
        .map(|c| FileCookie {
            include_subdomains: c.domain.starts_with('.'),
            domain: c.domain.trim_start_matches('.').to_owned(),
            path: c.path.clone(),
            secure: c.secure,
            http_only: c.http_only,
            expires: (!c.session && c.expires > 0.0)
                .then(|| UNIX_EPOCH + Duration::from_secs_f64(c.expires)),
            name: c.name.clone(),
            value: Secret::new(c.value.clone()),
        })
        .collect())
}

fn cdp(url: &url::Url, source: chromiumoxide::error::CdpError) -> RenderError {
    RenderError::Cdp {
        url: url.to_string(),
        source,
    }
}

fn failed(url: &url::Url, message: String) -> RenderError {
    RenderError::SignIn {
        url: crate::redact::redact(url).to_string(),
        message,
    }
}
