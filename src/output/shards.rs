//! WebDataset output: verified images packed into tar shards of `shard_size` samples, each
//! sample a `{key}.{ext}` member (the bytes as downloaded), a `{key}.json` member (url,
//! sha256, size, page, caption, metadata) and, for an image with a caption, a `{key}.txt`
//! member holding it (as img2dataset writes them), each shard with a JSON-lines index `NNNNN.jsonl` of its
//! samples, as img2dataset lays them out (`webdataset` and img2dataset readers load them).
//!
//! [`Shards`] is the state writer's [`Placement`]: the writer gives each sample its key and its
//! place in the open shard, and a thread of its own (the appender) writes it there, and ends and
//! syncs a full shard, while the writer goes on with the batch's records; the batch is
//! committed only once the appender is done with it. The open shard is `NNNNN.tar.tmp` (and
//! `NNNNN.jsonl.tmp`): its committed length is recorded in `shards_v1` with every batch that
//! appends to it, so after a crash the rerun cuts off what no commit recorded (those images are
//! still pending and are fetched again) and goes on appending. A full shard gets its
//! end-of-archive blocks, is synced and recorded as finished; only after that commit is it
//! renamed to `NNNNN.tar`, so a name without `.tmp` always holds a complete tar, and its
//! images are never fetched again.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{IoSlice, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::bucket::ShardPublisher;
use super::original::OriginalJson;
use crate::state::{Held, Payload, Placement, Sample, ShardRecord, State, StateError, StoredFile};

/// The suffix of a shard being rewritten without damaged samples, until it is renamed over.
const REWRITE: &str = ".rewrite";

/// The tar's end: two zero blocks.
pub(super) const END_OF_ARCHIVE: [u8; 1024] = [0; 1024];

/// Bytes appended to the open shard after which a background thread starts writing them to disk,
/// so closing the shard (synced before it is recorded as finished) waits for its tail only, not
/// for hundreds of MB while every download waits for the writer.
const FLUSH_EVERY_BYTES: u64 = 32 * 1024 * 1024;

/// Tar shards in the output folder.
pub struct Shards {
    out: PathBuf,
    shard_size: u64,
    open: Option<OpenShard>,
    /// The number the next shard gets.
    next: u64,
    /// Records to commit with the current batch.
    changed: Vec<ShardRecord>,
    /// Shards finished in the current batch, renamed once it is committed.
    finished: Vec<u64>,
    /// Writes the samples placed, on a thread of its own.
    appender: Appender,
    /// Puts finished shards into a bucket (`--out s3://...`), once renamed.
    publish: Option<ShardPublisher>,
    /// Finished shards a run before this one did not put into the bucket yet.
    unpublished: Vec<u64>,
    /// The job placed its last image: the shards being put are waited for once committed.
    sealed: bool,
}

/// The shard being appended to.
pub(super) struct OpenShard {
    pub(super) record: ShardRecord,
    /// Appended to since its record was last handed to the writer.
    dirty: bool,
    pub(super) files: Arc<ShardFiles>,
    /// Bytes appended since the last background flush started.
    unflushed: u64,
    /// The background flush in progress, if any (see [`FLUSH_EVERY_BYTES`]).
    flushing: Option<std::thread::JoinHandle<()>>,
}

/// The open shard's two files, shared with the thread that appends to them.
pub(super) struct ShardFiles {
    pub(super) tar: File,
    pub(super) index: File,
    pub(super) tar_path: PathBuf,
    pub(super) index_path: PathBuf,
}

impl ShardFiles {
    /// Ends the tar at `end` and syncs both files.
    pub(super) fn finish(&self, end: u64) -> Result<(), (&Path, std::io::Error)> {
        let tar = self
            .tar
            .write_all_at(&END_OF_ARCHIVE, end)
            .and_then(|()| self.tar.sync_all());
        tar.map_err(|e| (self.tar_path.as_path(), e))?;
        self.index
            .sync_all()
            .map_err(|e| (self.index_path.as_path(), e))
    }
}

/// The `{key}.json` member of a sample, and its line in the shard's index.
#[derive(Serialize)]
struct SampleJson<'a> {
    key: &'a str,
    url: &'a str,
    sha256: &'a str,
    bytes: u64,
    content_type: &'a str,
    width: u32,
    height: u32,
    page: &'a str,
    /// The picture as downloaded, when the member is a resized copy (`[download.resize]`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    original: Option<OriginalJson<'a>>,
    /// The caption, also the sample's `{key}.txt` member.
    #[serde(skip_serializing_if = "Option::is_none")]
    caption: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rights: Option<&'a crate::extract::rights::Rights>,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    metadata: &'a std::collections::BTreeMap<String, String>,
}

