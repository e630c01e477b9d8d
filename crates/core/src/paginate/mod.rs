//! Paginate: given the page just processed, which page comes next.
//!
//! Pure: strategies take a parsed page and the current position and return the next action.
//! The crawl stage stores the returned [`PagePosition`] as the checkpoint, in the same
//! transaction as the page's images.

pub mod json_cursor;
mod next_link;
pub mod resume;
mod url_template;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::page::ParsedPage;
use crate::profile::{ApiPaging, Pagination};

/// Where a chain of pages stands: the page to fetch and its number in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagePosition {
    pub url: String,
    /// The `{page}` value for URL templates; the 1-based position otherwise.
    pub number: i64,
    /// Pages of this chain already done before this one.
    pub done: u64,
    /// `json_cursor`: the cursor to send (`None` on the first page and when resuming by id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// `json_cursor`: the id to resume after, when the cursor has expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_id: Option<String>,
    /// Numbered `json_cursor` pages: the items read before this page (`{offset}`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What to do after a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextPage {
    Fetch(PagePosition),
    End(EndReason),
}

/// Why a chain of pages ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndReason {
    /// The profile has no pagination.
    SinglePage,
    /// No next-page link on the last page.
    NoNextLink,
    /// The next link points at a page already visited.
    Loop,
    /// The URL template reached `stop`.
    StopReached,
    /// The page numbers reached the end of their range (64-bit integers): there is no number
    /// for a next page.
    LastPageNumber,
    /// The page yielded no images (URL templates end there).
    EmptyPage,
    /// The server answered 404 or 410 for the page (URL templates end there).
    MissingPage,
    /// `max_pages` pages were done.
    MaxPages,
    /// The API response has no next cursor (null, missing or empty).
    NoCursor,
    /// The API response says there are no more pages (`has_more` is false).
    NoMorePages,
    /// An incremental run met `stop_after_known` already-known items in a row.
    KnownItems,
    /// An incremental run reached the newest id of the walks before (`stop_at_known_id`).
    KnownId,
    /// A replay reached a page (or API request) its recording does not have: the recording
    /// stopped there.
    EndOfRecording,
}

impl EndReason {
    /// Words for the summary and `status`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::SinglePage => "single page",
            Self::NoNextLink => "no next link",
            Self::Loop => "next link loops back",
            Self::StopReached => "template stop reached",
            Self::LastPageNumber => "last page number reached",
            Self::EmptyPage => "empty page",
            Self::MissingPage => "page not found",
            Self::MaxPages => "max_pages reached",
            Self::NoCursor => "no next cursor",
            Self::NoMorePages => "the API says there are no more pages",
            Self::KnownItems => "reached items already known",
            Self::KnownId => "reached the newest id of the previous run",
            Self::EndOfRecording => "end of recording",
        }
    }
}

/// The first page of the chain that starts at `start`.
pub fn first_page(pagination: &Pagination, start: &Url) -> PagePosition {
    match pagination {
        Pagination::UrlTemplate {
            template,
            start: first,
            ..
        } => url_template::position(template, start, *first, 0),
        Pagination::JsonCursor(api) => {
            json_cursor::position(api, start, json_cursor::first_number(api), 0, None, None)
        }
        Pagination::None | Pagination::NextLink { .. } => PagePosition {
            url: start.to_string(),
            number: 1,
            done: 0,
            cursor: None,
            after_id: None,
            offset: 0,
        },
    }
}

/// Why a page number names no page of a profile's chains.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageNumberError {
    /// The pagination does not number its pages (none, next links).
    #[error("the pages are not numbered")]
    NotNumbered,
    /// A `json_cursor` API whose responses name the next cursor.
    #[error("the API pages by cursor, not by number")]
    ByCursor,
    /// A number the chain never reaches: before its first page, between its steps or past its
    /// `stop`.
    #[error("no page `{number}`: the pages are numbered {numbering}")]
    NoSuchPage { number: i64, numbering: String },
}

