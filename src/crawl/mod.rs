//! Crawl: walks each start URL's chain of pages, fetching, analysing and checkpointing.
//!
//! Chains run side by side (every start URL is a chain), with `[crawl] concurrency` pages in
//! flight over all of them and `per_host` per host; a page takes its place among the
//! `concurrency` only once its host's turn has come, and chains and linked pages are started
//! host by host in turn, so a host that is slow or silent holds up no other. Inside a chain, order is kept where the
//! page decides what comes next (next links, cursors); a URL template's pages are fetched ahead
//! in a window, and pages fetched past the chain's end are discarded, never counted or stored.
//!
//! Each page's accepted images and the chain's next position are committed in one transaction
//! through the state writer, in chain order; a rerun continues from the committed position. A
//! page that fails after retries stops its chain for this run and is retried by the next one.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::stream::{self, FuturesOrdered, FuturesUnordered, StreamExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use url::Url;

use redb::ReadableDatabase;

use crate::engine::source::PageSource;
use crate::engine::{
    ApiReply, Fetched, PagePlace, PageStep, analyse, api_images, ends_on_missing, failure_record,
    other_failure, page_step, read_api_reply,
};
use crate::fetch::PageFailure;
use crate::fetch::api::ApiFetcher;
use crate::net::session::TokenKeeper;
use crate::net::{Failure, FailureClass, HttpClient};
use crate::page::CapturedJson;
use crate::paginate::json_cursor::{self, ApiReading};
use crate::paginate::resume::{self, AfterExpiry};
use crate::paginate::{EndReason, NextPage, PagePosition, first_page, predict_next};
use crate::profile::{ApiPaging, JsonCursor, Pagination, Profile, RenderMode};
use crate::redact::redact;
use crate::state::{
    ChainCheckpoint, FailureRecord, LinkRecord, NewImage, PageCommit, PageResult, PageStatus,
    State, StateError, WriterHandle, now,
};
use crate::telemetry::Live;

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

/// What the crawl did: how each chain ended (in start URL order) and what became of the
/// pages reached through links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Crawled {
    pub chains: Vec<(String, ChainOutcome)>,
    pub links: LinkTally,
}

/// Pages reached through `[[follow]]` links in this run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkTally {
    pub done: u64,
    /// Failed after retries; they stay queued and the next run retries them.
    pub failed: u64,
    /// Still queued when the run was interrupted.
    pub interrupted: u64,
}

/// The API fetcher a `kind = "json_cursor"` profile's chains call the API with: the run's
/// `client`, the session's `token` if there is one, and the crawl's per-host limits. `None`
/// for other profiles.
pub fn api_fetcher(
    profile: &Profile,
    source: &PageSource,
    client: HttpClient,
    token: Option<Arc<TokenKeeper>>,
) -> Option<ApiFetcher> {
    match &profile.pagination {
        Pagination::JsonCursor(c) => Some(ApiFetcher::new(
            client,
            profile.download.retries,
            Arc::clone(source.hosts()),
            &c.headers,
            token,
        )),
        _ => None,
    }
}

/// Crawls every chain of `profile`, side by side, and the pages their `[[follow]]` links lead
/// to, with at most `[crawl] concurrency` pages in flight over all of them; API chains call
/// the API through `api` (see [`api_fetcher`]), like pages and images go through the run's
/// client.
pub async fn crawl(
    profile: Arc<Profile>,
    source: &PageSource,
    api: Option<ApiFetcher>,
    state: State,
    writer: WriterHandle,
    live: Arc<Live>,
    cancel: CancellationToken,
) -> Result<Crawled, StateError> {
    let levels = profile
        .levels
        .keys()
        .filter_map(|name| Some((name.clone(), Arc::new(profile.for_level(name)?))))
        .collect();
    let crawler = Crawler {
        profile: &profile,
        levels,
        source,
        state: &state,
        writer: &writer,
        live: &live,
        cancel: &cancel,
        links_added: Notify::new(),
        chains_done: AtomicBool::new(false),
    };
    let chains = async {
        let outcomes = crawler.crawl_chains(api.as_ref()).await;
        crawler.chains_done.store(true, Ordering::SeqCst);
        crawler.links_added.notify_one();
        outcomes
    };
    let (chains, links) = tokio::try_join!(chains, crawler.crawl_links())?;
    Ok(Crawled { chains, links })
}

