//! `scrape new-profile URL`: drafts a profile for a site from one of its pages.
//!
//! The page is fetched over plain HTTP and rendered in the browser twice (once loaded, once
//! scrolled to the bottom) with every JSON response captured and the layout marked (which
//! elements scroll, which are fixed overlays, which hold open shadow roots: `new_profile.js`);
//! [`scrape::draft`] proposes the rules, and the draft is checked by the real validator before
//! anything is written. What the draft could not decide is printed with the summary.

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context;
use scrape::draft::{DraftInput, draft_profile};
use scrape::fetch::{PageFailure, PageFetcher};
use scrape::net::session::Session;
use scrape::net::{HttpClient, error_chain};
use scrape::page::PageSnapshot;
use scrape::profile::limits;
use scrape::profile::{self, DownloadSettings, RenderMode, parse_http_url};
use scrape::render::{Action, BrowserPool, BrowserSettings, RenderError, RenderRequest, Wait};
use tokio_util::sync::CancellationToken;

use crate::cli::{DraftRender, NewProfileArgs};
use crate::{Outcome, UsageError};

/// Scrolls of the second render: enough to see whether the page grows.
const DRAFT_SCROLLS: u32 = 10;

/// Marks the layout facts the draft reads (see `scrape::draft::layout`) on the rendered page.
const LAYOUT_JS: &str = include_str!("new_profile.js");

pub async fn new_profile(
    args: &NewProfileArgs,
    cancel: &CancellationToken,
) -> anyhow::Result<Outcome> {
    let url = parse_http_url(&args.url).map_err(|m| UsageError(format!("URL: {m}")))?;
    if let Some(out) = &args.out
        && out.exists()
        && !args.force
    {
        return Err(UsageError(format!(
            "`{}` exists; pass --force to overwrite it",
            out.display()
        ))
        .into());
    }
    // Checked like the `[browser]` keys they mirror.
    if let Some(selector) = &args.wait_for {
        super::flag("--wait-for", limits::css_selector(selector))?;
    }
    let page_timeout = args
        .page_timeout
        .as_deref()
        .map(|t| super::flag("--page-timeout", limits::page_time(t)))
        .transpose()?;
    let forced = args.render.map(|r| match r {
        DraftRender::Static => RenderMode::Static,
        DraftRender::Browser => RenderMode::Browser,
        DraftRender::Auto => RenderMode::Auto,
    });

    let client = HttpClient::new(
        &DownloadSettings::defaults_for("draft"),
        &Session::default(),
        Default::default(),
    )
    .context("cannot build the HTTP client")?;
    let static_page = match PageFetcher::new(client, 1).fetch(&url, cancel).await {
        Ok(page) => Some(page),
        Err(PageFailure::Cancelled) => return Ok(Outcome::Interrupted),
        Err(PageFailure::Missing(code)) => {
            eprintln!("warning: `{url}` answered HTTP {code} over plain HTTP");
            None
        }
        Err(PageFailure::Failed(f)) => {
            eprintln!(
                "warning: cannot fetch `{url}` over plain HTTP: {}",
                f.detail
            );
            None
        }
    };

    let (rendered, scrolled) = if forced == Some(RenderMode::Static) {
        (None, None)
    } else {
        let defaults = BrowserSettings::default();
        let settings = BrowserSettings {
            tabs: 1,
            page_timeout: page_timeout.unwrap_or(defaults.page_timeout),
            ..defaults
        };
        match BrowserPool::launch(settings).await {
            Ok(pool) => {
                let renders = render_twice(&pool, &url, args.wait_for.as_deref(), cancel).await;
                pool.close().await;
                match renders {
                    Ok(Some(pages)) => pages,
                    Ok(None) => return Ok(Outcome::Interrupted),
                    Err(e) => {
                        return Err(UsageError(format!(
                            "cannot render `{url}`: {}",
                            error_chain(&e)
                        ))
                        .into());
                    }
                }
            }
            Err(e @ RenderError::BrowserNotFound { .. }) if forced.is_none() => {
                eprintln!("warning: {e}; drafting from the plain page only");
                (None, None)
            }
            Err(e) => {
                return Err(
                    UsageError(format!("cannot start the browser: {}", error_chain(&e))).into(),
                );
            }
        }
    };
    if static_page.is_none() && rendered.is_none() {
        return Err(UsageError(format!("cannot get `{url}`; nothing to draft from")).into());
    }

    let draft = draft_profile(&DraftInput {
        url: url.clone(),
        static_page,
        rendered,
        scrolled,
        render: forced,
        wait_for: args.wait_for.clone(),
        page_timeout: args.page_timeout.as_ref().map(|t| t.trim().to_owned()),
    });
    // Never hand out a draft that `scrape check` would refuse.
    let checked = profile::check(&draft.toml);
    if checked.profile.is_none() || checked.diagnostics.iter().any(|d| d.is_error()) {
        for d in &checked.diagnostics {
            eprint!("{}", d.render("draft", &draft.toml));
        }
        anyhow::bail!("the drafted profile does not pass `scrape check`; nothing was written");
    }

    let shown = match &args.out {
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .create_new(!args.force)
                .open(path)
                .with_context(|| format!("cannot create `{}`", path.display()))?;
            file.write_all(draft.toml.as_bytes())
                .with_context(|| format!("cannot write `{}`", path.display()))?;
            path.display().to_string()
        }
        None => {
            super::print_stdout(&draft.toml)?;
            "PROFILE".to_owned()
        }
    };
    let mode = match draft.render {
        RenderMode::Static => "static",
        RenderMode::Browser => "browser",
        RenderMode::Auto => "auto",
    };
    eprintln!(
        "drafted {}: render = \"{mode}\", {} image rule(s), {} api rule(s), {}; the rules find {} image(s) on the page ({} without a browser)",
        if args.out.is_some() {
            shown.as_str()
        } else {
            "a profile"
        },
        draft.image_rules(),
        draft.api_rules(),
        if draft.next.is_some() {
            "a next-page link"
        } else {
            "no next-page link"
        },
        draft.found_rendered.max(draft.found_static),
        draft.found_static,
    );
    let proposed = draft.proposals();
    if !proposed.is_empty() {
        eprintln!("also proposed: {}", proposed.join(", "));
    }
    eprintln!("output folder: downloads/{}", draft.name);
    if !draft.notes.is_empty() {
        eprintln!("left to you:");
        for note in &draft.notes {
            eprintln!("  - {note}");
        }
    }
    eprintln!("next: scrape probe --profile {shown} --url {url}");
    Ok(Outcome::Done)
}

