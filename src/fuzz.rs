//! Fuzz entry points of the I/O crate: its parsers of user input that need no network,
//! database or browser, each taking raw bytes and calling what the program calls. As in
//! [`scrape_core::fuzz`], none of them may panic whatever the bytes; the integration tests'
//! mutation test and `fuzz/` (cargo-fuzz) run every target of [`TARGETS`].

use std::io::Cursor;
use std::path::Path;

use scrape_core::fuzz::Target;

use crate::input::urllist::{ListFormat, MAX_LINE_BYTES, UrlList};

/// Every fuzz target of the I/O crate.
pub const TARGETS: &[Target] = &[Target {
    name: "urllist",
    run: urllist,
}];

/// The formats a list is read as.
const FORMATS: [ListFormat; 4] = [
    ListFormat::Text,
    ListFormat::Delimited { delimiter: b',' },
    ListFormat::Delimited { delimiter: b'\t' },
    ListFormat::JsonLines,
];

/// The bytes of a URL list, read to its end as every format (gunzipped first when they start
/// as gzip does, as a `.gz` list is), checking what the reader promises: lines in order, and
/// no entry or skipped line holding more than a line's worth of the input.
pub fn urllist(data: &[u8]) {
    let gzipped = data.starts_with(&[0x1f, 0x8b]);
    for format in FORMATS {
        let raw = Box::new(Cursor::new(data.to_vec()));
        let Ok(list) = UrlList::from_read(Path::new("fuzz.txt"), raw, format, gzipped, "url")
        else {
            continue;
        };
        let mut last = 0;
        for item in list {
            let Ok(item) = item else { break };
            let line = match item {
                Ok(entry) => {
                    // Percent-encoding may triple a line's bytes, never more.
                    assert!(entry.url.len() <= 3 * MAX_LINE_BYTES, "{format:?}");
                    entry.line
                }
                Err(skipped) => {
                    assert!(skipped.text.len() <= 1024, "{format:?}: {skipped:?}");
                    skipped.line
                }
            };
            assert!(line > last, "{format:?}: line {line} after {last}");
            last = line;
        }
    }
}
