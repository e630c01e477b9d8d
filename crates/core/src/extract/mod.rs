//! Extract: from a parsed page and the profile's rules to image candidates.
//!
//! Pure: no I/O, no async. `dom` applies `[[images]]` rules, `srcset` and `css` parse attribute
//! values, `json` applies `[[api]]` rules, `links` applies `[[follow]]` rules, `rights` reads
//! what a page says of its images' rights; the profile's filter then decides which image URLs
//! are wanted.

pub mod css;
mod dom;
mod json;
mod links;
pub mod rights;
pub mod srcset;

use std::collections::BTreeMap;

pub use dom::extract_images;
pub use json::extract_json_images;
pub use links::{FollowLink, follow_links};

/// One image URL found on a page, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageCandidate {
    /// Absolute and normalised (see [`normalize_url`]).
    pub url: url::Url,
    /// The `[[images]]` rule's name.
    pub rule: String,
    /// The attribute (or `style`) the URL was read from; `source[srcset]` when it is another
    /// element's of the matched element's `<picture>`.
    pub attribute: String,
    pub metadata: BTreeMap<String, String>,
    /// The text a reader would take for the image (see [`dom::caption_of`]), whitespace
    /// collapsed, at most [`MAX_CAPTION_CHARS`] characters.
    pub caption: Option<String>,
    /// What the page (or API item) says of its rights, each value with its source.
    pub rights: Option<rights::Rights>,
}

/// The longest caption kept, in characters; a longer text is cut at a word.
pub const MAX_CAPTION_CHARS: usize = 2000;

/// `text` as a caption: whitespace collapsed, cut to [`MAX_CAPTION_CHARS`] at a word; `None`
/// when nothing is left.
pub fn caption_text(text: &str) -> Option<String> {
    let mut caption = String::new();
    for word in text.split_whitespace() {
        let more =
            caption.chars().count() + word.chars().count() + usize::from(!caption.is_empty());
        if more > MAX_CAPTION_CHARS {
            break;
        }
        if !caption.is_empty() {
            caption.push(' ');
        }
        caption.push_str(word);
    }
    (!caption.is_empty()).then_some(caption)
}

/// The form under which image URLs are compared and stored: no fragment, `http(s)` only.
///
/// The `url` crate already lowercases the scheme and host, drops default ports and
/// percent-encodes what must be; the query is kept as is because servers may care about order.
/// Returns `None` for URLs an image cannot be downloaded from (`data:`, `blob:`, ...).
pub fn normalize_url(mut url: url::Url) -> Option<url::Url> {
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return None;
    }
    url.set_fragment(None);
    Some(url)
}
