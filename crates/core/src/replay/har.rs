//! HAR 1.2 (<http://www.softwareishard.com/blog/har-12-spec/>): the recording format, so a
//! recording can also come from a browser's devtools ("Save all as HAR").
//!
//! Reading is tolerant: fields the project does not use may be missing, and the extra `_fields`
//! Chromium's DevTools writes (`_resourceType`, `_initiator`, ...) are ignored. What it needs
//! (each entry's request method and URL, response status and content) is checked, and a broken
//! file is reported by file, line and column, or by entry number and field.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::{Deserialize, Serialize};

/// A whole HAR file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Har {
    pub log: Log,
}

/// `log`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Log {
    #[serde(default = "default_version")]
    pub version: String,
    #[serde(default)]
    pub creator: Creator,
    pub entries: Vec<Entry>,
}

fn default_version() -> String {
    "1.2".to_owned()
}

/// `log.creator`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Creator {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// One request and its response.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    #[serde(default)]
    pub started_date_time: String,
    #[serde(default)]
    pub time: f64,
    pub request: Request,
    pub response: Response,
    #[serde(default)]
    pub cache: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub timings: Timings,
}

/// `entry.request`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub method: String,
    pub url: String,
    #[serde(default = "default_http_version")]
    pub http_version: String,
    #[serde(default)]
    pub cookies: Vec<serde_json::Value>,
    #[serde(default)]
    pub headers: Vec<NameValue>,
    #[serde(default)]
    pub query_string: Vec<NameValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_data: Option<PostData>,
    #[serde(default = "unknown_size")]
    pub headers_size: i64,
    #[serde(default = "unknown_size")]
    pub body_size: i64,
}

/// `request.postData`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostData {
    #[serde(default)]
    pub mime_type: String,
    #[serde(default)]
    pub text: String,
}

/// `entry.response`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub status: i64,
    #[serde(default)]
    pub status_text: String,
    #[serde(default = "default_http_version")]
    pub http_version: String,
    #[serde(default)]
    pub cookies: Vec<serde_json::Value>,
    #[serde(default)]
    pub headers: Vec<NameValue>,
    pub content: Content,
    #[serde(default, rename = "redirectURL")]
    pub redirect_url: String,
    #[serde(default = "unknown_size")]
    pub headers_size: i64,
    #[serde(default = "unknown_size")]
    pub body_size: i64,
    /// Why the request failed without a response (`status` 0), as DevTools writes it
    /// (`net::ERR_CONNECTION_REFUSED`); DevTools also puts it on the entry.
    #[serde(default, rename = "_error", skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `response.content`: the body, as text or base64.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    #[serde(default)]
    pub size: i64,
    #[serde(default)]
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
}

/// A header or query parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameValue {
    pub name: String,
    pub value: String,
}

/// `entry.timings`; `-1` where a phase does not apply.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timings {
    #[serde(default)]
    pub send: f64,
    #[serde(default)]
    pub wait: f64,
    #[serde(default)]
    pub receive: f64,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            send: 0.0,
            wait: 0.0,
            receive: 0.0,
        }
    }
}

fn default_http_version() -> String {
    "HTTP/1.1".to_owned()
}

fn unknown_size() -> i64 {
    -1
}

