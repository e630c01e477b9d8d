//! Deep nesting flattened before parsing.
//!
//! html5ever's tree builder walks its stack of open elements for many start tags (is a `<p>` in
//! button scope?), so a document nested `n` deep costs `n²`: 2 MB of nested `<div>`s took
//! minutes. Browsers cap the depth (Chromium at 512: deeper elements become siblings at the
//! cap); this does the same on the markup, in one linear pass, before html5ever sees it. A
//! start tag past [`MAX_DEPTH`] is closed right after itself (`<div class=x></div>`), its
//! content goes to the element at the cap, and its own end tag is dropped. Markup that never
//! nests that deep is returned as it is.
//!
//! The depth is counted from tags as written, with the end tags HTML lets a page leave out
//! implied as the tree builder implies them in the common cases (a `<tr>` closes the open cell
//! and row, an `<li>` the open `<li>`, a `<div>` the open `<p>`; see [`implied_end`]), so a
//! table of a thousand rows without `</td></tr>` is as shallow here as in a browser. Rarer
//! cases are counted a little more coarsely than a browser would, which only matters past the
//! cap. The implied end tags look no further down than an end tag does, so the pass stays
//! linear.

use std::borrow::Cow;

/// Elements open at once past which a start tag is flattened.
pub const MAX_DEPTH: usize = 256;

/// How far down the open elements an end tag looks for its start tag; an end tag that matches
/// nothing that close is left to the parser (a stray end tag costs nothing to count).
const END_TAG_REACH: usize = 64;

/// Elements that have no content and no end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "keygen", "frame", "basefont", "bgsound",
];

/// Elements whose content is text up to their end tag: tags inside them are not tags.
const RAW_TEXT: &[&str] = &[
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes",
];

/// Elements whose end tag may be left out, with no rule of their own in [`implied_end`]: a new
/// one closes the one open on top.
const SELF_CLOSING_SIBLINGS: &[&str] = &["option", "optgroup", "rb", "rt", "rtc", "rp"];

/// Start tags that close an open `<p>` in button scope (HTML § 13.2.6.4.7, "in body").
/// `<table>` is left out: in quirks mode it does not.
const CLOSES_P: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "center",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "listing",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "search",
    "section",
    "summary",
    "ul",
    "li",
    "dd",
    "dt",
];

/// The elements that end the button scope a `<p>` is looked for in.
const BUTTON_SCOPE: &[&str] = &[
    "applet", "button", "caption", "html", "marquee", "object", "table", "td", "template", "th",
];

/// Special elements (HTML § 13.2.4.3) that can be open, but `address`, `div` and `p`: an open
/// `<li>`, `<dt>` or `<dd>` below one of these is not closed by a new one.
const LIST_ITEM_SCOPE: &[&str] = &[
    "applet",
    "article",
    "aside",
    "blockquote",
    "body",
    "button",
    "caption",
    "center",
    "colgroup",
    "dd",
    "details",
    "dir",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frameset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hgroup",
    "html",
    "li",
    "listing",
    "main",
    "marquee",
    "menu",
    "nav",
    "noscript",
    "object",
    "ol",
    "pre",
    "search",
    "section",
    "select",
    "summary",
    "table",
    "tbody",
    "td",
    "template",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
];

/// Where an end tag that a start tag implies falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Implied {
    /// The element open at this index is closed, with everything above it.
    Through(usize),
    /// Everything above the element open at this index is closed.
    Above(usize),
}

/// An element open in the markup.
struct Open<'h> {
    name: &'h str,
    /// Past the cap: closed right after its start tag, so its end tag is dropped.
    flattened: bool,
}

/// Start tags that are part of a table and open nothing outside one.
const TABLE_PARTS: &[&str] = &["tr", "td", "th", "tbody", "thead", "tfoot"];

/// The elements open in the markup, as far as the pass knows.
#[derive(Default)]
struct OpenElements<'h> {
    open: Vec<Open<'h>>,
    /// Elements in `open` that are not flattened: the depth.
    depth: usize,
    /// Open `<table>` and `<template>` elements, in which table rows and cells can open.
    tables: usize,
    /// How many of each of [`IMPLIED_END_TARGETS`] are open: a start tag whose implied end
    /// tags have nothing to close spares the walk down the open elements.
    targets_open: [usize; IMPLIED_END_TARGETS.len()],
}

impl<'h> OpenElements<'h> {
    fn push(&mut self, element: Open<'h>) {
        self.depth += usize::from(!element.flattened);
        self.tables += usize::from(is_table_context(element.name));
        if let Some(t) = target_index(element.name) {
            self.targets_open[t] += 1;
        }
        self.open.push(element);
    }

