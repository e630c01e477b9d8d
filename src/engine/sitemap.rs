//! Sitemaps of a job: a sitemap file fetched like a page (robots.txt, host limits, retries),
//! inflated when it is gzipped, and read by `scrape_core::sitemap` on the blocking pool; a
//! site's robots.txt in the profile's `sitemap` list reads as an index of the sitemaps its
//! `Sitemap:` lines name. What a listed page becomes (a page crawled by the top-level rules,
//! images found on it) is decided here too, for every driver.

use std::io::Read;

use tokio_util::sync::CancellationToken;
use url::Url;

use super::analyse::reading_place;
use super::page::failure_record;
use super::source::PageSource;
use crate::fetch::PageFailure;
use crate::net::{Failure, FailureClass};
use crate::profile::{Pagination, Profile, is_robots_txt, parse_http_url};
use crate::sitemap::{self, MAX_SITEMAP_BYTES, Sitemap, SitemapKind, SitemapPage, SitemapRef};
use crate::state::{FailureRecord, NewImage};

/// The level of a sitemap file in the link queue: not a `[levels]` name (those have no `:`).
pub const SITEMAP_LEVEL: &str = "sitemap:file";

/// The level of a page a sitemap lists, crawled by the profile's top-level rules.
pub const SITEMAP_PAGE_LEVEL: &str = "sitemap:page";

/// The rule name of images a sitemap's image extension lists.
pub const SITEMAP_RULE: &str = "sitemap";

/// The failure class of a sitemap that was had but cannot be read (not XML, not a sitemap,
/// too many URLs).
pub const SITEMAP_CLASS: &str = "sitemap";

/// Sitemap files followed from a profile's entry at most: an entry (0), the sitemaps of an
/// index or robots.txt (1), of an index those name (2), and one more (3).
pub const MAX_SITEMAP_DEPTH: u32 = 3;

/// Sitemap files one job reads at most, over all its runs.
pub const MAX_SITEMAP_FILES: u64 = 1_000;

/// Pages one job takes from sitemaps at most, over all its runs.
pub const MAX_SITEMAP_PAGES: u64 = 5_000_000;

/// What reading a sitemap gave.
#[derive(Debug)]
pub enum SitemapRead {
    Read(Sitemap),
    Failed(FailureRecord),
    /// The run stopped meanwhile: nothing is stored, the next run reads it.
    Cancelled,
}

/// Reads the sitemap at `url` (a robots.txt reads as an index of its `Sitemap:` lines).
pub async fn read_sitemap(
    source: &PageSource,
    url: &Url,
    cancel: &CancellationToken,
) -> SitemapRead {
    let fetcher = source.fetcher();
    if is_robots_txt(url) {
        return match fetcher.robots_sitemaps(url).await {
            Ok(lines) => SitemapRead::Read(robots_index(&lines)),
            Err(failure) => SitemapRead::Failed(failure_record(PageFailure::Failed(failure))),
        };
    }
    let body = match fetcher
        .fetch_body(url, "sitemap", MAX_SITEMAP_BYTES, cancel)
        .await
    {
        Ok(body) => body.bytes,
        Err(PageFailure::Cancelled) => return SitemapRead::Cancelled,
        Err(failure) => return SitemapRead::Failed(failure_record(failure)),
    };
    let _place = match reading_place("the sitemap", body.len() / 32).await {
        Ok(place) => place,
        Err(failed) => return SitemapRead::Failed(failure_record(PageFailure::Failed(failed))),
    };
    let read = tokio::task::spawn_blocking(move || {
        let body = inflate(body)?;
        sitemap::parse(&body).map_err(|e| FailureRecord {
            class: SITEMAP_CLASS.to_owned(),
            detail: e.to_string(),
        })
    });
    match read.await {
        Ok(Ok(sitemap)) => SitemapRead::Read(sitemap),
        Ok(Err(failed)) => SitemapRead::Failed(failed),
        Err(_) => SitemapRead::Cancelled,
    }
}

