//! Crawl: the one-process driver of a job's pages. Walks each start URL's chain of pages,
//! fetching, analysing (the engine's page step) and checkpointing.
//!
//! Chains run side by side (every start URL is a chain), with `[crawl] concurrency` pages in
//! flight over all of them and `per_host` per host; a page takes its place among the
//! `concurrency` only once its host's turn has come, and chains start host by host in turn, so
//! a host that is slow or silent holds up no other. Inside a chain, order is kept where the
//! page decides what comes next (next links, cursors); a URL template's pages are fetched ahead
//! in a window, and pages fetched past the chain's end are discarded, never counted or stored.
//!
//! Each page's accepted images and the chain's next position are committed in one transaction
//! through the state writer, in chain order; a rerun continues from the committed position. A
//! page that fails after retries stops its chain for this run and is retried by the next one.
//!
//! - [`walk`]: the one walk of a chain from its checkpoint, whatever its pagination
//! - [`chain`]: the pages of a chain of next links, URL templates or a single page
//! - [`api_chain`]: the pages of a chain of `json_cursor` API pages
//! - [`links`]: the link queue of `[[follow]]` levels
//! - [`sitemaps`]: sitemap files in the link queue, and the pages they list

mod api_chain;
mod chain;
mod links;
mod sitemaps;
mod walk;

use sitemaps::SitemapRoom;
pub use sitemaps::SitemapTally;

use api_chain::ApiChain;
use chain::Pages;
use walk::walk;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::stream::{self, FuturesOrdered, FuturesUnordered, StreamExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::engine::source::PageSource;
use crate::engine::{
    ApiReply, Fetched, PagePlace, PageStep, api_images, ends_on_missing, failure_record,
    other_failure, page_step, read_api_reply, revisited_levels,
};
use crate::fetch::PageFailure;
use crate::fetch::api::ApiFetcher;
use crate::net::{Failure, FailureClass};
use crate::page::{CapturedJson, Validators};
use crate::paginate::json_cursor::{self, ApiReading};
use crate::paginate::resume::{self, AfterExpiry, AfterKnown};
use crate::paginate::{EndReason, NextPage, PagePosition, first_page, predict_next};
use crate::profile::{ApiPaging, JsonCursor, Pagination, Profile, RenderMode};
use crate::redact::redact;
use crate::render::KnownImages;
use crate::state::{
    ChainCheckpoint, ChainPages, FailureRecord, LinkRecord, LinkedPages, NewImage, PageCommit,
    PageCommitted, PageLedger, PageResult, PageSeen, PageStatus, PageUnit, State, StateError,
    WriterHandle, commit_page, now, read,
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
    /// The sitemaps read (they are entries of the link queue too, counted here alone).
    pub sitemaps: SitemapTally,
}

/// Crawls every chain of `profile`, side by side, and the pages their `[[follow]]` links lead
/// to, with at most `[crawl] concurrency` pages in flight over all of them; API chains call
/// the API through `api` (see [`crate::engine::stages`]), like pages and images go through the run's
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
    let mut levels: HashMap<String, Arc<Profile>> = profile
        .levels
        .keys()
        .filter_map(|name| Some((name.clone(), Arc::new(profile.for_level(name)?))))
        .collect();
    if !profile.sitemap.is_empty()
        && let Some(pages) = crate::engine::sitemap::page_profile(&profile)
    {
        levels.insert(
            crate::engine::sitemap::SITEMAP_PAGE_LEVEL.to_owned(),
            Arc::new(pages),
        );
    }
    let sitemap_room = read(&state, SitemapRoom::left).await?;
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
        sitemap_room,
        revisited: revisited_levels(&profile),
    };
    crawler.queue_sitemaps().await?;
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
    /// Room left under the job's caps of sitemap files and pages.
    sitemap_room: SitemapRoom,
    /// The levels whose known pages a refresh looks at again.
    revisited: BTreeSet<String>,
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
                        let kind = ApiChain {
                            crawler: self,
                            cursor,
                            api,
                            start,
                        };
                        walk(self, start, kind).await
                    }
                    _ => walk(self, start, Pages::new(self, start)).await,
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