    /// The index of the nearest open `name`, looking no further than [`END_TAG_REACH`].
    fn find(&self, name: &str) -> Option<usize> {
        let reach = self.open.len().saturating_sub(END_TAG_REACH);
        (reach..self.open.len())
            .rev()
            .find(|&k| self.open[k].name.eq_ignore_ascii_case(name))
    }

    /// Closes the element at `k` and every one above it; whether the element at `k` was
    /// flattened (its end tag then has nothing left to close).
    fn close_through(&mut self, k: usize) -> bool {
        if k >= self.open.len() {
            return false;
        }
        let closed = self.open.split_off(k);
        self.depth -= closed.iter().filter(|o| !o.flattened).count();
        self.tables -= closed.iter().filter(|o| is_table_context(o.name)).count();
        for t in closed.iter().filter_map(|o| target_index(o.name)) {
            self.targets_open[t] -= 1;
        }
        closed[0].flattened
    }

    /// Where `rule` falls in the open elements, looking no further than [`END_TAG_REACH`].
    fn walk(&self, rule: &ImpliedEnd) -> Option<Implied> {
        let any_open = rule
            .closes
            .iter()
            .chain(rule.keeps)
            .filter_map(|name| target_index(name))
            .any(|t| self.targets_open[t] > 0);
        if !any_open {
            return None;
        }
        let reach = self.open.len().saturating_sub(END_TAG_REACH);
        for k in (reach..self.open.len()).rev() {
            let name = self.open[k].name;
            if is_one_of(rule.closes, name) {
                return Some(Implied::Through(k));
            }
            if is_one_of(rule.keeps, name) {
                return Some(Implied::Above(k));
            }
            if is_one_of(rule.stops_at, name) {
                return None;
            }
        }
        None
    }
}

/// The elements an implied end tag closes or stops above (the `closes` and `keeps` of every
/// [`ImpliedEnd`]).
const IMPLIED_END_TARGETS: [&str; 10] = [
    "p", "li", "dt", "dd", "tr", "td", "th", "tbody", "thead", "tfoot",
];

fn target_index(name: &str) -> Option<usize> {
    IMPLIED_END_TARGETS
        .iter()
        .position(|t| t.eq_ignore_ascii_case(name))
}

fn is_one_of(list: &[&str], name: &str) -> bool {
    list.iter().any(|n| n.eq_ignore_ascii_case(name))
}

fn is_table_context(name: &str) -> bool {
    name.eq_ignore_ascii_case("table") || name.eq_ignore_ascii_case("template")
}

/// One end tag a start tag implies: the nearest open element of `closes` is closed with
/// everything above it, or, if an element of `keeps` comes first, everything above that one;
/// an element of `stops_at` (or of `keeps`) ends the search.
struct ImpliedEnd {
    closes: &'static [&'static str],
    keeps: &'static [&'static str],
    stops_at: &'static [&'static str],
}

/// The end tags the start tag `name` implies, in the order the tree builder applies them
/// (HTML § 13.2.6.4: "in body", "in table body", "in row", "in cell"), for the elements
/// galleries leave open: rows, cells, list items and paragraphs.
fn implied_end(name: &str) -> &'static [ImpliedEnd] {
    const P: ImpliedEnd = ImpliedEnd {
        closes: &["p"],
        keeps: &[],
        stops_at: BUTTON_SCOPE,
    };
    const LI: &[ImpliedEnd] = &[
        ImpliedEnd {
            closes: &["li"],
            keeps: &[],
            stops_at: LIST_ITEM_SCOPE,
        },
        P,
    ];
    const DT_DD: &[ImpliedEnd] = &[
        ImpliedEnd {
            closes: &["dt", "dd"],
            keeps: &[],
            stops_at: LIST_ITEM_SCOPE,
        },
        P,
    ];
    const ROW: &[ImpliedEnd] = &[ImpliedEnd {
        closes: &["tr"],
        keeps: &["tbody", "thead", "tfoot"],
        stops_at: &["table", "template", "html"],
    }];
    const CELL: &[ImpliedEnd] = &[ImpliedEnd {
        closes: &["td", "th"],
        keeps: &["tr"],
        stops_at: &["table", "template", "html"],
    }];
    const SECTION: &[ImpliedEnd] = &[ImpliedEnd {
        closes: &["tbody", "thead", "tfoot"],
        keeps: &[],
        stops_at: &["table", "template", "html"],
    }];
    let is = |list: &[&str]| is_one_of(list, name);
    if is(&["li"]) {
        LI
    } else if is(&["dt", "dd"]) {
        DT_DD
    } else if is(&["tr"]) {
        ROW
    } else if is(&["td", "th"]) {
        CELL
    } else if is(&["tbody", "thead", "tfoot"]) {
        SECTION
    } else if is(CLOSES_P) {
        std::slice::from_ref(&P)
    } else {
        &[]
    }
}

