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
    let number = current.number.saturating_add(step);
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
}
