//! Sitemaps as sitemaps.org defines them: a `<urlset>` of pages (`<url><loc>`, `<lastmod>`)
//! or a `<sitemapindex>` of further sitemaps, with Google's image extension (`<image:image>
//! <image:loc>` inside a `<url>`, the images of that page). Pure: the I/O crate fetches the
//! file (and inflates a gzipped one) and asks [`parse`] what it lists.
//!
//! Elements are matched by their local name, whatever their prefix or namespace (sitemaps in
//! the wild use the 0.9 namespace, older ones or none), except the image extension's, which
//! are matched by its namespace so a prefix of any name works. A `<loc>` must be an absolute
//! `http(s)` URL, as the protocol asks: others are skipped and counted, never guessed at.

use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use url::Url;

use crate::profile::parse_http_url;

/// The most URLs one sitemap file may list (sitemaps.org).
pub const MAX_SITEMAP_URLS: usize = 50_000;

/// The largest sitemap file, uncompressed (sitemaps.org: 50 MB).
pub const MAX_SITEMAP_BYTES: usize = 50 * 1024 * 1024;

/// The most images kept for one page of an image sitemap (Google's limit); more are skipped.
pub const MAX_IMAGES_PER_PAGE: usize = 1_000;

/// The namespace of Google's image extension.
pub const IMAGE_NAMESPACE: &str = "http://www.google.com/schemas/sitemap-image/1.1";

/// The longest `<lastmod>` kept (a W3C datetime is at most 35 characters).
const MAX_LASTMOD_CHARS: usize = 64;

/// What one sitemap file lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sitemap {
    pub kind: SitemapKind,
    /// `<urlset>`: its pages, in file order.
    pub pages: Vec<SitemapPage>,
    /// `<sitemapindex>`: the sitemaps it names, in file order.
    pub sitemaps: Vec<SitemapRef>,
    /// Entries (and image entries) left out: no `<loc>`, or one that is not an absolute
    /// `http(s)` URL, or images past [`MAX_IMAGES_PER_PAGE`].
    pub skipped: u64,
}

/// Which of the two kinds of sitemap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitemapKind {
    /// `<urlset>`: pages.
    Pages,
    /// `<sitemapindex>`: further sitemaps.
    Index,
}

/// One `<sitemap>` of a `<sitemapindex>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitemapRef {
    pub url: Url,
    /// `<lastmod>` as written (a W3C datetime), trimmed.
    pub lastmod: Option<String>,
}

/// One `<url>` of a `<urlset>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitemapPage {
    pub url: Url,
    /// `<lastmod>` as written (a W3C datetime), trimmed.
    pub lastmod: Option<String>,
    /// The image extension's `<image:loc>`s: images of this page.
    pub images: Vec<Url>,
}

/// Why a body is no sitemap that can be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SitemapError {
    #[error("the sitemap is larger than {limit} bytes (sitemaps.org allows {limit})")]
    TooLarge { limit: usize },
    #[error("the sitemap lists more than {limit} URLs (sitemaps.org allows {limit})")]
    TooManyUrls { limit: usize },
    #[error("the sitemap is empty")]
    Empty,
    #[error("the sitemap is not well-formed XML: {0}")]
    NotXml(String),
    #[error("this is an HTML page, not a sitemap (an error page served in its place?)")]
    Html,
    #[error("the document is `<{0}>`, not a sitemap's `<urlset>` or `<sitemapindex>`")]
    NotASitemap(String),
}

/// What text the parser is collecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Loc,
    Lastmod,
    ImageLoc,
}

/// The entry being read: a `<url>` or a `<sitemap>`.
#[derive(Debug, Default)]
struct Entry {
    loc: Option<String>,
    lastmod: Option<String>,
    images: Vec<String>,
}

