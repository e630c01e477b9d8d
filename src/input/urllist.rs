//! URL lists for `scrape download --urls FILE`: `.txt`, `.csv`/`.tsv`, `.jsonl`, each optionally
//! gzipped, read as a stream so a list of millions of lines needs no memory to speak of.
//!
//! Lines that cannot be used (blank, invalid URL, unsupported scheme) are reported as
//! [`Skipped`] items with their line number, never as errors: only an unreadable file or a
//! missing URL column stops the reading.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::extract::normalize_url;

/// The kinds of list, by file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFormat {
    /// One URL per line; `#` starts a comment line.
    Text,
    /// Header row, then one record per line; `delimiter` is `,` or tab.
    Delimited { delimiter: u8 },
    /// One JSON object per line with a `url` field (or the chosen column).
    JsonLines,
}

impl ListFormat {
    /// The format for `path` by its extension (`.gz` looked through), and whether it is gzipped.
    pub fn for_path(path: &Path) -> (Self, bool) {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let (name, gzipped) = match name.strip_suffix(".gz") {
            Some(inner) => (inner.to_owned(), true),
            None => (name, false),
        };
        let format = match name.rsplit_once('.').map(|(_, ext)| ext) {
            Some("csv") => Self::Delimited { delimiter: b',' },
            Some("tsv") => Self::Delimited { delimiter: b'\t' },
            Some("jsonl" | "ndjson") => Self::JsonLines,
            _ => Self::Text,
        };
        (format, gzipped)
    }
}

/// One usable line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// 1-based line (or record) number.
    pub line: u64,
    /// Normalised (see [`normalize_url`]).
    pub url: String,
    /// The other columns or fields, as text.
    pub metadata: BTreeMap<String, String>,
}

/// Why a line was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkipReason {
    Blank,
    Invalid,
    UnsupportedScheme,
    /// Not UTF-8 text.
    NotUtf8,
    /// Longer than [`MAX_LINE_BYTES`]; in a CSV, often an opening quote never closed.
    TooLong,
    /// A CSV record with a quote that is never closed, or that runs over lines that start
    /// with a URL: the records after the quote were read as one field.
    OpenQuote,
}

/// The longest line (or CSV record) read, in bytes: far above any URL with its metadata, and a
/// bound on the memory one line can take (a list may be a gzip bomb of one endless line).
pub const MAX_LINE_BYTES: usize = 64 * 1024;

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blank => "blank",
            Self::Invalid => "invalid",
            Self::UnsupportedScheme => "unsupported scheme",
            Self::NotUtf8 => "not UTF-8",
            Self::TooLong => "too long",
            Self::OpenQuote => "open quote",
        }
    }
}

/// A line that was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub line: u64,
    pub reason: SkipReason,
    pub text: String,
}

/// What the reader yields per line.
pub type ListItem = Result<ListEntry, Skipped>;

/// Why a list cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("cannot read URL list `{path}`")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("URL list `{path}` has no column `{column}` (columns: {found})")]
    NoColumn {
        path: PathBuf,
        column: String,
        found: String,
    },
    #[error("URL list `{path}`, record {line}: {message}")]
    Malformed {
        path: PathBuf,
        line: u64,
        message: String,
    },
}

/// Streams a URL list.
pub struct UrlList {
    path: PathBuf,
    inner: Inner,
    column: String,
}

enum Inner {
    Lines {
        reader: Box<dyn BufRead + Send>,
        line: u64,
        json: bool,
    },
    Delimited {
        // Boxed: csv-core's parser state is a few hundred bytes.
        records: Box<Records>,
        headers: Vec<String>,
        url_index: usize,
        record: u64,
    },
}

impl UrlList {
    /// Opens `path`, reading URLs from `column` (CSV/TSV header name or JSON field).
    pub fn open(path: &Path, column: &str) -> Result<Self, ListError> {
        let io = |source| ListError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let (format, gzipped) = ListFormat::for_path(path);
        Self::from_read(path, Box::new(file), format, gzipped, column)
    }

