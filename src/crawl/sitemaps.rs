//! Sitemaps in the link queue: the profile's sitemap entries are queued as links of their own
//! level ([`SITEMAP_LEVEL`]) when the crawl starts (those known already are not), each read
//! when its turn comes. An index (or a robots.txt) queues the sitemaps it names; a `<urlset>`
//! queues its pages as links of [`SITEMAP_PAGE_LEVEL`], crawled by the top-level rules as
//! single pages like any linked page, and stores the images its image extension lists as
//! found on their pages. A sitemap read commits with everything it lists, so a rerun reads
//! neither it nor a page it listed again; a failed one stays queued for the next run.

use std::sync::atomic::AtomicU64;

use super::links::LinkOutcome;
use super::*;
use crate::engine::sitemap::{
    MAX_SITEMAP_DEPTH, MAX_SITEMAP_FILES, MAX_SITEMAP_PAGES, SITEMAP_LEVEL, SITEMAP_PAGE_LEVEL,
    SitemapRead, listed_images, read_sitemap,
};
use crate::sitemap::Sitemap;
use crate::state::{NewLink, Revisit};

/// What the sitemaps read in this run listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SitemapTally {
    /// Sitemap files (and robots.txt files) read.
    pub read: u64,
    /// Failed; they stay queued and the next run reads them again.
    pub failed: u64,
    /// Pages listed, queued to be crawled (those known already are not queued twice).
    pub pages: u64,
    /// Images listed by the image extension.
    pub images: u64,
    /// Entries left out: not an absolute `http(s)` URL, too deep, past the job's caps.
    pub skipped: u64,
}

/// What one sitemap leads to.
struct Listing {
    /// Further sitemaps, or the pages to crawl.
    links: Vec<NewLink>,
    /// The images it lists, by page.
    listed: Vec<(String, Vec<NewImage>)>,
    tally: SitemapTally,
}

/// Room left under the job's caps of sitemap files and of pages taken from sitemaps.
pub(super) struct SitemapRoom {
    files: AtomicU64,
    pages: AtomicU64,
}

impl SitemapRoom {
    /// The room `state` leaves, by what earlier runs queued.
    pub(super) fn left(state: &State) -> Result<Self, StateError> {
        Ok(Self {
            files: AtomicU64::new(
                MAX_SITEMAP_FILES.saturating_sub(state.links_found(SITEMAP_LEVEL)?),
            ),
            pages: AtomicU64::new(
                MAX_SITEMAP_PAGES.saturating_sub(state.links_found(SITEMAP_PAGE_LEVEL)?),
            ),
        })
    }

    /// Takes up to `want` of `room`; how much it got.
    fn take(room: &AtomicU64, want: u64) -> u64 {
        let mut got = 0;
        let _ = room.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            got = want.min(left);
            Some(left - got)
        });
        got
    }
}