/// Reads a sitemap file (already inflated). Fails on a body over [`MAX_SITEMAP_BYTES`], more
/// than [`MAX_SITEMAP_URLS`] entries, XML that is not well-formed, or a document that is not a
/// sitemap (an HTML error page, a feed).
pub fn parse(body: &[u8]) -> Result<Sitemap, SitemapError> {
    if body.len() > MAX_SITEMAP_BYTES {
        return Err(SitemapError::TooLarge {
            limit: MAX_SITEMAP_BYTES,
        });
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| SitemapError::NotXml(format!("not UTF-8 text ({e})")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(SitemapError::Empty);
    }
    let mut reader = quick_xml::NsReader::from_str(text);
    let mut sitemap = Sitemap {
        kind: SitemapKind::Pages,
        pages: Vec::new(),
        sitemaps: Vec::new(),
        skipped: 0,
    };
    // Open elements, by local name; the root decides the kind.
    let mut open: Vec<String> = Vec::new();
    let mut root_seen = false;
    let mut entry: Option<Entry> = None;
    let mut field: Option<(Field, usize)> = None;
    let mut collected = String::new();
    let not_xml = |e: quick_xml::Error, at: u64| SitemapError::NotXml(format!("{e} at byte {at}"));
    loop {
        let at = reader.buffer_position();
        let (namespace, event) = reader.read_resolved_event().map_err(|e| not_xml(e, at))?;
        let image_ns = matches!(
            namespace,
            ResolveResult::Bound(ns) if ns.into_inner() == IMAGE_NAMESPACE
        );
        match event {
            Event::Start(ref start) | Event::Empty(ref start) if !root_seen => {
                root_seen = true;
                let local = start.local_name().into_inner().to_ascii_lowercase();
                sitemap.kind = match local.as_str() {
                    "urlset" => SitemapKind::Pages,
                    "sitemapindex" => SitemapKind::Index,
                    "html" => return Err(SitemapError::Html),
                    _ => return Err(SitemapError::NotASitemap(local)),
                };
                // An empty root (`<urlset/>`) lists nothing and has no end tag.
                if matches!(event, Event::Start(_)) {
                    open.push(local);
                }
            }
            Event::Start(start) => {
                let local = start.local_name().into_inner().to_owned();
                let depth = open.len();
                match (depth, local.as_str(), image_ns) {
                    (1, "url", false) if sitemap.kind == SitemapKind::Pages => {
                        entry = Some(Entry::default());
                    }
                    (1, "sitemap", false) if sitemap.kind == SitemapKind::Index => {
                        entry = Some(Entry::default());
                    }
                    (2, "loc", false) if entry.is_some() => field = Some((Field::Loc, depth)),
                    (2, "lastmod", false) if entry.is_some() => {
                        field = Some((Field::Lastmod, depth));
                    }
                    (3, "loc", true)
                        if entry.is_some() && open.get(2).is_some_and(|p| p == "image") =>
                    {
                        field = Some((Field::ImageLoc, depth));
                    }
                    _ => {}
                }
                if field.is_some_and(|(_, at)| at == depth) {
                    collected.clear();
                }
                open.push(local);
            }
            Event::Empty(_) => {}
            Event::Text(t) => {
                if field.is_some() {
                    collected.push_str(&t.xml10_content());
                }
            }
            Event::CData(c) => {
                if field.is_some() {
                    collected.push_str(&c.into_inner());
                }
            }
            Event::GeneralRef(r) => {
                if field.is_some() {
                    match resolve_reference(&r) {
                        Some(c) => collected.push(c),
                        None => {
                            return Err(SitemapError::NotXml(format!(
                                "unknown entity `&{};` at byte {at}",
                                r.xml10_content()
                            )));
                        }
                    }
                }
            }
            Event::End(_) => {
                if open.pop().is_none() {
                    return Err(SitemapError::NotXml(format!(
                        "a closing tag without its opening one at byte {at}"
                    )));
                }
                let depth = open.len();
                if let Some((kind, at_depth)) = field
                    && at_depth == depth
                {
                    field = None;
                    let value = std::mem::take(&mut collected).trim().to_owned();
                    if let Some(entry) = entry.as_mut() {
                        match kind {
                            Field::Loc => entry.loc = Some(value),
                            Field::Lastmod => entry.lastmod = Some(value),
                            Field::ImageLoc => entry.images.push(value),
                        }
                    }
                }
                if depth == 1
                    && let Some(done) = entry.take()
                {
                    sitemap.add(done)?;
                }
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    if !root_seen {
        return Err(SitemapError::NotXml("no element at all".into()));
    }
    if let Some(unclosed) = open.last() {
        return Err(SitemapError::NotXml(format!(
            "the file ends inside `<{unclosed}>` (cut short?)"
        )));
    }
    Ok(sitemap)
}

impl Sitemap {
    /// Adds a finished `<url>` or `<sitemap>`, or counts it as skipped.
    fn add(&mut self, entry: Entry) -> Result<(), SitemapError> {
        if self.pages.len() + self.sitemaps.len() >= MAX_SITEMAP_URLS {
            return Err(SitemapError::TooManyUrls {
                limit: MAX_SITEMAP_URLS,
            });
        }
        let Some(url) = entry.loc.as_deref().and_then(|l| parse_http_url(l).ok()) else {
            self.skipped += 1 + entry.images.len() as u64;
            return Ok(());
        };
        let lastmod = entry
            .lastmod
            .filter(|l| !l.is_empty() && l.chars().count() <= MAX_LASTMOD_CHARS);
        match self.kind {
            SitemapKind::Index => self.sitemaps.push(SitemapRef { url, lastmod }),
            SitemapKind::Pages => {
                let mut images = Vec::new();
                for image in &entry.images {
                    match parse_http_url(image) {
                        Ok(image) if images.len() < MAX_IMAGES_PER_PAGE => images.push(image),
                        _ => self.skipped += 1,
                    }
                }
                self.pages.push(SitemapPage {
                    url,
                    lastmod,
                    images,
                });
            }
        }
        Ok(())
    }
}

/// The character of a predefined entity or a character reference; `None` for any other
/// (a sitemap declares no entities of its own).
fn resolve_reference(r: &quick_xml::events::BytesRef<'_>) -> Option<char> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Some(c);
    }
    match r.xml10_content().as_ref() {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => None,
    }
}

/// Whether `body` starts with gzip's magic bytes (a `.xml.gz` sitemap, served as is).
pub fn is_gzip(body: &[u8]) -> bool {
    body.starts_with(&[0x1f, 0x8b])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a case expects: page URLs (each with its images and lastmod), or the sitemaps of
    /// an index, and how many entries were skipped; or an error.
    enum Expect {
        Pages(
            &'static [(&'static str, Option<&'static str>, &'static [&'static str])],
            u64,
        ),
        Index(&'static [&'static str], u64),
        Error(fn(&SitemapError) -> bool),
    }

    struct Case {
        name: &'static str,
        body: &'static str,
        expect: Expect,
    }

    const NS: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";

    const CASES: &[Case] = &[
        Case {
            name: "a urlset of pages with lastmod",
            body: r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://a.test/g/1</loc><lastmod>2024-05-01</lastmod></url>
  <url><loc>https://a.test/g/2</loc><changefreq>daily</changefreq><priority>0.5</priority></url>
</urlset>"#,
            expect: Expect::Pages(
                &[
                    ("https://a.test/g/1", Some("2024-05-01"), &[]),
                    ("https://a.test/g/2", None, &[]),
                ],
                0,
            ),
        },
        Case {
            name: "an index of sitemaps",
            body: r#"<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://a.test/s1.xml</loc><lastmod>2024-01-01T00:00:00+00:00</lastmod></sitemap>
  <sitemap><loc>https://a.test/s2.xml.gz</loc></sitemap>
</sitemapindex>"#,
            expect: Expect::Index(&["https://a.test/s1.xml", "https://a.test/s2.xml.gz"], 0),
        },
        Case {
            name: "the image extension gives a page its images",
            body: r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
  xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url><loc>https://a.test/p</loc>
    <image:image><image:loc>https://cdn.a.test/1.jpg</image:loc><image:caption>x</image:caption></image:image>
    <image:image><image:loc>https://cdn.a.test/2.jpg</image:loc></image:image>
  </url>
</urlset>"#,
            expect: Expect::Pages(
                &[(
                    "https://a.test/p",
                    None,
                    &["https://cdn.a.test/1.jpg", "https://cdn.a.test/2.jpg"],
                )],
                0,
            ),
        },
        Case {
            name: "prefixes of any name, the sitemap's own prefixed too",
            body: r#"<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"
  xmlns:pic="http://www.google.com/schemas/sitemap-image/1.1">
  <sm:url><sm:loc>https://a.test/p</sm:loc>
    <pic:image><pic:loc>https://a.test/i.png</pic:loc></pic:image></sm:url>
</sm:urlset>"#,
            expect: Expect::Pages(&[("https://a.test/p", None, &["https://a.test/i.png"])], 0),
        },
        Case {
            name: "an image element of another namespace is not an image",
            body: r#"<urlset xmlns:image="http://example.test/other">
  <url><loc>https://a.test/p</loc><image:image><image:loc>https://a.test/i.png</image:loc></image:image></url>
</urlset>"#,
            expect: Expect::Pages(&[("https://a.test/p", None, &[])], 0),
        },
        Case {
            name: "no namespace at all is read the same",
            body: "<urlset><url><loc>https://a.test/p</loc></url></urlset>",
            expect: Expect::Pages(&[("https://a.test/p", None, &[])], 0),
        },
        Case {
            name: "CDATA, entities and character references",
            body: r#"<urlset><url><loc><![CDATA[https://a.test/p?a=1&b=2]]></loc></url>
<url><loc>https://a.test/q?a=1&amp;b=&#50;&#x33;</loc></url></urlset>"#,
            expect: Expect::Pages(
                &[
                    ("https://a.test/p?a=1&b=2", None, &[]),
                    ("https://a.test/q?a=1&b=23", None, &[]),
                ],
                0,
            ),
        },
        Case {
            name: "whitespace around a loc is trimmed",
            body: "<urlset>\n <url>\n  <loc>\n   https://a.test/p\n  </loc>\n  <lastmod> 2024-05-01 </lastmod>\n </url>\n</urlset>",
            expect: Expect::Pages(&[("https://a.test/p", Some("2024-05-01"), &[])], 0),
        },
        Case {
            name: "relative, invalid and missing locs are skipped and counted",
            body: r#"<urlset xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
<url><loc>/relative</loc></url>
<url><loc>ftp://a.test/x</loc></url>
<url><loc>not a url</loc></url>
<url><lastmod>2024-01-01</lastmod></url>
<url><loc>https://a.test/ok</loc><image:image><image:loc>img/relative.jpg</image:loc></image:image></url>
</urlset>"#,
            expect: Expect::Pages(&[("https://a.test/ok", None, &[])], 5),
        },
        Case {
            name: "a byte-order mark and comments are fine",
            body: "\u{feff}<?xml version=\"1.0\"?><!-- made by hand --><urlset><url><loc>https://a.test/p</loc></url></urlset>",
            expect: Expect::Pages(&[("https://a.test/p", None, &[])], 0),
        },
        Case {
            name: "an empty urlset lists nothing",
            body: "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"/>",
            expect: Expect::Pages(&[], 0),
        },
        Case {
            name: "a loc outside any url is no page",
            body: "<urlset><loc>https://a.test/stray</loc></urlset>",
            expect: Expect::Pages(&[], 0),
        },
        Case {
            name: "an HTML error page served as a sitemap",
            body: "<!DOCTYPE html>\n<html><head><title>Not found</title></head><body>Oops</body></html>",
            expect: Expect::Error(|e| matches!(e, SitemapError::Html)),
        },
        Case {
            name: "another XML document",
            body: "<rss version=\"2.0\"><channel></channel></rss>",
            expect: Expect::Error(
                |e| matches!(e, SitemapError::NotASitemap(root) if root == "rss"),
            ),
        },
        Case {
            name: "not XML at all",
            body: "{\"pages\": []}",
            expect: Expect::Error(|e| matches!(e, SitemapError::NotXml(_))),
        },
        Case {
            name: "mismatched tags",
            body: "<urlset><url><loc>https://a.test/p</lock></url></urlset>",
            expect: Expect::Error(|e| matches!(e, SitemapError::NotXml(_))),
        },
        Case {
            name: "cut short",
            body: "<urlset><url><loc>https://a.test/p</loc></url><url><loc>https://a.te",
            expect: Expect::Error(|e| matches!(e, SitemapError::NotXml(_))),
        },
        Case {
            name: "an unknown entity",
            body: "<urlset><url><loc>https://a.test/&nbsp;</loc></url></urlset>",
            expect: Expect::Error(|e| matches!(e, SitemapError::NotXml(m) if m.contains("nbsp"))),
        },
        Case {
            name: "empty",
            body: " \n ",
            expect: Expect::Error(|e| matches!(e, SitemapError::Empty)),
        },
    ];

    fn check(case: &Case) -> Result<(), String> {
        let got = parse(case.body.as_bytes());
        match (&case.expect, got) {
            (Expect::Pages(pages, skipped), Ok(s)) => {
                let got: Vec<(String, Option<String>, Vec<String>)> = s
                    .pages
                    .iter()
                    .map(|p| {
                        let images = p.images.iter().map(|i| i.to_string()).collect();
                        (p.url.to_string(), p.lastmod.clone(), images)
                    })
                    .collect();
                let want: Vec<(String, Option<String>, Vec<String>)> = pages
                    .iter()
                    .map(|(u, l, i)| {
                        let images = i.iter().map(|s| s.to_string()).collect();
                        (u.to_string(), l.map(str::to_owned), images)
                    })
                    .collect();
                (s.kind == SitemapKind::Pages && got == want && s.skipped == *skipped)
                    .then_some(())
                    .ok_or(format!("got {s:?}"))
            }
            (Expect::Index(sitemaps, skipped), Ok(s)) => {
                let got: Vec<String> = s.sitemaps.iter().map(|r| r.url.to_string()).collect();
                (s.kind == SitemapKind::Index && got == *sitemaps && s.skipped == *skipped)
                    .then_some(())
                    .ok_or(format!("got {s:?}"))
            }
            (Expect::Error(is), Err(e)) => is(&e).then_some(()).ok_or(format!("got error {e}")),
            (_, got) => Err(format!("got {got:?}")),
        }
    }

    #[test]
    fn the_sitemap_table_holds() {
        let wrong: Vec<String> = CASES
            .iter()
            .filter_map(|case| check(case).err().map(|e| format!("{}: {e}", case.name)))
            .collect();
        assert!(wrong.is_empty(), "cases that failed: {wrong:#?}");
    }

    #[test]
    fn a_sitemap_over_fifty_thousand_urls_is_refused() {
        let entry = "<url><loc>https://a.test/p</loc></url>";
        let at_limit = format!(
            "<urlset xmlns=\"{NS}\">{}</urlset>",
            entry.repeat(MAX_SITEMAP_URLS)
        );
        assert_eq!(
            parse(at_limit.as_bytes()).unwrap().pages.len(),
            MAX_SITEMAP_URLS
        );
        let over = format!("<urlset>{}</urlset>", entry.repeat(MAX_SITEMAP_URLS + 1));
        assert_eq!(
            parse(over.as_bytes()),
            Err(SitemapError::TooManyUrls {
                limit: MAX_SITEMAP_URLS
            })
        );
    }

    #[test]
    fn a_sitemap_over_fifty_megabytes_is_refused_unread() {
        let mut body = b"<urlset>".to_vec();
        body.resize(MAX_SITEMAP_BYTES + 1, b' ');
        assert_eq!(
            parse(&body),
            Err(SitemapError::TooLarge {
                limit: MAX_SITEMAP_BYTES
            })
        );
    }

    #[test]
    fn images_past_the_limit_of_a_page_are_skipped_and_counted() {
        let image = "<i:image><i:loc>https://a.test/x.jpg</i:loc></i:image>";
        let body = format!(
            "<urlset xmlns:i=\"{IMAGE_NAMESPACE}\"><url><loc>https://a.test/p</loc>{}</url></urlset>",
            image.repeat(MAX_IMAGES_PER_PAGE + 2)
        );
        let sitemap = parse(body.as_bytes()).unwrap();
        assert_eq!(sitemap.pages[0].images.len(), MAX_IMAGES_PER_PAGE);
        assert_eq!(sitemap.skipped, 2);
    }

    #[test]
    fn gzip_is_known_by_its_magic_bytes() {
        assert!(is_gzip(&[0x1f, 0x8b, 8, 0]));
        assert!(!is_gzip(b"<urlset/>"));
        assert!(!is_gzip(&[0x1f]));
    }
}
