//! `manifest.jsonl` and `failures.jsonl`, written from the state database.
//!
//! They are derived, never the source of truth: each run rewrites them from the image records
//! (streamed, so memory stays flat) into a temporary file that is renamed into place, so a crash
//! leaves the previous complete file, and the state decides what they say.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::original::OriginalJson;
use crate::state::{
    ImageRecord, ImageStatus, PageRecord, PageStatus, ShardRecord, State, StateError,
};

/// The manifest's file name in the output folder.
pub const MANIFEST: &str = "manifest.jsonl";
/// The failure list's file name in the output folder.
pub const FAILURES: &str = "failures.jsonl";
/// The folder, in the output folder, of the runs' lists of new images.
pub const RUNS_DIR: &str = "runs";

/// The list of the images run `number` stored or found duplicates first, relative to the
/// output folder: `runs/00002.jsonl`.
pub fn run_list_name(number: u32) -> String {
    format!("{RUNS_DIR}/{number:05}.jsonl")
}

/// [`run_list_name`] in output folder `out`.
pub fn run_list_path(out: &Path, number: u32) -> PathBuf {
    out.join(run_list_name(number))
}

/// What the export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    pub manifest_lines: u64,
    pub failure_lines: u64,
    /// Failed images by failure class (the stored files found missing are not among them).
    pub failure_classes: Vec<(String, u64)>,
    /// Stored images whose file is missing or has another size than recorded: listed as
    /// failures (class `missing`), not in the manifest.
    pub missing_files: u64,
    /// The run list written (`runs/NNNNN.jsonl`), for a job whose runs are numbered.
    pub run_list: Option<RunListed>,
}

/// What a run's list of new images says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunListed {
    pub number: u32,
    /// Lines: images stored, or found duplicates, for the first time by this run (or by runs
    /// before it that ended without writing their list).
    pub lines: u64,
    /// Images first found by this run, whatever became of them.
    pub found: u64,
}

/// Which images a run list holds: those first stored (or found duplicates) by a run in
/// `after + 1 ..= number`. `after` is the last run whose list was written, so the images of a
/// run killed before it wrote its own are in the next one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunWindow {
    pub number: u32,
    pub after: u32,
}

impl RunWindow {
    /// The window of run `number`, given every run (`listed`: its list is written).
    pub fn of(number: u32, runs: impl IntoIterator<Item = (u32, bool)>) -> Self {
        let after = runs
            .into_iter()
            .filter(|&(n, listed)| listed && n < number)
            .map(|(n, _)| n)
            .max()
            .unwrap_or(0);
        Self { number, after }
    }

    /// Whether the image `record` goes in the list.
    pub fn holds(&self, record: &ImageRecord) -> bool {
        matches!(record.status, ImageStatus::Stored | ImageStatus::Duplicate)
            && record.stored_run > self.after
            && record.stored_run <= self.number
    }
}

#[derive(Serialize)]
struct ManifestLine<'a> {
    url: &'a str,
    path: &'a str,
    sha256: &'a str,
    bytes: u64,
    content_type: &'a str,
    width: u32,
    height: u32,
    page: &'a str,
    rule: &'a str,
    attribute: &'a str,
    /// The same bytes were first stored under another URL; `path` is that file.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
    /// The perceptual hash, 16 hex digits (with near-duplicate flags on).
    #[serde(skip_serializing_if = "Option::is_none")]
    phash: Option<&'a str>,
    /// The sha256 of an image stored before whose perceptual hash is near this one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    near_duplicate_of: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    near_duplicate_path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    near_duplicate_distance: Option<u32>,
    /// The picture as downloaded, when the stored file is a resized copy (`[download.resize]`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    original: Option<OriginalJson<'a>>,
    /// The text a reader would take for the image: img2dataset's `caption`.
    #[serde(skip_serializing_if = "Option::is_none")]
    caption: Option<&'a str>,
    /// What the image's page says of its rights: field → value and source.
    #[serde(skip_serializing_if = "Option::is_none")]
    rights: Option<&'a crate::extract::rights::Rights>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    metadata: &'a BTreeMap<String, String>,
    /// The run that first found it (0: before runs were numbered, or by workers over Redis).
    run: u32,
    /// When that run began, RFC 3339 UTC; `null` for run 0.
    found_at: Option<String>,
}

/// When run `run` began, as the manifest says it (see [`run_time`]); `None` for run 0 (or a run
/// `runs`, run number → seconds since the epoch, does not know).
pub fn found_at(runs: &BTreeMap<u32, u64>, run: u32) -> Option<String> {
    runs.get(&run).map(|started| run_time(*started))
}