    /// Reads the bytes of a list of `format` from `raw`, gunzipping them first when `gzipped`
    /// (`path` is only for messages).
    pub fn from_read(
        path: &Path,
        raw: Box<dyn Read + Send>,
        format: ListFormat,
        gzipped: bool,
        column: &str,
    ) -> Result<Self, ListError> {
        let raw: Box<dyn Read + Send> = if gzipped {
            Box::new(flate2::read::MultiGzDecoder::new(raw))
        } else {
            raw
        };
        let reader: Box<dyn BufRead + Send> = Box::new(BufReader::with_capacity(256 * 1024, raw));
        Self::from_reader(path, reader, format, column)
    }

    /// Reads an already-open stream of the given format (`path` is only for messages).
    pub fn from_reader(
        path: &Path,
        reader: Box<dyn BufRead + Send>,
        format: ListFormat,
        column: &str,
    ) -> Result<Self, ListError> {
        let inner = match format {
            ListFormat::Text | ListFormat::JsonLines => Inner::Lines {
                reader,
                line: 0,
                json: format == ListFormat::JsonLines,
            },
            ListFormat::Delimited { delimiter } => {
                let mut records = Box::new(Records::new(reader, delimiter));
                let malformed = |message: String| ListError::Malformed {
                    path: path.to_owned(),
                    line: 1,
                    message,
                };
                let headers: Vec<String> = match records.next_record() {
                    Ok(Some(Record::Fields(fields))) => fields
                        .iter()
                        .map(|h| {
                            String::from_utf8_lossy(h)
                                .trim()
                                .trim_start_matches('\u{feff}')
                                .to_owned()
                        })
                        .collect(),
                    Ok(Some(Record::TooLong)) => {
                        return Err(malformed(format!(
                            "the header is longer than {MAX_LINE_BYTES} bytes"
                        )));
                    }
                    Ok(Some(Record::OpenQuote { opened, .. })) => {
                        return Err(malformed(format!(
                            "the quote opened on line {opened} is never closed"
                        )));
                    }
                    Ok(None) => Vec::new(),
                    Err(e) => return Err(malformed(e.to_string())),
                };
                let url_index = headers.iter().position(|h| h == column).ok_or_else(|| {
                    ListError::NoColumn {
                        path: path.to_owned(),
                        column: column.to_owned(),
                        found: headers.join(", "),
                    }
                })?;
                Inner::Delimited {
                    records,
                    headers,
                    url_index,
                    record: 1,
                }
            }
        };
        Ok(Self {
            path: path.to_owned(),
            inner,
            column: column.to_owned(),
        })
    }
}