impl Shards {
    /// The shards of the job in `out`, as `state` recorded them: finished shards whose rename a
    /// crash interrupted get their final names, the open one is cut to its committed length,
    /// and shard files no record mentions (a batch never committed, an earlier `--fresh` run)
    /// are removed.
    /// Into a bucket (`publish`), a finished shard is put there after its rename and removed
    /// from `out`; those a crash left in `out` are put after the first commit.
    pub fn open(
        out: &Path,
        state: &State,
        shard_size: u64,
        publish: Option<ShardPublisher>,
    ) -> Result<Self, StateError> {
        let records = state.shards()?;
        let known: HashMap<u64, &ShardRecord> = records.iter().map(|r| (r.shard, r)).collect();
        remove_unrecorded(out, &known)?;
        let mut open = None;
        let mut unpublished = Vec::new();
        for record in &records {
            if record.finished {
                let tar = [
                    tmp_path(out, record.shard, "tar"),
                    final_path(out, record.shard, "tar"),
                ];
                if publish.is_some() && !tar.iter().any(|t| t.exists()) {
                    // Put into the bucket: only its index may be left, if a kill came first.
                    let index = final_path(out, record.shard, "jsonl");
                    let _ = std::fs::remove_file(index);
                    continue;
                }
                finish_rename(out, record.shard)?;
                if publish.is_some() {
                    unpublished.push(record.shard);
                }
            } else {
                open = Some(OpenShard::reopen(out, record.clone())?);
            }
        }
        let next = records.iter().map(|r| r.shard + 1).max().unwrap_or(0);
        Ok(Self {
            out: out.to_owned(),
            shard_size,
            open,
            next,
            changed: Vec::new(),
            finished: Vec::new(),
            appender: Appender::start()?,
            publish,
            unpublished,
            sealed: false,
        })
    }

    /// The shard to append to, opening a new one when none is.
    fn open_shard(&mut self) -> Result<&mut OpenShard, StateError> {
        if self.open.is_none() {
            let record = ShardRecord {
                shard: self.next,
                samples: 0,
                tar_bytes: 0,
                index_bytes: 0,
                finished: false,
            };
            self.next += 1;
            self.open = Some(OpenShard::create(&self.out, record)?);
        }
        // Invariant: set just above when it was not.
        Ok(self.open.as_mut().expect("a shard is open"))
    }

    /// Closes the open shard if it is full.
    fn finish_if_full(&mut self) -> Result<(), StateError> {
        match &self.open {
            Some(shard) if shard.record.samples >= self.shard_size => self.finish(),
            _ => Ok(()),
        }
    }

    /// Closes the open shard: its end blocks are written and it is synced by the appender,
    /// before the batch that records it as finished is committed (it is renamed after).
    fn finish(&mut self) -> Result<(), StateError> {
        let Some(mut shard) = self.open.take() else {
            return Ok(());
        };
        self.appender
            .finish(Arc::clone(&shard.files), shard.record.tar_bytes)?;
        shard.record.tar_bytes += END_OF_ARCHIVE.len() as u64;
        shard.record.finished = true;
        self.finished.push(shard.record.shard);
        self.changed.push(shard.record);
        Ok(())
    }
}

impl Placement for Shards {
    fn place(
        &mut self,
        body: Payload,
        file: &mut StoredFile,
        sample: Sample<'_>,
    ) -> Result<(), StateError> {
        let body = match body {
            Payload::Memory(held) => held,
            Payload::Part(part) => {
                let bytes = std::fs::read(&part).map_err(io_error(&part));
                let _ = std::fs::remove_file(&part);
                Held {
                    bytes: bytes?.into(),
                    permit: None,
                }
            }
        };
        let shard_size = self.shard_size;
        let shard = self.open_shard()?;
        let append = shard.place(body, file, sample, shard_size);
        shard.flush_in_background();
        self.appender.send(append)?;
        self.finish_if_full()
    }

    fn take_records(&mut self) -> Result<Vec<ShardRecord>, StateError> {
        self.appender.wait()?;
        if let Some(shard) = self.open.as_mut().filter(|s| s.dirty) {
            shard.dirty = false;
            self.changed.push(shard.record.clone());
        }
        Ok(std::mem::take(&mut self.changed))
    }

    fn seal(&mut self) -> Result<(), StateError> {
        self.sealed = true;
        match &self.open {
            Some(shard) if shard.record.samples > 0 => self.finish(),
            _ => Ok(()),
        }
    }

    fn committed(&mut self) -> Result<(), StateError> {
        let finished = std::mem::take(&mut self.finished);
        for &shard in &finished {
            finish_rename(&self.out, shard)?;
        }
        if let Some(publish) = &mut self.publish {
            for shard in std::mem::take(&mut self.unpublished)
                .into_iter()
                .chain(finished)
            {
                let names = ["jsonl", "tar"].map(|ext| format!("{shard:05}.{ext}"));
                publish.publish(&self.out, &names)?;
            }
            // A job that is done ends with every shard in the bucket; an interrupted one
            // leaves those not yet put in the folder, for the rerun.
            if self.sealed {
                publish.wait()?;
            }
        }
        Ok(())
    }
}

