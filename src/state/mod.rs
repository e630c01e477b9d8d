//! State: the redb database that makes every run resumable.
//!
//! One file, `<out>/.scrape/state.redb`. Reads happen anywhere through [`State`]; every write
//! goes through the single [`writer`] thread, which batches commits and is the only place that
//! gives downloaded files their final names. A page's images and its chain checkpoint are
//! committed in one transaction, so a crash can neither skip a page nor record one twice.

mod ledger;
pub mod live;
mod records;
mod retry;
mod robots;
mod shards;
mod shield;
pub mod tables;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::profile::{DatasetSettings, OutputFormat};
use redb::{Database, ReadableDatabase, ReadableTable, TableHandle};

pub use crate::net::HostWindow;
pub use crate::net::robots::{ROBOTS_REFUSAL, RobotsOutcome, RobotsRecord};
pub use ledger::{
    ChainPages, ImageDecision, ImageLedger, LinkedPages, PageCommitted, PageLedger, PageUnit,
    commit_page, image_step,
};
pub use records::PageSeen;
pub use records::{
    ChainCheckpoint, FailureRecord, ImageRecord, ImageStatus, ImportCheckpoint, LinkRecord,
    NearDuplicateOf, NewImage, NewLink, OriginalFile, PageRecord, PageResult, PageStatus,
    ROBOTS_CLASS, Revisit, RunRecord, StoredFile, now, phash_hex, phash_value,
};
pub use robots::RobotsCache;
pub use shards::ShardRecord;
pub use shield::panic_message;
pub use writer::{
    DownloadResult, Held, ImportCommit, PageCommit, Payload, Placement, Sample, StateWriter,
    WriterHandle,
};

use tables::{CHAINS, COUNTERS, IMAGES, IMPORTS, LINK_QUEUE, LINKS, META, PAGES, PENDING, RUNS};

/// redb's page cache. Its default (1 GiB) would let memory grow with the job; the hot data (the
/// pending queue's head, recent inserts) is small, and the OS page cache holds the rest.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

fn database() -> redb::Builder {
    let mut builder = Database::builder();
    builder.set_cache_size(CACHE_BYTES);
    builder
}

/// The `meta_v1` key saying how the last run went: `started TS` or `finished TS`.
const LAST_RUN: &str = "last_run";
/// The `meta_v1` key saying what the stored images are (`DatasetSettings::layout`).
const LAYOUT: &str = "layout";
/// The `meta_v1` keys of the format and shard size the last run stored images with, which a
/// URL list's `scrape retry` (or `scrape download --out`) without flags goes on with.
const FORMAT: &str = "format";
const SHARD_SIZE: &str = "shard_size";

/// How the last run of a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastRun {
    /// A state written before runs were marked.
    Unknown,
    /// Started and never finished: killed, interrupted or still running.
    Unfinished,
    /// Read every source to its end.
    Finished,
}

/// Creates the database at `path` unless there is one, whole or not at all: it is made under a
/// temporary name and linked into place (never over another), so a run killed while it creates
/// the database leaves none rather than a half-written one that would read as damage.
fn create_if_missing(path: &Path) -> Result<(), StateError> {
    if path.exists() {
        return Ok(());
    }
    let io = |source| StateError::Io {
        path: path.to_owned(),
        source,
    };
    let temporary = path.with_extension(format!("redb.new.{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    drop(
        database()
            .create(&temporary)
            .map_err(|source| open_error(&temporary, source))?,
    );
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        // Another run created it meanwhile: its database is the one to open.
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io(e)),
        _ => Ok(()),
    }
}

/// Opens the database at `path` (creating it when `create`) and verifies every page's checksum
/// before anything reads it: redb checks them only after a crash, and a damaged page read
/// without the check can panic inside redb or pass a wrong value on. A damaged last commit is
/// repaired by going back to the one before (logged); damage the previous commit shares is an
/// error, [`StateError::is_damage`].
fn open_checked(path: &Path, create: bool) -> Result<Database, StateError> {
    let (db, clean) = shield::shielded(path, || {
        let opened = if create {
            database().create(path)
        } else {
            database().open(path)
        };
        let mut db = opened.map_err(|source| open_error(path, source))?;
        let clean = db
            .check_integrity()
            .map_err(|source| open_error(path, source))?;
        Ok((db, clean))
    })?;
    if !clean {
        tracing::warn!(
            path = %path.display(),
            "the state database was damaged and has been repaired; the last changes before the damage may be done again"
        );
    }
    Ok(db)
}

/// The layout version written to `meta_v1.schema`.
const SCHEMA: &str = "1";

/// Folder, inside the output folder, that holds the database and partial downloads.
pub const STATE_DIR: &str = ".scrape";