/// What every chain of one crawl shares.
struct Crawler<'a> {
    profile: &'a Arc<Profile>,
    /// The profile as it applies to each level's pages.
    levels: HashMap<String, Arc<Profile>>,
    source: &'a PageSource,
    state: &'a State,
    writer: &'a WriterHandle,
    /// Pages in flight, for the progress display.
    live: &'a Live,
    cancel: &'a CancellationToken,
    /// Told when a commit queued links, and when the chains are all done.
    links_added: Notify,
    chains_done: AtomicBool,
}

impl Crawler<'_> {
    /// Every start URL's chain, side by side; outcomes in start URL order.
    async fn crawl_chains(
        &self,
        api: Option<&ApiFetcher>,
    ) -> Result<Vec<(String, ChainOutcome)>, StateError> {
        self.live.set_chains(self.profile.start.len() as u64);
        let mut chains = stream::iter(by_host_in_turn(&self.profile.start))
            .map(|(index, start)| async move {
                let _chain = self.live.begin_chain();
                let outcome = match (&self.profile.pagination, api) {
                    _ if self.cancel.is_cancelled() => Ok(ChainOutcome::Interrupted),
                    (Pagination::JsonCursor(cursor), Some(api)) => {
                        ApiChain {
                            crawler: self,
                            cursor,
                            api,
                            start,
                        }
                        .crawl()
                        .await
                    }
                    _ => self.crawl_chain(start).await,
                };
                outcome.map(|outcome| (index, start.to_string(), outcome))
            })
            // Chains waiting for their hosts' turns hold no page's place: more of them than
            // places run, so the places of hosts that are slow go to others.
            .buffer_unordered(
                self.profile
                    .crawl
                    .concurrency
                    .saturating_mul(WAITING_PER_PLACE),
            );
        let mut outcomes = Vec::with_capacity(self.profile.start.len());
        while let Some(done) = chains.next().await {
            outcomes.push(done?);
        }
        outcomes.sort_by_key(|(index, _, _)| *index);
        Ok(outcomes
            .into_iter()
            .map(|(_, start, outcome)| (start, outcome))
            .collect())
    }

    /// The link queue: pages `[[follow]]` links lead to, read from the state in the order they
    /// were found, while the chains run and after, until the queue is empty and nothing in
    /// flight can add to it. A linked page's images and the links it leads to commit with it;
    /// a failed one stays queued for the next run.
    async fn crawl_links(&self) -> Result<LinkTally, StateError> {
        let mut tally = LinkTally::default();
        if self.levels.is_empty() {
            return Ok(tally);
        }
        let room = self
            .profile
            .crawl
            .concurrency
            .saturating_mul(WAITING_PER_PLACE);
        let mut from = 0;
        let mut in_flight = FuturesUnordered::new();
        loop {
            if !self.cancel.is_cancelled() && in_flight.len() < room {
                let limit = room - in_flight.len();
                let batch = read(self.state, move |s| s.queued_links_from(from, limit)).await?;
                for (url, link) in batch {
                    from = link.seq + 1;
                    in_flight.push(self.crawl_link(url, link));
                }
            }
            if in_flight.is_empty() {
                // Chains done, and the look at the queue just now found nothing: no commit
                // can queue a link any more.
                if self.cancel.is_cancelled() || self.chains_done.load(Ordering::SeqCst) {
                    break;
                }
                tokio::select! {
                    () = self.links_added.notified() => {}
                    () = self.cancel.cancelled() => {}
                }
                continue;
            }
            tokio::select! {
                Some(done) = in_flight.next() => match done? {
                    LinkOutcome::Done => tally.done += 1,
                    LinkOutcome::Failed => tally.failed += 1,
                    LinkOutcome::Interrupted => tally.interrupted += 1,
                },
                () = self.links_added.notified(), if in_flight.len() < room => {}
            }
        }
        Ok(tally)
    }

    /// One linked page: fetched and analysed by its level's rules, committed with its images
    /// (carrying what the link passed down) and the links it leads to.
    async fn crawl_link(&self, url: String, link: LinkRecord) -> Result<LinkOutcome, StateError> {
        let commit = |result: PageResult| PageCommit {
            start: link.start.clone(),
            url: url.clone(),
            number: 0,
            result,
            checkpoint: None,
        };
        let Some(level) = self.levels.get(&link.level) else {
            let error = other_failure(format!(
                "the profile has no level `{}` any more",
                link.level
            ));
            self.writer
                .commit_page(commit(PageResult::Failed(error)))
                .await?;
            return Ok(LinkOutcome::Failed);
        };
        let start = Url::parse(&link.start).unwrap_or_else(|_| self.profile.start[0].clone());
        let position = PagePosition {
            url: url.clone(),
            number: 0,
            done: 0,
            cursor: None,
            after_id: None,
            offset: 0,
        };
        let (position, fetched) = self.fetch_page(level, &start, position).await;
        let place = PagePlace {
            position: &position,
            in_chain: false,
            depth: link.depth,
            max_depth: self.profile.crawl.max_depth,
            ends_on_missing: false,
            inherited: &link.metadata,
        };
        let result = match page_step(&place, fetched) {
            PageStep::Interrupted => return Ok(LinkOutcome::Interrupted),
            // Only a chain's page ends a chain.
            PageStep::EndOfChain { .. } => return Ok(LinkOutcome::Failed),
            PageStep::Commit { result, .. } => result,
        };
        let queued = matches!(&result, PageResult::Done { links, .. } if !links.is_empty());
        let outcome = match &result {
            PageResult::Done { .. } => LinkOutcome::Done,
            PageResult::Partial { images, error } => {
                tracing::warn!(page = %url, images = images.len(), error = %error.detail, "linked page rendered in part: its images are kept, the next run retries it");
                LinkOutcome::Failed
            }
            PageResult::Failed(error) => {
                tracing::warn!(page = %url, error = %error.detail, "linked page failed; the next run retries it");
                LinkOutcome::Failed
            }
        };
        self.writer.commit_page(commit(result)).await?;
        if queued {
            self.links_added.notify_one();
        }
        Ok(outcome)
    }
}

