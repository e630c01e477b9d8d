//! A chain of pages: next links, URL templates, or a single page, walked from its checkpoint
//! with the pages a template predicts fetched ahead.

use super::*;

impl Crawler<'_> {
    /// Whether `position` is past the end of the recording being replayed: a chain's later
    /// page the recording does not have. The chain ends there, as the recording did (`scrape
    /// record --pages N`); a first page missing is a failure.
    fn ends_recording(&self, position: &PagePosition) -> bool {
        let past = position.done > 0 && self.source.is_past_recording(&position.url);
        if past {
            tracing::info!(page = %position.url, "end of recording: the chain ends here");
        }
        past
    }

    /// Walks the chain from `start` from its checkpoint. Pages whose URL is known before the
    /// page before them is read (URL templates) are fetched ahead, up to the crawl's
    /// concurrency; each is committed in chain order, and a page fetched ahead of a chain's end
    /// (or of a different next page than predicted) is dropped unread.
    pub(super) async fn crawl_chain(&self, start: &Url) -> Result<ChainOutcome, StateError> {
        let (profile, writer) = (self.profile, self.writer);
        let key = start.to_string();
        let mut checkpoint = match read(self.state, {
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
                ..ChainCheckpoint::default()
            },
        };
        if checkpoint.next.is_none()
            && let (Some(_), Some(_)) = (profile.refresh, checkpoint.end)
        {
            tracing::info!(start = %redact(start), "the chain ended before; walking it again for what is new");
            checkpoint = refreshed(checkpoint, first_page(&profile.pagination, start));
            writer.commit_checkpoint(&key, &checkpoint).await?;
        }
        let mut ahead = FuturesOrdered::new();
        let mut queued: VecDeque<PagePosition> = VecDeque::new();
        while let Some(position) = checkpoint.next.clone() {
            if self.cancel.is_cancelled() {
                return Ok(ChainOutcome::Interrupted);
            }
            if self.ends_recording(&position) {
                return Ok(ChainOutcome::Ended(EndReason::EndOfRecording));
            }
            // A refresh reaching the old end (after a known head, or walking to it): on from
            // there as a first walk goes, pages it does not know being new.
            let at_tail = checkpoint.tail.as_ref() == Some(&position);
            if at_tail {
                checkpoint.incremental = false;
                checkpoint.known_in_a_row = 0;
            }
            // The head of a refresh fetches ahead no further than it may stop.
            let window = match (checkpoint.incremental, profile.refresh) {
                (true, Some(limit)) => profile
                    .crawl
                    .concurrency
                    .min(usize::try_from(limit).unwrap_or(usize::MAX)),
                _ => profile.crawl.concurrency,
            };
            if queued.front() != Some(&position) {
                // Nothing fetched ahead yet, or not the page that came next: start over here.
                ahead = FuturesOrdered::new();
                queued.clear();
                let seen = read(self.state, {
                    let url = position.url.clone();
                    move |s| s.page(&url)
                })
                .await?;
                // A refresh walks pages it knows: its head, and the old last page.
                let walked_before = checkpoint.incremental || at_tail;
                if position.done > 0
                    && !walked_before
                    && seen.is_some_and(|p| p.status == PageStatus::Done)
                {
                    checkpoint = ended(checkpoint, EndReason::Loop);
                    writer.commit_checkpoint(&key, &checkpoint).await?;
                    break;
                }
                queued.push_back(position.clone());
                // Known pages, the old last page too, are asked only if they changed.
                let conditional = walked_before && self.asks_if_changed(profile);
                ahead.push_back(self.chain_page(profile, start, position.clone(), conditional));
            }
            while queued.len() < window {
                let Some(next) = queued
                    .back()
                    .and_then(|last| {
                        predict_next(&profile.pagination, profile.max_pages, start, last)
                    })
                    .filter(|next| !self.source.is_past_recording(&next.url))
                else {
                    break;
                };
                queued.push_back(next.clone());
                ahead.push_back(self.chain_page(profile, start, next, checkpoint.incremental));
            }
            let Some(fetched) = ahead.next().await else {
                break;
            };
            let (position, revisited) = fetched?;
            queued.pop_front();
            let (fetched, validators) = match revisited {
                Revisited::Page(fetched, validators) => (fetched, validators),
                Revisited::Unchanged(next) => {
                    // A known page: nothing of it is stored again, the chain goes on past it.
                    let next = head_next(&mut checkpoint, profile.refresh, true, Some(next));
                    advance(&mut checkpoint, &position, 0, next);
                    writer.commit_unchanged(&key, &checkpoint).await?;
                    continue;
                }
            };
            let place = PagePlace {
                position: &position,
                in_chain: true,
                depth: 0,
                max_depth: profile.crawl.max_depth,
                ends_on_missing: ends_on_missing(profile),
                inherited: &BTreeMap::new(),
                revisited: &self.revisited,
            };
            let (result, next) = match page_step(&place, fetched) {
                PageStep::Interrupted => return Ok(ChainOutcome::Interrupted),
                PageStep::EndOfChain { code } => {
                    tracing::debug!(page = %position.url, code, "page missing: end of pagination");
                    checkpoint = ended(checkpoint, EndReason::MissingPage);
                    writer.commit_checkpoint(&key, &checkpoint).await?;
                    break;
                }
                PageStep::Commit { result, next } => (result, next),
            };
            // What a later refresh asks the page with: the page's own next, not where a head
            // that met enough known pages jumps to.
            let seen = PageSeen {
                validators,
                next: next.clone(),
            };
            let next = match (checkpoint.incremental, profile.refresh, &result) {
                (true, Some(_), PageResult::Done { images, links }) => {
                    let known = self.knows_all(images, links).await?;
                    head_next(&mut checkpoint, profile.refresh, known, next)
                }
                _ => next,
            };
            let queued = matches!(&result, PageResult::Done { links, .. } if !links.is_empty());
            if let Some(stopped) =
                commit_chain_page(writer, &key, &position, result, seen, &mut checkpoint, next)
                    .await?
            {
                return Ok(stopped);
            }
            if queued {
                self.links_added.notify_one();
            }
        }
        Ok(ChainOutcome::Ended(
            checkpoint.end.unwrap_or(EndReason::SinglePage),
        ))
    }

    /// The chain's page at `position`; on a refresh's head (`refresh`), asked only if it
    /// changed when the state kept the page's validators and next page.
    async fn chain_page(
        &self,
        profile: &Arc<Profile>,
        start: &Url,
        position: PagePosition,
        refresh: bool,
    ) -> Result<(PagePosition, Revisited), StateError> {
        let revisit = match refresh {
            false => None,
            true => read(self.state, {
                let url = position.url.clone();
                move |s| s.page(&url)
            })
            .await?
            .and_then(|record| {
                record
                    .revisit()
                    .map(|(validators, next)| (validators.clone(), next.clone()))
            }),
        };
        // A page rendered again (no validators) loads more of itself only while it brings
        // images the job does not know.
        let known = match (refresh, &revisit, profile.render, profile.refresh) {
            (true, None, render, Some(rounds)) if render != RenderMode::Static => {
                let url = position.url.clone();
                let urls = read(self.state, move |s| s.images_found_on(&url)).await?;
                let rounds = u32::try_from(rounds).unwrap_or(u32::MAX);
                (!urls.is_empty()).then(|| Arc::new(KnownImages { urls, rounds }))
            }
            _ => None,
        };
        Ok(self
            .revisit_page(profile, start, position, revisit, known)
            .await)
    }

    /// Whether the state knows every image URL and link of a page: a known page to a refresh.
    async fn knows_all(&self, images: &[NewImage], links: &[NewLink]) -> Result<bool, StateError> {
        let images: Vec<String> = images.iter().map(|i| i.url.clone()).collect();
        let links: Vec<String> = links.iter().map(|l| l.url.clone()).collect();
        read(self.state, move |s| {
            let images: Vec<&str> = images.iter().map(String::as_str).collect();
            let links: Vec<&str> = links.iter().map(String::as_str).collect();
            s.knows_all(&images, &links)
        })
        .await
    }
}