impl OpenShard {
    pub(super) fn create(out: &Path, record: ShardRecord) -> Result<Self, StateError> {
        let open = |path: PathBuf| {
            File::options()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&path)
                .map_err(io_error(&path))
        };
        let (tar_path, index_path) = (
            tmp_path(out, record.shard, "tar"),
            tmp_path(out, record.shard, "jsonl"),
        );
        Ok(Self {
            files: Arc::new(ShardFiles {
                tar: open(tar_path.clone())?,
                index: open(index_path.clone())?,
                tar_path,
                index_path,
            }),
            record,
            dirty: false,
            unflushed: 0,
            flushing: None,
        })
    }

    /// The open shard of an earlier run, cut to what was committed.
    pub(super) fn reopen(out: &Path, record: ShardRecord) -> Result<Self, StateError> {
        let open = |path: PathBuf, committed: u64| -> Result<File, StateError> {
            let file = File::options()
                .write(true)
                .open(&path)
                .map_err(io_error(&path))?;
            let len = file.metadata().map_err(io_error(&path))?.len();
            if len < committed {
                return Err(StateError::Io {
                    path,
                    source: std::io::Error::other(format!(
                        "the open shard has {len} bytes, but {committed} were committed; run with --fresh to start over"
                    )),
                });
            }
            file.set_len(committed).map_err(io_error(&path))?;
            Ok(file)
        };
        let (tar_path, index_path) = (
            tmp_path(out, record.shard, "tar"),
            tmp_path(out, record.shard, "jsonl"),
        );
        Ok(Self {
            files: Arc::new(ShardFiles {
                tar: open(tar_path.clone(), record.tar_bytes)?,
                index: open(index_path.clone(), record.index_bytes)?,
                tar_path,
                index_path,
            }),
            record,
            dirty: false,
            unflushed: 0,
            flushing: None,
        })
    }

    /// Gives the verified `body` of `file` the next place in the shard as a sample (its two
    /// members and its index line), pointing `file.path` at its member: what is to be written
    /// there, with the record moved past it.
    pub(super) fn place(
        &mut self,
        body: Held,
        file: &mut StoredFile,
        sample: Sample<'_>,
        shard_size: u64,
    ) -> Append {
        let number = self.record.shard;
        let key = sample_key(number, self.record.samples, shard_size);
        let ext = file.path.rsplit_once('.').map_or("bin", |(_, ext)| ext);
        let member = format!("{key}.{ext}");
        let json = SampleJson {
            key: &key,
            url: sample.url,
            sha256: &file.sha256,
            bytes: file.bytes,
            content_type: &file.content_type,
            width: file.width,
            height: file.height,
            page: &sample.record.page,
            original: OriginalJson::of(file.original.as_deref()),
            caption: sample.record.caption.as_deref(),
            rights: sample.record.rights.as_ref(),
            metadata: &sample.record.metadata,
        };
        // Invariant: strings and numbers; serializing cannot fail.
        let mut line = serde_json::to_vec(&json).expect("a sample serializes");
        line.push(b'\n');
        let caption = sample
            .record
            .caption
            .as_ref()
            .map(|c| c.as_bytes().to_vec());
        let mut headers = vec![
            member_header(&member, body.bytes.len()),
            member_header(&format!("{key}.json"), line.len() - 1),
        ];
        if let Some(caption) = &caption {
            headers.push(member_header(&format!("{key}.txt"), caption.len()));
        }
        file.path = format!("{}/{member}", shard_name(number));
        self.reserve(headers, body, line, caption)
    }

    /// Gives a sample the next place in the shard: what the appender writes there, with the
    /// record moved past it.
    fn reserve(
        &mut self,
        headers: Vec<tar::Header>,
        body: Held,
        line: Vec<u8>,
        caption: Option<Vec<u8>>,
    ) -> Append {
        let append = Append {
            files: Arc::clone(&self.files),
            tar_at: self.record.tar_bytes,
            index_at: self.record.index_bytes,
            headers,
            body,
            line,
            caption,
        };
        let tar_len = append.tar_len();
        self.record.tar_bytes += tar_len;
        self.record.index_bytes += append.line.len() as u64;
        self.record.samples += 1;
        self.dirty = true;
        self.unflushed += tar_len;
        append
    }

    /// Once [`FLUSH_EVERY_BYTES`] were appended and no flush is running, starts one on a thread
    /// of its own. It only moves writing to disk earlier: durability still comes from the sync
    /// in [`Shards::finish`], so a flush that fails (or cannot start) changes nothing.
    fn flush_in_background(&mut self) {
        if self.unflushed < FLUSH_EVERY_BYTES
            || self.flushing.as_ref().is_some_and(|f| !f.is_finished())
        {
            return;
        }
        let Ok(tar) = self.files.tar.try_clone() else {
            return;
        };
        self.unflushed = 0;
        self.flushing = std::thread::Builder::new()
            .name("shard-flush".into())
            .spawn(move || {
                let _ = tar.sync_data();
            })
            .ok();
    }
}

/// A sample to append: its tar members (the image, `{key}.json` and, with a caption,
/// `{key}.txt`) and its index line, at the offsets the shard's record gave them.
pub(super) struct Append {
    files: Arc<ShardFiles>,
    tar_at: u64,
    index_at: u64,
    /// The image's header, the `{key}.json` member's and the `{key}.txt` member's, if any.
    headers: Vec<tar::Header>,
    /// The image, with its share of the memory budget until it is written.
    body: Held,
    /// The index line; the `{key}.json` member is the line without its newline.
    line: Vec<u8>,
    /// The `{key}.txt` member: the caption, as img2dataset writes it.
    caption: Option<Vec<u8>>,
}

impl Append {
    /// The members' contents, in the order of their headers.
    fn contents(&self) -> impl Iterator<Item = &[u8]> {
        let json = &self.line[..self.line.len() - 1];
        [&self.body.bytes[..], json]
            .into_iter()
            .chain(self.caption.as_deref())
    }

    fn tar_len(&self) -> u64 {
        self.contents()
            .map(|c| (512 + c.len() + padding(c.len()).len()) as u64)
            .sum()
    }

