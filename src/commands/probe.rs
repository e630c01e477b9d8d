//! `scrape probe`: what a profile extracts from one page, as JSON lines on stdout.
//!
//! The page comes from the profile's own page source (plain HTTP, the browser, or `auto`'s
//! fallback), so probe shows what a run would find on it. `--screenshot` also saves a PNG of
//! the page as the browser rendered it.

use std::sync::Arc;

use anyhow::Context;
use scrape::analyze::analyze_page;
use scrape::fetch::{PageFailure, PageFetcher};
use scrape::page::PageSnapshot;
use scrape::paginate::{NextPage, first_page};
use scrape::profile::{RenderMode, parse_http_url};
use scrape::source::PageSource;
use scrape::transport::{build_client, error_chain};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::load_profile;
use crate::cli::ProbeArgs;
use crate::{Outcome, UsageError};

pub async fn probe(args: &ProbeArgs, cancel: &CancellationToken) -> anyhow::Result<Outcome> {
    let mut profile = load_profile(&args.profile)?;
    let session = scrape::session::Session::start(&mut profile)?;
    let profile = Arc::new(profile);
    let url = parse_http_url(&args.url).map_err(|m| UsageError(format!("--url: {m}")))?;
    // The chain's start is the profile's start on the probed site, so URL templates resolve as
    // in a run; the probed page takes the place of the page numbered `--page`.
    let start = profile
        .start
        .iter()
        .find(|s| s.origin() == url.origin())
        .cloned()
        .unwrap_or_else(|| url.clone());
    let mut position = first_page(&profile.pagination, &start);
    position.url = url.to_string();
    if let Some(page) = args.page {
        position.number = page;
    }
    if args.screenshot.is_some() && profile.render == RenderMode::Static {
        return Err(UsageError(
            "--screenshot needs a profile that renders pages (render = \"browser\" or \"auto\"); \
             a static profile's pages are never rendered"
                .into(),
        )
        .into());
    }
    let mut screenshot = None;
    let (snapshot, way) = match &args.html {
        Some(file) => {
            let html = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read `{}`", file.display()))?;
            (PageSnapshot::html(url.clone(), html), "read from a file")
        }
        None => {
            // The profile's own page source, so a browser profile is rendered (and an `auto`
            // one falls back to the browser) exactly as a run would.
            let client = build_client(&profile.download, &session)
                .context("cannot build the HTTP client")?;
            let fetcher = PageFetcher::new(client, 1);
            let started = match args.screenshot {
                // The picture is for a person: the browser loads the images too.
                Some(_) => PageSource::start_showing_images(&profile, fetcher).await,
                None => PageSource::start(&profile, fetcher).await,
            };
            let source = started.map_err(|e| {
                UsageError(format!("cannot start the browser: {}", error_chain(&e)))
            })?;
            let fetched = match args.screenshot {
                Some(_) => source
                    .fetch_with_screenshot(
                        &profile,
                        &start,
                        &position,
                        &url,
                        cancel,
                        args.screenshot_max_height,
                    )
                    .await
                    .map(|(snapshot, png)| {
                        screenshot = Some(png);
                        snapshot
                    }),
                None => {
                    source
                        .fetch(&profile, &start, &position, &url, cancel)
                        .await
                }
            };
            let way = match source.pages_by_way() {
                (_, 0) => "fetched over plain HTTP",
                _ => "rendered in the browser",
            };
            source.close().await;
            match fetched {
                Ok(s) => (s, way),
                Err(PageFailure::Missing(code)) => {
                    return Err(UsageError(format!("`{url}` answered HTTP {code}")).into());
                }
                Err(PageFailure::Failed(f)) => {
                    return Err(UsageError(format!("cannot fetch `{url}`: {}", f.detail)).into());
                }
                Err(PageFailure::Cancelled) => return Ok(Outcome::Interrupted),
            }
        }
    };
    let analysis = analyze_page(&profile, &start, &position, &snapshot);
    for (candidate, verdict) in &analysis.candidates {
        let mut line = json!({
            "kind": "image",
            "url": candidate.url.as_str(),
            "rule": candidate.rule,
            "attribute": candidate.attribute,
            "accepted": verdict.is_ok(),
        });
        if let Err(rejection) = verdict {
            line["rejected"] = json!(rejection.as_str());
        }
        if !candidate.metadata.is_empty() {
            line["metadata"] = json!(candidate.metadata);
        }
        println!("{line}");
    }
    let next = match &analysis.next {
        NextPage::Fetch(p) => json!({ "kind": "next", "url": p.url }),
        NextPage::End(reason) => json!({ "kind": "end", "reason": reason.describe() }),
    };
    println!("{next}");
    if let (Some(path), Some(png)) = (&args.screenshot, &screenshot) {
        std::fs::write(path, png)
            .with_context(|| format!("cannot write the screenshot `{}`", path.display()))?;
        let size = imagesize::blob_size(png)
            .map(|s| format!(", {}x{} px", s.width, s.height))
            .unwrap_or_default();
        eprintln!("screenshot: {}{size}", path.display());
    }
    let accepted = analysis.accepted().count();
    eprintln!(
        "{accepted} image(s) accepted, {} rejected by filters (page {way})",
        analysis.candidates.len() - accepted
    );
    Ok(Outcome::Done)
}
