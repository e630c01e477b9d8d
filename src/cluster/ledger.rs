//! The job in Redis as a worker's ledger of pages (its image questions are asked of the
//! [`JobQueue`] itself): a page entry is committed with the entries it leads to (its images,
//! the pages its links lead to, its chain's next page) and acknowledged, in one script. Where
//! one process keeps a chain's position in a checkpoint, a worker's chain is the entry of its
//! next page.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use url::Url;

use super::ClusterError;
use super::item::{ImageItem, Item, PageItem, image_key, page_key};
use super::keys::Stream;
use super::queue::{Entry, JobQueue, PageEffect};
use crate::net::FailureClass;
use crate::net::hosts::host_of;
use crate::paginate::{EndReason, NextPage, PagePosition};
use crate::state::{PageLedger, PageRecord, PageResult, PageStatus, PageUnit, now};

/// How long every worker holds back from a host after one met a sign-in wall or a challenge
/// there (after signing in again did not help): time for the site, or a person, to let the
/// job in again.
pub const WALL_PAUSE: Duration = Duration::from_secs(60);

/// Whether a failure class is a wall's (a sign-in wall, a challenge).
pub fn is_wall_class(class: &str) -> bool {
    [FailureClass::LoginRequired, FailureClass::Blocked]
        .iter()
        .any(|wall| wall.name() == class)
}

/// The page of one entry, as the job in Redis keeps it.
pub struct EntryPage<'a> {
    pub queue: &'a JobQueue,
    pub entry: &'a Entry,
    pub item: &'a PageItem,
    /// An API chain's furthest id, carried to its next page's entry (what one process keeps in
    /// its checkpoint, for an expired cursor).
    pub last_id: Option<String>,
}

impl EntryPage<'_> {
    /// Commits the entry with `record` to `counter` and the entries it leads to.
    async fn commit(
        &self,
        url: &str,
        record: &PageRecord,
        counter: &'static str,
        children: &[Item],
    ) -> Result<bool, ClusterError> {
        let host = Url::parse(url).map(|u| host_of(&u)).unwrap_or_default();
        let record_json = serde_json::to_string(record).unwrap_or_default();
        let key = page_key(&self.item.position.url);
        let effect = PageEffect {
            url,
            record_json,
            counter,
            host: &host,
            children,
        };
        self.queue.commit_page(self.entry, &key, effect).await
    }

    /// The entries `page` leads to: its images, the pages its links lead to, and its chain's
    /// next page.
    fn children(&self, page: PageUnit) -> Vec<Item> {
        let url = page.position.url;
        let (images, links) = match page.result {
            PageResult::Done { images, links } => (images, links),
            PageResult::Partial { images, .. } => (images, Vec::new()),
            PageResult::Failed(_) => (Vec::new(), Vec::new()),
        };
        let mut children: Vec<Item> = images
            .into_iter()
            .map(|image| {
                Item::Image(ImageItem {
                    url: image.url,
                    page: url.clone(),
                    rule: image.rule,
                    attribute: image.attribute,
                    metadata: image.metadata,
                    caption: image.caption,
                    rights: image.rights,
                })
            })
            .collect();
        children.extend(links.into_iter().map(|link| {
            Item::Page(PageItem {
                start: page.start.clone(),
                position: PagePosition {
                    url: link.url,
                    number: 0,
                    done: 0,
                    cursor: None,
                    after_id: None,
                    offset: 0,
                },
                level: Some(link.level),
                depth: link.depth,
                metadata: link.metadata,
                last_id: None,
            })
        }));
        if let Some(NextPage::Fetch(next)) = page.next {
            children.push(Item::Page(PageItem {
                start: page.start,
                position: next,
                level: None,
                depth: 0,
                metadata: BTreeMap::new(),
                last_id: self.last_id.clone(),
            }));
        }
        children
    }

    /// Which of `keys` (items' seen keys) the job has seen.
    async fn seen(&self, keys: Vec<String>) -> Result<Vec<bool>, ClusterError> {
        self.queue.seen(keys).await
    }
}

impl PageLedger for EntryPage<'_> {
    type Error = ClusterError;

    async fn commit_page(&mut self, page: PageUnit) -> Result<bool, ClusterError> {
        let url = page.position.url.clone();
        let record = page.result.record(&page.start, page.position.number, now());
        if let Some(error) = page.result.error()
            && is_wall_class(&error.class)
        {
            // Every worker's requests would meet the same wall: the host waits.
            let host = Url::parse(&url).map(|u| host_of(&u)).unwrap_or_default();
            tracing::warn!(
                host,
                "a sign-in wall or challenge: every worker holds back from the host for {WALL_PAUSE:?}"
            );
            self.queue
                .pause_host(Stream::Pages, &host, WALL_PAUSE)
                .await?;
            self.queue
                .pause_host(Stream::Images, &host, WALL_PAUSE)
                .await?;
        }
        let counter = match record.status {
            PageStatus::Done => "pages_done",
            _ => "pages_failed",
        };
        let children = self.children(page);
        self.commit(&url, &record, counter, &children).await
    }

    /// The chain ends with no next page's entry: the page asked past its end is recorded done,
    /// with why the chain ended.
    async fn end_chain(
        &mut self,
        start: &str,
        position: &PagePosition,
        reason: EndReason,
    ) -> Result<(), ClusterError> {
        let done = PageResult::Done {
            images: Vec::new(),
            links: Vec::new(),
        };
        let mut record = done.record(start, position.number, now());
        record.error = Some(format!("end of pagination: {}", reason.describe()));
        self.commit(&position.url, &record, "pages_done", &[])
            .await
            .map(drop)
    }

    async fn knows_all(
        &self,
        images: Vec<String>,
        pages: Vec<String>,
    ) -> Result<bool, ClusterError> {
        let keys = images.iter().map(|url| image_key(url));
        let keys = keys.chain(pages.iter().map(|url| page_key(url))).collect();
        Ok(self.seen(keys).await?.into_iter().all(|seen| seen))
    }

    async fn known_images(&self, urls: Vec<String>) -> Result<HashSet<String>, ClusterError> {
        let seen = self.seen(urls.iter().map(|url| image_key(url)).collect());
        let seen = seen.await?;
        Ok(urls
            .into_iter()
            .zip(seen)
            .filter_map(|(url, seen)| seen.then_some(url))
            .collect())
    }
}