    /// Writes the sample where it was given its place; an error names the file.
    pub(super) fn write(&self) -> Result<(), (&Path, std::io::Error)> {
        // The members as slices of what is already in memory: the image is not copied.
        let mut tar: Vec<IoSlice<'_>> = self
            .headers
            .iter()
            .zip(self.contents())
            .flat_map(|(header, content)| {
                [
                    IoSlice::new(header.as_bytes()),
                    IoSlice::new(content),
                    IoSlice::new(padding(content.len())),
                ]
            })
            .collect();
        let files = &self.files;
        write_all_vectored_at(&files.tar, &mut tar, self.tar_at)
            .map_err(|e| (files.tar_path.as_path(), e))?;
        files
            .index
            .write_all_at(&self.line, self.index_at)
            .map_err(|e| (files.index_path.as_path(), e))
    }
}

enum AppendJob {
    Sample(Box<Append>),
    /// The shard is full or the job is done: its end-of-archive blocks go at `end`, then both
    /// files are synced.
    Finish {
        files: Arc<ShardFiles>,
        end: u64,
    },
    /// Answered once every sample sent before it is written, with the first write that failed
    /// if one did.
    Wait(mpsc::SyncSender<Result<(), StateError>>),
}

/// The thread that writes samples into their shard while the state writer goes on with the
/// batch's records: a batch is committed only after [`Appender::wait`], so every committed
/// sample is in its shard. A failed write fails that batch and every later one: nothing more is
/// written or committed, the run stops, and the rerun cuts the open shard to its committed
/// length and fetches the images after it again.
struct Appender {
    jobs: mpsc::Sender<AppendJob>,
}

impl Appender {
    fn start() -> Result<Self, StateError> {
        let (jobs, queue) = mpsc::channel::<AppendJob>();
        std::thread::Builder::new()
            .name("shard-append".into())
            .spawn(move || {
                let mut failed: Option<(PathBuf, std::io::Error)> = None;
                for job in queue {
                    match job {
                        AppendJob::Sample(append) => {
                            if failed.is_none()
                                && let Err((path, e)) = append.write()
                            {
                                failed = Some((path.to_owned(), e));
                            }
                        }
                        AppendJob::Finish { files, end } => {
                            if failed.is_none()
                                && let Err((path, e)) = files.finish(end)
                            {
                                failed = Some((path.to_owned(), e));
                            }
                        }
                        AppendJob::Wait(reply) => {
                            let answer = match &failed {
                                None => Ok(()),
                                Some((path, e)) => Err(StateError::Io {
                                    path: path.clone(),
                                    source: e.raw_os_error().map_or_else(
                                        || std::io::Error::new(e.kind(), e.to_string()),
                                        std::io::Error::from_raw_os_error,
                                    ),
                                }),
                            };
                            let _ = reply.send(answer);
                        }
                    }
                }
            })
            .map_err(|source| StateError::Io {
                path: "shard-append thread".into(),
                source,
            })?;
        Ok(Self { jobs })
    }

    fn send(&self, append: Append) -> Result<(), StateError> {
        self.jobs
            .send(AppendJob::Sample(Box::new(append)))
            .map_err(|_| StateError::WriterGone)
    }

    fn finish(&self, files: Arc<ShardFiles>, end: u64) -> Result<(), StateError> {
        self.jobs
            .send(AppendJob::Finish { files, end })
            .map_err(|_| StateError::WriterGone)
    }

    /// Waits until every sample sent is written (and every shard finished is synced).
    fn wait(&self) -> Result<(), StateError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.jobs
            .send(AppendJob::Wait(reply))
            .map_err(|_| StateError::WriterGone)?;
        answer.recv().map_err(|_| StateError::WriterGone)?
    }
}

/// A sample's key: the shard's number and the sample's place in it, as img2dataset writes them
/// (`000000012` is sample 12 of shard 0 with shards of 10,000).
fn sample_key(shard: u64, index: u64, shard_size: u64) -> String {
    let width = (shard_size.saturating_sub(1))
        .max(1)
        .to_string()
        .len()
        .max(4);
    format!("{shard:05}{index:0width$}")
}

/// The final file name of shard `n`.
pub fn shard_name(n: u64) -> String {
    format!("{n:05}.tar")
}

pub(super) fn tmp_path(out: &Path, shard: u64, ext: &str) -> PathBuf {
    out.join(format!("{shard:05}.{ext}.tmp"))
}

fn final_path(out: &Path, shard: u64, ext: &str) -> PathBuf {
    out.join(format!("{shard:05}.{ext}"))
}

/// Gives finished shard `shard` its final names, index first, so a visible tar has its index.
/// Done already (a rerun) is fine.
pub(super) fn finish_rename(out: &Path, shard: u64) -> Result<(), StateError> {
    for ext in ["jsonl", "tar"] {
        let (tmp, target) = (tmp_path(out, shard, ext), final_path(out, shard, ext));
        match std::fs::rename(&tmp, &target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && target.exists() => {}
            Err(source) => return Err(StateError::Io { path: tmp, source }),
        }
    }
    Ok(())
}

/// Removes the shard files (`NNNNN.tar`, `.jsonl`, and their `.tmp`) in `out` that no record
/// mentions, and any rewrite left half-done.
fn remove_unrecorded(out: &Path, known: &HashMap<u64, &ShardRecord>) -> Result<(), StateError> {
    let entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StateError::Io {
                path: out.to_owned(),
                source,
            });
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        // A rewrite (`scrape verify --requeue`) that stopped before its rename.
        if name.to_str().is_some_and(|n| n.ends_with(REWRITE)) {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(io_error(&path))?;
            continue;
        }
        let Some(shard) = name.to_str().and_then(shard_of_file) else {
            continue;
        };
        if !known.contains_key(&shard) {
            let path = entry.path();
            std::fs::remove_file(&path).map_err(io_error(&path))?;
        }
    }
    Ok(())
}