impl Crawler<'_> {
    /// Queues the profile's sitemap entries that the job does not know yet.
    pub(super) async fn queue_sitemaps(&self) -> Result<(), StateError> {
        for url in &self.profile.sitemap {
            let link = NewLink {
                url: url.to_string(),
                level: SITEMAP_LEVEL.to_owned(),
                depth: 0,
                metadata: BTreeMap::new(),
                lastmod: None,
                // A refresh reads the profile's sitemaps again, once.
                revisit: match self.profile.refresh {
                    Some(_) => Revisit::Once,
                    None => Revisit::Never,
                },
            };
            self.writer
                .queue_links(url.as_str(), url.as_str(), vec![link])
                .await?;
        }
        Ok(())
    }

    /// One sitemap of the queue: read, and committed with the sitemaps or pages it lists and
    /// the images it lists for them; or recorded as failed, staying queued.
    pub(super) async fn crawl_sitemap(
        &self,
        url: String,
        link: LinkRecord,
    ) -> Result<LinkOutcome, StateError> {
        let commit = |result: PageResult, listed| PageCommit {
            start: link.start.clone(),
            url: url.clone(),
            number: 0,
            result,
            checkpoint: None,
            listed,
            seen: PageSeen::default(),
        };
        let read = match Url::parse(&url) {
            Ok(parsed) => {
                let _counted = self.live.begin_page();
                tracing::debug!(sitemap = %redact(&parsed), "reading sitemap");
                read_sitemap(self.source, &parsed, self.cancel).await
            }
            Err(_) => SitemapRead::Failed(other_failure(format!("`{url}` is not a valid URL"))),
        };
        let sitemap = match read {
            SitemapRead::Read(sitemap) => sitemap,
            SitemapRead::Cancelled => return Ok(LinkOutcome::Interrupted),
            SitemapRead::Failed(error) => {
                tracing::warn!(sitemap = %url, error = %error.detail, "sitemap failed; the next run retries it");
                self.writer
                    .commit_page(commit(PageResult::Failed(error), Vec::new()))
                    .await?;
                return Ok(LinkOutcome::SitemapFailed);
            }
        };
        let Listing {
            links,
            listed,
            tally,
        } = self.sitemap_entries(&url, &link, sitemap);
        let queued = !links.is_empty();
        self.writer
            .commit_page(commit(
                PageResult::Done {
                    images: Vec::new(),
                    links,
                },
                listed,
            ))
            .await?;
        if queued {
            self.links_added.notify_one();
        }
        Ok(LinkOutcome::SitemapRead(tally))
    }

    /// What the sitemap at `url` (queued as `link`) leads to: the links to queue (further
    /// sitemaps, or pages when the profile reads them), the images it lists by page, and the
    /// tally of it.
    fn sitemap_entries(&self, url: &str, link: &LinkRecord, sitemap: Sitemap) -> Listing {
        let mut tally = SitemapTally {
            read: 1,
            skipped: sitemap.skipped,
            ..SitemapTally::default()
        };
        let mut links = Vec::new();
        let mut listed = Vec::new();
        // On a refresh, a sitemap (and a page) a sitemap dates is read again when its date
        // changed; an undated sitemap is read again, an undated page is not.
        let refresh = self.profile.refresh.is_some();
        let new_link = |url: &Url, level: &str, depth: u32, lastmod: Option<String>| {
            let revisit = match (refresh, &lastmod, level == SITEMAP_LEVEL) {
                (false, _, _) => Revisit::Never,
                (true, Some(_), _) => Revisit::IfModified,
                (true, None, true) => Revisit::Once,
                (true, None, false) => Revisit::Never,
            };
            NewLink {
                url: url.to_string(),
                level: level.to_owned(),
                depth,
                metadata: BTreeMap::new(),
                lastmod,
                revisit,
            }
        };
        let depth = link.depth + 1;
        let named = sitemap.sitemaps.len() as u64;
        if named > 0 && depth > MAX_SITEMAP_DEPTH {
            tracing::warn!(sitemap = %url, sitemaps = named, "sitemaps nested deeper than {MAX_SITEMAP_DEPTH} are not read");
            tally.skipped += named;
        } else if named > 0 {
            let room = SitemapRoom::take(&self.sitemap_room.files, named);
            if room < named {
                tracing::warn!(sitemap = %url, left_out = named - room, "the job reads {MAX_SITEMAP_FILES} sitemap files at most; the others are not read");
                tally.skipped += named - room;
            }
            for child in sitemap.sitemaps.iter().take(room as usize) {
                links.push(new_link(
                    &child.url,
                    SITEMAP_LEVEL,
                    depth,
                    child.lastmod.clone(),
                ));
            }
        }
        let reads_pages = self.levels.contains_key(SITEMAP_PAGE_LEVEL);
        let wanted = if reads_pages {
            sitemap.pages.len() as u64
        } else {
            0
        };
        let room = SitemapRoom::take(&self.sitemap_room.pages, wanted);
        if room < wanted {
            tracing::warn!(sitemap = %url, left_out = wanted - room, "the job takes {MAX_SITEMAP_PAGES} pages from sitemaps at most; the others are not crawled");
            tally.skipped += wanted - room;
        }
        for (index, page) in sitemap.pages.into_iter().enumerate() {
            let images = listed_images(self.profile, &page);
            tally.images += images.len() as u64;
            if reads_pages && (index as u64) < room {
                tally.pages += 1;
                links.push(new_link(&page.url, SITEMAP_PAGE_LEVEL, 0, page.lastmod));
            }
            if !images.is_empty() {
                listed.push((page.url.to_string(), images));
            }
        }
        Listing {
            links,
            listed,
            tally,
        }
    }
}
