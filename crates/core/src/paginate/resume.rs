//! How a chain goes on from what an earlier walk left: a walk for new items once the chain has
//! ended (a refresh), when to stop it (known items or pages in a row), and where a `json_cursor`
//! chain goes when the API calls a saved cursor expired. Pure; both drivers of a job (one
//! process, workers) follow it.

use url::Url;

use super::PagePosition;
use super::json_cursor::{first_number, position};
use crate::profile::{IdOrder, JsonCursor};

/// Where a walk for new items starts, once the chain has ended: after `last_id` (the furthest
/// id read) when new items come at the end (ascending, with `after_id`), from the first page
/// when they come at the head and `stop_after_known` or `stop_at_known_id` (with a `newest_id`
/// to stop at) says when to stop; `None` when the profile asks for neither.
pub fn next_walk(
    cursor: &JsonCursor,
    start: &Url,
    last_id: Option<&str>,
    newest_id: Option<&str>,
) -> Option<PagePosition> {
    let first = first_number(cursor);
    let from_first = || position(cursor, start, first, 0, None, None);
    match (cursor.order, &cursor.after_id, last_id) {
        (IdOrder::Ascending, Some(_), Some(id)) => {
            Some(position(cursor, start, first, 0, None, Some(id.to_owned())))
        }
        _ if cursor.stop_after_known.is_some() => Some(from_first()),
        _ if cursor.stop_at_known_id && newest_id.is_some() => Some(from_first()),
        _ => None,
    }
}

/// Counts already-known items in a row, item by item in page order (an item is its images with
/// the same `id`, given as `(id, known)`; one image is an item when the rule has no `id`):
/// whether `limit` known items in a row were reached.
pub fn count_known<'a>(
    images: impl IntoIterator<Item = (Option<&'a str>, bool)>,
    in_a_row: &mut u64,
    limit: u64,
) -> bool {
    let mut items: Vec<(Option<&str>, bool)> = Vec::new();
    for (id, is_known) in images {
        match items.last_mut() {
            Some((last, all_known)) if id.is_some() && *last == id => *all_known &= is_known,
            _ => items.push((id, is_known)),
        }
    }
    for (_, all_known) in items {
        if all_known {
            *in_a_row += 1;
            if *in_a_row >= limit {
                return true;
            }
        } else {
            *in_a_row = 0;
        }
    }
    false
}

/// Where a refresh of a chain of pages goes after a page of its head (the walk again from the
/// first page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterKnown {
    /// On to the page's next page.
    Next,
    /// `stop_after_known` known pages in a row: the head is what the walks before saw. On
    /// from the last page of those walks (`tail`), where new pages come at the end, or, with
    /// no such page, the refresh is over.
    Tail,
}

/// The refresh step after a page of the head: `known` whether the page brought nothing new (no
/// image URL and no link the state did not know); `in_a_row` counts known pages in a row.
pub fn after_head_page(known: bool, in_a_row: &mut u64, limit: u64) -> AfterKnown {
    if !known {
        *in_a_row = 0;
        return AfterKnown::Next;
    }
    *in_a_row += 1;
    if *in_a_row >= limit {
        AfterKnown::Tail
    } else {
        AfterKnown::Next
    }
}

/// Where a chain goes on when the API calls the cursor it sent for `at` expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterExpiry {
    /// After the furthest id read (`after_id` is set and an id was read).
    AfterId(PagePosition),
    /// Nothing to go on after: from the first page again (images are known by URL, so nothing
    /// is stored twice).
    FromFirst(PagePosition),
}