/// Why the state database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("another scrape run is using `{path}`; wait for it to finish or stop it")]
    Locked { path: PathBuf },
    #[error("cannot open state database `{path}`")]
    Open {
        path: PathBuf,
        #[source]
        source: redb::DatabaseError,
    },
    #[error("no state database at `{path}`: nothing has run with this output folder yet")]
    Missing { path: PathBuf },
    #[error("state database `{path}` was written by profile `{found}`, not `{expected}`")]
    OtherProfile {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error(
        "state database `{path}` holds {found}; this run would store {expected}: rerun with \
         {hint}, or give another --out (or --fresh, to start this one over)"
    )]
    OtherLayout {
        path: PathBuf,
        found: String,
        expected: String,
        /// What to rerun with: the format, or the resize table, the images were stored with.
        hint: String,
    },
    #[error("state database error")]
    Db(#[from] redb::Error),
    #[error("damaged record `{record}` in table `{table}` of the state database: {detail}")]
    Corrupt {
        table: String,
        record: String,
        detail: String,
    },
    #[error("cannot write `{path}`")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// redb panicked reading the file: damage its checksums did not catch first.
    #[error("the state database `{path}` is damaged: {detail}")]
    Unreadable { path: PathBuf, detail: String },
    /// The output could not store what the batch placed (a bucket's put failed).
    #[error("cannot store the output")]
    Output(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the state writer has stopped")]
    WriterGone,
    /// A task working on the state (a read or an analysis on the blocking pool, a download
    /// slot) ended without an answer: it panicked, or the run is shutting down.
    #[error("a state task stopped before it finished")]
    TaskLost,
}

impl StateError {
    /// Whether the database itself is damaged (a record, or the file): `--fresh` starts over.
    pub fn is_damage(&self) -> bool {
        match self {
            Self::Corrupt { .. } | Self::Unreadable { .. } => true,
            Self::Open { source, .. } => match source {
                redb::DatabaseError::Storage(redb::StorageError::Corrupted(_)) => true,
                // "Not a redb database": a damaged header.
                redb::DatabaseError::Storage(redb::StorageError::Io(io)) => {
                    io.kind() == std::io::ErrorKind::InvalidData
                }
                _ => false,
            },
            Self::Db(redb::Error::Corrupted(_)) => true,
            _ => false,
        }
    }

    /// Whether the disk is full (or the quota used up): nothing is lost, and the same command
    /// continues once there is room.
    pub fn is_disk_full(&self) -> bool {
        is_disk_full(self)
    }
}

/// Whether `error` or one of its causes says the disk is full (`ENOSPC`, `EDQUOT`), in a file
/// or inside the database.
pub fn is_disk_full(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if io_error(e).is_some_and(|io| {
            io.kind() == std::io::ErrorKind::StorageFull
                || io.kind() == std::io::ErrorKind::QuotaExceeded
                || io.raw_os_error() == Some(28)
        }) {
            return true;
        }
        source = e.source();
    }
    false
}

/// The I/O error `error` is, or wraps: redb's errors hold one without naming it as their source.
fn io_error<'e>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e std::io::Error> {
    let storage = |s: &'e redb::StorageError| match s {
        redb::StorageError::Io(io) => Some(io),
        _ => None,
    };
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        return Some(io);
    }
    if let Some(redb::Error::Io(io)) = error.downcast_ref::<redb::Error>() {
        return Some(io);
    }
    if let Some(s) = error.downcast_ref::<redb::StorageError>() {
        return storage(s);
    }
    match error.downcast_ref::<redb::DatabaseError>() {
        Some(redb::DatabaseError::Storage(s)) => storage(s),
        _ => None,
    }
}

macro_rules! redb_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for StateError {
            fn from(e: $t) -> Self {
                Self::Db(e.into())
            }
        }
    )*};
}
redb_errors!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// Running totals, in step with the records (table [`tables::COUNTERS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    pub pages_done: u64,
    pub pages_failed: u64,
    /// Failed pages that robots.txt disallows (counted in `pages_failed` too).
    #[serde(default)]
    pub pages_robots: u64,
    pub images_found: u64,
    pub stored: u64,
    pub stored_bytes: u64,
    pub duplicates: u64,
    pub failed: u64,
    /// Linked pages (`[[follow]]` levels) queued and not crawled yet: pages, not images.
    #[serde(default)]
    pub links_queued: u64,
    /// Stored images `--recheck-images` queued to be asked again, not asked yet.
    #[serde(default)]
    pub rechecks_queued: u64,
    /// Images a recheck found serving other bytes and stored anew, over every run.
    #[serde(default)]
    pub rechecks_changed: u64,
}

impl Counters {
    /// Images stored, deduplicated or failed: those the download stage is done with.
    pub fn done(&self) -> u64 {
        self.stored + self.duplicates + self.failed
    }

