//! A job's ledger: what every driver commits a page and an image to, and asks what the job
//! knows, through one interface. A one-process run's ledger is its database (pages committed
//! through the state writer, an image's questions asked inside the writer's transaction); a
//! worker's is the job in Redis. The decisions themselves are the engine's page step and the
//! core's image fate (`scrape_core::fate`): the ledgers only keep what was decided.
//!
//! - [`PageLedger`] and [`commit_page`]: a page, with what it leads to, and the job's known
//!   URLs
//! - [`ImageLedger`] and [`image_step`]: where an image's bytes stand among those stored

use std::collections::HashSet;
use std::future::Future;

use scrape_core::fate::{ImageFate, image_fate, near_search};

use super::records::{
    ChainCheckpoint, FailureRecord, NearDuplicateOf, PageResult, PageSeen, StoredFile, phash_value,
};
use super::writer::{PageCommit, WriterHandle};
use super::{State, StateError, read};
use crate::paginate::{EndReason, NextPage, PagePosition};
use crate::profile::NearDuplicates;

/// A page as the page step left it: what every driver's ledger commits.
#[derive(Debug)]
pub struct PageUnit {
    /// The start URL of the page's chain (that it descends from, for a linked page).
    pub start: String,
    pub position: PagePosition,
    /// A chain's page; otherwise reached through a `[[follow]]` link.
    pub in_chain: bool,
    pub result: PageResult,
    /// Where a chain goes after the page, when it is done; `None` leaves it where it was.
    pub next: Option<NextPage>,
    /// What a refresh asks the page again with, kept when it is done.
    pub seen: PageSeen,
}

/// What a job's ledger keeps of its pages, and what it knows.
pub trait PageLedger {
    type Error;

    /// Commits `page` with what it leads to, in one step: its record, its images, the pages
    /// its links lead to, and where its chain goes after it. `false` when it was committed
    /// before (a worker's entry delivered again).
    fn commit_page(&mut self, page: PageUnit) -> impl Future<Output = Result<bool, Self::Error>>;

    /// Ends the chain from `start` at the page at `position`, for `reason`: the page was asked
    /// past the chain's last one, or the chain's kind ends it there.
    fn end_chain(
        &mut self,
        start: &str,
        position: &PagePosition,
        reason: EndReason,
    ) -> impl Future<Output = Result<(), Self::Error>>;

    /// Whether the job knows every one of `images` (as image URLs) and `pages` (as pages done
    /// or queued): a known page, to a refresh.
    fn knows_all(
        &self,
        images: Vec<String>,
        pages: Vec<String>,
    ) -> impl Future<Output = Result<bool, Self::Error>>;

    /// Which of `urls` the job knows as image URLs, found by an earlier page or run.
    fn known_images(
        &self,
        urls: Vec<String>,
    ) -> impl Future<Output = Result<HashSet<String>, Self::Error>>;
}

/// How a committed page went.
#[derive(Debug, Clone, PartialEq)]
pub enum PageCommitted {
    /// Done: its images and links are the job's, its chain moved on.
    Done,
    /// Failed, or had only in part (its images kept): it stays to be tried again, and its
    /// chain where it was.
    Failed(FailureRecord),
    /// Committed before: nothing changed.
    Before,
}

/// Commits `page` to `ledger`, and says once for every driver what a page that failed or was
/// had in part leaves for later.
pub async fn commit_page<L: PageLedger>(
    ledger: &mut L,
    page: PageUnit,
) -> Result<PageCommitted, L::Error> {
    let what = match page.in_chain {
        true => "page",
        false => "linked page",
    };
    let failed = page.result.error().cloned();
    match (&page.result, &failed) {
        (PageResult::Partial { images, .. }, Some(error)) => {
            tracing::warn!(page = %page.position.url, images = images.len(), error = %error.detail, "{what} rendered in part: its images are kept, and it is left to be tried again")
        }
        (_, Some(error)) => {
            tracing::warn!(page = %page.position.url, error = %error.detail, "{what} failed; it is left to be tried again")
        }
        (_, None) => {}
    }
    Ok(match (ledger.commit_page(page).await?, failed) {
        (false, _) => PageCommitted::Before,
        (true, None) => PageCommitted::Done,
        (true, Some(error)) => PageCommitted::Failed(error),
    })
}

/// The ledger of one process's chain: its pages committed through the state writer with the
/// chain's checkpoint, moved past each page done, in one transaction.
pub struct ChainPages<'a> {
    state: &'a State,
    writer: &'a WriterHandle,
    /// The chain's start URL, its key.
    pub key: String,
    pub checkpoint: ChainCheckpoint,
}

impl<'a> ChainPages<'a> {
    /// The chain from `key`, standing at `checkpoint`.
    pub fn new(
        state: &'a State,
        writer: &'a WriterHandle,
        key: String,
        checkpoint: ChainCheckpoint,
    ) -> Self {
        Self {
            state,
            writer,
            key,
            checkpoint,
        }
    }

    /// Commits the checkpoint as it stands (a chain set to be walked again).
    pub async fn commit_checkpoint(&self) -> Result<(), StateError> {
        self.writer
            .commit_checkpoint(&self.key, &self.checkpoint)
            .await
    }

