//! A chain of `kind = "json_cursor"` API pages: the API asked for each page (after, with
//! `render = "browser"`, the pages the start page fetched by itself), each committed with the
//! chain's checkpoint.

use super::walk::{ChainKind, Taken, commit_chain_page};
use super::*;

/// One chain of `kind = "json_cursor"` API pages: the tool calls the API itself (after, with
/// `render = "browser"`, the pages the start page fetched itself).
pub(super) struct ApiChain<'a> {
    pub(super) crawler: &'a Crawler<'a>,
    pub(super) cursor: &'a JsonCursor,
    pub(super) api: &'a ApiFetcher,
    pub(super) start: &'a Url,
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

impl ChainKind for ApiChain<'_> {
    fn first(&self) -> PagePosition {
        let number = json_cursor::first_number(self.cursor);
        json_cursor::position(self.cursor, self.start, number, 0, None, None)
    }

    /// A saved chain that ended is asked again for new items: after its newest id, or from the
    /// first page up to what is known.
    fn again(&self, checkpoint: &ChainCheckpoint) -> Option<ChainCheckpoint> {
        let position = resume::next_walk(
            self.cursor,
            self.start,
            checkpoint.last_id.as_deref(),
            checkpoint.newest_id.as_deref(),
        )?;
        tracing::info!(start = %redact(self.start), "the chain ended before; looking for new items");
        let mut again = checkpoint.clone();
        again.incremental = position.after_id.is_none();
        again.known_in_a_row = 0;
        again.stop_at_id = if self.cursor.stop_at_known_id {
            checkpoint.newest_id.clone()
        } else {
            None
        };
        again.end = None;
        again.next = Some(position);
        Some(again)
    }

    fn open_end(&self) -> EndReason {
        EndReason::NoCursor
    }

    /// With `render = "browser"`, a chain walked for the first time by cursor takes the API
    /// pages its rendered start page fetches first (see [`ApiChain::render_pages`]). Numbered
    /// pages are asked for directly: which captured response is which page cannot be told
    /// from a cursor.
    async fn before(
        &mut self,
        chain: &mut ChainPages<'_>,
    ) -> Result<Option<ChainOutcome>, StateError> {
        let fresh = chain.checkpoint.pages_done == 0
            && chain
                .checkpoint
                .next
                .as_ref()
                .is_some_and(|p| p.cursor.is_none() && p.after_id.is_none());
        let by_cursor = matches!(self.cursor.paging, ApiPaging::Cursor(_));
        if self.profile.render == RenderMode::Browser && fresh && by_cursor {
            return self.render_pages(chain).await;
        }
        Ok(None)
    }

    /// The API asked for the page at `position`. A saved cursor the API calls expired is
    /// replaced by the last id (or, without `after_id`, by a walk from the first page: images
    /// are deduplicated by URL, so nothing is stored twice).
    async fn take(
        &mut self,
        position: &PagePosition,
        chain: &mut ChainPages<'_>,
    ) -> Result<Taken, StateError> {
        if self
            .profile
            .max_pages
            .is_some_and(|max| position.done >= max)
        {
            // The rendered page fetched `max_pages` pages or more by itself.
            return Ok(Taken::End(EndReason::MaxPages));
        }
        let api = self.api;
        let request = json_cursor::request(self.cursor, self.start, position);
        if position.done > 0 && api.is_past_recording(&request) {
            tracing::info!(page = %redact(&request.url), "end of recording: the chain ends here");
            return Ok(Taken::Stop(ChainOutcome::Ended(EndReason::EndOfRecording)));
        }
        tracing::debug!(page = %redact(&request.url), number = position.number, "API request");
        let failed = |error: FailureRecord| Taken::Page {
            result: PageResult::Failed(error),
            seen: PageSeen::default(),
            next: None,
        };
        let response = match api.fetch(&request, self.cancel).await {
            Ok(response) => response,
            Err(PageFailure::Cancelled) => return Ok(Taken::Stop(ChainOutcome::Interrupted)),
            Err(failure) => return Ok(failed(failure_record(failure))),
        };
        let reply = (response.url, response.status, response.body);
        match self
            .read_reply(position, reply, self.profile.max_pages)
            .await?
        {
            ApiReading::Page(page) => {
                let (result, next) = self.judge(page, chain).await?;
                Ok(Taken::Page {
                    result,
                    seen: PageSeen::default(),
                    next: Some(next),
                })
            }
            ApiReading::Failed(error) => Ok(failed(other_failure(error))),
            ApiReading::Expired { reason } => {
                let last_id = chain.checkpoint.last_id.as_deref();
                match resume::after_expiry(self.cursor, self.start, position, last_id) {
                    AfterExpiry::AfterId(resume) => {
                        tracing::warn!(start = %redact(self.start), %reason, "the saved cursor has expired; resuming after the last id `{}`", last_id.unwrap_or_default());
                        Ok(Taken::From(resume))
                    }
                    AfterExpiry::FromFirst(first) => {
                        tracing::warn!(start = %redact(self.start), %reason, "the saved cursor has expired and there is no id to resume after; walking again from the first page");
                        Ok(Taken::From(first))
                    }
                }
            }
        }
    }
}

