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
//! The depth is counted from tags as written, a little more coarsely than a browser would
//! (elements whose end tag may be left out close when the same element starts again), which
//! only matters past the cap.

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

/// Elements whose end tag may be left out: a new one closes the one open on top.
const SELF_CLOSING_SIBLINGS: &[&str] = &["p", "li", "dt", "dd", "option", "tr", "td", "th"];

/// An element open in the markup.
struct Open<'h> {
    name: &'h str,
    /// Past the cap: closed right after its start tag, so its end tag is dropped.
    flattened: bool,
}

/// `html` with every element deeper than `max_depth` flattened (see the module docs).
pub fn flatten_deep(html: &str, max_depth: usize) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    let mut open: Vec<Open<'_>> = Vec::new();
    // Elements in `open` that are not flattened: the depth.
    let mut depth = 0usize;
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
                let reach = open.len().saturating_sub(END_TAG_REACH);
                if let Some(k) = (reach..open.len())
                    .rev()
                    .find(|&k| open[k].name.eq_ignore_ascii_case(name))
                {
                    let closed = open.split_off(k);
                    depth -= closed.iter().filter(|o| !o.flattened).count();
                    if closed[0].flattened {
                        let out = out.get_or_insert_with(|| String::with_capacity(html.len()));
                        out.push_str(&html[copied..lt]);
                        copied = end;
                    }
                }
                i = end;
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let name = tag_name(html, lt + 1);
                let end = start_tag_end(bytes, lt + 1 + name.len());
                i = end;
                let is = |list: &[&str]| list.iter().any(|n| n.eq_ignore_ascii_case(name));
                if is(VOID) {
                    continue;
                }
                if is(RAW_TEXT) {
                    i = raw_text_end(bytes, end, name);
                    continue;
                }
                if is(SELF_CLOSING_SIBLINGS)
                    && open
                        .last()
                        .is_some_and(|o| o.name.eq_ignore_ascii_case(name))
                    && let Some(sibling) = open.pop()
                {
                    depth -= usize::from(!sibling.flattened);
                }
                let flattened = depth >= max_depth;
                if flattened {
                    let out = out.get_or_insert_with(|| String::with_capacity(html.len()));
                    out.push_str(&html[copied..end]);
                    out.push_str("</");
                    out.push_str(name);
                    out.push('>');
                    copied = end;
                } else {
                    depth += 1;
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