/// Why a HAR file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HarError {
    #[error("cannot read recording `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}`:{line}:{column}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("`{}` entry {number}: {message}", path.display())]
    Entry {
        path: PathBuf,
        /// 1-based.
        number: usize,
        message: String,
    },
    #[error("`{}`: {message}", path.display())]
    Shape { path: PathBuf, message: String },
    #[error("cannot write recording `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Har {
    /// An empty log written by this program.
    pub fn new() -> Self {
        Self {
            log: Log {
                version: default_version(),
                creator: Creator {
                    name: "scrape".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                },
                entries: Vec::new(),
            },
        }
    }

    /// Reads and checks the HAR file at `path`.
    pub fn load(path: &Path) -> Result<Self, HarError> {
        let text = std::fs::read_to_string(path).map_err(|source| HarError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses and checks HAR `text`; `path` names it in errors. A UTF-8 byte-order mark at the
    /// start (Fiddler writes one) is skipped.
    pub fn parse(text: &str, path: &Path) -> Result<Self, HarError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            let message = if e.is_eof() {
                "the file ends early: it is truncated".to_owned()
            } else {
                strip_position(&e.to_string())
            };
            HarError::Syntax {
                path: path.to_owned(),
                line: e.line(),
                column: e.column(),
                message,
            }
        })?;
        let shape = |message: &str| HarError::Shape {
            path: path.to_owned(),
            message: message.to_owned(),
        };
        let log = value
            .get("log")
            .and_then(|l| l.as_object())
            .ok_or_else(|| shape("no `log` object: this is not a HAR file"))?;
        let entries = log
            .get("entries")
            .and_then(|e| e.as_array())
            .ok_or_else(|| shape("`log.entries` is missing or not a list"))?;
        let mut checked = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let entry = parse_entry(entry).map_err(|message| HarError::Entry {
                path: path.to_owned(),
                number: index + 1,
                message,
            })?;
            checked.push(entry);
        }
        let mut har = Self::new();
        har.log.version = log
            .get("version")
            .and_then(|v| v.as_str())
            .unwrap_or("1.2")
            .to_owned();
        if let Some(creator) = log.get("creator") {
            har.log.creator = serde_json::from_value(creator.clone()).unwrap_or_default();
        }
        har.log.entries = checked;
        Ok(har)
    }

    /// Writes the file atomically (a temporary file in the same folder, then a rename), so a
    /// reader never sees half a recording.
    pub fn write(&self, path: &Path) -> Result<(), HarError> {
        let failed = |source| HarError::Write {
            path: path.to_owned(),
            source,
        };
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(failed)?;
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
        serde_json::to_writer_pretty(&mut temp, self).map_err(|e| failed(e.into()))?;
        std::io::Write::write_all(&mut temp, b"\n").map_err(failed)?;
        temp.persist(path).map_err(|e| failed(e.error))?;
        Ok(())
    }
}

impl Default for Har {
    fn default() -> Self {
        Self::new()
    }
}

/// One entry, its parts deserialized separately so an error names the part.
fn parse_entry(value: &serde_json::Value) -> Result<Entry, String> {
    let part = |name: &str| {
        value
            .get(name)
            .cloned()
            .ok_or_else(|| format!("`{name}` is missing"))
    };
    let request: Request = serde_json::from_value(part("request")?)
        .map_err(|e| format!("`request`: {}", strip_position(&e.to_string())))?;
    let mut response: Response = serde_json::from_value(part("response")?)
        .map_err(|e| format!("`response`: {}", strip_position(&e.to_string())))?;
    if response.error.is_none() {
        response.error = value
            .get("_error")
            .and_then(|e| e.as_str())
            .map(str::to_owned);
    }
    if let Some(encoding) = &response.content.encoding
        && encoding != "base64"
        && !encoding.is_empty()
    {
        return Err(format!(
            "`response.content.encoding` is `{encoding}`; expected `base64`"
        ));
    }
    if response.content.encoding.as_deref() == Some("base64")
        && let Some(text) = &response.content.text
        && base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_err()
    {
        return Err("`response.content.text` is not valid base64".to_owned());
    }
    if url::Url::parse(&request.url).is_err() {
        return Err(format!("`request.url` `{}` is not a URL", request.url));
    }
    let mut entry: Entry = Entry {
        started_date_time: String::new(),
        time: 0.0,
        request,
        response,
        cache: serde_json::Map::new(),
        timings: Timings::default(),
    };
    if let Some(started) = value.get("startedDateTime").and_then(|v| v.as_str()) {
        entry.started_date_time = started.to_owned();
    }
    if let Some(time) = value.get("time").and_then(|v| v.as_f64()) {
        entry.time = time;
    }
    Ok(entry)
}

/// serde_json appends " at line L column C", which means nothing for a part of an entry.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

impl Content {
    /// The body bytes: base64 decoded, or the text's UTF-8. Empty when the recording has none.
    pub fn body(&self) -> Vec<u8> {
        match (&self.text, self.encoding.as_deref()) {
            (Some(text), Some("base64")) => base64::engine::general_purpose::STANDARD
                .decode(text)
                .unwrap_or_default(),
            (Some(text), _) => text.clone().into_bytes(),
            (None, _) => Vec::new(),
        }
    }

