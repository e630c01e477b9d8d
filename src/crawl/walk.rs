//! The one walk of a chain, whatever its pagination: the checkpoint read (or begun at the first
//! page), a chain that ended walked again for what is new, then each page at the checkpoint
//! taken from the chain's [`ChainKind`] and committed to the chain's ledger ([`ChainPages`])
//! with the moved checkpoint, in one transaction. The kind says how a page is had (fetched
//! ahead, asked only if it changed, an API request, a response the rendered start page
//! fetched) and where the chain goes after it; the walk reads the checkpoint, and only the
//! ledger moves it.

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

    /// Before the first page is taken: pages had some other way, committed to `chain` (the
    /// responses a rendered start page fetched). `Some` when the chain stops there.
    async fn before(
        &mut self,
        _chain: &mut ChainPages<'_>,
    ) -> Result<Option<ChainOutcome>, StateError> {
        Ok(None)
    }

    /// The page at `position`, the checkpoint's next; the kind may ask `chain` what the job
    /// knows, and move the refresh counts of its checkpoint as it judges the page.
    async fn take(
        &mut self,
        position: &PagePosition,
        chain: &mut ChainPages<'_>,
    ) -> Result<Taken, StateError>;
}

/// Walks the chain from `start` with `kind`, from its checkpoint to its end, a page that
/// stops it, or the run's cancellation.
pub(super) async fn walk(
    crawler: &Crawler<'_>,
    start: &Url,
    mut kind: impl ChainKind,
) -> Result<ChainOutcome, StateError> {
    let key = start.to_string();
    let saved = read(crawler.state, {
        let key = key.clone();
        move |s| s.chain(&key)
    })
    .await?;
    let checkpoint = saved.unwrap_or_else(|| ChainCheckpoint {
        next: Some(kind.first()),
        updated: now(),
        ..ChainCheckpoint::default()
    });
    let mut chain = ChainPages::new(crawler.state, crawler.writer, key, checkpoint);
    if let Some(end) = chain.checkpoint.end {
        match kind.again(&chain.checkpoint) {
            Some(again) => {
                chain.checkpoint = again;
                chain.commit_checkpoint().await?;
            }
            None => return Ok(ChainOutcome::Ended(end)),
        }
    }
    if let Some(stopped) = kind.before(&mut chain).await? {
        return Ok(stopped);
    }
    while let Some(position) = chain.checkpoint.next.clone() {
        if crawler.cancel.is_cancelled() {
            return Ok(ChainOutcome::Interrupted);
        }
        match kind.take(&position, &mut chain).await? {
            Taken::Page { result, seen, next } => {
                let queued = matches!(&result, PageResult::Done { links, .. } if !links.is_empty());
                let stopped = commit_chain_page(&mut chain, position, result, seen, next);
                if let Some(stopped) = stopped.await? {
                    return Ok(stopped);
                }
                if queued {
                    crawler.links_added.notify_one();
                }
            }
            Taken::Unchanged(next) => chain.unchanged(&position, next).await?,
            Taken::From(from) => chain.checkpoint.next = Some(from),
            Taken::End(reason) => {
                let key = chain.key.clone();
                chain.end_chain(&key, &position, reason).await?;
            }
            Taken::Stop(outcome) => return Ok(outcome),
        }
    }
    Ok(ChainOutcome::Ended(
        chain.checkpoint.end.unwrap_or_else(|| kind.open_end()),
    ))
}

/// Commits the page at `position` of `chain` with the chain's checkpoint, moved on to `next`
/// when the page is done. `Some` when the page stops the chain: it failed, or was had only in
/// part (its images kept), and the next run asks it again.
pub(super) async fn commit_chain_page(
    chain: &mut ChainPages<'_>,
    position: PagePosition,
    result: PageResult,
    seen: PageSeen,
    next: Option<NextPage>,
) -> Result<Option<ChainOutcome>, StateError> {
    let url = position.url.clone();
    let page = PageUnit {
        start: chain.key.clone(),
        position,
        in_chain: true,
        result,
        next,
        seen,
    };
    Ok(match commit_page(chain, page).await? {
        PageCommitted::Failed(error) => Some(ChainOutcome::Failed {
            page: url,
            error: error.detail,
        }),
        PageCommitted::Done | PageCommitted::Before => None,
    })
}