impl Iterator for UrlList {
    type Item = Result<ListItem, ListError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Lines { reader, line, json } => {
                let bytes = match read_line(reader.as_mut()) {
                    Ok(Some(bytes)) => bytes,
                    Ok(None) => return None,
                    Err(source) => {
                        return Some(Err(ListError::Io {
                            path: self.path.clone(),
                            source,
                        }));
                    }
                };
                let text = match bytes {
                    Line::Text(bytes) => match String::from_utf8(bytes) {
                        Ok(text) => text,
                        Err(e) => {
                            *line += 1;
                            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                            return Some(Ok(Err(Skipped {
                                line: *line,
                                reason: SkipReason::NotUtf8,
                                text: truncate(&text),
                            })));
                        }
                    },
                    Line::TooLong => {
                        *line += 1;
                        return Some(Ok(Err(Skipped {
                            line: *line,
                            reason: SkipReason::TooLong,
                            text: format!("longer than {MAX_LINE_BYTES} bytes"),
                        })));
                    }
                };
                *line += 1;
                let trimmed = text.trim().trim_start_matches('\u{feff}');
                if trimmed.is_empty() || (!*json && trimmed.starts_with('#')) {
                    return Some(Ok(Err(Skipped {
                        line: *line,
                        reason: SkipReason::Blank,
                        text: String::new(),
                    })));
                }
                if !*json {
                    return Some(Ok(entry(*line, trimmed, BTreeMap::new())));
                }
                Some(Ok(json_entry(*line, trimmed, &self.column)))
            }
            Inner::Delimited {
                records,
                headers,
                url_index,
                record,
            } => {
                let starts_at = records.line();
                let row = match records.next_record() {
                    Ok(Some(row)) => row,
                    Ok(None) => return None,
                    Err(source) => {
                        return Some(Err(ListError::Io {
                            path: self.path.clone(),
                            source,
                        }));
                    }
                };
                *record += 1;
                let row = match row {
                    Record::Fields(row) => row,
                    Record::TooLong => {
                        return Some(Ok(Err(Skipped {
                            line: *record,
                            reason: SkipReason::TooLong,
                            text: format!(
                                "record {record} (from line {starts_at}) is longer than {MAX_LINE_BYTES} bytes: a quote opened there and never closed takes in what follows"
                            ),
                        })));
                    }
                    Record::OpenQuote { opened } => {
                        return Some(Ok(Err(Skipped {
                            line: *record,
                            reason: SkipReason::OpenQuote,
                            text: format!(
                                "record {record} (from line {starts_at}): the quote opened on line {opened} is never closed, so the rest of the list was read as one field"
                            ),
                        })));
                    }
                };
                if let Some(field) = row.iter().find(|f| starts_a_line_with_a_url(f)) {
                    let lines = field.iter().filter(|&&b| b == b'\n').count();
                    return Some(Ok(Err(Skipped {
                        line: *record,
                        reason: SkipReason::OpenQuote,
                        text: format!(
                            "record {record} (from line {starts_at}): a quoted field runs over {lines} line break(s) and lines that start with a URL: a quote opened there is closed only by a later one"
                        ),
                    })));
                }
                let Ok(row) = row
                    .into_iter()
                    .map(String::from_utf8)
                    .collect::<Result<Vec<String>, _>>()
                else {
                    return Some(Ok(Err(Skipped {
                        line: *record,
                        reason: SkipReason::NotUtf8,
                        text: format!("record {record} (from line {starts_at})"),
                    })));
                };
                let url = row.get(*url_index).map_or("", |u| u.trim());
                if url.is_empty() {
                    return Some(Ok(Err(Skipped {
                        line: *record,
                        reason: SkipReason::Blank,
                        text: String::new(),
                    })));
                }
                let metadata = headers
                    .iter()
                    .zip(row.iter())
                    .enumerate()
                    .filter(|(i, (_, v))| *i != *url_index && !v.is_empty())
                    .map(|(_, (h, v))| (h.clone(), v.to_owned()))
                    .collect();
                Some(Ok(entry(*record, url, metadata)))
            }
        }
    }
}

/// One CSV/TSV record, or word that it was too long to keep or never ended.
enum Record {
    Fields(Vec<Vec<u8>>),
    /// Longer than [`MAX_LINE_BYTES`]: read to its end and dropped as it streamed by.
    TooLong,
    /// A quote opened on line `opened` and the list ended before it closed.
    OpenQuote {
        opened: u64,
    },
}

/// Whether a field read from quotes holds a line break followed by a URL: the mark of a quote
/// opened by mistake that ran over the records after it, up to the next quote.
fn starts_a_line_with_a_url(field: &[u8]) -> bool {
    field.windows(9).any(|w| {
        matches!(w[0], b'\n' | b'\r')
            && (w[1..].eq_ignore_ascii_case(b"https://")
                || w[1..8].eq_ignore_ascii_case(b"http://"))
    })
}

/// Follows the quoting of the bytes the CSV parser reads, as csv-core reads it (a field that
/// starts with `"` is quoted, `""` inside it is a quote, a `"` elsewhere is an ordinary
/// byte), to tell a record the end of the input cut off inside a quoted field: csv-core ends
/// that record as if the quote had been closed.
#[derive(Debug)]
struct QuoteTracker {
    delimiter: u8,
    line: u64,
    at_field_start: bool,
    /// The line the open quote opened on.
    open_since: Option<u64>,
    /// A `"` inside the quotes was just read: a second one makes it a quote, anything else
    /// closes the field's quotes.
    quote_pending: bool,
}

impl QuoteTracker {
    fn new(delimiter: u8) -> Self {
        Self {
            delimiter,
            line: 1,
            at_field_start: true,
            open_since: None,
            quote_pending: false,
        }
    }

    fn read(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.line += 1;
            }
            if self.open_since.is_some() {
                if self.quote_pending {
                    self.quote_pending = false;
                    if b == b'"' {
                        continue;
                    }
                    self.open_since = None;
                } else {
                    self.quote_pending = b == b'"';
                    continue;
                }
            }
            if self.at_field_start && b == b'"' {
                self.open_since = Some(self.line);
                self.at_field_start = false;
            } else {
                self.at_field_start = matches!(b, b'\n' | b'\r') || b == self.delimiter;
            }
        }
    }

    /// The line an open quote opened on, if the quoting is open (a `"` just read, at the end
    /// of the input, closes it).
    fn open_quote(&self) -> Option<u64> {
        self.open_since.filter(|_| !self.quote_pending)
    }
}