    /// Images found but not yet stored, deduplicated or failed.
    pub fn pending(&self) -> u64 {
        self.images_found.saturating_sub(self.done())
    }
}

/// Runs a state read on the blocking pool, for the async stages.
pub async fn read<T: Send + 'static>(
    state: &State,
    f: impl FnOnce(&State) -> Result<T, StateError> + Send + 'static,
) -> Result<T, StateError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || f(&state))
        .await
        .map_err(|_| StateError::TaskLost)?
}

/// Names of the counters in [`tables::COUNTERS`].
pub(crate) mod counter {
    pub const PAGES_DONE: &str = "pages_done";
    pub const PAGES_FAILED: &str = "pages_failed";
    /// Failed pages of class `robots`.
    pub const PAGES_ROBOTS: &str = "pages_robots";
    /// Pages a refresh asked for only if they changed and the server said had not (`304`).
    pub const PAGES_UNCHANGED: &str = "pages_unchanged";
    pub const IMAGES_FOUND: &str = "images_found";
    pub const STORED: &str = "stored";
    pub const STORED_BYTES: &str = "stored_bytes";
    pub const DUPLICATES: &str = "duplicates";
    pub const FAILED: &str = "failed";
    pub const NEXT_SEQ: &str = "next_seq";
    /// The next link queue sequence number.
    pub const NEXT_LINK_SEQ: &str = "next_link_seq";
    /// Links waiting in the queue.
    pub const LINKS_QUEUED: &str = "links_queued";
    /// Followed by a level's name: links of that level waiting in the queue (counted since
    /// this counter exists: a queue from before has the total only).
    pub const LINKS_QUEUED_AT: &str = "links_queued:";
    /// Followed by a level's name: links of that level ever queued (never taken back).
    pub const LINKS_FOUND_AT: &str = "links_found:";
    /// Images `--recheck-images` queued to be asked again, not asked yet.
    pub const RECHECKS_QUEUED: &str = "rechecks_queued";
    /// Images a recheck found serving other bytes, stored anew (over every run).
    pub const RECHECKS_CHANGED: &str = "rechecks_changed";
}

/// What [`State::image_tally`] counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageTally {
    /// Failed images by class.
    pub failure_classes: Vec<(String, u64)>,
    /// Images the run first found ([`ImageRecord::run`]).
    pub found_by_run: u64,
    /// Images the run first stored or found duplicates ([`ImageRecord::stored_run`]).
    pub stored_by_run: u64,
}

/// Read access to a job's state; cheap to clone.
#[derive(Clone)]
pub struct State {
    db: Arc<Database>,
    path: PathBuf,
}

impl State {
    /// The database path for output folder `out`.
    pub fn path_for(out: &Path) -> PathBuf {
        out.join(STATE_DIR).join("state.redb")
    }

    /// Opens (or creates) the state of output folder `out` for profile `profile`, whose images
    /// are stored as `dataset` says (`DatasetSettings::layout`; `None`: not checked). Images
    /// stored one way are never mixed with images stored another way in one output folder,
    /// where a manifest would point at both: a job whose stored images have another layout is
    /// refused ([`StateError::OtherLayout`]) before anything is written. A job with no image
    /// stored yet (or one begun before layouts were recorded) takes the new one.
    pub fn open(
        out: &Path,
        profile: &str,
        dataset: Option<&DatasetSettings>,
    ) -> Result<Self, StateError> {
        let path = Self::path_for(out);
        let dir = out.join(STATE_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| StateError::Io { path: dir, source })?;
        create_if_missing(&path)?;
        let db = open_checked(&path, true)?;
        let state = Self {
            db: Arc::new(db),
            path,
        };
        state.init(profile, dataset)?;
        Ok(state)
    }

