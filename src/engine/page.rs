//! The page step: what a fetched (or failed) page leads to, decided once for every driver. A
//! one-process crawl commits the step to redb with its chain's checkpoint; a worker commits it
//! to Redis with the entries it leads to. Pure: no I/O, table-tested below.

use std::collections::{BTreeMap, BTreeSet};

use crate::extract::FollowLink;
use crate::fetch::PageFailure;
use crate::net::FailureClass;
use crate::paginate::{NextPage, PagePosition};
use crate::profile::{Pagination, Profile};
use crate::state::{FailureRecord, NewImage, NewLink, PageResult, Revisit};

/// What a fetched page yields once analysed: its accepted images, the links its `[[follow]]`
/// rules found, and what comes next in its chain.
#[derive(Debug, Clone)]
pub struct PageYield {
    pub images: Vec<NewImage>,
    pub links: Vec<FollowLink>,
    pub next: NextPage,
    /// The page was rendered only in part (it reached its deadline): its images are kept, the
    /// page counts as failed (class `partial`) and is retried by the next run.
    pub partial: Option<FailureRecord>,
}

/// A page, fetched and analysed (or why not).
pub type Fetched = Result<PageYield, PageFailure>;

/// The failure class of a page rendered only in part: it reached `page_timeout`, and what was
/// rendered and captured by then was taken.
pub const PARTIAL_CLASS: &str = "partial";

/// Where a page stands in its job, as far as the step cares.
#[derive(Debug, Clone, Copy)]
pub struct PagePlace<'a> {
    pub position: &'a PagePosition,
    /// A chain's page (a start URL's, or its next pages); otherwise reached through a link.
    pub in_chain: bool,
    /// Links followed from the start page to reach it (0 for a chain's page).
    pub depth: u32,
    /// `[crawl] max_depth`: links of a page at this depth are not followed.
    pub max_depth: u32,
    /// The chain asks past its last page to find its end (page-number templates).
    pub ends_on_missing: bool,
    /// What the link that led here passes down to what the page yields.
    pub inherited: &'a BTreeMap<String, String>,
    /// The levels whose known pages a refresh looks at again (see [`revisited_levels`]);
    /// empty outside a refresh.
    pub revisited: &'a BTreeSet<String>,
}

/// The levels of `profile` whose pages a refresh looks at again although it knows them:
/// listings, the levels that lead to further pages, where new items appear. Pages of the
/// others (details) are not fetched again. None outside a refresh.
pub fn revisited_levels(profile: &Profile) -> BTreeSet<String> {
    if profile.refresh.is_none() {
        return BTreeSet::new();
    }
    profile
        .levels
        .iter()
        .filter(|(_, level)| !level.follow.is_empty())
        .map(|(name, _)| name.clone())
        .collect()
}

/// What a driver does with a page.
#[derive(Debug, Clone, PartialEq)]
pub enum PageStep {
    /// Store `result`; a chain's page done goes on to `next` (`None` for a page reached
    /// through a link, and for one that did not end done: its chain stays where it was).
    Commit {
        result: PageResult,
        next: Option<NextPage>,
    },
    /// A page-number chain asked past its last page: the chain ends here, and the missing page
    /// is no failure.
    EndOfChain { code: u16 },
    /// The run stopped while the page was fetched: nothing is stored, the next run fetches it.
    Interrupted,
}

/// The step for `fetched`, the page at `place`.
pub fn page_step(place: &PagePlace, fetched: Fetched) -> PageStep {
    let page = match fetched {
        Ok(page) => page,
        Err(PageFailure::Cancelled) => return PageStep::Interrupted,
        Err(PageFailure::Missing(code))
            if place.in_chain && place.position.done > 0 && place.ends_on_missing =>
        {
            return PageStep::EndOfChain { code };
        }
        Err(failure) => {
            return PageStep::Commit {
                result: PageResult::Failed(failure_record(failure)),
                next: None,
            };
        }
    };
    let images: Vec<NewImage> = page
        .images
        .into_iter()
        .map(|mut image| {
            image.metadata = merged(place.inherited, std::mem::take(&mut image.metadata));
            image
        })
        .collect();
    if let Some(error) = page.partial {
        return PageStep::Commit {
            result: PageResult::Partial { images, error },
            next: None,
        };
    }
    PageStep::Commit {
        result: PageResult::Done {
            images,
            links: new_links(place, page.links),
        },
        next: place.in_chain.then_some(page.next),
    }
}