/// CSV/TSV records read with a bound: at most [`MAX_LINE_BYTES`] of a record is held (the
/// `csv` crate's reader holds a record whole before anyone can look at its length, and a quote
/// never closed makes the rest of the file one record).
struct Records {
    reader: Box<dyn BufRead + Send>,
    parser: csv_core::Reader,
    /// The record's bytes so far, and where each field ends in them.
    bytes: Vec<u8>,
    ends: Vec<usize>,
    quotes: QuoteTracker,
}

impl Records {
    fn new(reader: Box<dyn BufRead + Send>, delimiter: u8) -> Self {
        Self {
            reader,
            parser: csv_core::ReaderBuilder::new().delimiter(delimiter).build(),
            bytes: vec![0; 4096],
            ends: vec![0; 64],
            quotes: QuoteTracker::new(delimiter),
        }
    }

    /// The line the next record starts on (1-based).
    fn line(&self) -> u64 {
        self.parser.line()
    }

    /// The next record; `None` at the end of the input.
    fn next_record(&mut self) -> std::io::Result<Option<Record>> {
        let (mut used, mut fields, mut too_long) = (0, 0, false);
        loop {
            let input = loop {
                match self.reader.fill_buf() {
                    Ok(input) => break input,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            let (result, read, wrote, ended) =
                self.parser
                    .read_record(input, &mut self.bytes[used..], &mut self.ends[fields..]);
            self.quotes.read(&input[..read]);
            self.reader.consume(read);
            used += wrote;
            fields += ended;
            match result {
                csv_core::ReadRecordResult::InputEmpty => {}
                csv_core::ReadRecordResult::OutputFull => {
                    if too_long || used >= MAX_LINE_BYTES {
                        // Over the bound: what comes until the record ends is dropped.
                        too_long = true;
                        (used, fields) = (0, 0);
                    } else {
                        let grown = (self.bytes.len() * 2).min(MAX_LINE_BYTES + 1);
                        self.bytes.resize(grown, 0);
                    }
                }
                csv_core::ReadRecordResult::OutputEndsFull => {
                    if too_long {
                        fields = 0;
                    } else {
                        let grown = self.ends.len() * 2;
                        self.ends.resize(grown, 0);
                    }
                }
                csv_core::ReadRecordResult::Record if too_long => {
                    return Ok(Some(Record::TooLong));
                }
                csv_core::ReadRecordResult::Record => {
                    // csv-core ends a record inside quotes only at the end of the input.
                    if let Some(opened) = self.quotes.open_quote() {
                        return Ok(Some(Record::OpenQuote { opened }));
                    }
                    let mut start = 0;
                    let row = self.ends[..fields]
                        .iter()
                        .map(|&end| {
                            let field = self.bytes[start..end].to_vec();
                            start = end;
                            field
                        })
                        .collect();
                    return Ok(Some(Record::Fields(row)));
                }
                csv_core::ReadRecordResult::End => return Ok(None),
            }
        }
    }
}

fn json_entry(line: u64, text: &str, column: &str) -> ListItem {
    let invalid = |why: &str| {
        Err(Skipped {
            line,
            reason: SkipReason::Invalid,
            text: format!("{why}: {}", truncate(text)),
        })
    };
    let Ok(serde_json::Value::Object(object)) = serde_json::from_str::<serde_json::Value>(text)
    else {
        return invalid("not a JSON object");
    };
    let Some(url) = object.get(column).and_then(|v| v.as_str()) else {
        return invalid(&format!("no string field `{column}`"));
    };
    let metadata = object
        .iter()
        .filter(|(k, _)| k.as_str() != column)
        .filter_map(|(k, v)| {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => return None,
                other => other.to_string(),
            };
            Some((k.clone(), text))
        })
        .collect();
    entry(line, url, metadata)
}

fn entry(line: u64, text: &str, metadata: BTreeMap<String, String>) -> ListItem {
    let skipped = |reason| {
        Err(Skipped {
            line,
            reason,
            text: truncate(text),
        })
    };
    let Ok(url) = url::Url::parse(text) else {
        return skipped(SkipReason::Invalid);
    };
    match normalize_url(url) {
        Some(url) => Ok(ListEntry {
            line,
            url: url.to_string(),
            metadata,
        }),
        None if text.starts_with("http:") || text.starts_with("https:") => {
            skipped(SkipReason::Invalid)
        }
        None => skipped(SkipReason::UnsupportedScheme),
    }
}

/// One line as read: its bytes (without the line break), or the fact it was too long.
enum Line {
    Text(Vec<u8>),
    TooLong,
}

/// Reads the next line of `reader`, keeping at most [`MAX_LINE_BYTES`] of it in memory: the
/// rest of a longer line is read and dropped. `None` at the end.
fn read_line(reader: &mut dyn BufRead) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            break;
        }
        read_any = true;
        let (chunk, ends) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !too_long && line.len() + chunk.len() <= MAX_LINE_BYTES {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line = Vec::new();
        }
        let used = ends.unwrap_or(buffer.len());
        reader.consume(used);
        if ends.is_some() {
            break;
        }
    }
    if !read_any {
        return Ok(None);
    }
    if too_long {
        return Ok(Some(Line::TooLong));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(Line::Text(line)))
}