/// Page `number` of the chain that starts at `start`, as a run reaches it: for a URL template,
/// its URL and the pages before it; for a numbered API, its request with `{page}` = `number`
/// and `{offset}` = 0 (the items before a page are known only by reading them: the `next` of
/// the page before carries them).
pub fn numbered_page(
    pagination: &Pagination,
    start: &Url,
    number: i64,
) -> Result<PagePosition, PageNumberError> {
    let (first, step, stop) = match pagination {
        Pagination::UrlTemplate {
            start, step, stop, ..
        } => (*start, *step, *stop),
        Pagination::JsonCursor(api) => match api.paging {
            ApiPaging::Numbered { first } => (first, 1, None),
            ApiPaging::Cursor(_) => return Err(PageNumberError::ByCursor),
        },
        Pagination::None | Pagination::NextLink { .. } => {
            return Err(PageNumberError::NotNumbered);
        }
    };
    let steps = i128::from(number) - i128::from(first);
    let past_stop = stop.is_some_and(|stop| {
        if step > 0 {
            number > stop
        } else {
            number < stop
        }
    });
    let done = match u64::try_from(steps / i128::from(step)) {
        Ok(done) if steps % i128::from(step) == 0 && !past_stop => done,
        _ => {
            let mut numbering = match step {
                1 => format!("from {first}"),
                -1 => format!("from {first} down"),
                _ => format!("{first}, {}, ...", i128::from(first) + i128::from(step)),
            };
            if let Some(stop) = stop {
                numbering.push_str(&format!(" to {stop}"));
            }
            return Err(PageNumberError::NoSuchPage { number, numbering });
        }
    };
    match pagination {
        Pagination::UrlTemplate { template, .. } => {
            Ok(url_template::position(template, start, number, done))
        }
        Pagination::JsonCursor(api) => {
            Ok(json_cursor::position(api, start, number, done, None, None))
        }
        Pagination::None | Pagination::NextLink { .. } => Err(PageNumberError::NotNumbered),
    }
}

/// The page after `current`, which yielded `found` images and links to follow.
pub fn next_page(
    pagination: &Pagination,
    max_pages: Option<u64>,
    start: &Url,
    current: &PagePosition,
    page: &ParsedPage,
    found: usize,
) -> NextPage {
    if max_pages.is_some_and(|max| current.done + 1 >= max) {
        return NextPage::End(EndReason::MaxPages);
    }
    match pagination {
        Pagination::None => NextPage::End(EndReason::SinglePage),
        Pagination::NextLink {
            selector,
            attribute,
        } => next_link::next(selector, attribute, current, page),
        Pagination::UrlTemplate {
            template,
            step,
            stop,
            ..
        } => url_template::next(template, *step, *stop, start, current, found),
        // API chains are paged from their responses (`json_cursor::next`), not from HTML.
        Pagination::JsonCursor(_) => NextPage::End(EndReason::SinglePage),
    }
}

/// The page after `current` as far as it can be known before `current` is fetched, so it can
/// be fetched ahead: the next number of a URL template, as if `current` had images (when it
/// turns out to be the last page, the page fetched ahead is discarded). `None` where only the
/// page itself can tell (next links, cursors) and where the chain ends at `current` anyway.
pub fn predict_next(
    pagination: &Pagination,
    max_pages: Option<u64>,
    start: &Url,
    current: &PagePosition,
) -> Option<PagePosition> {
    if max_pages.is_some_and(|max| current.done + 1 >= max) {
        return None;
    }
    match pagination {
        Pagination::UrlTemplate {
            template,
            step,
            stop,
            ..
        } => match url_template::next(template, *step, *stop, start, current, 1) {
            NextPage::Fetch(next) => Some(next),
            NextPage::End(_) => None,
        },
        Pagination::None | Pagination::NextLink { .. } | Pagination::JsonCursor(_) => None,
    }
}

