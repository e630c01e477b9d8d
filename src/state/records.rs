//! The values stored in the state tables (JSON-encoded, so a person can read a dump).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use scrape_core::fate::ImageFate;

use crate::extract::rights::Rights;
use crate::net::robots::RobotsRecord;
use crate::page::Validators;
use crate::paginate::{EndReason, NextPage, PagePosition};

/// Where one chain of pages (one start URL) stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainCheckpoint {
    /// The page to fetch next; `None` once the chain has ended.
    pub next: Option<PagePosition>,
    pub end: Option<EndReason>,
    pub pages_done: u64,
    pub images_found: u64,
    /// Seconds since the Unix epoch of the last change.
    pub updated: u64,
    /// `json_cursor`: the id to resume after if the saved cursor has expired (the furthest id
    /// of the pages committed so far).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_id: Option<String>,
    /// `json_cursor`: API items read so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub items_found: u64,
    /// This walk is a refresh (the chain had ended before): it stops at `stop_after_known`
    /// known items (`json_cursor`) or pages in a row; a chain of pages then goes on at `tail`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incremental: bool,
    /// Already-known items (`json_cursor`) or pages met in a row in this walk.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub known_in_a_row: u64,
    /// A chain of pages: the last page done by a walk that was not a refresh's head, where a
    /// refresh looks for pages added at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<PagePosition>,
    /// A refresh of a chain of pages: where it goes on once its head is known (the `last` page
    /// of the walks before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<PagePosition>,
    /// `json_cursor`: the newest (greatest) id committed so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_id: Option<String>,
    /// `json_cursor`, `stop_at_known_id`: the newest id of the walks before this incremental
    /// one; the walk ends at the page that reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_at_id: Option<String>,
}

impl ChainCheckpoint {
    /// Moves the checkpoint past the page at `position`, done with `images` found: on to
    /// `next`, or to the chain's end it names.
    pub fn advance(&mut self, position: &PagePosition, images: u64, next: Option<NextPage>) {
        // A refresh's head walks pages done before: the old end stays where a later one looks.
        if !self.incremental {
            self.last = Some(position.clone());
        }
        self.pages_done += 1;
        self.images_found += images;
        self.updated = now();
        match next {
            Some(NextPage::Fetch(p)) => self.next = Some(p),
            Some(NextPage::End(reason)) => self.end(reason),
            None => {}
        }
    }

    /// Ends the chain, for `reason`.
    pub fn end(&mut self, reason: EndReason) {
        self.next = None;
        self.end = Some(reason);
        self.tail = None;
        self.updated = now();
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Outcome of one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageStatus {
    Done,
    Failed,
}

/// One page fetched (or failed) by the crawl.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRecord {
    /// The start URL of the chain this page belongs to.
    pub start: String,
    pub number: i64,
    pub status: PageStatus,
    /// Images the rules found on it (before deduplication against earlier pages).
    pub images_found: u64,
    pub error: Option<String>,
    /// Why a failed page failed, when it is not a plain fetch failure (`robots`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    pub updated: u64,
    /// A chain's page done over plain HTTP: its response's `ETag` and `Last-Modified`.
    #[serde(default, skip_serializing_if = "Validators::is_empty")]
    pub validators: Validators,
    /// A chain's page done: what came after it (the next page, or the chain's end), so a
    /// refresh that finds the page unchanged goes on without its body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<NextPage>,
}

impl PageRecord {
    /// What a refresh asks the page with, only if it changed: its validators and the next page
    /// it goes on to when it did not. `None` (a plain request) for a page not done, one with
    /// no validators, or one recorded without its next page (by an older version).
    pub fn revisit(&self) -> Option<(&Validators, &NextPage)> {
        Some((self.validators_if_done()?, self.next.as_ref()?))
    }

    /// What a page done is asked with, only if it changed: its validators; `None` for a page
    /// not done, or one that kept none.
    pub fn validators_if_done(&self) -> Option<&Validators> {
        match self.status {
            PageStatus::Done if !self.validators.is_empty() => Some(&self.validators),
            _ => None,
        }
    }