/// `html` with every element deeper than `max_depth` flattened (see the module docs).
pub fn flatten_deep(html: &str, max_depth: usize) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    let mut open = OpenElements::default();
    let mut out: Option<String> = None;
    // `html[copied..]` is not in `out` yet.
    let mut copied = 0;
    let mut i = 0;
    while let Some(lt) = find(bytes, i, b"<") {
        let rest = &bytes[lt..];
        if rest.starts_with(b"<!--") {
            i = find(bytes, lt + 4, b"-->").map_or(bytes.len(), |end| end + 3);
            continue;
        }
        match rest.get(1) {
            Some(b'!' | b'?') => {
                i = find(bytes, lt, b">").map_or(bytes.len(), |end| end + 1);
            }
            Some(b'/') if rest.get(2).is_some_and(u8::is_ascii_alphabetic) => {
                let name = tag_name(html, lt + 2);
                let end = find(bytes, lt + 2 + name.len(), b">").map_or(bytes.len(), |e| e + 1);
                if let Some(k) = open.find(name)
                    && open.close_through(k)
                {
                    let out = out.get_or_insert_with(|| String::with_capacity(html.len()));
                    out.push_str(&html[copied..lt]);
                    copied = end;
                }
                i = end;
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let name = tag_name(html, lt + 1);
                let end = start_tag_end(bytes, lt + 1 + name.len());
                i = end;
                let is = |list: &[&str]| is_one_of(list, name);
                if is(VOID) {
                    continue;
                }
                if is(RAW_TEXT) {
                    i = raw_text_end(bytes, end, name);
                    continue;
                }
                if is(TABLE_PARTS) && open.tables == 0 {
                    // Outside a table the tree builder ignores these tags: nothing opens.
                    continue;
                }
                if is(SELF_CLOSING_SIBLINGS)
                    && open
                        .open
                        .last()
                        .is_some_and(|o| o.name.eq_ignore_ascii_case(name))
                {
                    open.close_through(open.open.len() - 1);
                }
                for rule in implied_end(name) {
                    match open.walk(rule) {
                        Some(Implied::Through(k)) => _ = open.close_through(k),
                        Some(Implied::Above(k)) => _ = open.close_through(k + 1),
                        None => {}
                    }
                }
                let flattened = open.depth >= max_depth;
                if flattened {
                    let out = out.get_or_insert_with(|| String::with_capacity(html.len()));
                    out.push_str(&html[copied..end]);
                    out.push_str("</");
                    out.push_str(name);
                    out.push('>');
                    copied = end;
                }
                open.push(Open { name, flattened });
            }
            _ => i = lt + 1,
        }
    }
    match out {
        None => Cow::Borrowed(html),
        Some(mut out) => {
            out.push_str(&html[copied..]);
            Cow::Owned(out)
        }
    }
}

/// Where `needle` first occurs in `bytes` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let haystack = bytes.get(from..)?;
    memchr::memmem::find(haystack, needle).map(|at| from + at)
}

/// The tag name starting at `at`: up to whitespace, `/` or `>`.
fn tag_name(html: &str, at: usize) -> &str {
    let rest = &html[at..];
    let len = rest
        .find(|c: char| c.is_ascii_whitespace() || c == '/' || c == '>')
        .unwrap_or(rest.len());
    &rest[..len]
}