/// A run's time, `seconds` since the epoch, as shown: RFC 3339 UTC.
pub fn run_time(seconds: u64) -> String {
    crate::replay::iso_8601(std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds))
}

#[derive(Serialize)]
struct FailureLine<'a> {
    /// `image` or `page`.
    kind: &'static str,
    url: &'a str,
    class: &'a str,
    detail: &'a str,
    attempts: u32,
    page: &'a str,
}

/// Where the records of a job are read from for the export: the state database of one
/// process, or the Redis of a job's workers (`cluster`).
pub trait JobRecords {
    fn for_each_image(
        &self,
        visit: impl FnMut(&str, &ImageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError>;
    fn for_each_page(
        &self,
        visit: impl FnMut(&str, &PageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError>;

    /// The WebDataset shards the job recorded (none for a job that stores image files).
    fn shards(&self) -> Result<Vec<ShardRecord>, StateError> {
        Ok(Vec::new())
    }

    /// When each numbered run began (seconds since the epoch); none for workers over Redis.
    fn run_starts(&self) -> Result<BTreeMap<u32, u64>, StateError> {
        Ok(BTreeMap::new())
    }

    /// The run list to write with the manifest, if the job numbers its runs.
    fn run_window(&self) -> Result<Option<RunWindow>, StateError> {
        Ok(None)
    }
}

impl JobRecords for State {
    fn for_each_image(
        &self,
        visit: impl FnMut(&str, &ImageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        State::for_each_image(self, visit)
    }

    fn for_each_page(
        &self,
        visit: impl FnMut(&str, &PageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        State::for_each_page(self, visit)
    }

    fn shards(&self) -> Result<Vec<ShardRecord>, StateError> {
        State::shards(self)
    }

    fn run_starts(&self) -> Result<BTreeMap<u32, u64>, StateError> {
        Ok(self
            .runs()?
            .into_iter()
            .map(|(n, run)| (n, run.started))
            .collect())
    }

    fn run_window(&self) -> Result<Option<RunWindow>, StateError> {
        let Some((number, _)) = self.current_run()? else {
            return Ok(None);
        };
        let runs = self.runs()?;
        Ok(Some(RunWindow::of(
            number,
            runs.iter().map(|(n, run)| (*n, run.listed)),
        )))
    }
}

/// Rewrites `manifest.jsonl` and `failures.jsonl` in `out` from `state`, and writes the
/// current run's list of new images (`runs/NNNNN.jsonl`, manifest lines) when it numbers runs.
pub fn export(state: &impl JobRecords, out: &Path) -> Result<ExportSummary, StateError> {
    export_checking(state, out, true)
}

/// [`export`], looking for the stored files in `out` only when `files_here` (not when they are
/// objects of a bucket: `scrape verify` checks those).
pub fn export_checking(
    state: &impl JobRecords,
    out: &Path,
    files_here: bool,
) -> Result<ExportSummary, StateError> {
    let mut manifest = TempFile::create(out.join(MANIFEST))?;
    let mut failures = TempFile::create(out.join(FAILURES))?;
    let mut summary = ExportSummary::default();
    let starts = state.run_starts()?;
    let window = state.run_window()?;
    let mut run_list = match window {
        Some(window) => {
            let dir = out.join(RUNS_DIR);
            std::fs::create_dir_all(&dir).map_err(|source| StateError::Io { path: dir, source })?;
            let listed = RunListed {
                number: window.number,
                ..RunListed::default()
            };
            Some((
                window,
                TempFile::create(run_list_path(out, window.number))?,
                listed,
            ))
        }
        None => None,
    };
    let shards = state.shards()?;
    let mut files = FileCheck::new(out, &shards);
    files.here = files_here;
    let mut classes = BTreeMap::<String, u64>::new();
    state.for_each_image(|url, record| {
        if let Some((window, _, listed)) = &mut run_list
            && record.run == window.number
        {
            listed.found += 1;
        }
        match (record.status, &record.stored, &record.failure) {
            (ImageStatus::Stored | ImageStatus::Duplicate, Some(file), _) => {
                if let Some(problem) = files.problem(&file.path, file.expected_bytes()) {
                    failures.line(&FailureLine {
                        kind: "image",
                        url,
                        class: "missing",
                        detail: &problem,
                        attempts: record.attempts,
                        page: &record.page,
                    })?;
                    summary.failure_lines += 1;
                    summary.missing_files += 1;
                    return Ok(());
                }
                let line = ManifestLine {
                    url,
                    path: &file.path,
                    sha256: &file.sha256,
                    bytes: file.bytes,
                    content_type: &file.content_type,
                    width: file.width,
                    height: file.height,
                    page: &record.page,
                    rule: &record.rule,
                    attribute: &record.attribute,
                    duplicate: record.status == ImageStatus::Duplicate,
                    phash: file.phash.as_deref(),
                    near_duplicate_of: file.near_duplicate_of.as_ref().map(|n| n.sha256.as_str()),
                    near_duplicate_path: file.near_duplicate_of.as_ref().map(|n| n.path.as_str()),
                    near_duplicate_distance: file.near_duplicate_of.as_ref().map(|n| n.distance),
                    original: OriginalJson::of(file.original.as_deref()),
                    caption: record.caption.as_deref(),
                    rights: record.rights.as_ref(),
                    metadata: &record.metadata,
                    run: record.run,
                    found_at: found_at(&starts, record.run),
                };
                manifest.line(&line)?;
                summary.manifest_lines += 1;
                if let Some((window, list, listed)) = &mut run_list
                    && window.holds(record)
                {
                    list.line(&line)?;
                    listed.lines += 1;
                }
            }
            (ImageStatus::Failed, _, Some(failure)) => {
                *classes.entry(failure.class.clone()).or_default() += 1;
                failures.line(&FailureLine {
                    kind: "image",
                    url,
                    class: &failure.class,
                    detail: &failure.detail,
                    attempts: record.attempts,
                    page: &record.page,
                })?;
                summary.failure_lines += 1;
            }
            _ => {}
        }
        Ok(())
    })?;
    state.for_each_page(|url, record| {
        if record.status == PageStatus::Failed {
            failures.line(&FailureLine {
                kind: "page",
                url,
                class: record.failure_class(),
                detail: record.error.as_deref().unwrap_or_default(),
                attempts: 1,
                page: url,
            })?;
            summary.failure_lines += 1;
        }
        Ok(())
    })?;
    manifest.commit()?;
    failures.commit()?;
    if let Some((_, list, listed)) = run_list {
        list.commit()?;
        summary.run_list = Some(listed);
    }
    summary.failure_classes = classes.into_iter().collect();
    Ok(summary)
}

/// What is wrong with the stored file `path` (relative to `out`) that should have `bytes`
/// bytes (any size for `None`), if anything: it is gone, or not that size. Hashes are checked
/// by `scrape verify`.
pub fn file_problem(out: &Path, path: &str, bytes: Option<u64>) -> Option<String> {
    FileCheck::new(out, &[]).problem(path, bytes)
}

/// A shard as [`FileCheck`] found it.
enum ShardOnDisk {
    Gone,
    /// As long as its record says (hashes are `scrape verify`'s).
    Whole,
    /// Shorter (or, finished, longer) than its record says: the members still whole, by name
    /// and size, or why none can be read.
    Damaged {
        len: u64,
        recorded: u64,
        members: Result<HashMap<String, u64>, String>,
    },
}

/// [`file_problem`] for many files: each shard is looked up once, with one `stat` against the
/// length its record says, and read only when that differs.
struct FileCheck<'a> {
    out: &'a Path,
    /// Shard name → its record.
    records: HashMap<String, &'a ShardRecord>,
    /// Shard name → what was found.
    shards: HashMap<String, ShardOnDisk>,
    /// Whether the stored files are in `out` at all.
    here: bool,
}

impl<'a> FileCheck<'a> {
    fn new(out: &'a Path, records: &'a [ShardRecord]) -> Self {
        Self {
            out,
            records: records
                .iter()
                .map(|r| (super::shards::shard_name(r.shard), r))
                .collect(),
            shards: HashMap::new(),
            here: true,
        }
    }

    fn problem(&mut self, path: &str, bytes: Option<u64>) -> Option<String> {
        if !self.here {
            return None;
        }
        let out = self.out;
        if let Some((shard, member)) = super::shards::member_of(path) {
            let found = match self.shards.get(shard) {
                Some(found) => found,
                None => {
                    let found = look_at_shard(out, shard, self.records.get(shard).copied());
                    self.shards.entry(shard.to_owned()).or_insert(found)
                }
            };
            return match found {
                ShardOnDisk::Gone => {
                    Some(format!("shard `{shard}` of stored sample `{path}` is gone"))
                }
                ShardOnDisk::Whole => None,
                ShardOnDisk::Damaged {
                    len,
                    recorded,
                    members,
                } => {
                    let whole = match members {
                        Ok(members) => members
                            .get(member)
                            .is_some_and(|size| bytes.is_none_or(|b| *size == b)),
                        Err(_) => false,
                    };
                    (!whole).then(|| {
                        format!(
                            "stored sample `{path}` is lost: shard `{shard}` has {len} bytes, not {recorded}"
                        )
                    })
                }
            };
        }
        file_on_disk_problem(out, path, bytes)
    }
}

/// Shard `shard` in `out` against its record (when there is one).
fn look_at_shard(out: &Path, shard: &str, record: Option<&ShardRecord>) -> ShardOnDisk {
    let Some(file) = super::shards::shard_file(out, shard) else {
        return ShardOnDisk::Gone;
    };
    let Some(record) = record else {
        return ShardOnDisk::Whole;
    };
    let len = std::fs::metadata(&file).map_or(0, |m| m.len());
    // The open shard may hold an uncommitted batch past its record; a finished one is exact.
    let damaged = if record.finished {
        len != record.tar_bytes
    } else {
        len < record.tar_bytes
    };
    if !damaged {
        return ShardOnDisk::Whole;
    }
    ShardOnDisk::Damaged {
        len,
        recorded: record.tar_bytes,
        members: super::shards::whole_members(&file).map_err(|e| e.to_string()),
    }
}

fn file_on_disk_problem(out: &Path, path: &str, bytes: Option<u64>) -> Option<String> {
    match std::fs::metadata(out.join(path)) {
        Ok(meta) if meta.is_file() && bytes.is_none_or(|b| meta.len() == b) => None,
        Ok(meta) if meta.is_file() => Some(format!(
            "stored file `{path}` has {} bytes, not {}",
            meta.len(),
            bytes.unwrap_or_default()
        )),
        Ok(_) => Some(format!("stored file `{path}` is not a file")),
        Err(e) => Some(format!("stored file `{path}` cannot be read: {e}")),
    }
}

/// A file written under a temporary name and renamed over the real one when complete.
struct TempFile {
    target: PathBuf,
    temp: PathBuf,
    writer: BufWriter<std::fs::File>,
}

impl TempFile {
    fn create(target: PathBuf) -> Result<Self, StateError> {
        let temp = target.with_extension("jsonl.tmp");
        let file = std::fs::File::create(&temp).map_err(|source| StateError::Io {
            path: temp.clone(),
            source,
        })?;
        Ok(Self {
            target,
            temp,
            writer: BufWriter::new(file),
        })
    }

    fn line(&mut self, value: &impl Serialize) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: self.temp.clone(),
            source,
        };
        serde_json::to_writer(&mut self.writer, value).map_err(|e| io(e.into()))?;
        self.writer.write_all(b"\n").map_err(io)
    }

    fn commit(self) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: self.temp.clone(),
            source,
        };
        let file = self.writer.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&self.temp, &self.target).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(status: ImageStatus, stored_run: u32) -> ImageRecord {
        ImageRecord {
            seq: 0,
            page: "p".into(),
            rule: "r".into(),
            attribute: "src".into(),
            metadata: BTreeMap::new(),
            caption: None,
            rights: None,
            status,
            attempts: 1,
            stored: None,
            failure: None,
            run: 1,
            stored_run,
            validators: Default::default(),
            recheck: false,
        }
    }

    #[test]
    fn a_run_list_holds_what_was_stored_since_the_last_list_written() {
        // Run 3 was killed before it wrote its list: run 4's holds its images too.
        let window = RunWindow::of(4, [(1, true), (2, true), (3, false), (4, false)]);
        assert_eq!(
            window,
            RunWindow {
                number: 4,
                after: 2
            }
        );
        let holds = |status, run| window.holds(&image(status, run));
        assert!(holds(ImageStatus::Stored, 3));
        assert!(holds(ImageStatus::Duplicate, 4));
        assert!(!holds(ImageStatus::Stored, 2), "in run 2's list");
        assert!(
            !holds(ImageStatus::Stored, 0),
            "stored before runs were numbered"
        );
        assert!(!holds(ImageStatus::Pending, 0));
        // A list written again for the same run (a later export) holds the same images.
        let again = RunWindow::of(4, [(1, true), (2, true), (3, false), (4, true)]);
        assert_eq!(again, window);
        assert_eq!(RunWindow::of(1, []).after, 0);
    }

    #[test]
    fn found_at_is_the_run_start_in_utc_and_nothing_for_run_0() {
        let runs = BTreeMap::from([(1, 1_700_000_000)]);
        assert_eq!(
            found_at(&runs, 1).as_deref(),
            Some("2023-11-14T22:13:20.000Z")
        );
        assert_eq!(found_at(&runs, 0), None);
        assert_eq!(run_list_name(2), "runs/00002.jsonl");
    }
}
