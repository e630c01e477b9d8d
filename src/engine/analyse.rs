//! Reading what was fetched: a page through the profile's rules, an API reply through its
//! cursor's. Both run on the blocking pool; every driver calls these, and nothing else reads
//! a page.

use std::sync::Arc;

use url::Url;

use super::page::{Fetched, PARTIAL_CLASS, PageYield};
use crate::analyze::analyze_page;
use crate::extract::ImageCandidate;
use crate::fetch::PageFailure;
use crate::net::{Failure, FailureClass};
use crate::paginate::PagePosition;
use crate::paginate::json_cursor::{self, ApiReading};
use crate::profile::{Pagination, Profile};
use crate::state::{FailureRecord, NewImage};

/// Analyses `snapshot`, the page at `position` of the chain from `start`, on the blocking pool.
pub async fn analyse(
    profile: Arc<Profile>,
    start: Url,
    position: PagePosition,
    snapshot: crate::page::PageSnapshot,
) -> Fetched {
    let partial = snapshot.partial.clone().map(|detail| FailureRecord {
        class: PARTIAL_CLASS.to_owned(),
        detail,
    });
    let analysed = tokio::task::spawn_blocking(move || {
        let analysis = analyze_page(&profile, &start, &position, &snapshot);
        let images: Vec<NewImage> = analysis.accepted().map(new_image).collect();
        PageYield {
            images,
            links: analysis.links,
            next: analysis.next,
            partial,
        }
    })
    .await;
    analysed.map_err(|_| {
        PageFailure::Failed(Failure::new(
            FailureClass::Other,
            "the page's analysis stopped",
        ))
    })
}

/// An API response, as [`read_api_reply`] reads it.
pub struct ApiReply {
    /// After redirects.
    pub url: Url,
    pub status: u16,
    pub body: Vec<u8>,
}

/// Reads `reply`, the response to the request for `position` of the chain from `start`, on the
/// blocking pool. `max_pages` is the chain's limit: the profile's for the pages the tool asks
/// for, `None` for those a rendered start page fetched by itself. `None` when the reading
/// stopped (the run is shutting down).
pub async fn read_api_reply(
    profile: Arc<Profile>,
    start: &Url,
    position: &PagePosition,
    reply: ApiReply,
    max_pages: Option<u64>,
) -> Option<ApiReading> {
    let (start, at) = (start.clone(), position.clone());
    tokio::task::spawn_blocking(move || {
        let Pagination::JsonCursor(cursor) = &profile.pagination else {
            return ApiReading::Failed("not a json_cursor profile".into());
        };
        json_cursor::read(
            cursor,
            &profile.api,
            max_pages,
            &start,
            &at,
            json_cursor::Reply {
                url: &reply.url,
                status: reply.status,
                body: &reply.body,
            },
        )
    })
    .await
    .ok()
}

/// The images of an API page that the profile's filters accept, to be downloaded.
pub fn api_images(profile: &Profile, page: &json_cursor::ApiPage) -> Vec<NewImage> {
    page.candidates
        .iter()
        .filter(|c| profile.filter.check(&c.url).is_ok())
        .map(new_image)
        .collect()
}

/// The state's record of an accepted candidate, to be downloaded.
fn new_image(candidate: &ImageCandidate) -> NewImage {
    NewImage {
        url: candidate.url.to_string(),
        rule: candidate.rule.clone(),
        attribute: candidate.attribute.clone(),
        metadata: candidate.metadata.clone(),
    }
}