/// The shard a file name of ours belongs to: `NNNNN.tar`, `NNNNN.jsonl`, either with `.tmp`.
fn shard_of_file(name: &str) -> Option<u64> {
    let name = name.strip_suffix(".tmp").unwrap_or(name);
    let (number, ext) = name.split_once('.')?;
    let ours = number.len() >= 5
        && number.bytes().all(|b| b.is_ascii_digit())
        && matches!(ext, "tar" | "jsonl");
    ours.then(|| number.parse().ok()).flatten()
}

/// The ustar header of a member `name` of `size` bytes.
fn member_header(name: &str, size: usize) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    // Invariant: our member names are short ASCII (a key and an extension).
    header
        .set_path(name)
        .expect("a sample name fits a tar header");
    header.set_size(size as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    header
}

/// The zeros that pad a member of `size` bytes to the tar's 512-byte blocks.
fn padding(size: usize) -> &'static [u8] {
    &END_OF_ARCHIVE[..(512 - size % 512) % 512]
}

/// Writes all of `slices` at `offset` of `file`, one `pwritev` call while it writes them whole.
fn write_all_vectored_at(
    file: &File,
    mut slices: &mut [IoSlice<'_>],
    mut offset: u64,
) -> std::io::Result<()> {
    while !slices.is_empty() {
        match rustix::io::pwritev(file, slices, offset) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                offset += n as u64;
                IoSlice::advance_slices(&mut slices, n);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The shard and member a stored path names (`00003.tar/000030012.jpg`), if it names one.
pub fn member_of(path: &str) -> Option<(&str, &str)> {
    let (shard, member) = path.split_once('/')?;
    (shard.ends_with(".tar") && shard_of_file(shard).is_some()).then_some((shard, member))
}

/// The shard file holding member paths of `shard` (`NNNNN.tar`): its final name, or the open
/// shard's `.tmp`.
pub fn shard_file(out: &Path, shard: &str) -> Option<PathBuf> {
    let done = out.join(shard);
    if done.is_file() {
        return Some(done);
    }
    let open = out.join(format!("{shard}.tmp"));
    open.is_file().then_some(open)
}

/// Every member of the tar at `path`: name → (size, hex SHA-256). A tar cut off mid-member is
/// an error; one without end blocks (the open shard) is read to its end.
pub fn hash_members(path: &Path) -> std::io::Result<HashMap<String, (u64, String)>> {
    let mut archive = tar::Archive::new(std::io::BufReader::new(File::open(path)?));
    let mut members = HashMap::new();
    let mut block = vec![0; 64 * 1024];
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.to_string_lossy().into_owned();
        let mut hasher = Sha256::new();
        let mut size = 0;
        loop {
            let n = entry.read(&mut block)?;
            if n == 0 {
                break;
            }
            size += n as u64;
            hasher.update(&block[..n]);
        }
        members.insert(name, (size, hex::encode(hasher.finalize())));
    }
    Ok(members)
}

/// The members of the tar at `path` whose bytes are all there: name → size. Reading stops at
/// the first member cut off or unreadable (a truncated or damaged shard), keeping those before.
pub fn whole_members(path: &Path) -> std::io::Result<HashMap<String, u64>> {
    let mut archive = tar::Archive::new(std::io::BufReader::new(File::open(path)?));
    let mut members = HashMap::new();
    for entry in archive.entries()? {
        let Ok(mut entry) = entry else {
            break;
        };
        let Ok(name) = entry.path().map(|p| p.to_string_lossy().into_owned()) else {
            break;
        };
        let size = entry.header().size().unwrap_or(u64::MAX);
        match std::io::copy(&mut entry, &mut std::io::sink()) {
            Ok(read) if read == size => {
                members.insert(name, size);
            }
            _ => break,
        }
    }
    Ok(members)
}

/// Samples taken out of the shards, found damaged or missing by `scrape verify --requeue`: the
/// images stored there go back in the queue, and no shard keeps a sample nothing points at.
#[derive(Debug, Default)]
pub struct Dropped {
    /// (shard name, sample key) of every sample no longer in its shard.
    samples: BTreeSet<(String, String)>,
    /// The shards' records as they are now, to commit with the requeue.
    pub records: Vec<ShardRecord>,
}

impl Dropped {
    /// Whether the sample at stored path `path` (`00000.tar/000000012.jpg`) was taken out.
    pub fn covers(&self, path: &str) -> bool {
        member_of(path).is_some_and(|(shard, member)| {
            self.samples
                .contains(&(shard.to_owned(), sample_key_of(member).to_owned()))
        })
    }
}

/// A member's sample key: its name without the extension.
fn sample_key_of(member: &str) -> &str {
    member.split_once('.').map_or(member, |(key, _)| key)
}

/// Takes the samples at stored paths `damaged` out of their shards. A finished shard is
/// rewritten without them (and their index lines) under a temporary name, synced, then renamed
/// over the old one, index first. The open shard is cut at its first damaged sample (as a crash
/// cuts it): the record says so, and the next run cuts the files. Its later samples are taken
/// out too. Sample keys are never reused: a shard's count of samples stays as it was.
pub fn drop_samples(
    out: &Path,
    state: &State,
    damaged: &BTreeSet<String>,
) -> Result<Dropped, StateError> {
    let mut by_shard: HashMap<u64, BTreeSet<String>> = HashMap::new();
    for path in damaged {
        if let Some((shard, member)) = member_of(path)
            && let Some(number) = shard_of_file(shard)
        {
            by_shard
                .entry(number)
                .or_default()
                .insert(sample_key_of(member).to_owned());
        }
    }
    let mut dropped = Dropped::default();
    for mut record in state.shards()? {
        let Some(keys) = by_shard.get(&record.shard) else {
            continue;
        };
        let taken = if record.finished {
            let (tar_bytes, index_bytes) = rewrite_without(out, record.shard, keys)?;
            record.tar_bytes = tar_bytes;
            record.index_bytes = index_bytes;
            keys.clone()
        } else {
            let (tar_at, index_at, after) = first_of(out, &record, keys);
            record.tar_bytes = tar_at.min(record.tar_bytes);
            record.index_bytes = index_at.min(record.index_bytes);
            after
        };
        let shard = shard_name(record.shard);
        dropped
            .samples
            .extend(taken.into_iter().map(|key| (shard.clone(), key)));
        dropped.records.push(record);
    }
    Ok(dropped)
}

/// Rewrites finished shard `shard` without the samples `keys`; its new tar and index lengths.
fn rewrite_without(
    out: &Path,
    shard: u64,
    keys: &BTreeSet<String>,
) -> Result<(u64, u64), StateError> {
    let (tar_path, index_path) = (
        final_path(out, shard, "tar"),
        final_path(out, shard, "jsonl"),
    );
    let new_tar = out.join(format!("{shard:05}.tar{REWRITE}"));
    let new_index = out.join(format!("{shard:05}.jsonl{REWRITE}"));
    let written = (|| -> Result<(u64, u64), StateError> {
        let mut builder = tar::Builder::new(std::io::BufWriter::new(
            File::create(&new_tar).map_err(io_error(&new_tar))?,
        ));
        // A tar damaged part-way is kept up to the damage: what follows is in `keys` (the
        // audit found none of it).
        if let Ok(file) = File::open(&tar_path) {
            let mut archive = tar::Archive::new(std::io::BufReader::new(file));
            if let Ok(entries) = archive.entries() {
                for entry in entries {
                    let Ok(mut entry) = entry else { break };
                    let name = match entry.path() {
                        Ok(name) => name.to_string_lossy().into_owned(),
                        Err(_) => break,
                    };
                    if keys.contains(sample_key_of(&name)) {
                        continue;
                    }
                    let header = entry.header().clone();
                    let mut body = Vec::new();
                    if entry.read_to_end(&mut body).is_err() {
                        break;
                    }
                    builder
                        .append(&header, body.as_slice())
                        .map_err(io_error(&new_tar))?;
                }
            }
        }
        let tar = builder
            .into_inner()
            .and_then(|w| w.into_inner().map_err(std::io::IntoInnerError::into_error))
            .map_err(io_error(&new_tar))?;
        tar.sync_all().map_err(io_error(&new_tar))?;
        let tar_bytes = tar.metadata().map_err(io_error(&new_tar))?.len();
        let index = std::fs::read(&index_path).unwrap_or_default();
        let kept: Vec<u8> = index
            .split_inclusive(|b| *b == b'\n')
            .filter(|line| !line_key(line).is_some_and(|key| keys.contains(key.as_str())))
            .flatten()
            .copied()
            .collect();
        std::fs::write(&new_index, &kept).map_err(io_error(&new_index))?;
        File::open(&new_index)
            .and_then(|f| f.sync_all())
            .map_err(io_error(&new_index))?;
        Ok((tar_bytes, kept.len() as u64))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&new_tar);
        let _ = std::fs::remove_file(&new_index);
    }
    let lengths = written?;
    for (from, to) in [(&new_index, &index_path), (&new_tar, &tar_path)] {
        std::fs::rename(from, to).map_err(io_error(from))?;
    }
    Ok(lengths)
}

/// The `key` of an index line, if it has one.
fn line_key(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Keyed {
        key: String,
    }
    serde_json::from_slice::<Keyed>(line).ok().map(|k| k.key)
}

/// In the open shard of `record`: where its first sample whose key is in `keys` starts in the
/// tar and in the index, and the keys of that sample and every later one (in the tar's order,
/// not by comparing keys: a shard's keys may have changed width with `shard_size`). A damaged
/// sample the tar does not hold cuts nothing, unless the tar ends short of its committed length
/// (then it is cut where it ends); a tar that cannot be read is cut whole (the audit, which
/// could not read it either, found every sample in it damaged).
fn first_of(
    out: &Path,
    record: &ShardRecord,
    keys: &BTreeSet<String>,
) -> (u64, u64, BTreeSet<String>) {
    // Each committed member's key and where its header starts, in the tar's order, and where
    // the last one read ends.
    let mut members: Vec<(String, u64)> = Vec::new();
    let mut end = 0;
    let mut readable = false;
    if let Ok(file) = File::open(tmp_path(out, record.shard, "tar")) {
        let mut archive = tar::Archive::new(std::io::BufReader::new(file));
        if let Ok(entries) = archive.entries() {
            readable = true;
            for entry in entries {
                let Ok(entry) = entry else {
                    readable = false;
                    break;
                };
                let at = entry.raw_header_position();
                if at >= record.tar_bytes {
                    break;
                }
                let Ok(name) = entry.path().map(|n| n.to_string_lossy().into_owned()) else {
                    readable = false;
                    break;
                };
                members.push((sample_key_of(&name).to_owned(), at));
                end = entry.raw_file_position() + entry.size().div_ceil(512) * 512;
            }
        }
    }
    let first = members.iter().position(|(key, _)| keys.contains(key));
    let (tar_at, from) = match (first, readable) {
        (Some(i), _) => (members[i].1, i),
        // Not in the tar: nothing to cut, unless the tar ends before its committed length.
        (None, true) => (end.min(record.tar_bytes), members.len()),
        (None, false) => (0, 0),
    };
    let mut after: BTreeSet<String> = members[from..].iter().map(|(key, _)| key.clone()).collect();
    after.extend(keys.iter().cloned());
    if tar_at >= record.tar_bytes {
        return (record.tar_bytes, record.index_bytes, after);
    }
    // The index keeps the lines of the samples the tar keeps, which come first.
    let kept: BTreeSet<&str> = members[..from]
        .iter()
        .map(|(key, _)| key.as_str())
        .collect();
    let index = std::fs::read(tmp_path(out, record.shard, "jsonl")).unwrap_or_default();
    let mut index_at = 0;
    for line in index.split_inclusive(|b| *b == b'\n') {
        if !line_key(line).is_some_and(|key| kept.contains(key.as_str())) {
            break;
        }
        index_at += line.len() as u64;
    }
    (tar_at, index_at, after)
}

pub(super) fn io_error(path: &Path) -> impl Fn(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample of `body` for the files at `tar` and `index`, at their start.
    fn append_to(tar: &Path, index: &Path, body: &'static [u8]) -> Append {
        let open = |path: &Path| File::options().write(true).open(path).unwrap();
        Append {
            files: Arc::new(ShardFiles {
                tar: open(tar),
                index: open(index),
                tar_path: tar.to_owned(),
                index_path: index.to_owned(),
            }),
            tar_at: 0,
            index_at: 0,
            headers: vec![
                member_header("0.jpg", body.len()),
                member_header("0.json", 2),
            ],
            body: Held {
                bytes: bytes::Bytes::from_static(body),
                permit: None,
            },
            line: b"{}\n".to_vec(),
            caption: None,
        }
    }

    #[test]
    fn a_failed_write_fails_every_later_wait_and_nothing_after_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let (tar, index) = (dir.path().join("0.tar"), dir.path().join("0.jsonl"));
        std::fs::write(&tar, "").unwrap();
        std::fs::write(&index, "").unwrap();
        let appender = Appender::start().unwrap();
        appender.send(append_to(&tar, &index, b"first")).unwrap();
        appender.wait().unwrap();
        assert_eq!(std::fs::read(&index).unwrap(), b"{}\n");

        // Writing to /dev/full fails as a full disk does.
        let full = Path::new("/dev/full");
        appender.send(append_to(full, &index, b"second")).unwrap();
        let later = append_to(&tar, &index, b"third");
        std::fs::write(&tar, "").unwrap();
        appender.send(later).unwrap();
        for _ in 0..2 {
            let error = appender.wait().unwrap_err();
            assert!(error.is_disk_full(), "{error}");
            assert!(error.to_string().contains("/dev/full"), "{error}");
        }
        assert_eq!(
            std::fs::read(&tar).unwrap(),
            b"",
            "nothing written after the failure"
        );
    }

    #[test]
    fn keys_are_the_shard_and_the_place_in_it() {
        assert_eq!(sample_key(0, 12, 10_000), "000000012");
        assert_eq!(sample_key(3, 9_999, 10_000), "000039999");
        assert_eq!(sample_key(1, 5, 100_000), "0000100005");
        assert_eq!(sample_key(2, 1, 10), "000020001");
    }

    #[test]
    fn only_our_shard_files_are_recognised() {
        assert_eq!(shard_of_file("00012.tar"), Some(12));
        assert_eq!(shard_of_file("00012.jsonl.tmp"), Some(12));
        assert_eq!(shard_of_file("manifest.jsonl"), None);
        assert_eq!(shard_of_file("12.tar"), None);
        assert_eq!(shard_of_file("00012.parquet"), None);
        assert_eq!(
            member_of("00001.tar/000010001.jpg"),
            Some(("00001.tar", "000010001.jpg"))
        );
        assert_eq!(member_of("abc/123.jpg"), None);
    }

    #[test]
    fn members_are_read_back_with_their_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let mut tar = Vec::new();
        for (name, data) in [("000000000.jpg", &b"abc"[..]), ("000000000.json", b"{}")] {
            tar.extend_from_slice(member_header(name, data.len()).as_bytes());
            tar.extend_from_slice(data);
            tar.extend_from_slice(padding(data.len()));
        }
        tar.extend_from_slice(&END_OF_ARCHIVE);
        let path = dir.path().join("00000.tar");
        std::fs::write(&path, &tar).unwrap();
        let members = hash_members(&path).unwrap();
        assert_eq!(members["000000000.jpg"].0, 3);
        assert_eq!(
            members["000000000.jpg"].1,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(members.len(), 2);
    }

    /// A finished shard of `samples` (key, image bytes), with its index, in `dir`.
    fn finished_shard(dir: &Path, samples: &[(&str, &[u8])]) {
        let (tar, index) = shard_bytes(samples);
        std::fs::write(
            final_path(dir, 0, "tar"),
            [tar, END_OF_ARCHIVE.to_vec()].concat(),
        )
        .unwrap();
        std::fs::write(final_path(dir, 0, "jsonl"), index).unwrap();
    }

    /// The open shard of `samples` in `dir`, and its record, all of it committed.
    fn open_shard(dir: &Path, samples: &[(&str, &[u8])]) -> ShardRecord {
        let (tar, index) = shard_bytes(samples);
        std::fs::write(tmp_path(dir, 0, "tar"), &tar).unwrap();
        std::fs::write(tmp_path(dir, 0, "jsonl"), &index).unwrap();
        ShardRecord {
            shard: 0,
            samples: samples.len() as u64,
            tar_bytes: tar.len() as u64,
            index_bytes: index.len() as u64,
            finished: false,
        }
    }

    /// The tar members (without end blocks) and index of `samples`.
    fn shard_bytes(samples: &[(&str, &[u8])]) -> (Vec<u8>, String) {
        let (mut tar, mut index) = (Vec::new(), String::new());
        for (key, image) in samples {
            let json = format!("{{\"key\":\"{key}\"}}");
            for (name, data) in [
                (format!("{key}.jpg"), *image),
                (format!("{key}.json"), json.as_bytes()),
            ] {
                tar.extend_from_slice(member_header(&name, data.len()).as_bytes());
                tar.extend_from_slice(data);
                tar.extend_from_slice(padding(data.len()));
            }
            index.push_str(&json);
            index.push('\n');
        }
        (tar, index)
    }

    #[test]
    fn the_open_shard_is_cut_before_its_first_damaged_sample_and_only_for_one_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let samples: [(&str, &[u8]); 3] = [
            ("000000000", b"first"),
            ("000000001", b"damaged"),
            ("000000002", b"later"),
        ];
        let record = open_shard(dir.path(), &samples);
        let keys = |ks: &[&str]| ks.iter().map(|k| (*k).to_owned()).collect::<BTreeSet<_>>();

        let (tar_at, index_at, after) = first_of(dir.path(), &record, &keys(&["000000001"]));
        // One sample is two members of a header and a padded block each.
        assert_eq!(tar_at, 2 * 1024);
        assert_eq!(index_at, "{\"key\":\"000000000\"}\n".len() as u64);
        assert_eq!(
            after,
            keys(&["000000001", "000000002"]),
            "the later one goes too"
        );

        let (tar_at, index_at, after) = first_of(dir.path(), &record, &keys(&["000000009"]));
        assert_eq!(
            (tar_at, index_at),
            (record.tar_bytes, record.index_bytes),
            "nothing cut"
        );
        assert_eq!(after, keys(&["000000009"]));

        std::fs::remove_file(tmp_path(dir.path(), 0, "tar")).unwrap();
        let (tar_at, index_at, _) = first_of(dir.path(), &record, &keys(&["000000001"]));
        assert_eq!(
            (tar_at, index_at),
            (0, 0),
            "a tar that cannot be read is cut whole"
        );
    }

    #[test]
    fn a_rewritten_shard_keeps_every_other_sample_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        finished_shard(
            dir.path(),
            &[
                ("000000000", b"first"),
                ("000000001", b"damaged"),
                ("000000002", b"third"),
            ],
        );
        let before = hash_members(&final_path(dir.path(), 0, "tar")).unwrap();

        let dropped = BTreeSet::from(["000000001".to_owned()]);
        let (tar_bytes, index_bytes) = rewrite_without(dir.path(), 0, &dropped).unwrap();

        let tar = final_path(dir.path(), 0, "tar");
        let after = hash_members(&tar).unwrap();
        let mut expected = before.clone();
        expected.retain(|name, _| !name.starts_with("000000001."));
        assert_eq!(after, expected);
        assert_eq!(std::fs::metadata(&tar).unwrap().len(), tar_bytes);
        let bytes = std::fs::read(&tar).unwrap();
        assert!(bytes.ends_with(&END_OF_ARCHIVE) && bytes.len().is_multiple_of(512));
        let index = std::fs::read_to_string(final_path(dir.path(), 0, "jsonl")).unwrap();
        assert_eq!(index, "{\"key\":\"000000000\"}\n{\"key\":\"000000002\"}\n");
        assert_eq!(index.len() as u64, index_bytes);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(REWRITE))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_rewrite_left_half_done_is_removed_with_unrecorded_shards() {
        let dir = tempfile::tempdir().unwrap();
        finished_shard(dir.path(), &[("000000000", b"image")]);
        let half = dir.path().join(format!("00000.tar{REWRITE}"));
        std::fs::write(&half, b"half").unwrap();
        let record = ShardRecord {
            shard: 0,
            samples: 1,
            tar_bytes: 0,
            index_bytes: 0,
            finished: true,
        };

        remove_unrecorded(dir.path(), &HashMap::from([(0, &record)])).unwrap();

        assert!(!half.exists());
        assert!(
            final_path(dir.path(), 0, "tar").exists(),
            "the recorded shard stays"
        );
    }
}
