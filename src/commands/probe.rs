//! `scrape probe`: what a profile extracts from one page, as JSON lines on stdout.

use anyhow::Context;
use scrape::analyze::analyze_page;
use scrape::fetch::{PageFailure, PageFetcher};
use scrape::page::PageSnapshot;
use scrape::paginate::{NextPage, first_page};
use scrape::profile::parse_http_url;
use scrape::transport::build_client;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::load_profile;
use crate::cli::ProbeArgs;
use crate::{Outcome, UsageError};

pub async fn probe(args: &ProbeArgs, cancel: &CancellationToken) -> anyhow::Result<Outcome> {
    let profile = load_profile(&args.profile)?;
    let url = parse_http_url(&args.url).map_err(|m| UsageError(format!("--url: {m}")))?;
    let snapshot = match &args.html {
        Some(file) => {
            let html = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read `{}`", file.display()))?;
            PageSnapshot::html(url.clone(), html)
        }
        None => {
            let client = build_client(&profile.download).context("cannot build the HTTP client")?;
            match PageFetcher::new(client, 1).fetch(&url, cancel).await {
                Ok(s) => s,
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
    let accepted = analysis.accepted().count();
    eprintln!(
        "{accepted} image(s) accepted, {} rejected by filters",
        analysis.candidates.len() - accepted
    );
    Ok(Outcome::Done)
}