/// Chains, or linked pages, under way for each place of `[crawl] concurrency`: those of a slow
/// host wait for its turn without a place, while the others use the places.
const WAITING_PER_PLACE: usize = 4;

/// The start URLs with their indexes, one host after another in turn (the first URL of each
/// host, then the second of each, ...), each host's in its own order: a host with many start
/// URLs that is slow to answer does not keep the other hosts' chains from starting.
fn by_host_in_turn(starts: &[Url]) -> Vec<(usize, &Url)> {
    let mut rank: HashMap<(Option<&str>, Option<u16>), usize> = HashMap::new();
    let mut ranked: Vec<(usize, usize, &Url)> = starts
        .iter()
        .enumerate()
        .map(|(index, url)| {
            let seen = rank
                .entry((url.host_str(), url.port_or_known_default()))
                .or_default();
            *seen += 1;
            (*seen, index, url)
        })
        .collect();
    ranked.sort_by_key(|(turn, index, _)| (*turn, *index));
    ranked
        .into_iter()
        .map(|(_, index, url)| (index, url))
        .collect()
}

/// How one linked page ended.
enum LinkOutcome {
    Done,
    Failed,
    Interrupted,
}

impl Crawler<'_> {
    /// Fetches the page at `position` (of the chain from `start`, or reached from it through
    /// links) under the crawl's page limit, the way `profile` (the job's, or a level's) says,
    /// and analyses it on the blocking pool; chains, windows and the link queue run many of
    /// these at once.
    async fn fetch_page(
        &self,
        profile: &Arc<Profile>,
        start: &Url,
        position: PagePosition,
    ) -> (PagePosition, Fetched) {
        let Ok(url) = Url::parse(&position.url) else {
            let failed = Failure::new(FailureClass::Other, "not a valid URL");
            return (position, Err(PageFailure::Failed(failed)));
        };
        let snapshot = {
            let _counted = self.live.begin_page();
            tracing::debug!(page = %redact(&url), "fetching page");
            self.source
                .fetch(profile, start, &position, &url, self.cancel)
                .await
        };
        let snapshot = match snapshot {
            Ok(snapshot) => snapshot,
            Err(failure) => return (position, Err(failure)),
        };
        // A cancelled run does not wait for an analysis still going: the page is fetched again
        // next time.
        let analysed = tokio::select! {
            analysed = analyse(Arc::clone(profile), start.clone(), position.clone(), snapshot) => analysed,
            () = self.cancel.cancelled() => Err(PageFailure::Cancelled),
        };
        (position, analysed)
    }
}

