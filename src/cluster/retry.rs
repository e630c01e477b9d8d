//! `scrape retry --redis`: a job's dead letters and failed images put back in their streams,
//! for its workers to do again.

use std::collections::HashSet;

use super::ClusterError;
use super::item::{ImageItem, Item};
use super::keys::Stream;
use super::queue::{BATCH, JobQueue, Requeue};
use super::report::DEAD_LETTER_CLASS;
use crate::state::{ImageRecord, ImageStatus};

/// What a retry put back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requeued {
    pub dead_letters: u64,
    pub failed_images: u64,
    /// Dead letters whose entry was no item (nothing to do again).
    pub unreadable: u64,
}

/// Puts back the dead letters (when `classes` is empty or names `dead_letter`) and the failed
/// images of `classes` (every class when empty). Failed pages are not put back: their records
/// do not keep where in their chain they were (a page that keeps failing ends as a dead letter,
/// which does).
pub async fn requeue_failed(
    queue: &JobQueue,
    classes: &[String],
) -> Result<Requeued, ClusterError> {
    let wants = |class: &str| classes.is_empty() || classes.iter().any(|c| c == class);
    let mut requeued = Requeued::default();
    let mut dead = Vec::new();
    if wants(DEAD_LETTER_CLASS) {
        let mut after: Option<String> = None;
        loop {
            let page = queue
                .stream_range(queue.keys().dead(), after.as_deref(), BATCH)
                .await?;
            let full = page.len() >= BATCH;
            after = page.last().map(|(id, _)| id.clone());
            for (id, fields) in page {
                let stream = match fields.get("stream").map(String::as_str) {
                    Some("pages") => Stream::Pages,
                    Some("images") => Stream::Images,
                    _ => {
                        requeued.unreadable += 1;
                        continue;
                    }
                };
                let item = fields
                    .get(super::item::FIELD)
                    .and_then(|json| Item::decode(stream, json).ok());
                match item {
                    Some(item) => dead.push(Requeue {
                        item,
                        dead_letter: Some(id),
                    }),
                    None => requeued.unreadable += 1,
                }
            }
            if !full {
                break;
            }
        }
    }
    let mut failed = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor = 0;
    loop {
        let (next, fields) = queue
            .scan_hash(queue.keys().images(), cursor, BATCH)
            .await?;
        for (url, json) in fields {
            let Ok(record) = serde_json::from_str::<ImageRecord>(&json) else {
                continue;
            };
            let class = record.failure.as_ref().map(|f| f.class.as_str());
            if record.status != ImageStatus::Failed || !class.is_some_and(wants) {
                continue;
            }
            // A scan may return a field twice.
            if !seen.insert(url.clone()) {
                continue;
            }
            failed.push(Requeue {
                item: Item::Image(ImageItem {
                    url,
                    page: record.page,
                    rule: record.rule,
                    attribute: record.attribute,
                    metadata: record.metadata,
                    caption: record.caption,
                    rights: record.rights,
                }),
                dead_letter: None,
            });
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    requeued.dead_letters = queue.requeue(&dead).await?;
    requeued.failed_images = queue.requeue(&failed).await?;
    Ok(requeued)
}