/// The links of the page at `place` worth queueing: those within `max_depth`, carrying what
/// the page inherited under their own metadata.
fn new_links(place: &PagePlace, links: Vec<FollowLink>) -> Vec<NewLink> {
    if place.depth >= place.max_depth {
        if !links.is_empty() {
            tracing::debug!(
                depth = place.depth,
                links = links.len(),
                "links past max_depth are not followed"
            );
        }
        return Vec::new();
    }
    links
        .into_iter()
        .map(|link| NewLink {
            url: link.url.to_string(),
            depth: place.depth + 1,
            revisit: match place.revisited.contains(&link.level) {
                true => Revisit::Once,
                false => Revisit::Never,
            },
            level: link.level,
            metadata: merged(place.inherited, link.metadata),
            lastmod: None,
        })
        .collect()
}

/// Page-number templates have no other way to know the last page than asking past it.
pub fn ends_on_missing(profile: &Profile) -> bool {
    matches!(profile.pagination, Pagination::UrlTemplate { .. })
}

/// A page that could not be had, as the state records it: its class (`http_404`, `timeout`,
/// `robots`, ...) and what went wrong.
pub fn failure_record(failure: PageFailure) -> FailureRecord {
    match failure {
        PageFailure::Missing(code) => FailureRecord {
            class: FailureClass::Http(code).name(),
            detail: format!("HTTP {code}"),
        },
        PageFailure::Failed(f) => FailureRecord {
            class: f.class.name(),
            detail: f.detail,
        },
        PageFailure::Cancelled => other_failure("cancelled".into()),
    }
}

/// A page that failed for a reason of the tool's own (its analysis, a profile that changed).
pub fn other_failure(detail: String) -> FailureRecord {
    FailureRecord {
        class: FailureClass::Other.name(),
        detail,
    }
}