    /// The failure class shown in `failures.jsonl`: `robots`, or `page` for the others.
    pub fn failure_class(&self) -> &str {
        self.class.as_deref().unwrap_or("page")
    }
}

/// The failure class of a page refused by robots.txt.
pub const ROBOTS_CLASS: &str = "robots";

/// Where an image stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageStatus {
    Pending,
    Stored,
    /// Same bytes as an image already stored; `path` points at that file.
    Duplicate,
    Failed,
}

/// One discovered image URL and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    pub seq: u64,
    /// The page it was found on.
    pub page: String,
    pub rule: String,
    pub attribute: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Its caption, as the page (or API item, or URL list) gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// Its rights and provenance, as its page published them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rights: Option<Rights>,
    pub status: ImageStatus,
    /// Download attempts over every run (a retry adds to them).
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureRecord>,
    /// The run that first found it (see [`RunRecord`]); 0 before runs were numbered, and for
    /// the records of workers over Redis. Never changed once set.
    #[serde(default)]
    pub run: u32,
    /// The run that first stored it or found it a duplicate; 0 until one did (or before runs
    /// were numbered). The run lists (`runs/NNNNN.jsonl`) are chosen by it.
    #[serde(default, skip_serializing_if = "is_zero_run")]
    pub stored_run: u32,
    /// The validators of the response its bytes came from, for `--recheck-images` to ask the
    /// image again only if it changed.
    #[serde(default, skip_serializing_if = "Validators::is_empty")]
    pub validators: Validators,
    /// Queued by `--recheck-images`: it is stored (or a duplicate) and asked again, and keeps
    /// what it has unless its URL now serves other bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recheck: bool,
}

fn is_zero_run(n: &u32) -> bool {
    *n == 0
}

/// One run of a job: `scrape --profile`, `scrape download`, `scrape retry` (table `runs_v1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Seconds since the Unix epoch when it began.
    pub started: u64,
    /// Its list of new images (`runs/NNNNN.jsonl`) is written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub listed: bool,
    /// Pages a refresh asked only if they changed, and of those the unchanged ones (`304`).
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub checked: u64,
    #[serde(default, skip_serializing_if = "is_zero_count")]
    pub unchanged: u64,
}

fn is_zero_count(n: &u64) -> bool {
    *n == 0
}

/// A file in the output folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFile {
    /// Relative to the output folder, `/`-separated.
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    pub content_type: String,
    pub width: u32,
    pub height: u32,
    /// The 64-bit perceptual hash (dHash) of the picture, as 16 hex digits; only with
    /// near-duplicate flags on, and only for an image that decodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phash: Option<String>,
    /// An image stored before whose perceptual hash is within the job's distance of this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_duplicate_of: Option<NearDuplicateOf>,
    /// The picture as downloaded, when `[download.resize]` stored a resized copy of it
    /// (`sha256`, `bytes`, `width`, `height` and `content_type` are then the copy's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<Box<OriginalFile>>,
}

/// The downloaded picture a resized file was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginalFile {
    pub sha256: String,
    pub bytes: u64,
    pub width: u32,
    pub height: u32,
}

impl StoredFile {
    /// The hash content is deduplicated by (the `content_v1` key): the downloaded bytes', so
    /// two URLs serving the same bytes are one image whether or not it was resized.
    pub fn content_key(&self) -> &str {
        self.original
            .as_ref()
            .map_or(self.sha256.as_str(), |o| o.sha256.as_str())
    }

    /// A near-duplicate dropped by `near_duplicates = "drop"`: its bytes were not kept, and
    /// `path` names the earlier picture's file (with its own size and hash).
    pub fn is_dropped_near_duplicate(&self) -> bool {
        self.near_duplicate_of
            .as_ref()
            .is_some_and(|near| near.path == self.path)
    }

    /// The size the file at `path` must have: `None` when it is another picture's.
    pub fn expected_bytes(&self) -> Option<u64> {
        (!self.is_dropped_near_duplicate()).then_some(self.bytes)
    }
}

/// The earlier image a picture is a near-duplicate of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NearDuplicateOf {
    pub sha256: String,
    pub path: String,
    /// Bits in which the two perceptual hashes differ.
    pub distance: u32,
}

/// A perceptual hash as stored: 16 lowercase hex digits.
pub fn phash_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

/// The perceptual hash written by [`phash_hex`], if `text` is one.
pub fn phash_value(text: &str) -> Option<u64> {
    (text.len() == 16)
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
}