    /// The page at `position` had not changed since it was done (`304`): the chain moves on
    /// to `next`, and nothing of the page is stored again.
    pub async fn unchanged(
        &mut self,
        position: &PagePosition,
        next: Option<NextPage>,
    ) -> Result<(), StateError> {
        self.checkpoint.advance(position, 0, next);
        self.writer
            .commit_unchanged(&self.key, &self.checkpoint)
            .await
    }
}

impl PageLedger for ChainPages<'_> {
    type Error = StateError;

    async fn commit_page(&mut self, mut page: PageUnit) -> Result<bool, StateError> {
        // A page that failed, or was had in part, leaves the chain where it was: the next run
        // asks it again.
        if page.result.error().is_none() {
            let images = page.result.images().len() as u64;
            self.checkpoint
                .advance(&page.position, images, page.next.take());
        }
        let checkpoint = Some(self.checkpoint.clone());
        self.writer
            .commit_page(page_commit(page, checkpoint))
            .await?;
        Ok(true)
    }

    async fn end_chain(
        &mut self,
        _start: &str,
        _position: &PagePosition,
        reason: EndReason,
    ) -> Result<(), StateError> {
        self.checkpoint.end(reason);
        self.commit_checkpoint().await
    }

    async fn knows_all(&self, images: Vec<String>, pages: Vec<String>) -> Result<bool, StateError> {
        knows_all(self.state, images, pages).await
    }

    async fn known_images(&self, urls: Vec<String>) -> Result<HashSet<String>, StateError> {
        known_images(self.state, urls).await
    }
}

/// The ledger of one process's linked pages: each committed through the state writer with
/// the links it queues; a linked page done leaves the link queue.
pub struct LinkedPages<'a> {
    state: &'a State,
    writer: &'a WriterHandle,
}

impl<'a> LinkedPages<'a> {
    pub fn new(state: &'a State, writer: &'a WriterHandle) -> Self {
        Self { state, writer }
    }
}

impl PageLedger for LinkedPages<'_> {
    type Error = StateError;

    async fn commit_page(&mut self, page: PageUnit) -> Result<bool, StateError> {
        self.writer.commit_page(page_commit(page, None)).await?;
        Ok(true)
    }

    /// A linked page ends no chain.
    async fn end_chain(
        &mut self,
        _start: &str,
        _position: &PagePosition,
        _reason: EndReason,
    ) -> Result<(), StateError> {
        Ok(())
    }

    async fn knows_all(&self, images: Vec<String>, pages: Vec<String>) -> Result<bool, StateError> {
        knows_all(self.state, images, pages).await
    }

    async fn known_images(&self, urls: Vec<String>) -> Result<HashSet<String>, StateError> {
        known_images(self.state, urls).await
    }
}

fn page_commit(page: PageUnit, checkpoint: Option<ChainCheckpoint>) -> PageCommit {
    PageCommit {
        start: page.start,
        url: page.position.url,
        number: page.position.number,
        result: page.result,
        checkpoint,
        listed: Vec::new(),
        seen: page.seen,
    }
}

async fn knows_all(
    state: &State,
    images: Vec<String>,
    pages: Vec<String>,
) -> Result<bool, StateError> {
    read(state, move |s| {
        let images: Vec<&str> = images.iter().map(String::as_str).collect();
        let pages: Vec<&str> = pages.iter().map(String::as_str).collect();
        s.knows_all(&images, &pages)
    })
    .await
}

/// What the image step asks of a job's ledger.
pub trait ImageLedger {
    type Error;

    /// Where the job stored the bytes whose content key is `key`, if it did.
    fn stored_path(&self, key: &str) -> impl Future<Output = Result<Option<String>, Self::Error>>;

    /// The picture stored before that is nearest to `hash`, within `rule.distance` bits, with
    /// where its bytes are. A ledger several workers share enters `file` (of `url`) in its
    /// index in the same step, so two workers with near pictures cannot both miss each other;
    /// a one-process run enters it once its bytes are placed.
    fn nearest(
        &self,
        url: &str,
        file: &StoredFile,
        rule: NearDuplicates,
        hash: u64,
    ) -> impl Future<Output = Result<Option<NearDuplicateOf>, Self::Error>>;
}

/// What the image step decided for an image's verified bytes.
#[derive(Debug)]
pub struct ImageDecision {
    pub fate: ImageFate,
    /// The near-duplicate search made, its rule and the picture's hash: the bytes, once
    /// stored, join the index under them.
    pub searched: Option<(NearDuplicates, u64)>,
}

/// The image step: the bytes of `file` (of `url`) are the same as bytes stored already, or
/// near a picture stored before (recorded in `file`), or new; `rule` is the job's
/// `near_duplicates`.
pub async fn image_step<L: ImageLedger>(
    ledger: &L,
    url: &str,
    file: &mut StoredFile,
    rule: Option<NearDuplicates>,
) -> Result<ImageDecision, L::Error> {
    let stored_at = ledger.stored_path(file.content_key()).await?;
    let phash = file.phash.as_deref().and_then(phash_value);
    let searched = near_search(stored_at.is_some(), rule, phash);
    if let Some((near, hash)) = searched {
        file.near_duplicate_of = ledger.nearest(url, file, near, hash).await?;
    }
    let earlier = file.near_duplicate_of.as_ref().map(|n| n.path.as_str());
    Ok(ImageDecision {
        fate: image_fate(stored_at, earlier, rule),
        searched,
    })
}

async fn known_images(state: &State, urls: Vec<String>) -> Result<HashSet<String>, StateError> {
    read(state, move |s| s.known_images(urls)).await
}