impl Crawler<'_> {
    /// Whether a known page `profile` reads (the job's, or a level's) may be asked only if it
    /// changed: not when it leads to listings a refresh looks at again, as a listing that
    /// changed does not change the page that links it.
    fn asks_if_changed(&self, profile: &Profile) -> bool {
        !profile
            .follow
            .iter()
            .any(|rule| self.revisited.contains(&rule.level))
    }

    /// Fetches the page at `position` (of the chain from `start`, or reached from it through
    /// links) under the crawl's page limit, the way `profile` (the job's, or a level's) says,
    /// and analyses it on the blocking pool, with its response's validators; chains, windows
    /// and the link queue run many of these at once. A page the state knows (`revisit`: what
    /// it kept of the page, its validators and next page) is asked only if it changed; one
    /// rendered again (`known`: its images the state knows) loads more of itself only while
    /// it brings new ones.
    async fn revisit_page(
        &self,
        profile: &Arc<Profile>,
        start: &Url,
        position: PagePosition,
        revisit: Option<(Validators, NextPage)>,
        known: Option<Arc<KnownImages>>,
    ) -> (PagePosition, Revisited) {
        let Ok(url) = Url::parse(&position.url) else {
            let failed = Failure::new(FailureClass::Other, "not a valid URL");
            let failed = Err(PageFailure::Failed(failed));
            return (position, Revisited::Page(failed, Validators::default()));
        };
        let snapshot = {
            let _counted = self.live.begin_page();
            tracing::debug!(page = %redact(&url), conditional = revisit.is_some(), "fetching page");
            match &revisit {
                None => self
                    .source
                    .fetch_knowing(profile, start, &position, &url, known, self.cancel)
                    .await
                    .map(Some),
                Some((validators, _)) => {
                    self.source
                        .fetch_if_changed(profile, start, &position, &url, validators, self.cancel)
                        .await
                }
            }
        };
        let snapshot = match (snapshot, revisit) {
            (Ok(Some(snapshot)), _) => snapshot,
            (Ok(None), Some((_, next))) => {
                tracing::debug!(page = %redact(&url), "page unchanged (304)");
                return (position, Revisited::Unchanged(next));
            }
            (Ok(None), None) => {
                let failed = Failure::new(FailureClass::Http(304), "HTTP 304");
                let failed = Err(PageFailure::Failed(failed));
                return (position, Revisited::Page(failed, Validators::default()));
            }
            (Err(failure), _) => {
                return (
                    position,
                    Revisited::Page(Err(failure), Validators::default()),
                );
            }
        };
        let validators = snapshot.validators.clone();
        // A cancelled run does not wait for an analysis still going: the page is fetched again
        // next time.
        let analysed = tokio::select! {
            analysed = self.source.analyse(Arc::clone(profile), start.clone(), position.clone(), snapshot, self.cancel) => analysed,
            () = self.cancel.cancelled() => Err(PageFailure::Cancelled),
        };
        (position, Revisited::Page(analysed, validators))
    }
}

/// A chain's page as a refresh may have it: fetched (or failed) with its response's
/// validators, or unchanged since it was done.
enum Revisited {
    Page(Fetched, Validators),
    /// The server said the page had not changed (`304`): the chain goes on to the page that
    /// came after it before.
    Unchanged(NextPage),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_page_of_a_refresh_head_is_known_and_goes_to_its_next_or_to_the_old_end() {
        let at = |number: i64| PagePosition {
            url: format!("http://127.0.0.1/g/{number}.html"),
            number,
            done: 0,
            cursor: None,
            after_id: None,
            offset: 0,
        };
        let mut checkpoint = ChainCheckpoint {
            incremental: true,
            tail: Some(at(6)),
            ..ChainCheckpoint::default()
        };
        let next = |n| Some(NextPage::Fetch(at(n)));
        // Known (unchanged) once: on to its own next page.
        assert_eq!(
            chain::head_next(&mut checkpoint, Some(2), true, next(3)),
            next(3)
        );
        // A changed page breaks the row.
        assert_eq!(
            chain::head_next(&mut checkpoint, Some(2), false, next(4)),
            next(4)
        );
        assert_eq!(checkpoint.known_in_a_row, 0);
        assert_eq!(
            chain::head_next(&mut checkpoint, Some(2), true, next(5)),
            next(5)
        );
        // Two known in a row: on from the old end.
        assert_eq!(
            chain::head_next(&mut checkpoint, Some(2), true, next(7)),
            next(6)
        );
        // Outside a refresh's head, the page's own next.
        checkpoint.incremental = false;
        assert_eq!(
            chain::head_next(&mut checkpoint, Some(2), true, next(9)),
            next(9)
        );
    }

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
