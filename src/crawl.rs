//! Crawl: walks each start URL's chain of pages, fetching, analysing and checkpointing.
//!
//! Each page's accepted images and the chain's next position are committed in one transaction
//! through the state writer; a rerun continues from the committed position. A page that fails
//! after retries stops its chain for this run and is retried by the next one.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use url::Url;

use crate::analyze::analyze_page;
use crate::fetch::PageFailure;
use crate::paginate::{EndReason, NextPage, PagePosition, first_page};
use crate::profile::Profile;
use crate::source::PageSource;
use crate::state::{
    ChainCheckpoint, NewImage, PageCommit, PageStatus, State, StateError, WriterHandle, now,
};
use crate::transport::redact;

/// How one chain stands at the end of the crawl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainOutcome {
    Ended(EndReason),
    /// A page failed after retries; the next run retries it.
    Failed {
        page: String,
        error: String,
    },
    Interrupted,
}

/// Crawls every chain of `profile`, one after another.
pub async fn crawl(
    profile: Arc<Profile>,
    source: &PageSource,
    state: State,
    writer: WriterHandle,
    cancel: CancellationToken,
) -> Result<Vec<(String, ChainOutcome)>, StateError> {
    let mut outcomes = Vec::new();
    for start in &profile.start {
        if cancel.is_cancelled() {
            outcomes.push((start.to_string(), ChainOutcome::Interrupted));
            continue;
        }
        let outcome = crawl_chain(&profile, start, source, &state, &writer, &cancel).await?;
        outcomes.push((start.to_string(), outcome));
    }
    Ok(outcomes)
}

async fn crawl_chain(
    profile: &Arc<Profile>,
    start: &Url,
    source: &PageSource,
    state: &State,
    writer: &WriterHandle,
    cancel: &CancellationToken,
) -> Result<ChainOutcome, StateError> {
    let key = start.to_string();
    let mut checkpoint = match read(state, {
        let key = key.clone();
        move |s| s.chain(&key)
    })
    .await?
    {
        Some(c) => c,
        None => ChainCheckpoint {
            next: Some(first_page(&profile.pagination, start)),
            end: None,
            pages_done: 0,
            images_found: 0,
            updated: now(),
        },
    };
    while let Some(position) = checkpoint.next.clone() {
        if cancel.is_cancelled() {
            return Ok(ChainOutcome::Interrupted);
        }
        let seen = read(state, {
            let url = position.url.clone();
            move |s| s.page(&url)
        })
        .await?;
        if position.done > 0 && seen.is_some_and(|p| p.status == PageStatus::Done) {
            checkpoint = ended(checkpoint, EndReason::Loop);
            write_checkpoint(writer, &key, &position, &checkpoint).await?;
            break;
        }
        let Ok(url) = Url::parse(&position.url) else {
            return Ok(ChainOutcome::Failed {
                page: position.url.clone(),
                error: "not a valid URL".into(),
            });
        };
        tracing::debug!(page = %redact(&url), "fetching page");
        let snapshot = match source.fetch(profile, start, &position, &url, cancel).await {
            Ok(snapshot) => snapshot,
            Err(PageFailure::Cancelled) => return Ok(ChainOutcome::Interrupted),
            Err(PageFailure::Missing(code)) if position.done > 0 && ends_on_missing(profile) => {
                tracing::debug!(page = %redact(&url), code, "page missing: end of pagination");
                checkpoint = ended(checkpoint, EndReason::MissingPage);
                write_checkpoint(writer, &key, &position, &checkpoint).await?;
                break;
            }
            Err(failure) => {
                let error = match failure {
                    PageFailure::Missing(code) => format!("HTTP {code}"),
                    PageFailure::Failed(f) => f.detail,
                    PageFailure::Cancelled => unreachable_cancel(),
                };
                tracing::warn!(page = %redact(&url), %error, "page failed; the next run retries it");
                writer
                    .commit_page(PageCommit {
                        start: key.clone(),
                        url: position.url.clone(),
                        number: position.number,
                        outcome: Err(error.clone()),
                        checkpoint: checkpoint.clone(),
                    })
                    .await?;
                return Ok(ChainOutcome::Failed {
                    page: position.url,
                    error,
                });
            }
        };
        let (images, next) = {
            let profile = Arc::clone(profile);
            let start = start.clone();
            let position = position.clone();
            tokio::task::spawn_blocking(move || {
                let analysis = analyze_page(&profile, &start, &position, &snapshot);
                let images: Vec<NewImage> = analysis
                    .accepted()
                    .map(|c| NewImage {
                        url: c.url.to_string(),
                        rule: c.rule.clone(),
                        attribute: c.attribute.clone(),
                        metadata: c.metadata.clone(),
                    })
                    .collect();
                (images, analysis.next)
            })
            .await
            .map_err(|_| StateError::WriterGone)?
        };
        checkpoint.pages_done += 1;
        checkpoint.images_found += images.len() as u64;
        checkpoint.updated = now();
        match next {
            NextPage::Fetch(p) => checkpoint.next = Some(p),
            NextPage::End(reason) => checkpoint = ended(checkpoint, reason),
        }
        writer
            .commit_page(PageCommit {
                start: key.clone(),
                url: position.url.clone(),
                number: position.number,
                outcome: Ok(images),
                checkpoint: checkpoint.clone(),
            })
            .await?;
    }
    Ok(ChainOutcome::Ended(
        checkpoint.end.unwrap_or(EndReason::SinglePage),
    ))
}

fn ended(mut checkpoint: ChainCheckpoint, reason: EndReason) -> ChainCheckpoint {
    checkpoint.next = None;
    checkpoint.end = Some(reason);
    checkpoint.updated = now();
    checkpoint
}

/// Page-number templates have no other way to know the last page than asking past it.
fn ends_on_missing(profile: &Profile) -> bool {
    matches!(
        profile.pagination,
        crate::profile::Pagination::UrlTemplate { .. }
    )
}

/// Commits a chain's end without a page of its own (loop or missing page).
async fn write_checkpoint(
    writer: &WriterHandle,
    key: &str,
    position: &PagePosition,
    checkpoint: &ChainCheckpoint,
) -> Result<(), StateError> {
    writer
        .commit_page(PageCommit {
            start: key.to_owned(),
            url: position.url.clone(),
            number: position.number,
            outcome: Ok(Vec::new()),
            checkpoint: checkpoint.clone(),
        })
        .await
        .map(|_| ())
}

fn unreachable_cancel() -> String {
    "cancelled".into()
}

/// Runs a state read on the blocking pool.
async fn read<T: Send + 'static>(
    state: &State,
    f: impl FnOnce(&State) -> Result<T, StateError> + Send + 'static,
) -> Result<T, StateError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || f(&state))
        .await
        .map_err(|_| StateError::WriterGone)?
}