    /// A state held in memory only, for the unit tests of the stages that write it.
    #[cfg(test)]
    pub(crate) fn in_memory(profile: &str) -> Result<Self, StateError> {
        let db = database()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|source| open_error(Path::new("(memory)"), source))?;
        let state = Self {
            db: Arc::new(db),
            path: PathBuf::from("(memory)"),
        };
        state.init(profile, None)?;
        Ok(state)
    }

    /// Opens the state of `out` for `profile` with everything it held forgotten (`--fresh`),
    /// for images stored as `dataset` says.
    ///
    /// Refused for another profile's folder. The database is emptied in place while its lock is
    /// held, never deleted first: a run
    /// still using the folder makes this fail with [`StateError::Locked`] instead of losing
    /// its state from under it. A database that cannot be opened at all (damaged) is replaced.
    pub fn open_fresh(
        out: &Path,
        profile: &str,
        dataset: &DatasetSettings,
    ) -> Result<Self, StateError> {
        let path = Self::path_for(out);
        let dir = out.join(STATE_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| StateError::Io { path: dir, source })?;
        create_if_missing(&path)?;
        let db = match open_checked(&path, true) {
            Ok(db) => db,
            Err(StateError::Locked { path }) => return Err(StateError::Locked { path }),
            Err(_) => {
                std::fs::remove_file(&path).map_err(|source| StateError::Io {
                    path: path.clone(),
                    source,
                })?;
                database()
                    .create(&path)
                    .map_err(|source| open_error(&path, source))?
            }
        };
        let state = Self {
            db: Arc::new(db),
            path,
        };
        // Starting over is for this profile's own progress: another profile's folder is refused
        // here as it is without --fresh.
        if let Some(found) = state.profile_name()?.filter(|found| found != profile) {
            return Err(StateError::OtherProfile {
                path: state.path.clone(),
                found,
                expected: profile.to_owned(),
            });
        }
        state.forget()?;
        state.init(profile, Some(dataset))?;
        Ok(state)
    }

    /// Deletes every table, in one transaction.
    fn forget(&self) -> Result<(), StateError> {
        let txn = self.db.begin_write()?;
        // The runs stay: a number names one run, before and after starting over.
        let tables: Vec<_> = txn
            .list_tables()?
            .filter(|table| table.name() != RUNS.name())
            .collect();
        for table in tables {
            txn.delete_table(table)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Opens an existing state without creating anything.
    pub fn open_existing(out: &Path) -> Result<Self, StateError> {
        let path = Self::path_for(out);
        if !path.exists() {
            return Err(StateError::Missing { path });
        }
        // A run killed as it created the file leaves it empty: an empty database, never damage.
        let empty = std::fs::metadata(&path).is_ok_and(|m| m.len() == 0);
        let db = open_checked(&path, empty)?;
        Ok(Self {
            db: Arc::new(db),
            path,
        })
    }

    fn init(&self, profile: &str, dataset: Option<&DatasetSettings>) -> Result<(), StateError> {
        let txn = self.db.begin_write()?;
        {
            let mut meta = txn.open_table(META)?;
            let found = meta.get("profile")?.map(|v| v.value().to_owned());
            match found {
                Some(found) if found != profile => {
                    return Err(StateError::OtherProfile {
                        path: self.path.clone(),
                        found,
                        expected: profile.to_owned(),
                    });
                }
                Some(_) => {}
                None => {
                    meta.insert("profile", profile)?;
                    meta.insert("schema", SCHEMA)?;
                    meta.insert("created", now().to_string().as_str())?;
                }
            }
            if let Some(dataset) = dataset {
                let layout = dataset.layout();
                let found = meta.get(LAYOUT)?.map(|v| v.value().to_owned());
                match found {
                    Some(found) if found != layout && stored(&txn)? > 0 => {
                        let hint = layout_hint(
                            &found,
                            &layout,
                            meta.get(FORMAT)?.map(|v| v.value().to_owned()),
                        );
                        return Err(StateError::OtherLayout {
                            path: self.path.clone(),
                            found,
                            expected: layout,
                            hint,
                        });
                    }
                    _ => {
                        meta.insert(LAYOUT, layout.as_str())?;
                        meta.insert(FORMAT, dataset.format.name())?;
                        meta.insert(SHARD_SIZE, dataset.shard_size.to_string().as_str())?;
                    }
                }
            }
            // A run has begun; only [`State::mark_run_finished`] says it ended, so a kill at
            // any point (even before the first commit) reads as an unfinished run.
            meta.insert(LAST_RUN, format!("started {}", now()).as_str())?;
            // And it has the next number.
            let mut runs = txn.open_table(RUNS)?;
            let number = match runs.last()? {
                Some((last, _)) => {
                    last.value()
                        .checked_add(1)
                        .ok_or_else(|| StateError::Corrupt {
                            table: RUNS.name().to_owned(),
                            record: last.value().to_string(),
                            detail: "no run can follow it".to_owned(),
                        })?
                }
                None => 1,
            };
            let record = RunRecord {
                // Never 0, which a record checks for: a clock before 1970 reads as 1.
                started: now().max(1),
                listed: false,
                checked: 0,
                unchanged: 0,
            };
            runs.insert(number, encode(&record).as_slice())?;
            // Create every table so readers never meet a missing one.
            txn.open_table(COUNTERS)?;
            txn.open_table(CHAINS)?;
            txn.open_table(PAGES)?;
            txn.open_table(IMAGES)?;
            txn.open_table(PENDING)?;
            txn.open_table(tables::CONTENT)?;
            txn.open_table(IMPORTS)?;
            txn.open_table(LINKS)?;
            txn.open_table(tables::ROBOTS)?;
            txn.open_table(LINK_QUEUE)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Records that the run that opened the state ended without being interrupted: every
    /// source was read to its end (failures may remain).
    pub fn mark_run_finished(&self) -> Result<(), StateError> {
        let txn = self.db.begin_write()?;
        txn.open_table(META)?
            .insert(LAST_RUN, format!("finished {}", now()).as_str())?;
        txn.commit()?;
        Ok(())
    }

    /// The last run begun, with its number: the one that opened the state, for a job running.
    /// `None` for a state from before runs were numbered.
    pub fn current_run(&self) -> Result<Option<(u32, RunRecord)>, StateError> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(RUNS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some((number, value)) = table.last()? else {
            return Ok(None);
        };
        let key = number.value().to_string();
        Ok(Some((
            number.value(),
            decode(RUNS.name(), &key, value.value())?,
        )))
    }

    /// Every run, by number.
    pub fn runs(&self) -> Result<std::collections::BTreeMap<u32, RunRecord>, StateError> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(RUNS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Default::default()),
            Err(e) => return Err(e.into()),
        };
        let mut runs = std::collections::BTreeMap::new();
        for entry in table.iter()? {
            let (number, value) = entry?;
            let key = number.value().to_string();
            runs.insert(number.value(), decode(RUNS.name(), &key, value.value())?);
        }
        Ok(runs)
    }

    /// Records that run `number`'s list of new images is written.
    pub fn mark_run_listed(&self, number: u32) -> Result<(), StateError> {
        self.update_run(number, |record| record.listed = true)
    }

    /// Records the pages the current run asked only if they changed (`checked`), and of those
    /// the unchanged ones.
    pub fn record_run_checks(&self, checked: u64, unchanged: u64) -> Result<(), StateError> {
        let Some((number, _)) = self.current_run()? else {
            return Ok(());
        };
        self.update_run(number, |record| {
            record.checked += checked;
            record.unchanged += unchanged;
        })
    }

    /// Changes run `number`'s record by `change`, if it has one.
    fn update_run(
        &self,
        number: u32,
        change: impl FnOnce(&mut RunRecord),
    ) -> Result<(), StateError> {
        let txn = self.db.begin_write()?;
        {
            let mut table = txn.open_table(RUNS)?;
            let key = number.to_string();
            let found = table
                .get(number)?
                .map(|v| decode::<RunRecord>(RUNS.name(), &key, v.value()))
                .transpose()?;
            if let Some(mut record) = found {
                change(&mut record);
                table.insert(number, encode(&record).as_slice())?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    /// How the last run ended, as far as the state knows.
    pub fn last_run(&self) -> Result<LastRun, StateError> {
        let value = self.meta(LAST_RUN)?;
        Ok(match value.as_deref().and_then(|v| v.split_once(' ')) {
            Some(("started", _)) => LastRun::Unfinished,
            Some(("finished", _)) => LastRun::Finished,
            _ => LastRun::Unknown,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format and shard size the last run stored images with, if one recorded them.
    pub fn stored_format(&self) -> Result<Option<(OutputFormat, u64)>, StateError> {
        let format = self.meta(FORMAT)?.and_then(|v| OutputFormat::from_name(&v));
        let shard_size = self.meta(SHARD_SIZE)?.and_then(|v| v.parse().ok());
        Ok(format.zip(shard_size))
    }

    /// The profile name this state belongs to.
    pub fn profile_name(&self) -> Result<Option<String>, StateError> {
        self.meta("profile")
    }

    /// The value of `key` in `meta_v1`, if it has one.
    fn meta(&self, key: &str) -> Result<Option<String>, StateError> {
        let txn = self.db.begin_read()?;
        let meta = match txn.open_table(META) {
            Ok(meta) => meta,
            // A database created a moment ago has no tables yet.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(meta.get(key)?.map(|v| v.value().to_owned()))
    }

    /// The running totals.
    pub fn counters(&self) -> Result<Counters, StateError> {
        read_counters(&self.db)
    }

    /// Linked pages still queued, by `[[follow]]` level (levels with none left out).
    pub fn links_queued_by_level(&self) -> Result<Vec<(String, u64)>, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(COUNTERS)?;
        let mut levels = Vec::new();
        for entry in table.range(counter::LINKS_QUEUED_AT..)? {
            let (name, count) = entry?;
            let Some(level) = name.value().strip_prefix(counter::LINKS_QUEUED_AT) else {
                break;
            };
            if count.value() > 0 {
                levels.push((level.to_owned(), count.value()));
            }
        }
        Ok(levels)
    }

    /// Links of `level` ever queued (since this count exists).
    pub fn links_found(&self, level: &str) -> Result<u64, StateError> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(COUNTERS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let name = format!("{}{level}", counter::LINKS_FOUND_AT);
        Ok(table.get(name.as_str())?.map_or(0, |v| v.value()))
    }

    /// Every chain's checkpoint, by start URL.
    pub fn chains(&self) -> Result<Vec<(String, ChainCheckpoint)>, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(CHAINS)?;
        let mut chains = Vec::new();
        for entry in table.iter()? {
            let (key, value) = entry?;
            chains.push((
                key.value().to_owned(),
                decode(tables::CHAINS.name(), key.value(), value.value())?,
            ));
        }
        Ok(chains)
    }

    /// The checkpoint of the chain starting at `start`, if it has one.
    pub fn chain(&self, start: &str) -> Result<Option<ChainCheckpoint>, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(CHAINS)?;
        table
            .get(start)?
            .map(|v| decode(tables::CHAINS.name(), start, v.value()))
            .transpose()
    }

    /// The checkpoint of URL list `list`, if it was read before.
    pub fn import(&self, list: &str) -> Result<Option<ImportCheckpoint>, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(IMPORTS)?;
        table
            .get(list)?
            .map(|v| decode(tables::IMPORTS.name(), list, v.value()))
            .transpose()
    }

    /// The robots.txt of `origin` as last fetched, if it was.
    pub fn robots(&self, origin: &str) -> Result<Option<RobotsRecord>, StateError> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(tables::ROBOTS) {
            Ok(table) => table,
            // A state from before robots.txt was cached.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        table
            .get(origin)?
            .map(|v| decode(tables::ROBOTS.name(), origin, v.value()))
            .transpose()
    }

    /// Whether the state knows every URL of `images` as an image and every URL of `pages` as a
    /// page or a link (found by an earlier page or run): a page that brings nothing else is a
    /// known page to a refresh.
    pub fn knows_all(&self, images: &[&str], pages: &[&str]) -> Result<bool, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(IMAGES)?;
        for url in images {
            if table.get(*url)?.is_none() {
                return Ok(false);
            }
        }
        let (links, done) = (txn.open_table(LINKS)?, txn.open_table(PAGES)?);
        for url in pages {
            if links.get(*url)?.is_none() && done.get(*url)?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The image URLs found on page `page`, in no order: one pass over every image record,
    /// for a refresh that renders the page again.
    pub fn images_found_on(&self, page: &str) -> Result<Vec<String>, StateError> {
        let mut urls = Vec::new();
        self.for_each_image(|url, record| {
            if record.page == page {
                urls.push(url.to_owned());
            }
            Ok(())
        })?;
        Ok(urls)
    }

    /// Which of `urls` the state knows as image URLs (found by an earlier page or run).
    pub fn known_images(
        &self,
        urls: Vec<String>,
    ) -> Result<std::collections::HashSet<String>, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(IMAGES)?;
        let mut known = std::collections::HashSet::new();
        for url in urls {
            if table.get(url.as_str())?.is_some() {
                known.insert(url);
            }
        }
        Ok(known)
    }

    /// The record of page `url`, if it was fetched or failed before.
    pub fn page(&self, url: &str) -> Result<Option<PageRecord>, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(PAGES)?;
        table
            .get(url)?
            .map(|v| decode(tables::PAGES.name(), url, v.value()))
            .transpose()
    }

    /// Up to `limit` queued links with sequence numbers from `from`, in order.
    pub fn queued_links_from(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<Vec<(String, LinkRecord)>, StateError> {
        let txn = self.db.begin_read()?;
        let queue = txn.open_table(LINK_QUEUE)?;
        let links = txn.open_table(LINKS)?;
        let mut batch = Vec::with_capacity(limit);
        for entry in queue.range(from..)?.take(limit) {
            let (_, url) = entry?;
            let url = url.value().to_owned();
            if let Some(record) = links.get(url.as_str())? {
                let record: LinkRecord = decode(tables::LINKS.name(), &url, record.value())?;
                batch.push((url, record));
            }
        }
        Ok(batch)
    }

    /// Up to `limit` pending downloads with sequence numbers from `from`, in order.
    pub fn pending_from(&self, from: u64, limit: usize) -> Result<Vec<(u64, String)>, StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(PENDING)?;
        let mut batch = Vec::with_capacity(limit);
        for entry in table.range(from..)?.take(limit) {
            let (seq, url) = entry?;
            batch.push((seq.value(), url.value().to_owned()));
        }
        Ok(batch)
    }

    /// Failure counts by class, from the failed image records, and the new images of run
    /// `run`: one pass over every image record.
    pub fn image_tally(&self, run: u32) -> Result<ImageTally, StateError> {
        let mut classes = std::collections::BTreeMap::<String, u64>::new();
        let mut tally = ImageTally::default();
        self.for_each_image(|_, record| {
            if let Some(f) = &record.failure
                && record.status == ImageStatus::Failed
            {
                *classes.entry(f.class.clone()).or_default() += 1;
            }
            tally.found_by_run += u64::from(record.run == run);
            tally.stored_by_run += u64::from(record.stored_run == run);
            Ok(())
        })?;
        tally.failure_classes = classes.into_iter().collect();
        Ok(tally)
    }

    /// Calls `visit` for every image record, in URL order, streaming from one read transaction.
    pub fn for_each_image(
        &self,
        mut visit: impl FnMut(&str, &ImageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(IMAGES)?;
        for entry in table.iter()? {
            let (url, value) = entry?;
            let record: ImageRecord = decode(tables::IMAGES.name(), url.value(), value.value())?;
            visit(url.value(), &record)?;
        }
        Ok(())
    }

    /// Calls `visit` for every page record, in URL order, from one read transaction.
    pub fn for_each_page(
        &self,
        mut visit: impl FnMut(&str, &PageRecord) -> Result<(), StateError>,
    ) -> Result<(), StateError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(PAGES)?;
        for entry in table.iter()? {
            let (url, value) = entry?;
            let record: PageRecord = decode(tables::PAGES.name(), url.value(), value.value())?;
            visit(url.value(), &record)?;
        }
        Ok(())
    }

    pub(crate) fn database(&self) -> Arc<Database> {
        Arc::clone(&self.db)
    }
}

fn open_error(path: &Path, source: redb::DatabaseError) -> StateError {
    match source {
        redb::DatabaseError::DatabaseAlreadyOpen => StateError::Locked {
            path: path.to_owned(),
        },
        source => StateError::Open {
            path: path.to_owned(),
            source,
        },
    }
}

/// What to rerun with when images stored as layout `found` (in `format`, if recorded) meet a
/// run that would store them as `asked`: the format, the resize table, or both.
fn layout_hint(found: &str, asked: &str, format: Option<String>) -> String {
    // A layout is "CONTAINER, HOW THE IMAGES WERE MADE".
    let (found_container, found_made) = found.split_once(", ").unwrap_or((found, ""));
    let (asked_container, asked_made) = asked.split_once(", ").unwrap_or((asked, ""));
    let mut hints = Vec::new();
    if found_container != asked_container {
        hints.push(match format {
            Some(format) => {
                format!("`--format {format}` (or `format = \"{format}\"` in the profile)")
            }
            None => "the format the images were stored in".to_owned(),
        });
    }
    if found_made != asked_made {
        hints.push("the `[download.resize]` table the images were stored with".to_owned());
    }
    if hints.is_empty() {
        hints.push("the settings the images were stored with".to_owned());
    }
    hints.join(" and ")
}

/// Images stored so far, as the write transaction `txn` sees it.
fn stored(txn: &redb::WriteTransaction) -> Result<u64, StateError> {
    let table = txn.open_table(COUNTERS)?;
    Ok(table.get(counter::STORED)?.map_or(0, |v| v.value()))
}

pub(crate) fn read_counters(db: &Database) -> Result<Counters, StateError> {
    let txn = db.begin_read()?;
    let table = txn.open_table(COUNTERS)?;
    let get =
        |name: &str| -> Result<u64, StateError> { Ok(table.get(name)?.map_or(0, |v| v.value())) };
    Ok(Counters {
        pages_done: get(counter::PAGES_DONE)?,
        pages_failed: get(counter::PAGES_FAILED)?,
        pages_robots: get(counter::PAGES_ROBOTS)?,
        images_found: get(counter::IMAGES_FOUND)?,
        stored: get(counter::STORED)?,
        stored_bytes: get(counter::STORED_BYTES)?,
        duplicates: get(counter::DUPLICATES)?,
        failed: get(counter::FAILED)?,
        links_queued: get(counter::LINKS_QUEUED)?,
        rechecks_queued: get(counter::RECHECKS_QUEUED)?,
        rechecks_changed: get(counter::RECHECKS_CHANGED)?,
    })
}

/// Reads the record `key` of `table` and checks it: a damaged one is an error naming it, never
/// a wrong value passed on (a bit flip can leave valid JSON saying something else).
pub(crate) fn decode<T: records::Record>(
    table: &str,
    key: &str,
    bytes: &[u8],
) -> Result<T, StateError> {
    let corrupt = |detail: String| StateError::Corrupt {
        table: table.to_owned(),
        record: key.to_owned(),
        detail,
    };
    let record: T = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    record.check().map_err(corrupt)?;
    Ok(record)
}

pub(crate) fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Invariant: these records are plain structs of strings and numbers; serializing cannot fail.
    serde_json::to_vec(value).expect("state records serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_hint_names_the_format_the_resize_table_or_both() {
        let files = "image files, as downloaded";
        let shards = "WebDataset shards, as downloaded";
        let resized = "image files, resized to 256 px (keep_ratio, jpeg quality 95)";
        let webdataset = Some("webdataset".to_owned());
        assert_eq!(
            layout_hint(shards, files, webdataset.clone()),
            "`--format webdataset` (or `format = \"webdataset\"` in the profile)"
        );
        assert_eq!(
            layout_hint(resized, files, Some("files".to_owned())),
            "the `[download.resize]` table the images were stored with"
        );
        assert_eq!(
            layout_hint(shards, resized, webdataset),
            "`--format webdataset` (or `format = \"webdataset\"` in the profile) and the \
             `[download.resize]` table the images were stored with"
        );
        assert_eq!(
            layout_hint(shards, files, None),
            "the format the images were stored in"
        );
    }

    fn no_space() -> std::io::Error {
        std::io::Error::from_raw_os_error(28)
    }

    #[test]
    fn a_full_disk_inside_the_database_is_a_full_disk() {
        let cases = [
            StateError::from(redb::StorageError::Io(no_space())),
            StateError::Db(redb::Error::Io(no_space())),
            StateError::Open {
                path: "state.redb".into(),
                source: redb::DatabaseError::Storage(redb::StorageError::Io(no_space())),
            },
        ];
        for error in cases {
            assert!(error.is_disk_full(), "{error:?}");
            let wrapped = anyhow::Error::new(error).context("profile `x` did not finish");
            assert!(wrapped.chain().any(is_disk_full));
        }
        let other = StateError::Db(redb::Error::Io(std::io::Error::other("broken")));
        assert!(!other.is_disk_full());
    }

    #[test]
    fn each_opening_for_a_run_takes_the_next_number_and_starting_over_keeps_counting() {
        let state = State::in_memory("t").unwrap();
        let (first, run) = state.current_run().unwrap().unwrap();
        assert_eq!(first, 1);
        assert!(run.started > 0 && !run.listed);
        state.mark_run_listed(1).unwrap();
        state.init("t", None).unwrap();
        assert_eq!(state.current_run().unwrap().unwrap().0, 2);
        state.forget().unwrap();
        state.init("t", None).unwrap();
        let runs = state.runs().unwrap();
        assert_eq!(runs.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
        assert!(runs[&1].listed && !runs[&2].listed);
    }

    #[test]
    fn a_state_from_before_runs_were_numbered_has_none_and_its_images_are_run_0() {
        let state = State::in_memory("t").unwrap();
        let txn = state.db.begin_write().unwrap();
        txn.delete_table(RUNS).unwrap();
        txn.commit().unwrap();
        assert_eq!(state.current_run().unwrap(), None);
        assert!(state.runs().unwrap().is_empty());
        let old =
            br#"{"seq":1,"page":"p","rule":"r","attribute":"src","status":"pending","attempts":0}"#;
        let record = decode::<ImageRecord>("images_v1", "k", old).unwrap();
        assert_eq!((record.run, record.stored_run), (0, 0));
    }

    #[test]
    fn a_damaged_run_record_is_damage_named_by_its_number() {
        let state = State::in_memory("t").unwrap();
        let bad: [&[u8]; 2] = [b"{\"started\":", br#"{"started":0}"#];
        for bad in bad {
            let txn = state.db.begin_write().unwrap();
            txn.open_table(RUNS).unwrap().insert(1, bad).unwrap();
            txn.commit().unwrap();
            let error = state.current_run().unwrap_err();
            assert!(error.is_damage(), "{error}");
            let text = error.to_string();
            assert!(text.contains("`1`") && text.contains("runs_v1"), "{text}");
            assert!(state.runs().is_err());
        }
    }

    #[test]
    fn a_record_that_parses_but_cannot_be_right_is_damage_named_by_its_key() {
        let bad = br#"{"seq":1,"page":"p","rule":"r","attribute":"src","status":"stored","attempts":1,
            "stored":{"path":"abc/x.jpg","sha256":"not-hex","bytes":1,"content_type":"image/jpeg","width":1,"height":1}}"#;
        let error = decode::<ImageRecord>("images_v1", "http://x/1.jpg", bad).unwrap_err();
        assert!(error.is_damage());
        assert!(error.to_string().contains("`http://x/1.jpg`"), "{error}");
        let escaping = String::from_utf8_lossy(bad).replace("abc/x.jpg", "../x.jpg");
        let sha = "a".repeat(64);
        let escaping = escaping.replace("not-hex", &sha);
        assert!(decode::<ImageRecord>("images_v1", "k", escaping.as_bytes()).is_err());
    }
}