    /// Whether the recording holds the body (DevTools leaves `text` out of bodies it did not keep).
    pub fn has_body(&self) -> bool {
        self.text.as_ref().is_some_and(|t| !t.is_empty())
    }

    /// The content of `body` as HAR stores it: text when it is UTF-8 text, base64 otherwise.
    pub fn from_body(mime_type: &str, body: &[u8]) -> Self {
        let textual = is_textual(mime_type);
        let (text, encoding) = match std::str::from_utf8(body) {
            Ok(text) if textual => (text.to_owned(), None),
            _ => (
                base64::engine::general_purpose::STANDARD.encode(body),
                Some("base64".to_owned()),
            ),
        };
        Self {
            size: body.len() as i64,
            mime_type: mime_type.to_owned(),
            text: Some(text),
            encoding,
        }
    }
}

/// Types whose bodies are kept as text in the file (readable diffs of recordings).
fn is_textual(mime_type: &str) -> bool {
    let essence = mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("json")
        || essence.ends_with("javascript")
        || essence.ends_with("xml")
        || essence.ends_with("+json")
        || essence == "application/x-www-form-urlencoded"
}

impl Response {
    /// Whether the request failed without a response: status 0, as a browser records a
    /// refused connection, an unknown host or a blocked request.
    pub fn is_failure(&self) -> bool {
        self.status == 0
    }

    /// The value of header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }
}

impl Entry {
    /// Whether the response is an image whose body the recording holds.
    pub fn has_image_body(&self) -> bool {
        let mime = if self.response.content.mime_type.is_empty() {
            self.response.header("content-type").unwrap_or_default()
        } else {
            &self.response.content.mime_type
        };
        mime.trim().to_ascii_lowercase().starts_with("image/") && self.response.content.has_body()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_json(encoding: &str) -> String {
        format!(
            r#"{{"log":{{"version":"1.2","creator":{{"name":"x","version":"1"}},"entries":[
            {{"request":{{"method":"GET","url":"http://a.test/"}},
              "response":{{"status":200,"content":{{"size":2,"mimeType":"text/html","text":"aGk=","encoding":"{encoding}"}}}},
              "_resourceType":"document"}}]}}}}"#
        )
    }

    #[test]
    fn devtools_extra_fields_are_ignored_and_base64_is_decoded() {
        let har = Har::parse(&entry_json("base64"), Path::new("site.har")).unwrap();
        assert_eq!(har.log.entries.len(), 1);
        assert_eq!(har.log.entries[0].response.content.body(), b"hi");
    }

    #[test]
    fn a_byte_order_mark_before_the_json_is_skipped() {
        let text = format!("\u{feff}{}", entry_json("base64"));
        let har = Har::parse(&text, Path::new("fiddler.har")).unwrap();
        assert_eq!(har.log.entries[0].response.content.body(), b"hi");
    }

    #[test]
    fn an_unknown_encoding_names_the_entry_and_field() {
        let e = Har::parse(&entry_json("rot13"), Path::new("site.har")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`site.har` entry 1: `response.content.encoding` is `rot13`; expected `base64`"
        );
    }

    #[test]
    fn a_truncated_file_names_line_and_column() {
        let text = entry_json("base64");
        let cut = &text[..text.len() / 2];
        let e = Har::parse(cut, Path::new("site.har")).unwrap_err();
        let message = e.to_string();
        assert!(message.starts_with("`site.har`:"), "{message}");
        assert!(message.contains("truncated"), "{message}");
    }

    #[test]
    fn a_missing_url_names_the_part() {
        let text = r#"{"log":{"entries":[{"request":{"method":"GET"},"response":{"status":200,"content":{}}}]}}"#;
        let e = Har::parse(text, Path::new("x.har")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`x.har` entry 1: `request`: missing field `url`"
        );
    }

    #[test]
    fn text_bodies_stay_text_and_binary_bodies_become_base64() {
        let text = Content::from_body("text/html; charset=utf-8", b"<p>");
        assert_eq!(text.text.as_deref(), Some("<p>"));
        assert_eq!(text.encoding, None);
        let image = Content::from_body("image/png", b"\x89PNG");
        assert_eq!(image.encoding.as_deref(), Some("base64"));
        assert_eq!(image.body(), b"\x89PNG");
    }
}