/// Why an image could not be stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// Stable class name: `http_404`, `timeout`, `not_an_image`, ... (see `download::FailureClass`).
    pub class: String,
    pub detail: String,
}

/// How far a URL list has been read into the state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportCheckpoint {
    /// Lines (records) read and committed.
    pub lines_done: u64,
    /// The whole list has been read.
    pub complete: bool,
    /// Size and modification time (seconds) of the file when it was read, to notice a new list.
    pub file_bytes: u64,
    pub file_modified: u64,
    /// URLs new to this job.
    pub added: u64,
    /// URLs already known (repeated in the list, or found before).
    pub duplicates: u64,
    /// Lines skipped, by reason.
    #[serde(default)]
    pub skipped: BTreeMap<String, u64>,
}

impl ImportCheckpoint {
    /// Counts a committed batch of `offered` URLs, `new` of them new to the job.
    pub fn count_batch(&mut self, offered: u64, new: u64) {
        self.added += new;
        self.duplicates += offered.saturating_sub(new);
    }
}

/// An image found by the crawl, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewImage {
    pub url: String,
    pub rule: String,
    pub attribute: String,
    pub metadata: BTreeMap<String, String>,
    /// The text a reader would take for it (alt, figcaption, the API item's caption, ...).
    pub caption: Option<String>,
    /// What its page says of its rights (licence, creator, ...), each value with its source.
    pub rights: Option<Rights>,
}

/// A link a `[[follow]]` rule found, to be crawled as a page of its level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLink {
    pub url: String,
    pub level: String,
    /// Links followed from the start page to reach it (1 for a start chain's page's links).
    pub depth: u32,
    /// Passed down to what the linked page yields.
    pub metadata: BTreeMap<String, String>,
    /// When the page last changed, as a sitemap's `<lastmod>` says.
    pub lastmod: Option<String>,
    /// Whether a refresh queues the link again when the job knows it already.
    pub revisit: Revisit,
}

/// Whether a refresh looks again at a page the job knows, reached through a link: a page is
/// queued again at most once per run, and only once done (a queued one is not queued twice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Revisit {
    /// A known page is left alone: a detail page, or any page outside a refresh.
    #[default]
    Never,
    /// Looked at again: a listing (a page of a level that leads to further pages), or a
    /// sitemap that says nothing of when it changed.
    Once,
    /// Looked at again when the `lastmod` it is listed with differs from the one kept: a page
    /// or sitemap a sitemap dates.
    IfModified,
}

/// A page of the frontier reached through a link: queued until it is done, then kept so the
/// same link found again is not queued twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// Its place in the link queue.
    pub seq: u64,
    /// The start URL of the chain it descends from.
    pub start: String,
    /// The page it was found on.
    pub found_on: String,
    pub level: String,
    pub depth: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// When the page last changed, as the sitemap that listed it says (`<lastmod>`, a W3C
    /// datetime as written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lastmod: Option<String>,
    /// The run that last queued it: the one that found it, or a refresh that looks at it once
    /// more (see [`Revisit`]); 0 for links queued before runs were numbered.
    #[serde(default, skip_serializing_if = "is_zero_run")]
    pub queued_by: u32,
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A value of a state table, checked after it is read: JSON that parses can still be damaged.
pub trait Record: serde::de::DeserializeOwned {
    /// Why the record cannot be right, if it cannot.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

impl Record for ChainCheckpoint {}
impl Record for PageRecord {}
impl Record for ImportCheckpoint {}
impl Record for LinkRecord {}
impl Record for RobotsRecord {}

impl Record for RunRecord {
    fn check(&self) -> Result<(), String> {
        if self.started == 0 {
            return Err("a run without the time it began".into());
        }
        Ok(())
    }
}

impl ImageRecord {
    /// Adds the rights its file carries (`embedded`: XMP, C2PA) to those its page published;
    /// where both say, the page's stay.
    pub fn add_embedded(&mut self, embedded: Rights) {
        if embedded.is_empty() {
            return;
        }
        let rights = self.rights.get_or_insert_with(Rights::new);
        for (field, value) in embedded {
            rights.entry(field).or_insert(value);
        }
    }

