//! A fetched page as the pure stages see it: its final URL and its HTML, parsed once.

mod nesting;
mod validators;

pub use validators::{MAX_VALIDATOR_BYTES, Validators};

use html5ever::driver::{self, ParseOpts};
use html5ever::tendril::TendrilSink;
use html5ever::tree_builder::TreeBuilderOpts;
use scraper::{Html, HtmlTreeSink, Selector};
use url::Url;

/// `html` parsed the way a browser with scripting off parses it, repairing malformed markup as
/// browsers do. With scripting off, the content of `<noscript>` is markup, not text: lazy-loading
/// pages often keep the original image only there (`<img src=placeholder><noscript><img
/// src=original></noscript>`), and a crawler that reads the page without running its scripts is
/// exactly the reader `<noscript>` is for. A rendered page's DOM still holds its `<noscript>`
/// content as text, so this reads it the same way. Elements nested deeper than
/// 256 levels are flattened first, as browsers do, so deep markup parses in linear
/// time.
pub fn parse_html(html: &str) -> Html {
    let html = nesting::flatten_deep(html, nesting::MAX_DEPTH);
    let opts = ParseOpts {
        tree_builder: TreeBuilderOpts {
            scripting_enabled: false,
            ..TreeBuilderOpts::default()
        },
        ..ParseOpts::default()
    };
    driver::parse_document(HtmlTreeSink::new(Html::new_document()), opts).one(&*html)
}

/// What a fetcher or the browser hands over for one page: the final URL (after redirects), the
/// HTML (the rendered DOM, for the browser) and the JSON responses captured while it loaded.
#[derive(Debug, Clone)]
pub struct PageSnapshot {
    pub url: Url,
    pub html: String,
    pub json: Vec<CapturedJson>,
    /// Why the page is only partly here: the browser reached the page's deadline and what was
    /// rendered and captured by then was taken. `None` for a complete page.
    pub partial: Option<String>,
    /// The values of the page response's `X-Robots-Tag` headers (for a rendered page, the
    /// main document's response), which may opt the page out as its meta robots may.
    pub robots_tags: Vec<String>,
    /// The `ETag` and `Last-Modified` of a page fetched over plain HTTP (none for a rendered
    /// page: it is never asked for conditionally).
    pub validators: Validators,
}

impl PageSnapshot {
    /// A snapshot of plain HTML, with no captured JSON.
    pub fn html(url: Url, html: String) -> Self {
        Self {
            url,
            html,
            json: Vec::new(),
            partial: None,
            robots_tags: Vec::new(),
            validators: Validators::default(),
        }
    }
}

/// A JSON response the page fetched (`fetch`/XHR), kept for JSONPath rules.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedJson {
    pub url: String,
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request body, for POST requests (e.g. GraphQL variables).
    pub request_body: Option<String>,
    pub status: u16,
    pub body: serde_json::Value,
}

/// A parsed page with its base URL (`<base href>` resolved against the page URL).
pub struct ParsedPage {
    pub url: Url,
    pub base: Url,
    pub document: Html,
}

impl ParsedPage {
    /// Parses the snapshot's HTML; malformed HTML is repaired the way browsers do.
    pub fn parse(snapshot: &PageSnapshot) -> Self {
        let document = parse_html(&snapshot.html);
        let base = base_href(&document)
            .and_then(|href| snapshot.url.join(href.trim()).ok())
            .unwrap_or_else(|| snapshot.url.clone());
        Self {
            url: snapshot.url.clone(),
            base,
            document,
        }
    }

    /// `reference` resolved against the base URL, if it is a URL at all.
    pub fn resolve(&self, reference: &str) -> Option<Url> {
        let reference = reference.trim();
        if reference.is_empty() {
            return None;
        }
        self.base.join(reference).ok()
    }
}

fn base_href(document: &Html) -> Option<&str> {
    // Invariant: a constant, valid selector.
    let selector = Selector::parse("base[href]").expect("valid selector");
    document.select(&selector).next()?.value().attr("href")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(url: &str, html: &str) -> ParsedPage {
        ParsedPage::parse(&PageSnapshot::html(
            Url::parse(url).unwrap(),
            html.to_owned(),
        ))
    }

    #[test]
    fn base_href_changes_how_relative_urls_resolve() {
        let p = page(
            "http://a.test/x/page.html",
            r#"<head><base href="/cdn/"></head>"#,
        );
        assert_eq!(
            p.resolve("i.jpg").unwrap().as_str(),
            "http://a.test/cdn/i.jpg"
        );
    }

    #[test]
    fn without_base_relative_urls_resolve_against_the_page() {
        let p = page("http://a.test/x/page.html", "<p>hi</p>");
        assert_eq!(
            p.resolve("i.jpg").unwrap().as_str(),
            "http://a.test/x/i.jpg"
        );
        assert_eq!(p.resolve("  "), None);
    }
}