/// See [`AfterExpiry`]; `last_id` is the furthest id the chain has read.
pub fn after_expiry(
    cursor: &JsonCursor,
    start: &Url,
    at: &PagePosition,
    last_id: Option<&str>,
) -> AfterExpiry {
    match (&cursor.after_id, last_id) {
        (Some(_), Some(id)) => AfterExpiry::AfterId(position(
            cursor,
            start,
            at.number,
            at.done,
            None,
            Some(id.to_owned()),
        )),
        _ => AfterExpiry::FromFirst(position(cursor, start, first_number(cursor), 0, None, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Pagination;

    fn cursor(pagination: &str) -> JsonCursor {
        let source = format!(
            "name = \"t\"\nstart = [\"http://a.test/g/\"]\n[pagination]\nkind = \"json_cursor\"\nrequest = \"/api\"\ncursor = \"$.next\"\n{pagination}\n[[api]]\nurl = \"/api\"\nitems = \"$.items[*]\"\nimage = \"$.src\"\nid = \"$.id\"\n"
        );
        let checked = crate::profile::check(&source);
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        match checked.profile.unwrap().pagination {
            Pagination::JsonCursor(c) => *c,
            other => panic!("not json_cursor: {other:?}"),
        }
    }

    fn start() -> Url {
        Url::parse("http://a.test/g/").unwrap()
    }

    /// What a walk position says: `first`, `after N`, or `none`.
    fn said(at: Option<PagePosition>) -> String {
        match at {
            None => "none".into(),
            Some(p) => match p.after_id {
                Some(id) => format!("after {id}"),
                None => format!("first ({})", p.number),
            },
        }
    }

    #[test]
    fn a_refresh_leaves_the_head_after_its_limit_of_known_pages_in_a_row() {
        // (pages known in order, limit, the step after each)
        let cases: [(&[bool], u64, &[AfterKnown]); 4] = [
            (&[true, true], 2, &[AfterKnown::Next, AfterKnown::Tail]),
            (&[true], 1, &[AfterKnown::Tail]),
            (
                &[true, false, true, true],
                2,
                &[
                    AfterKnown::Next,
                    AfterKnown::Next,
                    AfterKnown::Next,
                    AfterKnown::Tail,
                ],
            ),
            (&[false, false, false], 1, &[AfterKnown::Next; 3]),
        ];
        for (pages, limit, steps) in cases {
            let mut in_a_row = 0;
            let got: Vec<AfterKnown> = pages
                .iter()
                .map(|known| after_head_page(*known, &mut in_a_row, limit))
                .collect();
            assert_eq!(got, steps, "{pages:?} with a limit of {limit}");
        }
    }

    #[test]
    fn a_finished_chain_is_walked_again_only_where_the_profile_says_new_items_come() {
        let cases = [
            (
                "order = \"ascending\"\nafter_id = \"since\"",
                Some("9"),
                None,
                "after 9",
            ),
            (
                "order = \"ascending\"\nafter_id = \"since\"",
                None,
                None,
                "none",
            ),
            (
                "order = \"descending\"\nafter_id = \"before\"",
                Some("9"),
                None,
                "none",
            ),
            ("stop_after_known = 3", Some("9"), None, "first (1)"),
            (
                "order = \"descending\"\nstop_at_known_id = true",
                None,
                Some("20"),
                "first (1)",
            ),
            (
                "order = \"descending\"\nstop_at_known_id = true",
                None,
                None,
                "none",
            ),
            ("", Some("9"), Some("20"), "none"),
        ];
        for (pagination, last, newest, expected) in cases {
            let c = cursor(pagination);
            assert_eq!(
                said(next_walk(&c, &start(), last, newest)),
                expected,
                "{pagination:?} last {last:?} newest {newest:?}"
            );
        }
    }

    #[test]
    fn known_items_are_counted_in_a_row_by_item_not_by_image() {
        // Images (id, known), the count before, the limit, whether it is reached, the count after.
        type Case<'a> = (&'a [(Option<&'a str>, bool)], u64, u64, bool, u64);
        let cases: [Case; 5] = [
            // Two images of item a, both known, then item b known: two items.
            (
                &[(Some("a"), true), (Some("a"), true), (Some("b"), true)],
                0,
                2,
                true,
                2,
            ),
            // An item with one new image is new: the count starts again.
            (
                &[(Some("a"), true), (Some("b"), false), (Some("b"), true)],
                0,
                2,
                false,
                0,
            ),
            // Without ids each image is an item; the count goes on from the last page.
            (&[(None, true), (None, true)], 1, 3, true, 3),
            (&[(None, true), (None, false)], 2, 5, false, 0),
            (&[], 4, 5, false, 4),
        ];
        for (images, before, limit, reached, after) in cases {
            let mut in_a_row = before;
            assert_eq!(
                count_known(images.iter().copied(), &mut in_a_row, limit),
                reached,
                "{images:?}"
            );
            assert_eq!(in_a_row, after, "{images:?}");
        }
    }

    #[test]
    fn an_expired_cursor_goes_on_after_the_last_id_or_from_the_first_page() {
        let with_id = cursor("after_id = \"since\"\norder = \"ascending\"");
        let at = position(&with_id, &start(), 4, 3, Some("c4".into()), None);
        match after_expiry(&with_id, &start(), &at, Some("17")) {
            AfterExpiry::AfterId(p) => {
                assert_eq!(
                    (p.number, p.done, p.cursor, p.after_id.as_deref()),
                    (4, 3, None, Some("17"))
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            after_expiry(&with_id, &start(), &at, None),
            AfterExpiry::FromFirst(p) if p.number == 1 && p.done == 0
        ));
        let without = cursor("");
        assert!(matches!(
            after_expiry(&without, &start(), &at, Some("17")),
            AfterExpiry::FromFirst(_)
        ));
    }
}