    /// Records a verified image's `fate`: its status, and the file it names (a duplicate's
    /// path is the earlier picture's; a stored one's is where it was placed).
    pub fn settle_stored(&mut self, mut file: StoredFile, fate: &ImageFate) {
        self.status = match fate.earlier_path() {
            None => ImageStatus::Stored,
            Some(path) => {
                file.path = path.to_owned();
                ImageStatus::Duplicate
            }
        };
        self.stored = Some(file);
        self.failure = None;
    }

    /// Records a download that failed, or an image that could not be placed.
    pub fn settle_failed(&mut self, failure: FailureRecord) {
        self.status = ImageStatus::Failed;
        self.failure = Some(failure);
    }
}

impl Record for ImageRecord {
    fn check(&self) -> Result<(), String> {
        match (self.status, &self.stored, &self.failure) {
            (ImageStatus::Stored | ImageStatus::Duplicate, None, _) => {
                Err("a stored image without its file".into())
            }
            (ImageStatus::Failed, _, None) => Err("a failed image without its failure".into()),
            (_, Some(file), _) => file.check(),
            _ => Ok(()),
        }
    }
}

impl StoredFile {
    /// A hash of 64 lowercase hex digits and a relative path that stays in the output folder.
    pub fn check(&self) -> Result<(), String> {
        let is_hex = |text: &str| {
            text.len() == 64
                && text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if let Some(bad) = std::iter::once(self.sha256.as_str())
            .chain(self.original.as_ref().map(|o| o.sha256.as_str()))
            .find(|text| !is_hex(text))
        {
            return Err(format!("`{bad}` is not a SHA-256"));
        }
        let inside = !self.path.is_empty()
            && !self.path.starts_with('/')
            && self
                .path
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..");
        if !inside {
            return Err(format!(
                "`{}` is not a path in the output folder",
                self.path
            ));
        }
        if let Some(phash) = self.phash.as_deref().filter(|p| phash_value(p).is_none()) {
            return Err(format!("`{phash}` is not a perceptual hash"));
        }
        Ok(())
    }
}

/// What is kept of a chain's page for a refresh to ask it again only if it changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageSeen {
    /// Its response's validators (none for a rendered page).
    pub validators: Validators,
    /// What came after it in its chain.
    pub next: Option<NextPage>,
}

/// How a page ended: what is stored for it.
#[derive(Debug, Clone, PartialEq)]
pub enum PageResult {
    /// Its images, and the links to queue.
    Done {
        images: Vec<NewImage>,
        links: Vec<NewLink>,
    },
    /// Rendered only in part: its images are stored all the same, while the page counts as
    /// failed (its links and next page wait for a complete render) and the next run retries it.
    Partial {
        images: Vec<NewImage>,
        error: FailureRecord,
    },
    /// Could not be had after retries; the next run retries it.
    Failed(FailureRecord),
}

impl PageResult {
    /// The images to store.
    pub fn images(&self) -> &[NewImage] {
        match self {
            PageResult::Done { images, .. } | PageResult::Partial { images, .. } => images,
            PageResult::Failed(_) => &[],
        }
    }

    /// The failure to report, for a page that did not end done.
    pub fn error(&self) -> Option<&FailureRecord> {
        match self {
            PageResult::Done { .. } => None,
            PageResult::Partial { error, .. } | PageResult::Failed(error) => Some(error),
        }
    }

    /// The state's record of the page, of the chain from `start`, numbered `number`, with what
    /// a refresh asks it again with (`seen`) when it is done.
    pub fn record_seen(
        &self,
        start: &str,
        number: i64,
        updated: u64,
        seen: PageSeen,
    ) -> PageRecord {
        let mut record = self.record(start, number, updated);
        if record.status == PageStatus::Done {
            record.validators = seen.validators;
            record.next = seen.next;
        }
        record
    }