/// One chain of `kind = "json_cursor"` API pages: the tool calls the API itself (after, with
/// `render = "browser"`, the pages the start page fetched itself).
struct ApiChain<'a> {
    crawler: &'a Crawler<'a>,
    cursor: &'a JsonCursor,
    api: &'a ApiFetcher,
    start: &'a Url,
}

impl<'a> std::ops::Deref for ApiChain<'a> {
    type Target = Crawler<'a>;

    fn deref(&self) -> &Self::Target {
        self.crawler
    }
}

/// Where a chain stands in the API responses its rendered start page fetches.
struct CapturedWalk {
    /// The API endpoint of the chain's requests; other captured responses are not its pages.
    endpoint: Url,
    /// Responses that came before the page they follow, by the cursor they were sent with.
    waiting: HashMap<Option<String>, (Url, CapturedJson)>,
    /// Cursors whose page is committed: a response sent with one again is a repeat.
    taken: HashSet<Option<String>>,
    pages: u64,
    /// A captured page was expired or broken: the rest is asked for directly.
    stopped: bool,
}

impl CapturedWalk {
    /// At most this many responses wait for their turn; more are asked for directly later.
    const MAX_WAITING: usize = 64;

    fn new(endpoint: Url) -> Self {
        Self {
            endpoint,
            waiting: HashMap::new(),
            taken: HashSet::new(),
            pages: 0,
            stopped: false,
        }
    }
}