/// `checkpoint`, of a chain that ended, made the start of a refresh: its head is walked again
/// from `first`, and it goes on at the last page of the walks before.
fn refreshed(mut checkpoint: ChainCheckpoint, first: PagePosition) -> ChainCheckpoint {
    checkpoint.next = Some(first);
    checkpoint.end = None;
    checkpoint.incremental = true;
    checkpoint.known_in_a_row = 0;
    checkpoint.tail = checkpoint.last.clone();
    checkpoint.updated = now();
    checkpoint
}

/// Where a chain goes after a page whose own next is `next`: on a refresh's head (`refresh`
/// being its `stop_after_known`), on to it, or to the old end once the page, `known`, made
/// enough known pages in a row; elsewhere, to `next`.
pub(super) fn head_next(
    checkpoint: &mut ChainCheckpoint,
    refresh: Option<u64>,
    known: bool,
    next: Option<NextPage>,
) -> Option<NextPage> {
    let (true, Some(limit)) = (checkpoint.incremental, refresh) else {
        return next;
    };
    match resume::after_head_page(known, &mut checkpoint.known_in_a_row, limit) {
        AfterKnown::Next => next,
        AfterKnown::Tail => Some(match checkpoint.tail.clone() {
            Some(tail) => NextPage::Fetch(tail),
            None => NextPage::End(EndReason::KnownItems),
        }),
    }
}
