//! Work items: what a stream entry carries, and the key that makes each one unique in a job.
//!
//! A page item carries what its chain needs to produce the next page item: the chain's start
//! and the page's position (a URL template's number, a next link's count, an API page's
//! cursor, with the last item id to fall back on). A chain is
//! sequential by nature (its next page is enqueued when the page commits); chains, and pages
//! reached through links, are independent items and run in parallel on any worker.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::keys::Stream;
use crate::paginate::PagePosition;

/// The stream entry field holding the item's JSON.
pub const FIELD: &str = "item";

/// A page to fetch and analyse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageItem {
    /// The start URL of the chain it belongs to (or descends from, through links).
    pub start: String,
    pub position: PagePosition,
    /// The `[levels.NAME]` of a page reached through a link; `None` for a chain's page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// Links followed from the chain's page to reach it.
    #[serde(default)]
    pub depth: u32,
    /// Values the links passed down, merged into its images' metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// `json_cursor` chains: the furthest item id read so far, to go on after when the API
    /// calls the cursor expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_id: Option<String>,
}

/// An image to download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageItem {
    pub url: String,
    /// The page it was found on.
    pub page: String,
    pub rule: String,
    pub attribute: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rights: Option<crate::extract::rights::Rights>,
}

/// One work item of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Page(PageItem),
    Image(ImageItem),
}

impl Item {
    /// The stream it goes to.
    pub fn stream(&self) -> Stream {
        match self {
            Self::Page(_) => Stream::Pages,
            Self::Image(_) => Stream::Images,
        }
    }

    /// The key that identifies it in the job's seen and done sets: each page URL and each
    /// image URL is one item per job, however often it is found. A digest of fixed size
    /// ([`item_key`]), so the sets cost the same per item however long its URL is.
    pub fn key(&self) -> String {
        match self {
            Self::Page(page) => page_key(&page.position.url),
            Self::Image(image) => image_key(&image.url),
        }
    }

    /// The JSON a stream entry carries.
    pub fn encode(&self) -> String {
        // Invariant: these types serialize (string maps, no non-string keys).
        match self {
            Self::Page(page) => serde_json::to_string(page),
            Self::Image(image) => serde_json::to_string(image),
        }
        .expect("items serialize")
    }

    /// The item a stream entry of `stream` carries.
    pub fn decode(stream: Stream, json: &str) -> Result<Self, serde_json::Error> {
        Ok(match stream {
            Stream::Pages => Self::Page(serde_json::from_str(json)?),
            Stream::Images => Self::Image(serde_json::from_str(json)?),
        })
    }
}

/// How the seen and done sets of a job hold its items: recorded once per job
/// ([`super::keys::JobKeys::format`]), so a job begun by a binary that held whole URLs there
/// is refused rather than enqueued twice.
pub const KEY_FORMAT: &str = "sha256-128";

/// The seen/done key of the page at `url`.
pub fn page_key(url: &str) -> String {
    item_key('p', url)
}

/// The seen/done key of the image at `url`.
pub fn image_key(url: &str) -> String {
    item_key('i', url)
}

/// The first 16 bytes of the SHA-256 of `KIND URL`, in hex (32 characters): two of 10^9
/// items of a job share one with odds of about 1.5 in 10^21 (n^2 / 2^129), so no item is
/// taken for another in practice.
pub fn item_key(kind: char, url: &str) -> String {
    let digest = Sha256::digest(format!("{kind} {url}").as_bytes());
    hex::encode(&digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(url: &str) -> Item {
        Item::Page(PageItem {
            start: "http://a/".into(),
            position: PagePosition {
                url: url.into(),
                number: 2,
                done: 1,
                cursor: None,
                after_id: None,
                offset: 0,
            },
            level: Some("album".into()),
            depth: 1,
            metadata: BTreeMap::from([("title".into(), "x".into())]),
            last_id: Some("17".into()),
        })
    }

    #[test]
    fn an_item_survives_its_stream_entry() {
        let items = [
            page("http://a/p2"),
            Item::Image(ImageItem {
                url: "http://a/i.jpg".into(),
                page: "http://a/".into(),
                rule: "img".into(),
                attribute: "src".into(),
                metadata: BTreeMap::new(),
                caption: Some("A picture".into()),
                rights: None,
            }),
        ];
        for item in items {
            let decoded = Item::decode(item.stream(), &item.encode()).unwrap();
            assert_eq!(decoded, item);
        }
    }

    #[test]
    fn a_page_and_an_image_at_one_url_are_two_items() {
        let image = Item::Image(ImageItem {
            url: "http://a/x".into(),
            page: String::new(),
            rule: String::new(),
            attribute: String::new(),
            metadata: BTreeMap::new(),
            caption: None,
            rights: None,
        });
        assert_ne!(page("http://a/x").key(), image.key());
        assert_eq!(page("http://a/x").key(), page("http://a/x").key());
    }

    #[test]
    fn an_item_key_has_one_size_however_long_its_url() {
        let long = format!("http://a/{}", "x".repeat(4000));
        for key in [
            page_key("http://a/"),
            image_key(&long),
            item_key('x', "1-0"),
        ] {
            assert_eq!(key.len(), 32, "{key}");
            assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        }
        assert_ne!(page_key(&long), image_key(&long));
    }

    #[test]
    fn an_entry_of_another_stream_does_not_decode() {
        assert!(Item::decode(Stream::Images, &page("http://a/").encode()).is_err());
    }
}