/// `own` over `inherited`: what a link passes down, and what the page adds to it.
pub fn merged(
    inherited: &BTreeMap<String, String>,
    own: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut all = inherited.clone();
    all.extend(own);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::Failure;
    use crate::paginate::EndReason;
    use crate::state::PageStatus;

    fn position(done: u64) -> PagePosition {
        PagePosition {
            url: "http://127.0.0.1/p/2".into(),
            number: 2,
            done,
            cursor: None,
            after_id: None,
            offset: 0,
        }
    }

    fn image(url: &str, meta: &[(&str, &str)]) -> NewImage {
        NewImage {
            url: url.into(),
            rule: "gallery".into(),
            attribute: "src".into(),
            metadata: meta
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            caption: None,
            rights: None,
        }
    }

    fn link(url: &str) -> FollowLink {
        FollowLink {
            url: url::Url::parse(url).unwrap(),
            level: "detail".into(),
            rule: 0,
            metadata: [("title".to_owned(), "own".to_owned())].into(),
        }
    }

    fn page(partial: Option<FailureRecord>) -> Fetched {
        Ok(PageYield {
            images: vec![image("http://127.0.0.1/a.jpg", &[("alt", "a")])],
            links: vec![link("http://127.0.0.1/d/1")],
            next: NextPage::End(EndReason::NoNextLink),
            partial,
        })
    }

    fn partial() -> FailureRecord {
        FailureRecord {
            class: PARTIAL_CLASS.into(),
            detail: "the page timed out while scrolling".into(),
        }
    }

    /// A place: in a chain or not, at `depth` of at most 2, `done` pages before it, a
    /// template chain or not.
    fn step(in_chain: bool, depth: u32, done: u64, template: bool, fetched: Fetched) -> PageStep {
        let position = position(done);
        let inherited: BTreeMap<String, String> = [
            ("title".to_owned(), "inherited".to_owned()),
            ("album".to_owned(), "x".to_owned()),
        ]
        .into();
        let place = PagePlace {
            position: &position,
            in_chain,
            depth,
            max_depth: 2,
            ends_on_missing: template,
            inherited: &inherited,
            revisited: &BTreeSet::new(),
        };
        page_step(&place, fetched)
    }

    fn failed(class: FailureClass) -> Fetched {
        Err(PageFailure::Failed(Failure::new(class, "went wrong")))
    }

    #[test]
    fn every_kind_of_page_end_leads_where_it_should() {
        let missing = || Err(PageFailure::Missing(404));
        let cases: Vec<(&str, PageStep)> = vec![
            (
                "cancelled",
                step(true, 0, 3, true, Err(PageFailure::Cancelled)),
            ),
            (
                "missing past a template's first page",
                step(true, 0, 3, true, missing()),
            ),
            (
                "missing first page of a template",
                step(true, 0, 0, true, missing()),
            ),
            (
                "missing page of a next-link chain",
                step(true, 0, 3, false, missing()),
            ),
            ("missing linked page", step(false, 1, 3, true, missing())),
            (
                "timed out",
                step(true, 0, 3, true, failed(FailureClass::Timeout)),
            ),
            ("partial", step(true, 0, 3, true, page(Some(partial())))),
            ("done in a chain", step(true, 0, 3, true, page(None))),
            ("done through a link", step(false, 1, 0, false, page(None))),
            ("done at max depth", step(false, 2, 0, false, page(None))),
        ];
        let summary: Vec<(&str, String)> = cases
            .iter()
            .map(|(name, step)| {
                let said = match step {
                    PageStep::Interrupted => "interrupted".to_owned(),
                    PageStep::EndOfChain { code } => format!("end of chain ({code})"),
                    PageStep::Commit { result, next } => {
                        let kind = match result {
                            PageResult::Done { images, links } => {
                                format!("done, {} images, {} links", images.len(), links.len())
                            }
                            PageResult::Partial { images, error } => {
                                format!("partial ({}), {} images", error.class, images.len())
                            }
                            PageResult::Failed(error) => format!("failed ({})", error.class),
                        };
                        format!("{kind}, next: {}", next.is_some())
                    }
                };
                (*name, said)
            })
            .collect();
        let expected = [
            ("cancelled", "interrupted"),
            ("missing past a template's first page", "end of chain (404)"),
            (
                "missing first page of a template",
                "failed (http_404), next: false",
            ),
            (
                "missing page of a next-link chain",
                "failed (http_404), next: false",
            ),
            ("missing linked page", "failed (http_404), next: false"),
            ("timed out", "failed (timeout), next: false"),
            ("partial", "partial (partial), 1 images, next: false"),
            ("done in a chain", "done, 1 images, 1 links, next: true"),
            (
                "done through a link",
                "done, 1 images, 1 links, next: false",
            ),
            ("done at max depth", "done, 1 images, 0 links, next: false"),
        ];
        let expected: Vec<(&str, String)> = expected
            .iter()
            .map(|(n, s)| (*n, (*s).to_owned()))
            .collect();
        assert_eq!(summary, expected);
    }

    #[test]
    fn what_a_link_passes_down_goes_under_what_the_page_and_its_links_say() {
        let PageStep::Commit {
            result: PageResult::Done { images, links },
            ..
        } = step(false, 1, 0, false, page(None))
        else {
            panic!("a done page");
        };
        let meta = |m: &BTreeMap<String, String>| {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(meta(&images[0].metadata), "album=x,alt=a,title=inherited");
        assert_eq!(meta(&links[0].metadata), "album=x,title=own");
        assert_eq!(links[0].depth, 2);
    }

    #[test]
    fn a_record_says_what_the_state_keeps_of_each_result() {
        let done = PageResult::Done {
            images: vec![image("http://127.0.0.1/a.jpg", &[])],
            links: Vec::new(),
        };
        let record = done.record("http://127.0.0.1/", 4, 7);
        assert_eq!(
            (
                record.status,
                record.images_found,
                record.error,
                record.class
            ),
            (PageStatus::Done, 1, None, None)
        );
        let record = PageResult::Partial {
            images: vec![image("http://127.0.0.1/a.jpg", &[])],
            error: partial(),
        }
        .record("http://127.0.0.1/", 4, 7);
        assert_eq!(
            (record.status, record.images_found, record.class.as_deref()),
            (PageStatus::Failed, 1, Some(PARTIAL_CLASS))
        );
        let record = PageResult::Failed(failure_record(PageFailure::Failed(Failure::new(
            FailureClass::Http(503),
            "HTTP 503",
        ))))
        .record("http://127.0.0.1/", 4, 7);
        assert_eq!(
            (
                record.status,
                record.error.as_deref(),
                record.class.as_deref()
            ),
            (PageStatus::Failed, Some("HTTP 503"), Some("http_503"))
        );
    }
}
