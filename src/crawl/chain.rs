//! A chain of pages: next links, URL templates, or a single page, walked from its checkpoint
//! with the pages a template predicts fetched ahead.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::walk::{ChainKind, Taken};
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
}

/// A chain of pages (next links, URL templates, a single page), for
/// [`walk`](super::walk::walk): the pages a
/// template predicts are fetched ahead, up to the crawl's concurrency, and taken in chain
/// order; a page fetched ahead of the chain's end (or of another next page than predicted) is
/// dropped unread.
pub(super) struct Pages<'a> {
    crawler: &'a Crawler<'a>,
    start: &'a Url,
    /// The pages fetched ahead, in chain order, and their positions.
    ahead: FuturesOrdered<BoxFuture<'a, Result<(PagePosition, Revisited), StateError>>>,
    queued: VecDeque<PagePosition>,
}

impl<'a> Pages<'a> {
    pub(super) fn new(crawler: &'a Crawler<'a>, start: &'a Url) -> Self {
        Self {
            crawler,
            start,
            ahead: FuturesOrdered::new(),
            queued: VecDeque::new(),
        }
    }
}

impl ChainKind for Pages<'_> {
    fn first(&self) -> PagePosition {
        first_page(&self.crawler.profile.pagination, self.start)
    }

    fn again(&self, checkpoint: &ChainCheckpoint) -> Option<ChainCheckpoint> {
        self.crawler.profile.refresh?;
        tracing::info!(start = %redact(self.start), "the chain ended before; walking it again for what is new");
        Some(refreshed(checkpoint.clone(), self.first()))
    }

    fn open_end(&self) -> EndReason {
        EndReason::SinglePage
    }

    async fn take(
        &mut self,
        position: &PagePosition,
        chain: &mut ChainPages<'_>,
    ) -> Result<Taken, StateError> {
        let profile = self.crawler.profile;
        let checkpoint = &mut chain.checkpoint;
        if self.crawler.ends_recording(position) {
            return Ok(Taken::Stop(ChainOutcome::Ended(EndReason::EndOfRecording)));
        }
        // A refresh reaching the old end (after a known head, or walking to it): on from
        // there as a first walk goes, pages it does not know being new.
        let at_tail = checkpoint.tail.as_ref() == Some(position);
        if at_tail {
            checkpoint.incremental = false;
            checkpoint.known_in_a_row = 0;
        }
        if self.queued.front() != Some(position) {
            // A refresh walks pages it knows: its head, and the old last page.
            let walked_before = checkpoint.incremental || at_tail;
            if let Some(end) = self.start_over(position, walked_before).await? {
                return Ok(end);
            }
        }
        // The head of a refresh fetches ahead no further than it may stop.
        let window = match (checkpoint.incremental, profile.refresh) {
            (true, Some(limit)) => profile
                .crawl
                .concurrency
                .min(usize::try_from(limit).unwrap_or(usize::MAX)),
            _ => profile.crawl.concurrency,
        };
        self.fetch_ahead(window, checkpoint.incremental);
        // Never empty: the page at the checkpoint is in it.
        let Some(fetched) = self.ahead.next().await else {
            return Ok(Taken::End(EndReason::SinglePage));
        };
        let (position, revisited) = fetched?;
        self.queued.pop_front();
        self.read(&position, revisited, chain).await
    }
}

impl Pages<'_> {
    /// Nothing fetched ahead yet, or not the page that came next: the window starts over at
    /// `position`, asked only if it changed when it was `walked_before` (by a refresh). A page
    /// done before, met again by a first walk, ends the chain as a loop.
    async fn start_over(
        &mut self,
        position: &PagePosition,
        walked_before: bool,
    ) -> Result<Option<Taken>, StateError> {
        let crawler = self.crawler;
        self.ahead = FuturesOrdered::new();
        self.queued.clear();
        let seen = read(crawler.state, {
            let url = position.url.clone();
            move |s| s.page(&url)
        })
        .await?;
        if position.done > 0 && !walked_before && seen.is_some_and(|p| p.status == PageStatus::Done)
        {
            return Ok(Some(Taken::End(EndReason::Loop)));
        }
        self.queued.push_back(position.clone());
        // Known pages, the old last page too, are asked only if they changed.
        let conditional = walked_before && crawler.asks_if_changed(crawler.profile);
        let page = crawler.chain_page(crawler.profile, self.start, position.clone(), conditional);
        self.ahead.push_back(page.boxed());
        Ok(None)
    }

    /// Starts fetching the pages the pagination predicts after the last one queued, until
    /// `window` are in flight (on a refresh's head, asked only if they changed).
    fn fetch_ahead(&mut self, window: usize, refresh: bool) {
        let (crawler, start) = (self.crawler, self.start);
        let profile = crawler.profile;
        while self.queued.len() < window {
            let Some(next) = self
                .queued
                .back()
                .and_then(|last| predict_next(&profile.pagination, profile.max_pages, start, last))
                .filter(|next| !crawler.source.is_past_recording(&next.url))
            else {
                break;
            };
            self.queued.push_back(next.clone());
            let page = crawler.chain_page(profile, start, next, refresh);
            self.ahead.push_back(page.boxed());
        }
    }

    /// The page at `position` as it came (or its `304`), through the page step: what the walk
    /// commits, and where the chain goes after it.
    async fn read(
        &self,
        position: &PagePosition,
        revisited: Revisited,
        chain: &mut ChainPages<'_>,
    ) -> Result<Taken, StateError> {
        let crawler = self.crawler;
        let profile = crawler.profile;
        let (fetched, validators) = match revisited {
            Revisited::Page(fetched, validators) => (fetched, validators),
            // A known page: nothing of it is stored again, the chain goes on past it.
            Revisited::Unchanged(next) => {
                let next = head_next(&mut chain.checkpoint, profile.refresh, true, Some(next));
                return Ok(Taken::Unchanged(next));
            }
        };
        let place = PagePlace {
            position,
            in_chain: true,
            depth: 0,
            max_depth: profile.crawl.max_depth,
            ends_on_missing: ends_on_missing(profile),
            inherited: &BTreeMap::new(),
            revisited: &crawler.revisited,
        };
        let (result, next) = match page_step(&place, fetched) {
            PageStep::Interrupted => return Ok(Taken::Stop(ChainOutcome::Interrupted)),
            PageStep::EndOfChain { code } => {
                tracing::debug!(page = %position.url, code, "page missing: end of pagination");
                return Ok(Taken::End(EndReason::MissingPage));
            }
            PageStep::Commit { result, next } => (result, next),
        };
        // What a later refresh asks the page with: the page's own next, not where a head
        // that met enough known pages jumps to.
        let seen = PageSeen {
            validators,
            next: next.clone(),
        };
        let next = match (chain.checkpoint.incremental, profile.refresh, &result) {
            (true, Some(_), PageResult::Done { images, links }) => {
                let images = images.iter().map(|i| i.url.clone()).collect();
                let links = links.iter().map(|l| l.url.clone()).collect();
                let known = chain.knows_all(images, links).await?;
                head_next(&mut chain.checkpoint, profile.refresh, known, next)
            }
            _ => next,
        };
        Ok(Taken::Page { result, seen, next })
    }
}

impl Crawler<'_> {
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
