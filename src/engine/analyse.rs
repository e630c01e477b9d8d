//! Reading what was fetched: a page through the profile's rules, an API reply through its
//! cursor's. Both run on the blocking pool; every driver calls these, and nothing else reads
//! a page.

use std::sync::{Arc, LazyLock};

use tokio::sync::{Semaphore, SemaphorePermit};
use url::Url;

use super::page::{Fetched, PARTIAL_CLASS, PageYield};
use crate::analyze::{PageAnalysis, analyze_page};
use crate::extract::ImageCandidate;
use crate::fetch::PageFailure;
use crate::net::{Failure, FailureClass};
use crate::paginate::PagePosition;
use crate::paginate::json_cursor::{self, ApiReading};
use crate::profile::{Pagination, Profile};
use crate::state::{FailureRecord, NewImage};

/// What the pages and API replies being read at once may weigh, over every chain and link: a
/// tag of markup weighs one, a byte of JSON an eighth (parsed, a tag took about 260 bytes of
/// memory and a byte of JSON about 36), so reading takes about 1 GB at most. A page that
/// weighs more alone fails as `too_large`, as one past the byte limit does.
pub const READING_BUDGET: u32 = 4_000_000;

static READING: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(READING_BUDGET as usize));

/// Waits for `weight` of [`READING_BUDGET`] (a byte of JSON weighs an eighth); a `what` that
/// weighs more than all of it fails as `too_large`.
pub async fn reading_place(what: &str, weight: usize) -> Result<SemaphorePermit<'static>, Failure> {
    let Ok(weight) = u32::try_from(weight).map(|w| w.max(1)) else {
        return Err(too_heavy(what, weight));
    };
    if weight > READING_BUDGET {
        return Err(too_heavy(what, weight as usize));
    }
    // Invariant: the semaphore is never closed.
    Ok(READING
        .acquire_many(weight)
        .await
        .expect("reading budget open"))
}

fn too_heavy(what: &str, weight: usize) -> Failure {
    Failure::new(
        FailureClass::TooLarge,
        format!(
            "{what} is too large to read: it weighs {weight}, and pages are read within {READING_BUDGET} (a tag weighs 1, a byte of JSON 1/8)"
        ),
    )
}

/// The weight of `html` in the [`READING_BUDGET`]: its tags (every `<`).
pub fn markup_weight(html: &str) -> usize {
    html.bytes().filter(|b| *b == b'<').count()
}

/// Reads `snapshot`, the page at `position` of the chain from `start`, by `profile`'s rules on
/// the blocking pool, within the [`READING_BUDGET`]; what `take` makes of the reading is what
/// comes back. The one way a page is read, whatever it is read for.
pub async fn read_page<T: Send + 'static>(
    profile: Arc<Profile>,
    start: Url,
    position: PagePosition,
    snapshot: crate::page::PageSnapshot,
    take: impl FnOnce(PageAnalysis) -> T + Send + 'static,
) -> Result<T, Failure> {
    let _place = reading_place("the page", markup_weight(&snapshot.html)).await?;
    tokio::task::spawn_blocking(move || take(analyze_page(&profile, &start, &position, &snapshot)))
        .await
        .map_err(|_| Failure::new(FailureClass::Other, "the page's analysis stopped"))
}

/// Analyses `snapshot`, the page at `position` of the chain from `start` ([`read_page`]). A
/// page that is a wall (a sign-in form, a bot challenge) fails with its class.
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
    read_page(
        profile,
        start,
        position,
        snapshot,
        |analysis| match analysis.wall {
            Some(wall) => Err(Failure::new(wall.kind.class(), wall.reason)),
            None => Ok(PageYield {
                images: analysis.accepted().map(new_image).collect(),
                links: analysis.links,
                next: analysis.next,
                partial,
            }),
        },
    )
    .await
    .and_then(|read| read)
    .map_err(PageFailure::Failed)
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
    let _place = match reading_place("the API answer", reply.body.len() / 8).await {
        Ok(place) => place,
        Err(failed) => return Some(ApiReading::Failed(failed.detail)),
    };
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
        caption: candidate.caption.clone(),
        rights: candidate.rights.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_page_weighing_more_than_the_whole_budget_fails_as_too_large() {
        let failed = reading_place("the page", READING_BUDGET as usize + 1)
            .await
            .unwrap_err();
        assert_eq!(failed.class, FailureClass::TooLarge);
        let place = reading_place("the page", READING_BUDGET as usize).await;
        assert!(place.is_ok(), "a page of the whole budget is read");
        assert_eq!(markup_weight("<p><i>a</i></p>"), 4);
    }
}
