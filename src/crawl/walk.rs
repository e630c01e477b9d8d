//! The one walk of a chain, whatever its pagination: the checkpoint read (or begun at the first
//! page), a chain that ended walked again for what is new, then each page at the checkpoint
//! taken from the chain's [`ChainKind`] and committed with the moved checkpoint in one
//! transaction. The kind says how a page is had (fetched ahead, asked only if it changed, an
//! API request, a response the rendered start page fetched) and where the chain goes after
//! it; the walk alone reads and commits the checkpoint.

use super::*;

/// What a chain's kind gives the walk for the page at the checkpoint.
// Nearly every page is taken as `Page`: boxing it would add an allocation to each.
#[allow(clippy::large_enum_variant)]
pub(super) enum Taken {
    /// The page, read: committed with the checkpoint, moved on to `next` when the page is
    /// done. One that failed or was had in part stops the chain where it is.
    Page {
        result: PageResult,
        seen: PageSeen,
        next: Option<NextPage>,
    },
    /// Unchanged since it was done (`304`): nothing of it is stored again, the chain goes on
    /// to the page that followed it then (or where a refresh's head jumps to).
    Unchanged(Option<NextPage>),
    /// Nothing taken: the walk goes on from this page instead (a cursor that expired).
    From(PagePosition),
    /// The chain ends before this page, for this reason (a missing page, a loop, `max_pages`).
    End(EndReason),
    /// The walk stops here and commits nothing (interrupted, the end of a recording).
    Stop(ChainOutcome),
}

/// How the pages of one kind of chain are had, one after the other, for [`walk`].
pub(super) trait ChainKind {
    /// The chain's first page.
    fn first(&self) -> PagePosition;

    /// A chain that ended before (`checkpoint`), set to walk again for what is new, or `None`
    /// when this run has nothing to look for in it.
    fn again(&self, checkpoint: &ChainCheckpoint) -> Option<ChainCheckpoint>;

    /// Why the chain ended when its last page named no next and no reason.
    fn open_end(&self) -> EndReason;

    /// Before the first page is taken: pages had some other way and committed already (the
    /// responses a rendered start page fetched). `Some` when the chain stops there.
    async fn before(
        &mut self,
        _key: &str,
        _checkpoint: &mut ChainCheckpoint,
    ) -> Result<Option<ChainOutcome>, StateError> {
        Ok(None)
    }

    /// The page at `position`, the checkpoint's next; the kind may move the refresh counts of
    /// `checkpoint` as it judges the page.
    async fn take(
        &mut self,
        position: &PagePosition,
        checkpoint: &mut ChainCheckpoint,
    ) -> Result<Taken, StateError>;
}

/// Walks the chain from `start` with `kind`, from its checkpoint to its end, a page that
/// stops it, or the run's cancellation.
pub(super) async fn walk(
    crawler: &Crawler<'_>,
    start: &Url,
    mut kind: impl ChainKind,
) -> Result<ChainOutcome, StateError> {
    let writer = crawler.writer;
    let key = start.to_string();
    let saved = read(crawler.state, {
        let key = key.clone();
        move |s| s.chain(&key)
    })
    .await?;
    let mut checkpoint = saved.unwrap_or_else(|| ChainCheckpoint {
        next: Some(kind.first()),
        updated: now(),
        ..ChainCheckpoint::default()
    });
    if let Some(end) = checkpoint.end {
        match kind.again(&checkpoint) {
            Some(again) => {
                checkpoint = again;
                writer.commit_checkpoint(&key, &checkpoint).await?;
            }
            None => return Ok(ChainOutcome::Ended(end)),
        }
    }
    if let Some(stopped) = kind.before(&key, &mut checkpoint).await? {
        return Ok(stopped);
    }
    while let Some(position) = checkpoint.next.clone() {
        if crawler.cancel.is_cancelled() {
            return Ok(ChainOutcome::Interrupted);
        }
        match kind.take(&position, &mut checkpoint).await? {
            Taken::Page { result, seen, next } => {
                let queued = matches!(&result, PageResult::Done { links, .. } if !links.is_empty());
                let stopped =
                    commit_chain_page(writer, &key, &position, result, seen, &mut checkpoint, next)
                        .await?;
                if let Some(stopped) = stopped {
                    return Ok(stopped);
                }
                if queued {
                    crawler.links_added.notify_one();
                }
            }
            Taken::Unchanged(next) => {
                advance(&mut checkpoint, &position, 0, next);
                writer.commit_unchanged(&key, &checkpoint).await?;
            }
            Taken::From(from) => checkpoint.next = Some(from),
            Taken::End(reason) => {
                checkpoint = ended(checkpoint, reason);
                writer.commit_checkpoint(&key, &checkpoint).await?;
            }
            Taken::Stop(outcome) => return Ok(outcome),
        }
    }
    Ok(ChainOutcome::Ended(
        checkpoint.end.unwrap_or_else(|| kind.open_end()),
    ))
}

/// Commits a page of the chain from `key` with the chain's checkpoint, in one transaction: a
/// page done moves the chain on to `next`; one that failed, or was had only in part, leaves
/// the checkpoint where it was (the next run retries the page), and the chain stops with that
/// outcome (`Some`).
pub(super) async fn commit_chain_page(
    writer: &WriterHandle,
    key: &str,
    position: &PagePosition,
    result: PageResult,
    seen: PageSeen,
    checkpoint: &mut ChainCheckpoint,
    next: Option<NextPage>,
) -> Result<Option<ChainOutcome>, StateError> {
    let stopped = result.error().map(|error| {
        if let PageResult::Partial { images, .. } = &result {
            tracing::warn!(page = %position.url, images = images.len(), error = %error.detail, "page rendered in part: its images are kept, the next run retries it");
        } else {
            tracing::warn!(page = %position.url, error = %error.detail, "page failed; the next run retries it");
        }
        ChainOutcome::Failed {
            page: position.url.clone(),
            error: error.detail.clone(),
        }
    });
    if stopped.is_none() {
        advance(checkpoint, position, result.images().len() as u64, next);
    }
    writer
        .commit_page(PageCommit {
            start: key.to_owned(),
            url: position.url.clone(),
            number: position.number,
            result,
            listed: Vec::new(),
            checkpoint: Some(checkpoint.clone()),
            seen,
        })
        .await?;
    Ok(stopped)
}

/// Moves `checkpoint` past the page at `position`, done with `images` found: on to `next`.
fn advance(
    checkpoint: &mut ChainCheckpoint,
    position: &PagePosition,
    images: u64,
    next: Option<NextPage>,
) {
    // A refresh's head walks pages done before: the old end stays where a later one looks.
    if !checkpoint.incremental {
        checkpoint.last = Some(position.clone());
    }
    checkpoint.pages_done += 1;
    checkpoint.images_found += images;
    checkpoint.updated = now();
    match next {
        Some(NextPage::Fetch(p)) => checkpoint.next = Some(p),
        Some(NextPage::End(reason)) => *checkpoint = ended(checkpoint.clone(), reason),
        None => {}
    }
}

fn ended(mut checkpoint: ChainCheckpoint, reason: EndReason) -> ChainCheckpoint {
    checkpoint.next = None;
    checkpoint.end = Some(reason);
    checkpoint.tail = None;
    checkpoint.updated = now();
    checkpoint
}