impl ApiChain<'_> {
    /// Walks the chain from its checkpoint: each page's images and the new checkpoint (cursor,
    /// last id, counts) are committed together. A saved cursor the API calls expired is
    /// replaced by the last id (or, without `after_id`, by a walk from the first page: images
    /// are deduplicated by URL, so nothing is stored twice).
    async fn crawl(&self) -> Result<ChainOutcome, StateError> {
        let key = self.start.to_string();
        let number = json_cursor::first_number(self.cursor);
        let first = || json_cursor::position(self.cursor, self.start, number, 0, None, None);
        let mut checkpoint = read(self.state, {
            let key = key.clone();
            move |s| s.chain(&key)
        })
        .await?
        .unwrap_or_else(|| ChainCheckpoint {
            next: Some(first()),
            updated: now(),
            ..ChainCheckpoint::default()
        });
        if let Some(end) = checkpoint.end {
            let walk = resume::next_walk(
                self.cursor,
                self.start,
                checkpoint.last_id.as_deref(),
                checkpoint.newest_id.as_deref(),
            );
            match walk {
                Some(position) => {
                    tracing::info!(start = %redact(self.start), "the chain ended before; looking for new items");
                    checkpoint.incremental = position.after_id.is_none();
                    checkpoint.known_in_a_row = 0;
                    checkpoint.stop_at_id = if self.cursor.stop_at_known_id {
                        checkpoint.newest_id.clone()
                    } else {
                        None
                    };
                    checkpoint.end = None;
                    checkpoint.next = Some(position);
                }
                None => return Ok(ChainOutcome::Ended(end)),
            }
        }
        let fresh = checkpoint.pages_done == 0
            && checkpoint
                .next
                .as_ref()
                .is_some_and(|p| p.cursor.is_none() && p.after_id.is_none());
        // Numbered pages are asked for directly: which captured response is which page
        // cannot be told from a cursor.
        let by_cursor = matches!(self.cursor.paging, ApiPaging::Cursor(_));
        if self.profile.render == RenderMode::Browser
            && fresh
            && by_cursor
            && let Some(outcome) = self.render_pages(&key, &mut checkpoint).await?
        {
            return Ok(outcome);
        }
        while let Some(position) = checkpoint.next.clone() {
            if self.cancel.is_cancelled() {
                return Ok(ChainOutcome::Interrupted);
            }
            if self
                .profile
                .max_pages
                .is_some_and(|max| position.done >= max)
            {
                // The rendered page fetched `max_pages` pages or more by itself.
                checkpoint = ended(checkpoint, EndReason::MaxPages);
                self.writer.commit_checkpoint(&key, &checkpoint).await?;
                break;
            }
            let api = self.api;
            let request = json_cursor::request(self.cursor, self.start, &position);
            if position.done > 0 && api.is_past_recording(&request) {
                tracing::info!(page = %redact(&request.url), "end of recording: the chain ends here");
                return Ok(ChainOutcome::Ended(EndReason::EndOfRecording));
            }
            tracing::debug!(page = %redact(&request.url), number = position.number, "API request");
            let response = api.fetch(&request, self.cancel).await;
            let response = match response {
                Ok(response) => response,
                Err(PageFailure::Cancelled) => return Ok(ChainOutcome::Interrupted),
                Err(failure) => {
                    return self
                        .fail(&key, &position, &mut checkpoint, failure_record(failure))
                        .await;
                }
            };
            let reading = self
                .read_reply(
                    &position,
                    (response.url, response.status, response.body),
                    self.profile.max_pages,
                )
                .await?;
            let page = match reading {
                ApiReading::Page(page) => page,
                ApiReading::Failed(error) => {
                    return self
                        .fail(&key, &position, &mut checkpoint, other_failure(error))
                        .await;
                }
                ApiReading::Expired { reason } => {
                    let last_id = checkpoint.last_id.as_deref();
                    let resume = match resume::after_expiry(
                        self.cursor,
                        self.start,
                        &position,
                        last_id,
                    ) {
                        AfterExpiry::AfterId(resume) => {
                            tracing::warn!(start = %redact(self.start), %reason, "the saved cursor has expired; resuming after the last id `{}`", last_id.unwrap_or_default());
                            resume
                        }
                        AfterExpiry::FromFirst(first) => {
                            tracing::warn!(start = %redact(self.start), %reason, "the saved cursor has expired and there is no id to resume after; walking again from the first page");
                            first
                        }
                    };
                    checkpoint.next = Some(resume);
                    continue;
                }
            };
            self.commit_api_page(&key, &position, page, &mut checkpoint)
                .await?;
        }
        Ok(ChainOutcome::Ended(
            checkpoint.end.unwrap_or(EndReason::NoCursor),
        ))
    }

    /// `render = "browser"`: renders the start page with its `[browser]` waits and actions;
    /// each API response the page fetches meanwhile (a request to the profile's `request`
    /// endpoint carrying the cursor the walk expects next) is one page of the chain, read and
    /// committed with its checkpoint as soon as it arrives, exactly as if the tool had asked:
    /// a kill during a long scroll loses none of them. The walk then goes on from the last
    /// cursor by calling the API directly; so does a rerun. `Some` when the chain stops here (a
    /// render that failed before any API page, or an interruption).
    async fn render_pages(
        &self,
        key: &str,
        checkpoint: &mut ChainCheckpoint,
    ) -> Result<Option<ChainOutcome>, StateError> {
        let Some(position) = checkpoint.next.clone() else {
            return Ok(None);
        };
        tracing::debug!(page = %redact(self.start), "rendering the start page; its API calls are the first pages");
        let (sink, mut arriving) = tokio::sync::mpsc::unbounded_channel();
        let render = self.source.render_capturing(self.start, self.cancel, sink);
        tokio::pin!(render);
        let mut walk =
            CapturedWalk::new(json_cursor::request(self.cursor, self.start, &position).url);
        let rendered = loop {
            tokio::select! {
                biased;
                rendered = &mut render => break rendered,
                Some(captured) = arriving.recv() => self.take_captured(key, checkpoint, &mut walk, captured).await?,
            }
        };
        // Responses read before the render ended but not yet taken.
        while let Ok(captured) = arriving.try_recv() {
            self.take_captured(key, checkpoint, &mut walk, captured)
                .await?;
        }
        let pages = walk.pages;
        let failed = match rendered {
            Ok(_) => None,
            Err(PageFailure::Cancelled) => return Ok(Some(ChainOutcome::Interrupted)),
            Err(failure) => {
                let mut error = failure_record(failure);
                error.detail = format!("the start page failed: {}", error.detail);
                Some(error)
            }
        };
        match failed {
            Some(error) if pages == 0 => {
                self.fail(key, &position, checkpoint, error).await.map(Some)
            }
            Some(error) => {
                tracing::warn!(start = %redact(self.start), pages, error = %error.detail, "the render failed after the page fetched API pages; the walk goes on with direct requests");
                Ok(None)
            }
            None => {
                tracing::info!(start = %redact(self.start), pages, "API pages the rendered page fetched; the walk goes on with direct requests");
                Ok(None)
            }
        }
    }

    /// One API response the rendered page fetched: committed when it is the page the walk
    /// expects next (then any kept ones that follow it), kept when it may be needed later
    /// (responses can finish out of order), dropped when it is another endpoint or a repeat.
    /// Once a captured page is expired or broken, the walk stops taking them: the same request
    /// is made directly next, and judged there.
    async fn take_captured(
        &self,
        key: &str,
        checkpoint: &mut ChainCheckpoint,
        walk: &mut CapturedWalk,
        captured: CapturedJson,
    ) -> Result<(), StateError> {
        let Ok(url) = Url::parse(&captured.url) else {
            return Ok(());
        };
        if walk.stopped || !json_cursor::same_endpoint(&url, &walk.endpoint) {
            return Ok(());
        }
        let sent = json_cursor::sent_cursor(self.cursor, &url, captured.request_body.as_deref());
        if walk.taken.contains(&sent) || walk.waiting.len() >= CapturedWalk::MAX_WAITING {
            return Ok(());
        }
        walk.waiting.insert(sent, (url, captured));
        while let Some(position) = checkpoint.next.clone()
            && let Some((url, captured)) = walk.waiting.remove(&position.cursor)
        {
            let body = serde_json::to_vec(&captured.body).unwrap_or_default();
            // The page fetched it already, and it is in a recording of the run: `max_pages`
            // bounds the requests the walk makes itself, not what it is handed.
            match self
                .read_reply(&position, (url, captured.status, body), None)
                .await?
            {
                ApiReading::Page(page) => {
                    self.commit_api_page(key, &position, page, checkpoint)
                        .await?;
                    walk.taken.insert(position.cursor);
                    walk.pages += 1;
                }
                ApiReading::Expired { .. } | ApiReading::Failed(_) => {
                    walk.stopped = true;
                    walk.waiting.clear();
                    break;
                }
            }
        }
        Ok(())
    }

    /// The reply to the request for `position`, read on the blocking pool under `max_pages`
    /// (see [`read_api_reply`]).
    async fn read_reply(
        &self,
        position: &PagePosition,
        (url, status, body): (Url, u16, Vec<u8>),
        max_pages: Option<u64>,
    ) -> Result<ApiReading, StateError> {
        let reply = ApiReply { url, status, body };
        read_api_reply(
            Arc::clone(self.profile),
            self.start,
            position,
            reply,
            max_pages,
        )
        .await
        .ok_or(StateError::TaskLost)
    }

    /// Commits `page` (its accepted images) at `position` with the chain's new checkpoint,
    /// ending the chain where an incremental walk meets what is known.
    async fn commit_api_page(
        &self,
        key: &str,
        position: &PagePosition,
        page: json_cursor::ApiPage,
        checkpoint: &mut ChainCheckpoint,
    ) -> Result<(), StateError> {
        let images = api_images(self.profile, &page);
        let mut next = page.next;
        if checkpoint.incremental
            && let Some(limit) = self.cursor.stop_after_known
        {
            let known = known_urls(self.state, &images).await?;
            let items = images.iter().map(|i| {
                (
                    i.metadata.get("id").map(String::as_str),
                    known.contains(&i.url),
                )
            });
            if resume::count_known(items, &mut checkpoint.known_in_a_row, limit) {
                next = NextPage::End(EndReason::KnownItems);
            }
        }
        if checkpoint.incremental
            && let (Some(known), Some(least)) = (&checkpoint.stop_at_id, &page.last_id)
            && json_cursor::reaches_known_id(least, known)
        {
            next = NextPage::End(EndReason::KnownId);
        }
        checkpoint.newest_id = json_cursor::newer_id(checkpoint.newest_id.take(), page.newest_id);
        checkpoint.items_found += page.items;
        checkpoint.last_id = page.last_id.or(checkpoint.last_id.take());
        let done = PageResult::Done {
            images,
            links: Vec::new(),
        };
        commit_chain_page(self.writer, key, position, done, checkpoint, Some(next))
            .await
            .map(|_| ())
    }

    /// Records a failed page (the checkpoint stays where it was: the next run retries it).
    async fn fail(
        &self,
        key: &str,
        position: &PagePosition,
        checkpoint: &mut ChainCheckpoint,
        error: FailureRecord,
    ) -> Result<ChainOutcome, StateError> {
        let failed = PageResult::Failed(error);
        let stopped =
            commit_chain_page(self.writer, key, position, failed, checkpoint, None).await?;
        Ok(stopped.unwrap_or(ChainOutcome::Interrupted))
    }
}