/// The page once loaded (network idle, or an element matching `wait_for`) and once scrolled
/// to the bottom, every JSON response captured. `None` when cancelled.
async fn render_twice(
    pool: &BrowserPool,
    url: &url::Url,
    wait_for: Option<&str>,
    cancel: &CancellationToken,
) -> Result<Option<(Option<PageSnapshot>, Option<PageSnapshot>)>, RenderError> {
    let mut request = RenderRequest::new(url.clone());
    if let Some(css) = wait_for {
        request.wait = Wait::Selector {
            css: css.to_owned(),
        };
    }
    // Invariant: a constant, valid regex.
    request.capture = vec![regex::Regex::new(".").expect("valid regex")];
    request.actions = vec![Action::Script(LAYOUT_JS.to_owned())];
    let loaded = tokio::select! {
        r = pool.render(&request) => r?,
        () = cancel.cancelled() => return Ok(None),
    };
    request.actions = vec![
        Action::Scroll {
            max_scrolls: DRAFT_SCROLLS,
            settle: Duration::from_secs(2),
            element: None,
            end: None,
        },
        Action::Script(LAYOUT_JS.to_owned()),
    ];
    let scrolled = tokio::select! {
        r = pool.render(&request) => r?,
        () = cancel.cancelled() => return Ok(None),
    };
    Ok(Some((Some(loaded), Some(scrolled))))
}
