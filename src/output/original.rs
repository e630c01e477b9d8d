//! What a resized file says of the picture it was made from, in every output that lists it.

use serde::Serialize;

use crate::state::OriginalFile;

/// The `original_*` fields of a resized file (`[download.resize]`): the picture as downloaded,
/// in its manifest line and in its WebDataset sample.
#[derive(Serialize)]
pub(crate) struct OriginalJson<'a> {
    original_sha256: &'a str,
    original_bytes: u64,
    original_width: u32,
    original_height: u32,
}

impl<'a> OriginalJson<'a> {
    pub(crate) fn of(original: Option<&'a OriginalFile>) -> Option<Self> {
        original.map(|o| Self {
            original_sha256: &o.sha256,
            original_bytes: o.bytes,
            original_width: o.width,
            original_height: o.height,
        })
    }
}