impl ApiChain<'_> {
    /// `render = "browser"`: renders the start page with its `[browser]` waits and actions;
    /// each API response the page fetches meanwhile (a request to the profile's `request`
    /// endpoint carrying the cursor the walk expects next) is one page of the chain, read and
    /// committed with its checkpoint as soon as it arrives, exactly as if the tool had asked:
    /// a kill during a long scroll loses none of them. The walk then goes on from the last
    /// cursor by calling the API directly; so does a rerun. `Some` when the chain stops here (a
    /// render that failed before any API page, or an interruption).
    async fn render_pages(
        &self,
        chain: &mut ChainPages<'_>,
    ) -> Result<Option<ChainOutcome>, StateError> {
        let Some(position) = chain.checkpoint.next.clone() else {
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
                Some(captured) = arriving.recv() => self.take_captured(chain, &mut walk, captured).await?,
            }
        };
        // Responses read before the render ended but not yet taken.
        while let Ok(captured) = arriving.try_recv() {
            self.take_captured(chain, &mut walk, captured).await?;
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
                let failed = PageResult::Failed(error);
                let stopped = commit_chain_page(chain, position, failed, PageSeen::default(), None);
                Ok(Some(stopped.await?.unwrap_or(ChainOutcome::Interrupted)))
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
        chain: &mut ChainPages<'_>,
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
        while let Some(position) = chain.checkpoint.next.clone()
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
                    let cursor = position.cursor.clone();
                    let (result, next) = self.judge(page, chain).await?;
                    let seen = PageSeen::default();
                    commit_chain_page(chain, position, result, seen, Some(next)).await?;
                    walk.taken.insert(cursor);
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

    /// The images `page` gives and where the chain goes after it, ending the chain where an
    /// incremental walk meets what is known; the checkpoint takes the page's ids and items.
    async fn judge(
        &self,
        page: json_cursor::ApiPage,
        chain: &mut ChainPages<'_>,
    ) -> Result<(PageResult, NextPage), StateError> {
        let images = api_images(self.profile, &page);
        let mut next = page.next;
        if chain.checkpoint.incremental
            && let Some(limit) = self.cursor.stop_after_known
        {
            let urls = images.iter().map(|i| i.url.clone()).collect();
            let known = chain.known_images(urls).await?;
            let items = images.iter().map(|i| {
                (
                    i.metadata.get("id").map(String::as_str),
                    known.contains(&i.url),
                )
            });
            if resume::count_known(items, &mut chain.checkpoint.known_in_a_row, limit) {
                next = NextPage::End(EndReason::KnownItems);
            }
        }
        let checkpoint = &mut chain.checkpoint;
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
        Ok((done, next))
    }
}