/// A robots.txt's `Sitemap:` lines as an index; lines that are no absolute `http(s)` URL are
/// skipped and counted.
fn robots_index(lines: &[String]) -> Sitemap {
    let sitemaps: Vec<SitemapRef> = lines
        .iter()
        .filter_map(|l| parse_http_url(l).ok())
        .map(|url| SitemapRef { url, lastmod: None })
        .collect();
    Sitemap {
        kind: SitemapKind::Index,
        skipped: (lines.len() - sitemaps.len()) as u64,
        pages: Vec::new(),
        sitemaps,
    }
}

/// `body` inflated when it is gzipped (by its magic bytes: a `.xml.gz` served as it is; one
/// served with `Content-Encoding: gzip` was inflated by the client), at most
/// [`MAX_SITEMAP_BYTES`] of it.
fn inflate(body: Vec<u8>) -> Result<Vec<u8>, FailureRecord> {
    if !sitemap::is_gzip(&body) {
        return Ok(body);
    }
    let mut inflated = Vec::new();
    flate2::read::MultiGzDecoder::new(body.as_slice())
        .take(MAX_SITEMAP_BYTES as u64 + 1)
        .read_to_end(&mut inflated)
        .map_err(|e| FailureRecord {
            class: SITEMAP_CLASS.to_owned(),
            detail: format!("the gzipped sitemap cannot be inflated: {e}"),
        })?;
    if inflated.len() > MAX_SITEMAP_BYTES {
        let failed = Failure::new(
            FailureClass::TooLarge,
            format!("the sitemap is larger than {MAX_SITEMAP_BYTES} bytes once inflated"),
        );
        return Err(failure_record(PageFailure::Failed(failed)));
    }
    Ok(inflated)
}

/// The profile as it applies to the pages sitemaps list: its top-level rules, each page a
/// single page (no pagination). `None` when it has no rule that reads a page (no `[[images]]`,
/// `[[api]]` or `[[follow]]`): the pages are then not fetched, and only the images the
/// sitemaps list for them are kept.
pub fn page_profile(profile: &Profile) -> Option<Profile> {
    let reads_pages =
        !profile.images.is_empty() || !profile.api.is_empty() || !profile.follow.is_empty();
    reads_pages.then(|| Profile {
        pagination: Pagination::None,
        max_pages: None,
        ..profile.clone()
    })
}

/// The images a sitemap lists for `page` that the profile's filters accept, as found on it by
/// the rule `sitemap`.
pub fn listed_images(profile: &Profile, page: &SitemapPage) -> Vec<NewImage> {
    page.images
        .iter()
        .filter(|url| profile.filter.check(url).is_ok())
        .map(|url| NewImage {
            url: url.to_string(),
            rule: SITEMAP_RULE.to_owned(),
            attribute: "image:loc".to_owned(),
            metadata: Default::default(),
            caption: None,
            rights: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_gzipped_sitemap_is_inflated_and_a_plain_one_kept() {
        let xml = b"<urlset><url><loc>https://a.test/p</loc></url></urlset>".to_vec();
        assert_eq!(inflate(gzip(&xml)).unwrap(), xml);
        assert_eq!(inflate(xml.clone()).unwrap(), xml);
    }

    #[test]
    fn a_sitemap_that_inflates_past_the_limit_fails_as_too_large() {
        let bomb = gzip(&vec![b' '; MAX_SITEMAP_BYTES + 1]);
        assert!(bomb.len() < 1024 * 1024, "it weighs little gzipped");
        let failed = inflate(bomb).unwrap_err();
        assert_eq!(failed.class, "too_large", "{failed:?}");
    }

    #[test]
    fn broken_gzip_is_a_sitemap_failure() {
        let mut broken = gzip(b"<urlset/>");
        broken.truncate(12);
        assert_eq!(inflate(broken).unwrap_err().class, SITEMAP_CLASS);
    }

    #[test]
    fn robots_sitemap_lines_read_as_an_index() {
        let index = robots_index(&["https://a.test/s.xml".into(), "/relative.xml".into()]);
        assert_eq!(index.kind, SitemapKind::Index);
        assert_eq!(index.sitemaps.len(), 1);
        assert_eq!(index.skipped, 1);
    }
}