/// Which of `images` the state already knows (found by an earlier page or run).
async fn known_urls(state: &State, images: &[NewImage]) -> Result<HashSet<String>, StateError> {
    let urls: Vec<String> = images.iter().map(|i| i.url.clone()).collect();
    read(state, move |s| {
        let db = s.database();
        let txn = db.begin_read()?;
        let table = txn.open_table(crate::state::tables::IMAGES)?;
        let mut known = HashSet::new();
        for url in urls {
            if table.get(url.as_str())?.is_some() {
                known.insert(url);
            }
        }
        Ok(known)
    })
    .await
}

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
    async fn crawl_chain(&self, start: &Url) -> Result<ChainOutcome, StateError> {
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
        let window = profile.crawl.concurrency;
        let mut ahead = FuturesOrdered::new();
        let mut queued: VecDeque<PagePosition> = VecDeque::new();
        while let Some(position) = checkpoint.next.clone() {
            if self.cancel.is_cancelled() {
                return Ok(ChainOutcome::Interrupted);
            }
            if self.ends_recording(&position) {
                return Ok(ChainOutcome::Ended(EndReason::EndOfRecording));
            }
            if queued.front() != Some(&position) {
                // Nothing fetched ahead yet, or not the page that came next: start over here.
                ahead = FuturesOrdered::new();
                queued.clear();
                let seen = read(self.state, {
                    let url = position.url.clone();
                    move |s| s.page(&url)
                })
                .await?;
                if position.done > 0 && seen.is_some_and(|p| p.status == PageStatus::Done) {
                    checkpoint = ended(checkpoint, EndReason::Loop);
                    writer.commit_checkpoint(&key, &checkpoint).await?;
                    break;
                }
                queued.push_back(position.clone());
                ahead.push_back(self.fetch_page(profile, start, position.clone()));
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
                ahead.push_back(self.fetch_page(profile, start, next));
            }
            let Some((position, fetched)) = ahead.next().await else {
                break;
            };
            queued.pop_front();
            let place = PagePlace {
                position: &position,
                in_chain: true,
                depth: 0,
                max_depth: profile.crawl.max_depth,
                ends_on_missing: ends_on_missing(profile),
                inherited: &BTreeMap::new(),
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
            let queued = matches!(&result, PageResult::Done { links, .. } if !links.is_empty());
            if let Some(stopped) =
                commit_chain_page(writer, &key, &position, result, &mut checkpoint, next).await?
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
}

/// Commits a page of the chain from `key` with the chain's checkpoint, in one transaction: a
/// page done moves the chain on to `next`; one that failed, or was had only in part, leaves
/// the checkpoint where it was (the next run retries the page), and the chain stops with that
/// outcome (`Some`).
async fn commit_chain_page(
    writer: &WriterHandle,
    key: &str,
    position: &PagePosition,
    result: PageResult,
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
        checkpoint.pages_done += 1;
        checkpoint.images_found += result.images().len() as u64;
        checkpoint.updated = now();
        match next {
            Some(NextPage::Fetch(p)) => checkpoint.next = Some(p),
            Some(NextPage::End(reason)) => {
                checkpoint.next = None;
                checkpoint.end = Some(reason);
            }
            None => {}
        }
    }
    writer
        .commit_page(PageCommit {
            start: key.to_owned(),
            url: position.url.clone(),
            number: position.number,
            result,
            checkpoint: Some(checkpoint.clone()),
        })
        .await?;
    Ok(stopped)
}

fn ended(mut checkpoint: ChainCheckpoint, reason: EndReason) -> ChainCheckpoint {
    checkpoint.next = None;
    checkpoint.end = Some(reason);
    checkpoint.updated = now();
    checkpoint
}

/// Runs a state read on the blocking pool.
async fn read<T: Send + 'static>(
    state: &State,
    f: impl FnOnce(&State) -> Result<T, StateError> + Send + 'static,
) -> Result<T, StateError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || f(&state))
        .await
        .map_err(|_| StateError::TaskLost)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_urls_take_turns_by_host_and_keep_their_order_within_a_host() {
        let urls: Vec<Url> = [
            "http://a.test/1",
            "http://a.test/2",
            "http://a.test/3",
            "http://b.test/1",
            "http://a.test:8080/1",
            "http://b.test/2",
        ]
        .iter()
        .map(|u| Url::parse(u).unwrap())
        .collect();
        let order: Vec<usize> = by_host_in_turn(&urls).into_iter().map(|(i, _)| i).collect();
        assert_eq!(order, [0, 3, 4, 1, 5, 2]);
    }
}