/// Just past the `>` that ends a start tag whose attributes begin at `at` (a `>` inside a
/// quoted attribute value does not end it).
fn start_tag_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() {
        match bytes[at] {
            b'>' => return at + 1,
            quote @ (b'"' | b'\'')
                if bytes[at - 1] == b'=' || bytes[at - 1].is_ascii_whitespace() =>
            {
                at = find(bytes, at + 1, &[quote]).map_or(bytes.len(), |end| end + 1);
            }
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Just past the end tag `</name` of a raw text element whose content starts at `at`.
fn raw_text_end(bytes: &[u8], mut at: usize, name: &str) -> usize {
    while let Some(lt) = find(bytes, at, b"</") {
        let candidate = bytes.get(lt + 2..lt + 2 + name.len());
        if candidate.is_some_and(|c| c.eq_ignore_ascii_case(name.as_bytes())) {
            return lt + 2;
        }
        at = lt + 2;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize, inner: &str) -> String {
        "<div>".repeat(depth) + inner + &"</div>".repeat(depth)
    }

    #[test]
    fn markup_within_the_cap_is_left_as_it_is() {
        let cases = [
            nested(MAX_DEPTH, "<img src=a.jpg>"),
            "<p>one<p>two<ul><li>a<li>b</ul>".repeat(1000),
            "<script>".to_owned() + &"<div>".repeat(1000) + "</script>",
            "<!--".to_owned() + &"<div>".repeat(1000) + "-->",
            "<div title='<div>'>".repeat(10) + &"</div>".repeat(10),
        ];
        for html in cases {
            assert!(
                matches!(flatten_deep(&html, MAX_DEPTH), Cow::Borrowed(_)),
                "{}",
                &html[..80.min(html.len())]
            );
        }
    }

    #[test]
    fn end_tags_that_html_lets_a_page_leave_out_are_implied() {
        let cases = [
            (
                "rows and cells",
                "<table class=gallery>".to_owned()
                    + &"<tr><td><img src=a.jpg><td><img src=b.jpg>".repeat(1000)
                    + "</table>",
            ),
            (
                "header cells and sections",
                "<table>".to_owned()
                    + &"<thead><tr><th>a<tbody><tr><td><span><img src=a.jpg>".repeat(500)
                    + "</table>",
            ),
            (
                "definition lists",
                "<dl>".to_owned() + &"<dt>title<dd><img src=a.jpg>".repeat(1000) + "</dl>",
            ),
            (
                "list items holding paragraphs",
                "<ul>".to_owned() + &"<li><p>caption<p><img src=a.jpg>".repeat(1000) + "</ul>",
            ),
            (
                "paragraphs closed by blocks",
                "<p><b>caption</b><div><img src=a.jpg></div>".repeat(1000),
            ),
            (
                "options",
                "<select>".to_owned() + &"<option>a".repeat(1000) + "</select>",
            ),
        ];
        for (name, html) in cases {
            assert!(
                matches!(flatten_deep(&html, MAX_DEPTH), Cow::Borrowed(_)),
                "{name}"
            );
        }
    }

    #[test]
    fn markup_that_really_nests_is_still_flattened() {
        let cases = [
            (
                "tables in cells",
                "<table><tr><td>".repeat(300) + "<img src=a.jpg>",
            ),
            ("lists in list items", "<ul><li>".repeat(300)),
            ("divs after paragraphs", "<div><p>".repeat(300)),
            (
                "rows outside any table open nothing",
                "<tr><div>".repeat(300),
            ),
            (
                "a row does not close what its own table's cell holds",
                "<table><tr><td>".to_owned() + &"<table><div>".repeat(300) + "<tr>",
            ),
        ];
        for (name, html) in cases {
            assert!(
                matches!(flatten_deep(&html, MAX_DEPTH), Cow::Owned(_)),
                "{name}"
            );
        }
    }

    #[test]
    fn a_table_without_end_tags_keeps_every_image() {
        let html = "<table class=gallery>".to_owned()
            + &(0..300)
                .map(|n| format!("<tr><td><img src={n}.jpg>"))
                .collect::<String>()
            + "</table>";
        let document = crate::page::parse_html(&html);
        let images = scraper::Selector::parse(".gallery td img").unwrap();
        assert_eq!(document.select(&images).count(), 300);
    }

    #[test]
    fn elements_past_the_cap_are_closed_where_they_start_and_their_content_kept() {
        let flat = flatten_deep("<b><i><u>x</u></i></b>", 1);
        assert_eq!(flat, "<b><i></i><u></u>x</b>");
        let deep = nested(10, "<img src=a.jpg>");
        let flat = flatten_deep(&deep, 3);
        assert_eq!(
            flat,
            "<div><div><div>".to_owned()
                + &"<div></div>".repeat(7)
                + "<img src=a.jpg></div></div></div>"
        );
    }

    #[test]
    fn a_very_deep_document_is_flattened_in_linear_time() {
        let html = nested(400_000, "<img src=deep.jpg>");
        let began = std::time::Instant::now();
        let flat = flatten_deep(&html, MAX_DEPTH);
        assert!(flat.contains("<img src=deep.jpg>"));
        assert!(flat.len() < html.len() * 2);
        // Linear: well under a second even unoptimised; quadratic would take minutes.
        assert!(
            began.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
    }
}