fn truncate(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(format: ListFormat, text: &str, column: &str) -> Vec<ListItem> {
        read_bytes(format, text.as_bytes().to_vec(), column)
    }

    fn read_bytes(format: ListFormat, bytes: Vec<u8>, column: &str) -> Vec<ListItem> {
        let reader: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(bytes));
        UrlList::from_reader(Path::new("list"), reader, format, column)
            .unwrap()
            .map(|item| item.unwrap())
            .collect()
    }

    #[test]
    fn text_lists_skip_blank_comment_invalid_and_other_schemes() {
        let items = read(
            ListFormat::Text,
            "http://a.test/1.jpg\n\n# note\nnot a url\nftp://a.test/x\nhttps://a.test/2.jpg#frag\n",
            "url",
        );
        let urls: Vec<_> = items
            .iter()
            .filter_map(|i| i.as_ref().ok())
            .map(|e| (e.line, e.url.as_str()))
            .collect();
        assert_eq!(
            urls,
            [(1, "http://a.test/1.jpg"), (6, "https://a.test/2.jpg")]
        );
        let reasons: Vec<_> = items
            .iter()
            .filter_map(|i| i.as_ref().err())
            .map(|s| (s.line, s.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                (2, SkipReason::Blank),
                (3, SkipReason::Blank),
                (4, SkipReason::Invalid),
                (5, SkipReason::UnsupportedScheme)
            ]
        );
    }

    #[test]
    fn csv_lists_keep_other_columns_as_metadata() {
        let items = read(
            ListFormat::Delimited { delimiter: b',' },
            "id,image,caption\n7,http://a.test/x.jpg,\"a, b\"\n8,,\n",
            "image",
        );
        let first = items[0].as_ref().unwrap();
        assert_eq!(first.url, "http://a.test/x.jpg");
        assert_eq!(first.line, 2);
        assert_eq!(
            first.metadata.get("caption").map(String::as_str),
            Some("a, b")
        );
        assert_eq!(first.metadata.get("id").map(String::as_str), Some("7"));
        assert_eq!(items[1].as_ref().unwrap_err().reason, SkipReason::Blank);
    }

    #[test]
    fn csv_without_the_url_column_is_an_error_naming_the_columns() {
        let reader: Box<dyn BufRead + Send> =
            Box::new(std::io::Cursor::new(b"a,b\n1,2\n".to_vec()));
        let Err(error) = UrlList::from_reader(
            Path::new("l.csv"),
            reader,
            ListFormat::Delimited { delimiter: b',' },
            "url",
        ) else {
            panic!("expected an error");
        };
        assert!(
            error
                .to_string()
                .contains("no column `url` (columns: a, b)"),
            "{error}"
        );
    }

    #[test]
    fn json_lines_read_the_url_field() {
        let items = read(
            ListFormat::JsonLines,
            "{\"url\":\"http://a.test/1.png\",\"w\":3}\n[1]\n{\"href\":1}\n",
            "url",
        );
        let first = items[0].as_ref().unwrap();
        assert_eq!(
            (
                first.url.as_str(),
                first.metadata.get("w").map(String::as_str)
            ),
            ("http://a.test/1.png", Some("3"))
        );
        assert_eq!(items[1].as_ref().unwrap_err().reason, SkipReason::Invalid);
        assert_eq!(items[2].as_ref().unwrap_err().reason, SkipReason::Invalid);
    }

    #[test]
    fn formats_follow_the_file_name_through_gzip() {
        assert_eq!(
            ListFormat::for_path(Path::new("a.CSV.gz")),
            (ListFormat::Delimited { delimiter: b',' }, true)
        );
        assert_eq!(
            ListFormat::for_path(Path::new("a.tsv")),
            (ListFormat::Delimited { delimiter: b'\t' }, false)
        );
        assert_eq!(
            ListFormat::for_path(Path::new("a.jsonl")),
            (ListFormat::JsonLines, false)
        );
        assert_eq!(
            ListFormat::for_path(Path::new("urls")),
            (ListFormat::Text, false)
        );
    }

    #[test]
    fn gzipped_lists_are_read() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.txt.gz");
        let mut gz = flate2::write::GzEncoder::new(
            File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all(b"http://a.test/1.jpg\nhttp://a.test/2.jpg\n")
            .unwrap();
        gz.finish().unwrap();
        let urls: Vec<_> = UrlList::open(&path, "url")
            .unwrap()
            .map(|i| i.unwrap().unwrap().url)
            .collect();
        assert_eq!(urls, ["http://a.test/1.jpg", "http://a.test/2.jpg"]);
    }

    fn reasons(items: &[ListItem]) -> Vec<Result<String, SkipReason>> {
        items
            .iter()
            .map(|item| match item {
                Ok(entry) => Ok(entry.url.clone()),
                Err(skipped) => Err(skipped.reason),
            })
            .collect()
    }

    #[test]
    fn a_line_that_is_not_utf8_is_skipped_and_the_list_goes_on() {
        let mut bytes = b"http://a.test/1.jpg\nhttp://a.test/\xff\xfe.jpg\n".to_vec();
        bytes.extend_from_slice(b"http://a.test/2.jpg\n");
        for format in [ListFormat::Text, ListFormat::JsonLines] {
            let bytes = if format == ListFormat::Text {
                bytes.clone()
            } else {
                b"{\"url\":\"http://a.test/1.jpg\"}\n\xff\n{\"url\":\"http://a.test/2.jpg\"}\n"
                    .to_vec()
            };
            assert_eq!(
                reasons(&read_bytes(format, bytes, "url")),
                [
                    Ok("http://a.test/1.jpg".to_owned()),
                    Err(SkipReason::NotUtf8),
                    Ok("http://a.test/2.jpg".to_owned()),
                ]
            );
        }
        let csv = b"url,title\nhttp://a.test/1.jpg,\xff\nhttp://a.test/2.jpg,ok\n".to_vec();
        let items = read_bytes(ListFormat::Delimited { delimiter: b',' }, csv, "url");
        assert_eq!(
            reasons(&items),
            [
                Err(SkipReason::NotUtf8),
                Ok("http://a.test/2.jpg".to_owned())
            ]
        );
    }

    #[test]
    fn a_line_longer_than_the_limit_is_skipped_without_being_kept() {
        let mut bytes = b"http://a.test/".to_vec();
        bytes.resize(16 << 20, b'a');
        bytes.extend_from_slice(b"-8x8.png\r\nhttp://a.test/2.jpg\r\n");
        let items = read_bytes(ListFormat::Text, bytes, "url");
        assert_eq!(
            reasons(&items),
            [
                Err(SkipReason::TooLong),
                Ok("http://a.test/2.jpg".to_owned())
            ]
        );
        let exactly = format!("http://a.test/{}", "a".repeat(MAX_LINE_BYTES - 14));
        let items = read(ListFormat::Text, &exactly, "url");
        assert!(items[0].is_ok(), "a line of exactly the limit is read");
    }

    #[test]
    fn a_csv_quote_never_closed_is_reported_where_it_opens() {
        let mut text = "url,title\nhttp://a.test/1.jpg,\"open\nhttp://a.test/2.jpg,x\n".to_owned();
        for i in 0..2000 {
            text.push_str(&format!("http://a.test/{i}.jpg,some title {i}\n"));
        }
        let items = read(ListFormat::Delimited { delimiter: b',' }, &text, "url");
        let Err(skipped) = &items[0] else {
            panic!("the record with the open quote is skipped: {:?}", items[0]);
        };
        assert_eq!(skipped.reason, SkipReason::TooLong);
        assert!(skipped.text.contains("from line 2"), "{}", skipped.text);
    }

    #[test]
    fn a_csv_quote_never_closed_is_reported_whatever_the_size_of_the_rest() {
        let mut text = "url,title\nhttp://a.test/0.jpg,ok\nhttp://a.test/1.jpg,\"open\n".to_owned();
        for i in 2..100 {
            text.push_str(&format!("http://a.test/{i}.jpg,title {i}\n"));
        }
        let items = read(ListFormat::Delimited { delimiter: b',' }, &text, "url");
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(items[0].is_ok());
        let Err(skipped) = &items[1] else {
            panic!("the record with the open quote is skipped: {:?}", items[1]);
        };
        assert_eq!(skipped.reason, SkipReason::OpenQuote);
        assert!(
            skipped
                .text
                .contains("quote opened on line 3 is never closed"),
            "{}",
            skipped.text
        );
    }

    #[test]
    fn a_csv_quote_closed_only_records_later_is_reported() {
        let text = "url,title\nhttp://a.test/1.jpg,\"open\nhttp://a.test/2.jpg,x\nhttp://a.test/3.jpg,\"closed\"\nhttp://a.test/4.jpg,y\n";
        let items = read(ListFormat::Delimited { delimiter: b',' }, text, "url");
        assert_eq!(items.len(), 2, "{items:?}");
        let Err(skipped) = &items[0] else {
            panic!(
                "the record that took in the next ones is skipped: {:?}",
                items[0]
            );
        };
        assert_eq!(skipped.reason, SkipReason::OpenQuote);
        assert!(skipped.text.contains("from line 2"), "{}", skipped.text);
        assert_eq!(items[1].as_ref().unwrap().url, "http://a.test/4.jpg");
    }

    #[test]
    fn quoted_fields_that_close_are_read_as_they_are() {
        let text = "url,title\nhttp://a.test/1.jpg,\"a \"\"quoted\"\" title\"\nhttp://a.test/2.jpg,\"two\nlines\"\nhttp://a.test/3.jpg,a\"b\nhttp://a.test/4.jpg,\"last\"";
        let items = read(ListFormat::Delimited { delimiter: b',' }, text, "url");
        let titles: Vec<&str> = items
            .iter()
            .map(|i| i.as_ref().unwrap().metadata["title"].as_str())
            .collect();
        assert_eq!(titles, ["a \"quoted\" title", "two\nlines", "a\"b", "last"]);
    }

    #[test]
    fn a_csv_header_with_a_quote_never_closed_is_an_error() {
        let reader: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(
            b"url,\"title\nhttp://a.test/1.jpg,x\n".to_vec(),
        ));
        let error = UrlList::from_reader(
            Path::new("list.csv"),
            reader,
            ListFormat::Delimited { delimiter: b',' },
            "url",
        )
        .err()
        .expect("an error");
        assert!(error.to_string().contains("never closed"), "{error}");
    }

    #[test]
    fn a_csv_record_longer_than_the_limit_is_skipped_without_being_kept() {
        let mut bytes = b"url,title\nhttp://a.test/1.jpg,\"".to_vec();
        bytes.resize(16 << 20, b'a');
        bytes.extend_from_slice(b"\"\nhttp://a.test/2.jpg,ok\n");
        let reader: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(bytes));
        let mut records = Records::new(reader, b',');
        let mut kinds = Vec::new();
        while let Some(record) = records.next_record().unwrap() {
            assert!(
                records.bytes.len() <= MAX_LINE_BYTES + 1,
                "a record held whole"
            );
            kinds.push(match record {
                Record::Fields(fields) => String::from_utf8(fields[0].clone()).unwrap(),
                Record::TooLong => "too long".to_owned(),
                Record::OpenQuote { .. } => "open quote".to_owned(),
            });
        }
        assert_eq!(kinds, ["url", "too long", "http://a.test/2.jpg"]);
    }
}
