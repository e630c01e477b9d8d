//! `kind = "url_template"`: page numbers in a URL template, until `stop` or an empty page.

use url::Url;

use super::{EndReason, NextPage, PagePosition};
use crate::profile::UrlTemplate;

/// The position of page `number`, with the template resolved against the start URL.
pub(super) fn position(
    template: &UrlTemplate,
    start: &Url,
    number: i64,
    done: u64,
) -> PagePosition {
    let rendered = template.render(number);
    let url = start.join(&rendered).map_or(rendered, |u| u.to_string());
    PagePosition {
        url,
        number,
        done,
        cursor: None,
        after_id: None,
        offset: 0,
    }
}

pub(super) fn next(
    template: &UrlTemplate,
    step: i64,
    stop: Option<i64>,
    start: &Url,
    current: &PagePosition,
    found: usize,
) -> NextPage {
    if found == 0 {
        return NextPage::End(EndReason::EmptyPage);
    }
    // Past the end of the numbers there is no page: a number that stopped at the end (a
    // saturating add) would name the last page again and again.
    let Some(number) = current.number.checked_add(step) else {
        // A `stop` is a number too, so a chain that has one has gone past it.
        return NextPage::End(if stop.is_some() {
            EndReason::StopReached
        } else {
            EndReason::LastPageNumber
        });
    };
    let past_stop = stop.is_some_and(|stop| {
        if step > 0 {
            number > stop
        } else {
            number < stop
        }
    });
    if past_stop {
        return NextPage::End(EndReason::StopReached);
    }
    NextPage::Fetch(position(template, start, number, current.done + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_up_and_stops_at_stop() {
        let t = UrlTemplate::parse("/g?page={page}").unwrap();
        let start = Url::parse("http://a.test/x").unwrap();
        let p1 = position(&t, &start, 1, 0);
        assert_eq!(p1.url, "http://a.test/g?page=1");
        let NextPage::Fetch(p2) = next(&t, 1, Some(2), &start, &p1, 5) else {
            panic!("expected page 2")
        };
        assert_eq!(
            (p2.url.as_str(), p2.number, p2.done),
            ("http://a.test/g?page=2", 2, 1)
        );
        assert_eq!(
            next(&t, 1, Some(2), &start, &p2, 5),
            NextPage::End(EndReason::StopReached)
        );
    }

    #[test]
    fn an_empty_page_ends_the_chain() {
        let t = UrlTemplate::parse("/g/{page}").unwrap();
        let start = Url::parse("http://a.test/").unwrap();
        assert_eq!(
            next(&t, 1, None, &start, &position(&t, &start, 1, 0), 0),
            NextPage::End(EndReason::EmptyPage)
        );
    }

    #[test]
    fn the_chain_ends_at_the_last_page_number_there_is() {
        let t = UrlTemplate::parse("/g/{page}").unwrap();
        let start = Url::parse("http://a.test/").unwrap();
        let cases = [
            ("counting up", i64::MAX - 1, 1, None, i64::MAX),
            ("counting down", i64::MIN + 1, -1, None, i64::MIN),
            (
                "a step past the end",
                0,
                i64::MAX / 2 + 1,
                None,
                i64::MAX / 2 + 1,
            ),
            (
                "a stop at the end",
                i64::MAX - 1,
                1,
                Some(i64::MAX),
                i64::MAX,
            ),
        ];
        for (name, first, step, stop, last) in cases {
            let mut at = position(&t, &start, first, 0);
            let mut urls = vec![at.url.clone()];
            while let NextPage::Fetch(next) = next(&t, step, stop, &start, &at, 1) {
                urls.push(next.url.clone());
                at = next;
                assert!(urls.len() <= 3, "{name}: {urls:?}");
            }
            assert_eq!(at.number, last, "{name}");
            let expected = if stop.is_some() {
                EndReason::StopReached
            } else {
                EndReason::LastPageNumber
            };
            assert_eq!(
                next(&t, step, stop, &start, &at, 1),
                NextPage::End(expected),
                "{name}"
            );
        }
    }
}