    /// The state's record of the page, of the chain from `start`, numbered `number`.
    pub fn record(&self, start: &str, number: i64, updated: u64) -> PageRecord {
        let error = self.error();
        PageRecord {
            start: start.to_owned(),
            number,
            status: match error {
                None => PageStatus::Done,
                Some(_) => PageStatus::Failed,
            },
            images_found: self.images().len() as u64,
            error: error.map(|e| e.detail.clone()),
            class: error.map(|e| e.class.clone()),
            updated,
            validators: Validators::default(),
            next: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(number: i64) -> PagePosition {
        PagePosition {
            url: format!("http://127.0.0.1/g/{number}.html"),
            number,
            done: u64::try_from(number - 1).unwrap_or(0),
            cursor: None,
            after_id: None,
            offset: 0,
        }
    }

    #[test]
    fn a_page_done_moves_its_chain_on_or_ends_it_and_a_refresh_head_keeps_the_old_end() {
        let mut checkpoint = ChainCheckpoint {
            next: Some(position(1)),
            ..ChainCheckpoint::default()
        };
        checkpoint.advance(&position(1), 3, Some(NextPage::Fetch(position(2))));
        assert_eq!(checkpoint.next, Some(position(2)));
        assert_eq!((checkpoint.pages_done, checkpoint.images_found), (1, 3));
        assert_eq!(checkpoint.last, Some(position(1)));
        // No next named: the chain stays at the page its kind decides.
        checkpoint.advance(&position(2), 0, None);
        assert_eq!(checkpoint.next, Some(position(2)));
        assert_eq!(checkpoint.last, Some(position(2)));
        // A refresh's head walks pages done before: the old end stays.
        let mut head = ChainCheckpoint {
            incremental: true,
            last: Some(position(9)),
            tail: Some(position(9)),
            ..checkpoint.clone()
        };
        head.advance(&position(1), 0, Some(NextPage::Fetch(position(2))));
        assert_eq!(head.last, Some(position(9)));
        assert_eq!(head.tail, Some(position(9)));
        // A page naming the end ends the chain there, and a refresh has no tail left.
        head.advance(&position(2), 1, Some(NextPage::End(EndReason::NoNextLink)));
        assert_eq!(head.next, None);
        assert_eq!(head.end, Some(EndReason::NoNextLink));
        assert_eq!(head.tail, None);
        assert_eq!(head.images_found, 4);
    }

    fn seen(etag: Option<&str>, next: Option<NextPage>) -> PageSeen {
        PageSeen {
            validators: Validators::from_headers(etag.map(str::as_bytes), None),
            next,
        }
    }

    #[test]
    fn a_page_record_written_before_validators_reads_and_is_asked_plainly() {
        let old = r#"{"start":"http://127.0.0.1/g/1.html","number":2,"status":"done","images_found":3,"error":null,"updated":7}"#;
        let record: PageRecord = serde_json::from_str(old).unwrap();
        assert_eq!((record.validators.is_empty(), &record.next), (true, &None));
        assert_eq!(record.revisit(), None);
        // And a record with neither is written as it was.
        let written = serde_json::to_string(&record).unwrap();
        assert!(
            !written.contains("validators") && !written.contains("next"),
            "{written}"
        );
    }

    #[test]
    fn a_done_page_keeps_its_validators_and_next_page_and_is_asked_with_them() {
        let done = PageResult::Done {
            images: Vec::new(),
            links: Vec::new(),
        };
        let next = NextPage::Fetch(position(3));
        let record = done.record_seen("s", 2, 7, seen(Some("\"v1\""), Some(next.clone())));
        let read: PageRecord =
            serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(read, record);
        let (validators, stored) = read.revisit().expect("asked conditionally");
        assert_eq!(
            (validators.etag.as_deref(), stored),
            (Some("\"v1\""), &next)
        );

        // The chain's end is a next as good as a page.
        let end = NextPage::End(EndReason::NoNextLink);
        let record = done.record_seen("s", 2, 7, seen(Some("\"v1\""), Some(end.clone())));
        assert_eq!(record.revisit().map(|(_, n)| n), Some(&end));
    }

    #[test]
    fn a_page_is_asked_plainly_without_validators_without_its_next_or_when_it_failed() {
        let done = PageResult::Done {
            images: Vec::new(),
            links: Vec::new(),
        };
        let next = || Some(NextPage::Fetch(position(3)));
        let no_validators = done.record_seen("s", 2, 7, seen(None, next()));
        assert_eq!(no_validators.revisit(), None);
        let no_next = done.record_seen("s", 2, 7, seen(Some("\"v1\""), None));
        assert_eq!(no_next.revisit(), None);
        let failed = PageResult::Failed(FailureRecord {
            class: "http_503".into(),
            detail: "HTTP 503".into(),
        })
        .record_seen("s", 2, 7, seen(Some("\"v1\""), next()));
        assert_eq!((failed.validators.is_empty(), failed.next), (true, None));
    }
}