/// What follows a page the server says does not exist.
pub fn after_missing_page() -> NextPage {
    NextPage::End(EndReason::MissingPage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Profile, check};

    fn profile(pagination: &str) -> Profile {
        let source = format!(
            "name = \"t\"\nstart = [\"https://a.test/g/\"]\n[[images]]\nselector = \"img\"\n[pagination]\n{pagination}"
        );
        check(&source).profile.expect("valid profile")
    }

    fn predictions(profile: &Profile) -> Vec<i64> {
        let start = &profile.start[0];
        let mut at = first_page(&profile.pagination, start);
        let mut numbers = vec![at.number];
        while let Some(next) = predict_next(&profile.pagination, profile.max_pages, start, &at) {
            numbers.push(next.number);
            at = next;
            if numbers.len() > 100 {
                break;
            }
        }
        numbers
    }

    #[test]
    fn a_template_is_predicted_page_by_page_up_to_its_stop() {
        let p = profile(
            "kind = \"url_template\"\ntemplate = \"/g/{page}\"\nstart = 2\nstep = 2\nstop = 8\n",
        );
        assert_eq!(predictions(&p), [2, 4, 6, 8]);
        let first = first_page(&p.pagination, &p.start[0]);
        let next = predict_next(&p.pagination, p.max_pages, &p.start[0], &first).unwrap();
        assert_eq!(next.url, "https://a.test/g/4");
        assert_eq!(next.done, 1);
    }

    #[test]
    fn max_pages_bounds_the_prediction() {
        let p = profile("kind = \"url_template\"\ntemplate = \"/g/{page}\"\nmax_pages = 3\n");
        assert_eq!(predictions(&p), [1, 2, 3]);
    }

    #[test]
    fn next_links_cannot_be_predicted() {
        let p = profile("kind = \"next_link\"\nselector = \"a.next\"\n");
        assert_eq!(predictions(&p), [1]);
    }

    /// The page's URL and the pages before it, or why there is no such page.
    type Expected = Result<(String, u64), PageNumberError>;

    #[test]
    fn page_numbers_name_the_pages_a_chain_reaches() {
        use PageNumberError::{ByCursor, NoSuchPage, NotNumbered};
        let template = "kind = \"url_template\"\ntemplate = \"/g/{page}\"";
        let api = "kind = \"json_cursor\"\nrequest = \"/api?p={page}\"\n[[api]]\nurl = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"";
        let no_such = |number: i64, numbering: &str| {
            Err(NoSuchPage {
                number,
                numbering: numbering.to_owned(),
            })
        };
        let cases: [(&str, String, i64, Expected); 10] = [
            ("first page", template.into(), 1, Ok(("https://a.test/g/1".into(), 0))),
            ("a later page", template.into(), 15, Ok(("https://a.test/g/15".into(), 14))),
            ("page 0", template.into(), 0, no_such(0, "from 1")),
            (
                "between steps",
                format!("{template}\nstart = 2\nstep = 2\nstop = 8"),
                5,
                no_such(5, "2, 4, ... to 8"),
            ),
            (
                "past stop",
                format!("{template}\nstart = 2\nstep = 2\nstop = 8"),
                10,
                no_such(10, "2, 4, ... to 8"),
            ),
            (
                "counting down",
                format!("{template}\nstart = 5\nstep = -1"),
                3,
                Ok(("https://a.test/g/3".into(), 2)),
            ),
            ("an API page", api.into(), 15, Ok(("https://a.test/api?p=15".into(), 14))),
            ("before an API's first", api.into(), 0, no_such(0, "from 1")),
            (
                "a cursor API",
                "kind = \"json_cursor\"\nrequest = \"/api\"\ncursor = \"$.next\"\n[[api]]\nurl = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"".into(),
                2,
                Err(ByCursor),
            ),
            ("next links", "kind = \"next_link\"\nselector = \"a.next\"".into(), 2, Err(NotNumbered)),
        ];
        for (name, pagination, number, expected) in cases {
            let p = profile(&pagination);
            let found = numbered_page(&p.pagination, &p.start[0], number).map(|at| {
                assert_eq!(at.number, number, "{name}");
                (at.url, at.done)
            });
            assert_eq!(found, expected, "{name}");
        }
    }
}
