//! The single writer: one thread owns every write transaction and batches whatever is queued
//! into one commit, so redb is never the bottleneck and writes never race.
//!
//! It is also the only place that gives a downloaded file its final name: checking the content
//! hash and renaming happen in one thread, so two URLs with the same bytes can never both be
//! stored, and a file only counts as stored once the commit that says so has succeeded.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use redb::{
    Database, MultimapTable, ReadableMultimapTable, ReadableTable, Table, TableHandle,
    WriteTransaction,
};
use scrape_core::phash;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::failure::{FailureClass, error_chain};
use crate::net::robots::RobotsRecord;
use crate::profile::NearDuplicates;

use super::ledger::{ImageDecision, ImageLedger, image_step};
use super::records::PageSeen;
use super::records::{
    ChainCheckpoint, FailureRecord, ImageRecord, ImageStatus, ImportCheckpoint, LinkRecord,
    NearDuplicateOf, NewImage, NewLink, PageRecord, PageResult, PageStatus, ROBOTS_CLASS, Revisit,
    StoredFile, now,
};
use super::shards::{ShardRecord, save_shards};
use super::tables::{
    CHAINS, CONTENT, COUNTERS, IMAGES, IMPORTS, LINK_QUEUE, LINKS, PAGES, PENDING, PHASH_BANDS,
    ROBOTS,
};
use super::{Counters, State, StateError, counter, decode, encode};
use crate::page::Validators;

/// Most operations applied in one transaction.
const MAX_BATCH: usize = 2048;

/// Where verified files get their final names. The output stage provides it
/// (`output::place::Files`), so the state never depends on how files are laid out; the writer
/// calls it in the thread that records the file as stored, before the commit that says so.
pub trait Placement: Send {
    /// Gives the verified `body` its place: `file.path` (relative to the output folder) is the
    /// name the path template gave it, which a placement that packs files (a tar shard)
    /// replaces with the member's. On an error a part file is gone and the image stays pending.
    fn place(
        &mut self,
        body: Payload,
        file: &mut StoredFile,
        sample: Sample<'_>,
    ) -> Result<(), StateError>;

    /// The placement's own records to commit with the batch whose files it just placed
    /// (the shards written to). Called just before the commit: a placement that writes in the
    /// background waits here until the batch's bytes are written, and an error fails the batch.
    fn take_records(&mut self) -> Result<Vec<ShardRecord>, StateError> {
        Ok(Vec::new())
    }

    /// The job has nothing left to place: what is open (a shard) is finished as it is.
    fn seal(&mut self) -> Result<(), StateError> {
        Ok(())
    }

    /// The batch's transaction is committed: what waited for it may be made visible.
    fn committed(&mut self) -> Result<(), StateError> {
        Ok(())
    }
}

/// A verified body as the writer gets it: in a part file, or in memory (a small body handed
/// over whole, see [`Held`]). The placement owns it: a body in memory keeps its share of the
/// budget until the placement lets it go, written.
#[derive(Debug)]
pub enum Payload {
    Part(PathBuf),
    Memory(Held),
}

impl Payload {
    /// Lets the body go unplaced (its bytes are stored already, or not kept).
    fn discard(self) {
        if let Self::Part(part) = self {
            let _ = std::fs::remove_file(part);
        }
    }
}

/// A small verified body handed to the writer in memory, with the share of the memory budget
/// it holds until it is placed (see `download::fetch_image`).
#[derive(Debug)]
pub struct Held {
    pub bytes: bytes::Bytes,
    pub permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// What a placement may store beside an image's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub url: &'a str,
    pub record: &'a ImageRecord,
}

/// A page done (or failed), the links it leads to and the chain's new checkpoint: committed
/// together.
#[derive(Debug)]
pub struct PageCommit {
    /// The start URL of the chain the page belongs to (or descends from, for a linked page).
    pub start: String,
    pub url: String,
    pub number: i64,
    /// Its images and links, or why it failed (a page had in part stores its images, is
    /// recorded as failed and queues no links, so the next run retries it); a done linked page
    /// leaves the queue.
    pub result: PageResult,
    /// The chain's new position; `None` for a page reached through a link.
    pub checkpoint: Option<ChainCheckpoint>,
    /// Images this page lists for other pages (a sitemap's image extension), each kept as
    /// found on its own page; stored only when this page is done.
    pub listed: Vec<(String, Vec<NewImage>)>,
    /// A chain's page: what a refresh asks it again with, kept when it is done.
    pub seen: PageSeen,
}

/// The end of one image's download.
#[derive(Debug)]
// Nearly every download ends stored: boxing that variant would add an allocation to each.
#[allow(clippy::large_enum_variant)]
pub enum DownloadResult {
    /// Bytes verified and waiting in `part`, or in `held` (then there is no part file);
    /// `file.path` is the name it should get.
    Stored {
        url: String,
        part: PathBuf,
        held: Option<Held>,
        file: StoredFile,
        /// The validators of the response the bytes came from.
        validators: Validators,
        /// The rights the file carries in itself.
        embedded: crate::extract::rights::Rights,
        attempts: u32,
    },
    Failed {
        url: String,
        failure: FailureRecord,
        attempts: u32,
    },
    /// An image `--recheck-images` asked again answered `304 Not Modified`.
    Unchanged { url: String },
}

/// A batch of URLs from a list and the list's new checkpoint: committed together. The
/// checkpoint's `added` and `duplicates` count what came before this batch; the writer adds the
/// batch's own.
#[derive(Debug)]
pub struct ImportCommit {
    /// The list's key in `imports_v1` (its path as given).
    pub list: String,
    pub images: Vec<NewImage>,
    pub checkpoint: ImportCheckpoint,
}

enum Op {
    Page(Box<PageCommit>, oneshot::Sender<Result<u64, String>>),
    Import(ImportCommit, oneshot::Sender<Result<u64, String>>),
    Download(Box<DownloadResult>),
    Robots(String, RobotsRecord),
    Links(
        String,
        String,
        Vec<NewLink>,
        oneshot::Sender<Result<u64, String>>,
    ),
    /// A chain's checkpoint; `true` when it moves past a page a refresh found unchanged.
    Chain(
        String,
        Box<ChainCheckpoint>,
        bool,
        oneshot::Sender<Result<u64, String>>,
    ),
    /// A linked page looked at again and found unchanged (`304`).
    UnchangedLink(String, oneshot::Sender<Result<u64, String>>),
    Flush(oneshot::Sender<()>),
    Seal(oneshot::Sender<()>),
}

/// Starts and owns the writer thread.
pub struct StateWriter;

/// How the rest of the program talks to the writer; cheap to clone.
#[derive(Clone)]
pub struct WriterHandle {
    tx: mpsc::Sender<Op>,
    counters: watch::Receiver<Counters>,
    new_work: Arc<Notify>,
    fatal: Arc<Mutex<Option<StateError>>>,
}

impl StateWriter {
    /// Starts the writer for `state`, giving verified files their final names through
    /// `placement` (the output stage's) and flagging near-duplicates by `near` (the job's
    /// rule, if it has one). A fatal error (a failed commit, a full disk) is kept for
    /// [`WriterHandle::take_fatal`] and cancels `cancel`.
    pub fn start(
        state: &State,
        placement: Box<dyn Placement>,
        near: Option<NearDuplicates>,
        cancel: CancellationToken,
    ) -> Result<(WriterHandle, std::thread::JoinHandle<()>), StateError> {
        let initial = state.counters()?;
        // Images found and stored from here on carry the number of the run that opened the
        // state (0 for one opened without a run, as no job does).
        let run = state.current_run()?.map_or(0, |(number, _)| number);
        let (tx, rx) = mpsc::channel(4096);
        let (counters_tx, counters) = watch::channel(initial);
        let new_work = Arc::new(Notify::new());
        let fatal = Arc::new(Mutex::new(None));
        let worker = Worker {
            db: state.database(),
            placement: std::cell::RefCell::new(placement),
            near,
            run,
            counters: counters_tx,
            new_work: Arc::clone(&new_work),
            fatal: Arc::clone(&fatal),
            cancel,
        };
        let thread = std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || worker.run(rx))
            .map_err(|source| StateError::Io {
                path: "state-writer thread".into(),
                source,
            })?;
        Ok((
            WriterHandle {
                tx,
                counters,
                new_work,
                fatal,
            },
            thread,
        ))
    }
}

impl WriterHandle {
    /// Sends the operation `op` makes of a reply channel, and waits for its commit: its
    /// answer, or the writer's fatal error.
    async fn ask(
        &self,
        op: impl FnOnce(oneshot::Sender<Result<u64, String>>) -> Op,
    ) -> Result<u64, StateError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(op(reply))
            .await
            .map_err(|_| StateError::WriterGone)?;
        match answer.await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) | Err(_) => Err(self.take_fatal().unwrap_or(StateError::WriterGone)),
        }
    }

    /// Commits a page with its images and checkpoint; returns how many images were new.
    pub async fn commit_page(&self, commit: PageCommit) -> Result<u64, StateError> {
        self.ask(|reply| Op::Page(Box::new(commit), reply)).await
    }

    /// Commits the checkpoint of the chain from `start` alone, for an end that is no page of
    /// its own: a loop back to a page done, a missing page past the last, or `max_pages`
    /// reached with pages the chain was handed.
    pub async fn commit_checkpoint(
        &self,
        start: &str,
        checkpoint: &ChainCheckpoint,
    ) -> Result<(), StateError> {
        self.commit_chain(start, checkpoint, false).await
    }

    /// Commits the checkpoint of the chain from `start` past a page the server said had not
    /// changed (`304`), counted as such; nothing else of the page changes.
    pub async fn commit_unchanged(
        &self,
        start: &str,
        checkpoint: &ChainCheckpoint,
    ) -> Result<(), StateError> {
        self.commit_chain(start, checkpoint, true).await
    }

    async fn commit_chain(
        &self,
        start: &str,
        checkpoint: &ChainCheckpoint,
        unchanged: bool,
    ) -> Result<(), StateError> {
        let checkpoint = Box::new(checkpoint.clone());
        self.ask(|reply| Op::Chain(start.to_owned(), checkpoint, unchanged, reply))
            .await
            .map(drop)
    }

    /// A linked page looked at again that the server said had not changed (`304`): it leaves
    /// the link queue, counted as such; nothing else of it changes.
    pub async fn commit_unchanged_link(&self, url: &str) -> Result<(), StateError> {
        self.ask(|reply| Op::UnchangedLink(url.to_owned(), reply))
            .await
            .map(drop)
    }

    /// Queues `links` found on `found_on`, descending from `start`, the way a page's links are
    /// (those known already, as links or pages, are left out); for links that come from no
    /// page of a chain, such as a profile's sitemaps.
    pub async fn queue_links(
        &self,
        start: &str,
        found_on: &str,
        links: Vec<NewLink>,
    ) -> Result<(), StateError> {
        self.ask(|reply| Op::Links(start.to_owned(), found_on.to_owned(), links, reply))
            .await
            .map(drop)
    }

    /// Commits a batch of listed URLs with the list's checkpoint; returns how many were new.
    pub async fn commit_import(&self, commit: ImportCommit) -> Result<u64, StateError> {
        self.ask(|reply| Op::Import(commit, reply)).await
    }

    /// Queues a download's end; it is committed with the next batch.
    pub async fn finish_download(&self, result: DownloadResult) -> Result<(), StateError> {
        self.tx
            .send(Op::Download(Box::new(result)))
            .await
            .map_err(|_| StateError::WriterGone)
    }

    /// Queues `origin`'s robots.txt record; it is committed with the next batch.
    pub async fn save_robots(
        &self,
        origin: String,
        record: RobotsRecord,
    ) -> Result<(), StateError> {
        self.tx
            .send(Op::Robots(origin, record))
            .await
            .map_err(|_| StateError::WriterGone)
    }

    /// Waits until everything queued before this call is committed.
    pub async fn flush(&self) -> Result<(), StateError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Op::Flush(reply))
            .await
            .map_err(|_| StateError::WriterGone)?;
        answer.await.map_err(|_| StateError::WriterGone)
    }

    /// Waits until everything queued before this call is committed, with the placement's open
    /// output (a shard) finished: for the end of a job with nothing pending.
    pub async fn seal(&self) -> Result<(), StateError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Op::Seal(reply))
            .await
            .map_err(|_| StateError::WriterGone)?;
        answer
            .await
            .map_err(|_| self.take_fatal().unwrap_or(StateError::WriterGone))
    }

    /// The totals as of the last commit.
    pub fn counters(&self) -> watch::Receiver<Counters> {
        self.counters.clone()
    }

    /// Notified after a commit that added pending downloads.
    pub fn new_work(&self) -> Arc<Notify> {
        Arc::clone(&self.new_work)
    }

    /// The error that stopped the writer, if one did.
    pub fn take_fatal(&self) -> Option<StateError> {
        self.fatal.lock().ok()?.take()
    }
}

struct Worker {
    db: Arc<Database>,
    placement: std::cell::RefCell<Box<dyn Placement>>,
    near: Option<NearDuplicates>,
    /// The run whose images these are ([`ImageRecord::run`]).
    run: u32,
    counters: watch::Sender<Counters>,
    new_work: Arc<Notify>,
    fatal: Arc<Mutex<Option<StateError>>>,
    cancel: CancellationToken,
}

impl Worker {
    fn run(self, mut rx: mpsc::Receiver<Op>) {
        while let Some(first) = rx.blocking_recv() {
            let mut ops = vec![first];
            while ops.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => ops.push(op),
                    Err(_) => break,
                }
            }
            if let Err(e) = self.apply(ops) {
                self.fail(e);
                // Keep draining so senders never block forever; nothing more is written.
                while rx.blocking_recv().is_some() {}
                return;
            }
        }
    }

    fn fail(&self, error: StateError) {
        if let Ok(mut slot) = self.fatal.lock()
            && slot.is_none()
        {
            *slot = Some(error);
        }
        self.cancel.cancel();
    }

    /// Applies `ops` in one transaction and answers their senders once it is committed.
    fn apply(&self, ops: Vec<Op>) -> Result<(), StateError> {
        let txn = self.db.begin_write()?;
        let mut page_replies = Vec::new();
        let mut flushes = Vec::new();
        let mut added = 0;
        {
            let mut tables = Tables::open(&txn, self.run)?;
            for op in ops {
                match op {
                    Op::Page(commit, reply) => {
                        let new = tables.commit_page(*commit)?;
                        added += new;
                        page_replies.push((reply, new));
                    }
                    Op::Import(commit, reply) => {
                        let new = tables.commit_import(commit)?;
                        added += new;
                        page_replies.push((reply, new));
                    }
                    Op::Download(result) => {
                        let mut placement = self.placement.borrow_mut();
                        if let Err(e) =
                            tables.finish_download(*result, placement.as_mut(), self.near)
                        {
                            // The image stays pending; the run stops and a rerun retries it.
                            self.fail(e);
                        }
                    }
                    Op::Chain(start, checkpoint, unchanged, reply) => {
                        tables
                            .chains
                            .insert(start.as_str(), encode(&*checkpoint).as_slice())?;
                        if unchanged {
                            tables.bump(counter::PAGES_UNCHANGED, 1)?;
                        }
                        page_replies.push((reply, 0));
                    }
                    Op::Links(start, found_on, links, reply) => {
                        tables.add_links(&start, &found_on, links)?;
                        page_replies.push((reply, 0));
                    }
                    Op::UnchangedLink(url, reply) => {
                        tables.leave_link_queue(&url)?;
                        tables.bump(counter::PAGES_UNCHANGED, 1)?;
                        page_replies.push((reply, 0));
                    }
                    Op::Robots(origin, record) => {
                        tables
                            .robots
                            .insert(origin.as_str(), encode(&record).as_slice())?;
                    }
                    Op::Flush(reply) => flushes.push(reply),
                    Op::Seal(reply) => {
                        self.placement.borrow_mut().seal()?;
                        flushes.push(reply);
                    }
                }
            }
            tables.save_counters()?;
        }
        save_shards(&txn, &self.placement.borrow_mut().take_records()?)?;
        let committed = txn.commit();
        if let Err(e) = committed {
            for (reply, _) in page_replies {
                let _ = reply.send(Err("commit failed".into()));
            }
            return Err(e.into());
        }
        for (reply, new) in page_replies {
            let _ = reply.send(Ok(new));
        }
        // The batch is safe in the database; what it finished becomes visible (before a
        // flush or a seal is answered: a sealed job's shards are all in place then). A failure
        // here stops the run, and the next one finishes the renames from the records.
        self.placement.borrow_mut().committed()?;
        for reply in flushes {
            let _ = reply.send(());
        }
        if let Ok(counters) = super::read_counters(&self.db) {
            self.counters.send_replace(counters);
        }
        if added > 0 {
            self.new_work.notify_one();
        }
        Ok(())
    }
}

/// The tables one batch writes to, open for the whole transaction.
struct Tables<'t> {
    counters: Table<'t, &'static str, u64>,
    chains: Table<'t, &'static str, &'static [u8]>,
    pages: Table<'t, &'static str, &'static [u8]>,
    images: Table<'t, &'static str, &'static [u8]>,
    pending: Table<'t, u64, &'static str>,
    content: Table<'t, &'static str, &'static str>,
    imports: Table<'t, &'static str, &'static [u8]>,
    links: Table<'t, &'static str, &'static [u8]>,
    link_queue: Table<'t, u64, &'static str>,
    robots: Table<'t, &'static str, &'static [u8]>,
    phash_bands: MultimapTable<'t, (u32, u32, u64), (u64, &'static str)>,
    /// The run that writes: new images are found by it, settled ones stored by it.
    run: u32,
    /// Counter changes not written yet (see [`Tables::bump`]).
    bumps: Vec<(Cow<'static, str>, i64)>,
}

impl<'t> Tables<'t> {
    fn open(txn: &'t WriteTransaction, run: u32) -> Result<Self, StateError> {
        Ok(Self {
            counters: txn.open_table(COUNTERS)?,
            chains: txn.open_table(CHAINS)?,
            pages: txn.open_table(PAGES)?,
            images: txn.open_table(IMAGES)?,
            pending: txn.open_table(PENDING)?,
            content: txn.open_table(CONTENT)?,
            imports: txn.open_table(IMPORTS)?,
            links: txn.open_table(LINKS)?,
            link_queue: txn.open_table(LINK_QUEUE)?,
            robots: txn.open_table(ROBOTS)?,
            phash_bands: txn.open_multimap_table(PHASH_BANDS)?,
            run,
            bumps: Vec::new(),
        })
    }

    /// Adds `delta` to counter `name`, in memory until [`Tables::save_counters`]: a batch
    /// touches each counter once, not once per image.
    fn bump(&mut self, name: impl Into<Cow<'static, str>>, delta: i64) -> Result<(), StateError> {
        let name = name.into();
        match self.bumps.iter_mut().find(|(n, _)| *n == name) {
            Some((_, sum)) => *sum += delta,
            None => self.bumps.push((name, delta)),
        }
        Ok(())
    }

    /// Writes the counters the batch bumped.
    fn save_counters(&mut self) -> Result<(), StateError> {
        for (name, delta) in std::mem::take(&mut self.bumps) {
            if delta == 0 {
                continue;
            }
            let current = self.counters.get(&*name)?.map_or(0, |v| v.value());
            self.counters
                .insert(&*name, current.saturating_add_signed(delta))?;
        }
        Ok(())
    }

    /// Records the page, adds its images that are new, and moves the chain's checkpoint.
    fn commit_page(&mut self, commit: PageCommit) -> Result<u64, StateError> {
        let previous: Option<PageRecord> = self
            .pages
            .get(commit.url.as_str())?
            .map(|v| decode(super::tables::PAGES.name(), &commit.url, v.value()))
            .transpose()?;
        if previous
            .as_ref()
            .is_some_and(|p| p.status == PageStatus::Failed)
        {
            self.bump(counter::PAGES_FAILED, -1)?;
        }
        if previous
            .as_ref()
            .is_some_and(|p| p.class.as_deref() == Some(ROBOTS_CLASS))
        {
            self.bump(counter::PAGES_ROBOTS, -1)?;
        }
        let record = commit
            .result
            .record_seen(&commit.start, commit.number, now(), commit.seen);
        match record.status {
            PageStatus::Failed => self.bump(counter::PAGES_FAILED, 1)?,
            PageStatus::Done
                if previous
                    .as_ref()
                    .is_none_or(|p| p.status != PageStatus::Done) =>
            {
                self.bump(counter::PAGES_DONE, 1)?;
            }
            PageStatus::Done => {}
        }
        if record.class.as_deref() == Some(ROBOTS_CLASS) {
            self.bump(counter::PAGES_ROBOTS, 1)?;
        }
        let (images, links) = match commit.result {
            PageResult::Done { images, links } => (images, links),
            PageResult::Partial { images, .. } => (images, Vec::new()),
            PageResult::Failed(_) => (Vec::new(), Vec::new()),
        };
        let done = record.status == PageStatus::Done;
        let mut new = self.add_images(&commit.url, images)?;
        if done {
            for (page, images) in commit.listed {
                new += self.add_images(&page, images)?;
            }
        }
        self.pages
            .insert(commit.url.as_str(), encode(&record).as_slice())?;
        if let Some(checkpoint) = &commit.checkpoint {
            self.chains
                .insert(commit.start.as_str(), encode(checkpoint).as_slice())?;
        }
        if done {
            self.leave_link_queue(&commit.url)?;
            self.add_links(&commit.start, &commit.url, links)?;
        }
        Ok(new)
    }

    /// A linked page is done: it leaves the queue (its record stays, so it is never queued
    /// again). A failed one stays queued for the next run.
    fn leave_link_queue(&mut self, url: &str) -> Result<(), StateError> {
        let record = self
            .links
            .get(url)?
            .map(|v| decode::<LinkRecord>(super::tables::LINKS.name(), url, v.value()))
            .transpose()?;
        if let Some(record) = record
            && self.link_queue.remove(record.seq)?.is_some()
        {
            self.bump(counter::LINKS_QUEUED, -1)?;
            self.bump(format!("{}{}", counter::LINKS_QUEUED_AT, record.level), -1)?;
        }
        Ok(())
    }

    /// Queues the links not known yet (as links or as pages of a chain), found on `page`, and
    /// queues again the known ones a refresh looks at once more (see [`Revisit`]).
    fn add_links(
        &mut self,
        start: &str,
        page: &str,
        links: Vec<NewLink>,
    ) -> Result<(), StateError> {
        if links.is_empty() {
            return Ok(());
        }
        let mut seq = self
            .counters
            .get(counter::NEXT_LINK_SEQ)?
            .map_or(0, |v| v.value());
        let mut queued = 0;
        for link in links {
            let url = link.url.as_str();
            let known = self
                .links
                .get(url)?
                .map(|v| decode::<LinkRecord>(super::tables::LINKS.name(), url, v.value()))
                .transpose()?;
            let record = match known {
                Some(known) => match self.revisited(known, &link)? {
                    Some(record) => record,
                    None => continue,
                },
                None if self.pages.get(url)?.is_some() => continue,
                None => {
                    self.bump(format!("{}{}", counter::LINKS_FOUND_AT, link.level), 1)?;
                    LinkRecord {
                        seq,
                        start: start.to_owned(),
                        found_on: page.to_owned(),
                        level: link.level,
                        depth: link.depth,
                        metadata: link.metadata,
                        lastmod: link.lastmod,
                        queued_by: self.run,
                    }
                }
            };
            let record = LinkRecord { seq, ..record };
            self.links.insert(url, encode(&record).as_slice())?;
            self.link_queue.insert(seq, url)?;
            self.bump(format!("{}{}", counter::LINKS_QUEUED_AT, record.level), 1)?;
            seq += 1;
            queued += 1;
        }
        self.counters.insert(counter::NEXT_LINK_SEQ, seq)?;
        self.bump(counter::LINKS_QUEUED, queued)?;
        Ok(())
    }

    /// `known`, found again as `link`, as it is queued once more by a refresh: `None` when it
    /// is left alone (not to be looked at again, queued by this run already, still queued, or
    /// listed with the `lastmod` it had).
    fn revisited(
        &mut self,
        known: LinkRecord,
        link: &NewLink,
    ) -> Result<Option<LinkRecord>, StateError> {
        let again = match link.revisit {
            Revisit::Never => false,
            Revisit::Once => true,
            Revisit::IfModified => link.lastmod.is_some() && link.lastmod != known.lastmod,
        };
        if !again || known.queued_by == self.run || self.link_queue.get(known.seq)?.is_some() {
            return Ok(None);
        }
        Ok(Some(LinkRecord {
            queued_by: self.run,
            lastmod: link.lastmod.clone().or(known.lastmod),
            ..known
        }))
    }

    /// Adds the images not known yet as pending downloads, found on `page`; returns how many.
    fn add_images(&mut self, page: &str, images: Vec<NewImage>) -> Result<u64, StateError> {
        let mut seq = self
            .counters
            .get(counter::NEXT_SEQ)?
            .map_or(0, |v| v.value());
        let mut new = 0;
        for image in images {
            if self.images.get(image.url.as_str())?.is_some() {
                continue;
            }
            let record = ImageRecord {
                seq,
                page: page.to_owned(),
                rule: image.rule,
                attribute: image.attribute,
                metadata: image.metadata,
                caption: image.caption,
                rights: image.rights,
                status: ImageStatus::Pending,
                attempts: 0,
                stored: None,
                failure: None,
                run: self.run,
                stored_run: 0,
                validators: Default::default(),
                recheck: false,
            };
            self.images
                .insert(image.url.as_str(), encode(&record).as_slice())?;
            self.pending.insert(seq, image.url.as_str())?;
            seq += 1;
            new += 1;
        }
        self.counters.insert(counter::NEXT_SEQ, seq)?;
        self.bump(counter::IMAGES_FOUND, new as i64)?;
        Ok(new)
    }

    /// Adds a batch of listed URLs and moves the list's checkpoint, counting the batch's new
    /// URLs and duplicates into it.
    fn commit_import(&mut self, mut commit: ImportCommit) -> Result<u64, StateError> {
        let offered = commit.images.len() as u64;
        let new = self.add_images(&commit.list, commit.images)?;
        commit.checkpoint.count_batch(offered, new);
        self.imports
            .insert(commit.list.as_str(), encode(&commit.checkpoint).as_slice())?;
        Ok(new)
    }

    /// Records a download's end; a stored file gets its final name here (or is dropped as a
    /// duplicate of content already stored).
    fn finish_download(
        &mut self,
        result: DownloadResult,
        placement: &mut dyn Placement,
        near: Option<NearDuplicates>,
    ) -> Result<(), StateError> {
        let url = match &result {
            DownloadResult::Stored { url, .. }
            | DownloadResult::Failed { url, .. }
            | DownloadResult::Unchanged { url } => url.clone(),
        };
        let Some(mut record) = self
            .images
            .get(url.as_str())?
            .map(|v| decode::<ImageRecord>(super::tables::IMAGES.name(), &url, v.value()))
            .transpose()?
        else {
            return Ok(());
        };
        if record.recheck && !self.rechecked_anew(&mut record, &result)? {
            // It keeps what it had, the run that stored it too.
            self.pending.remove(record.seq)?;
            self.images
                .insert(url.as_str(), encode(&record).as_slice())?;
            return Ok(());
        }
        if record.status != ImageStatus::Pending {
            if let DownloadResult::Stored {
                part, held: None, ..
            } = &result
            {
                let _ = std::fs::remove_file(part);
            }
            return Ok(());
        }
        match result {
            DownloadResult::Stored {
                part,
                held,
                mut file,
                validators,
                embedded,
                attempts,
                ..
            } => {
                let body = match held {
                    Some(held) => Payload::Memory(held),
                    None => Payload::Part(part),
                };
                record.validators = validators;
                record.add_embedded(embedded);
                // Over every run: `scrape retry` adds to the attempts before it.
                record.attempts = record.attempts.saturating_add(attempts);
                // The tables answer at once, inside this transaction.
                let ImageDecision { fate, searched } = image_step(self, &url, &mut file, near)
                    .now_or_never()
                    .ok_or(StateError::TaskLost)??;
                if !fate.keeps_bytes() {
                    body.discard();
                    self.bump(counter::DUPLICATES, 1)?;
                    record.settle_stored(file, &fate);
                    return self.settle(&url, &mut record);
                }
                let sample = Sample {
                    url: &url,
                    record: &record,
                };
                match placement.place(body, &mut file, sample) {
                    Ok(()) => {
                        self.content
                            .insert(file.content_key(), file.path.as_str())?;
                        if let Some((rule, hash)) = searched {
                            let key = file.content_key().to_owned();
                            self.index_phash(hash, rule.distance, &key)?;
                        }
                        self.bump(counter::STORED, 1)?;
                        self.bump(counter::STORED_BYTES, file.bytes as i64)?;
                        record.settle_stored(file, &fate);
                    }
                    // A full disk stops the run (a rerun continues once there is room);
                    // any other write error belongs to this image alone.
                    Err(e) if e.is_disk_full() => return Err(e),
                    Err(e) => {
                        let failure = FailureRecord {
                            class: FailureClass::Disk.name(),
                            detail: error_chain(&e),
                        };
                        record.settle_failed(failure);
                        self.bump(counter::FAILED, 1)?;
                    }
                }
            }
            DownloadResult::Failed {
                failure, attempts, ..
            } => {
                record.attempts = record.attempts.saturating_add(attempts);
                record.settle_failed(failure);
                self.bump(counter::FAILED, 1)?;
            }
            // Only an image asked again answers 304, and it was settled above.
            DownloadResult::Unchanged { .. } => {}
        }
        self.settle(&url, &mut record)
    }

    /// Whether an image `--recheck-images` asked again (`record`) now serves other bytes: it is
    /// made pending again, to be stored as any new image is (the file it had stays where it
    /// is, for the images that share it), and listed as stored by this run. Otherwise (a
    /// `304`, the same bytes, or a failure) it keeps what it had, and `result`'s body goes.
    fn rechecked_anew(
        &mut self,
        record: &mut ImageRecord,
        result: &DownloadResult,
    ) -> Result<bool, StateError> {
        record.recheck = false;
        self.bump(counter::RECHECKS_QUEUED, -1)?;
        let changed = match result {
            DownloadResult::Stored {
                file, validators, ..
            } => {
                record.validators = validators.clone();
                record
                    .stored
                    .as_ref()
                    .is_none_or(|stored| stored.content_key() != file.content_key())
            }
            DownloadResult::Failed { .. } | DownloadResult::Unchanged { .. } => false,
        };
        if !changed {
            if let DownloadResult::Stored {
                part, held: None, ..
            } = result
            {
                let _ = std::fs::remove_file(part);
            }
            return Ok(false);
        }
        match (record.status, &record.stored) {
            (ImageStatus::Stored, Some(stored)) => {
                self.bump(counter::STORED, -1)?;
                self.bump(counter::STORED_BYTES, -(stored.bytes as i64))?;
            }
            (ImageStatus::Duplicate, _) => self.bump(counter::DUPLICATES, -1)?,
            _ => {}
        }
        self.bump(counter::RECHECKS_CHANGED, 1)?;
        record.status = ImageStatus::Pending;
        record.stored_run = 0;
        Ok(true)
    }

    /// The stored picture nearest to `hash`, within `distance` bits, if there is one: found
    /// through the band index, so only pictures sharing a band with it are compared.
    fn near_duplicate_of(
        &self,
        hash: u64,
        distance: u32,
    ) -> Result<Option<NearDuplicateOf>, StateError> {
        let Some((sha256, bits)) = nearest(&self.phash_bands, hash, distance)?.found else {
            return Ok(None);
        };
        let path = self
            .content
            .get(sha256.as_str())?
            .map(|v| v.value().to_owned());
        Ok(path.map(|path| NearDuplicateOf {
            sha256,
            path,
            distance: bits,
        }))
    }

    /// Adds a stored picture's hash to the band index.
    fn index_phash(&mut self, hash: u64, distance: u32, sha256: &str) -> Result<(), StateError> {
        for (band, value) in phash::bands(hash, distance) {
            self.phash_bands
                .insert((distance, band, value), (hash, sha256))?;
        }
        Ok(())
    }

    /// An image is no longer pending: its record says how it ended (and, the first time it is
    /// stored or found a duplicate, by which run).
    fn settle(&mut self, url: &str, record: &mut ImageRecord) -> Result<(), StateError> {
        if matches!(record.status, ImageStatus::Stored | ImageStatus::Duplicate)
            && record.stored_run == 0
        {
            record.stored_run = self.run;
        }
        self.pending.remove(record.seq)?;
        self.images.insert(url, encode(record).as_slice())?;
        Ok(())
    }
}

/// The one-process run's ledger: its tables, in the state writer's transaction.
impl ImageLedger for Tables<'_> {
    type Error = StateError;

    fn stored_path(&self, key: &str) -> impl Future<Output = Result<Option<String>, StateError>> {
        let path = self
            .content
            .get(key)
            .map(|v| v.map(|v| v.value().to_owned()));
        std::future::ready(path.map_err(StateError::from))
    }

    fn nearest(
        &self,
        _url: &str,
        _file: &StoredFile,
        rule: NearDuplicates,
        hash: u64,
    ) -> impl Future<Output = Result<Option<NearDuplicateOf>, StateError>> {
        std::future::ready(self.near_duplicate_of(hash, rule.distance))
    }
}

/// What a band-index lookup found, and how many indexed hashes it compared.
#[derive(Debug, PartialEq, Eq)]
pub struct Nearest {
    /// The nearest hash's sha256 and its distance; ties go to the smaller sha256, so the
    /// answer does not depend on the order of the index.
    pub found: Option<(String, u32)>,
    pub compared: usize,
}

/// The picture in `index` nearest to `hash` within `distance` bits. Reads only the entries
/// of `hash`'s own bands (pigeonhole: a hash within `distance` shares one), never the whole
/// index.
pub fn nearest(
    index: &impl ReadableMultimapTable<(u32, u32, u64), (u64, &'static str)>,
    hash: u64,
    distance: u32,
) -> Result<Nearest, StateError> {
    let mut best: Option<(String, u32)> = None;
    let mut compared = 0;
    for (band, value) in phash::bands(hash, distance) {
        for entry in index.get((distance, band, value))? {
            let entry = entry?;
            let (other, sha256) = entry.value();
            compared += 1;
            let bits = phash::distance(hash, other);
            let better = bits <= distance
                && best
                    .as_ref()
                    .is_none_or(|(s, b)| (bits, sha256) < (*b, s.as_str()));
            if better {
                best = Some((sha256.to_owned(), bits));
            }
        }
    }
    Ok(Nearest {
        found: best,
        compared,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Files "placed" by name, nothing on disk.
    struct Nowhere;

    impl Placement for Nowhere {
        fn place(
            &mut self,
            _body: Payload,
            _file: &mut StoredFile,
            _sample: Sample<'_>,
        ) -> Result<(), StateError> {
            Ok(())
        }
    }

    fn start(state: &State) -> (WriterHandle, std::thread::JoinHandle<()>) {
        StateWriter::start(state, Box::new(Nowhere), None, CancellationToken::new()).unwrap()
    }

    fn link(url: &str, depth: u32) -> NewLink {
        NewLink {
            url: url.to_owned(),
            level: "photo".to_owned(),
            depth,
            metadata: BTreeMap::from([("title".to_owned(), url.to_owned())]),
            lastmod: None,
            revisit: Revisit::Never,
        }
    }

    fn image(url: &str) -> NewImage {
        NewImage {
            url: url.to_owned(),
            rule: "r".to_owned(),
            attribute: "src".to_owned(),
            metadata: BTreeMap::new(),
            caption: None,
            rights: None,
        }
    }

    fn page(
        url: &str,
        outcome: Result<Vec<NewImage>, FailureRecord>,
        links: Vec<NewLink>,
    ) -> PageCommit {
        PageCommit {
            start: "https://a.test/".to_owned(),
            url: url.to_owned(),
            number: 0,
            result: match outcome {
                Ok(images) => PageResult::Done { images, links },
                Err(error) => PageResult::Failed(error),
            },
            checkpoint: None,
            listed: Vec::new(),
            seen: PageSeen::default(),
        }
    }

    fn queued(state: &State) -> Vec<String> {
        state
            .queued_links_from(0, 100)
            .unwrap()
            .into_iter()
            .map(|(url, _)| url)
            .collect()
    }

    #[test]
    fn the_band_index_finds_a_near_hash_by_its_bands_without_reading_the_others() {
        let state = State::in_memory("t").unwrap();
        let db = state.database();
        let txn = db.begin_write().unwrap();
        let distance = 4;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let stored = 20_000;
        let target = 0x0123_4567_89ab_cdefu64;
        let sha = |n: u64| format!("{n:064x}");
        {
            let mut index = txn.open_multimap_table(PHASH_BANDS).unwrap();
            let mut add = |hash: u64, sha256: &str| {
                for (band, value) in phash::bands(hash, distance) {
                    index
                        .insert((distance, band, value), (hash, sha256))
                        .unwrap();
                }
            };
            for n in 0..stored {
                add(next(), &sha(n));
            }
            add(target, &sha(u64::MAX));
        }
        {
            // Within the same bands but under another distance: never compared.
            let mut index = txn.open_multimap_table(PHASH_BANDS).unwrap();
            for (band, value) in phash::bands(target, 3) {
                index.insert((3, band, value), (target, "other")).unwrap();
            }
        }
        let index = txn.open_multimap_table(PHASH_BANDS).unwrap();

        let near = target ^ 0b1011 << 20;
        let found = nearest(&index, near, distance).unwrap();
        assert_eq!(found.found, Some((sha(u64::MAX), 3)));
        assert!(
            found.compared < 100,
            "{} of {stored} hashes compared",
            found.compared
        );

        let far = target ^ 0b11111 << 40;
        let missed = nearest(&index, far, distance).unwrap();
        assert_eq!(missed.found, None, "5 bits apart is beyond 4");
    }

    #[tokio::test]
    async fn a_link_found_twice_is_queued_once_and_leaves_the_queue_when_its_page_is_done() {
        let state = State::in_memory("t").unwrap();
        let (writer, thread) = start(&state);
        let listing = |n: u32, links| page(&format!("https://a.test/l/{n}"), Ok(vec![]), links);
        writer
            .commit_page(listing(
                1,
                vec![link("https://a.test/d/1", 1), link("https://a.test/d/2", 1)],
            ))
            .await
            .unwrap();
        writer
            .commit_page(listing(
                2,
                vec![link("https://a.test/d/2", 1), link("https://a.test/l/1", 1)],
            ))
            .await
            .unwrap();
        assert_eq!(
            queued(&state),
            ["https://a.test/d/1", "https://a.test/d/2"],
            "d/2 once, l/1 is a page already"
        );
        let (_, first) = &state.queued_links_from(0, 1).unwrap()[0];
        assert_eq!(first.found_on, "https://a.test/l/1");
        assert_eq!(first.depth, 1);
        assert_eq!(first.metadata["title"], "https://a.test/d/1");

        let done = page(
            "https://a.test/d/1",
            Ok(vec![image("https://a.test/full/1.jpg")]),
            vec![link("https://a.test/d/3", 2)],
        );
        assert_eq!(
            writer.commit_page(done).await.unwrap(),
            1,
            "its image is new"
        );
        writer
            .commit_page(page(
                "https://a.test/d/2",
                Err(FailureRecord {
                    class: "http_500".into(),
                    detail: "HTTP 500".into(),
                }),
                vec![],
            ))
            .await
            .unwrap();
        assert_eq!(
            queued(&state),
            ["https://a.test/d/2", "https://a.test/d/3"],
            "a done page leaves the queue, a failed one stays for the next run"
        );
        let counters = state.counters().unwrap();
        assert_eq!(
            (
                counters.pages_done,
                counters.pages_failed,
                counters.images_found
            ),
            (3, 1, 1)
        );
        writer
            .commit_page(listing(3, vec![link("https://a.test/d/1", 1)]))
            .await
            .unwrap();
        assert_eq!(queued(&state).len(), 2, "a page done is never queued again");
        drop(writer);
        thread.join().unwrap();
    }

    fn record_of(state: &State, url: &str) -> ImageRecord {
        let mut found = None;
        state
            .for_each_image(|u, record| {
                if u == url {
                    found = Some(record.clone());
                }
                Ok(())
            })
            .unwrap();
        found.unwrap_or_else(|| panic!("no record of {url}"))
    }

    fn stored(url: &str, sha: char) -> DownloadResult {
        DownloadResult::Stored {
            url: url.to_owned(),
            part: PathBuf::from("nowhere.part"),
            held: None,
            file: StoredFile {
                path: format!("{sha}.jpg"),
                sha256: sha.to_string().repeat(64),
                bytes: 1,
                content_type: "image/jpeg".into(),
                width: 1,
                height: 1,
                phash: None,
                near_duplicate_of: None,
                original: None,
            },
            validators: Validators::default(),
            embedded: Default::default(),
            attempts: 1,
        }
    }

    #[tokio::test]
    async fn a_refresh_queues_a_known_page_again_once_per_run_and_a_dated_one_when_its_date_changed()
     {
        let state = State::in_memory("t").unwrap();
        let (album, listed) = ("https://a.test/album/1", "https://a.test/p/1");
        let again = |url: &str, revisit: Revisit, lastmod: Option<&str>| NewLink {
            revisit,
            lastmod: lastmod.map(str::to_owned),
            ..link(url, 1)
        };
        let (writer, thread) = start(&state);
        let links = vec![
            again(album, Revisit::Once, None),
            again(listed, Revisit::IfModified, Some("2024-05-01")),
        ];
        let first = page("https://a.test/", Ok(vec![]), links.clone());
        writer.commit_page(first).await.unwrap();
        // Found again while still queued: queued once.
        let second = page("https://a.test/", Ok(vec![]), links.clone());
        writer.commit_page(second).await.unwrap();
        assert_eq!(queued(&state), [album, listed]);
        for url in [album, listed] {
            writer
                .commit_page(page(url, Ok(vec![]), vec![]))
                .await
                .unwrap();
        }
        // Done, and found again by the same run: not queued again.
        let third = page("https://a.test/", Ok(vec![]), links.clone());
        writer.commit_page(third).await.unwrap();
        assert_eq!(queued(&state), Vec::<String>::new());
        drop(writer);
        thread.join().unwrap();

        // The next run: the listing is looked at again, the dated page only once its date
        // changed, a page found again without a revisit never.
        state.init("t", None).unwrap();
        let (writer, thread) = start(&state);
        let links = vec![
            again(album, Revisit::Once, None),
            again(listed, Revisit::IfModified, Some("2024-05-01")),
        ];
        let found = state.links_found("photo").unwrap();
        writer
            .commit_page(page("https://a.test/", Ok(vec![]), links))
            .await
            .unwrap();
        assert_eq!(queued(&state), [album]);
        let (_, record) = &state.queued_links_from(0, 10).unwrap()[0];
        assert_eq!((record.queued_by, record.depth), (2, 1));
        assert_eq!(
            record.metadata.get("title").map(String::as_str),
            Some(album)
        );
        writer
            .commit_page(page(
                "https://a.test/sitemap.xml",
                Ok(vec![]),
                vec![
                    again(listed, Revisit::IfModified, Some("2024-06-01")),
                    again(album, Revisit::Never, None),
                ],
            ))
            .await
            .unwrap();
        assert_eq!(queued(&state), [album, listed]);
        let (_, record) = &state.queued_links_from(0, 10).unwrap()[1];
        assert_eq!(record.lastmod.as_deref(), Some("2024-06-01"));
        assert_eq!(
            state.links_found("photo").unwrap(),
            found,
            "a page queued again is no new link"
        );
        drop(writer);
        thread.join().unwrap();
    }

    #[tokio::test]
    async fn rechecks_are_queued_a_batch_at_a_time_once_each_and_a_304_keeps_the_image() {
        let state = State::in_memory("t").unwrap();
        let urls: Vec<String> = (0..5).map(|i| format!("https://a.test/{i}.jpg")).collect();
        let (writer, thread) = start(&state);
        let images = urls.iter().map(|u| image(u)).collect();
        writer
            .commit_page(page("https://a.test/", Ok(images), vec![]))
            .await
            .unwrap();
        for (url, sha) in urls.iter().zip(['a', 'b', 'c', 'd', 'a']) {
            writer.finish_download(stored(url, sha)).await.unwrap();
        }
        writer.flush().await.unwrap();
        drop(writer);
        thread.join().unwrap();
        let before = state.counters().unwrap();
        assert_eq!((before.stored, before.duplicates), (4, 1));

        // Two records a transaction: every image is queued once, the duplicate too.
        assert_eq!(state.queue_rechecks_by(2).unwrap(), 5);
        assert_eq!(state.queue_rechecks_by(2).unwrap(), 5, "queued once");
        assert_eq!(state.pending_from(0, 100).unwrap().len(), 5);
        assert_eq!(
            state.counters().unwrap().pending(),
            0,
            "nothing new is pending"
        );

        let (writer, thread) = start(&state);
        let unchanged = DownloadResult::Unchanged {
            url: urls[0].clone(),
        };
        writer.finish_download(unchanged).await.unwrap();
        writer.flush().await.unwrap();
        drop(writer);
        thread.join().unwrap();
        let kept = record_of(&state, &urls[0]);
        assert_eq!((kept.status, kept.recheck), (ImageStatus::Stored, false));
        assert_eq!(state.rechecks_queued().unwrap(), 4);
        assert_eq!(state.pending_from(0, 100).unwrap().len(), 4);
        assert_eq!(state.counters().unwrap().stored, 4, "the counts stay");
    }

    #[tokio::test]
    async fn an_image_keeps_the_run_that_found_it_and_gets_the_run_that_stored_it() {
        let state = State::in_memory("t").unwrap();
        let (a, b, c) = (
            "https://a.test/a.jpg",
            "https://a.test/b.jpg",
            "https://a.test/c.jpg",
        );
        let (writer, thread) = start(&state);
        let first = page("https://a.test/1", Ok(vec![image(a)]), vec![]);
        assert_eq!(writer.commit_page(first).await.unwrap(), 1);
        drop(writer);
        thread.join().unwrap();
        assert_eq!(
            (record_of(&state, a).run, record_of(&state, a).stored_run),
            (1, 0)
        );

        // The next run: finds `a` again (no change), `b` and `c`, and stores all three, `c`
        // with `a`'s bytes.
        state.init("t", None).unwrap();
        let (writer, thread) = start(&state);
        let second = page(
            "https://a.test/2",
            Ok(vec![image(a), image(b), image(c)]),
            vec![],
        );
        assert_eq!(writer.commit_page(second).await.unwrap(), 2);
        for result in [stored(a, 'a'), stored(b, 'b'), stored(c, 'a')] {
            writer.finish_download(result).await.unwrap();
        }
        writer.flush().await.unwrap();
        drop(writer);
        thread.join().unwrap();
        let runs = |url| {
            let record = record_of(&state, url);
            (record.status, record.run, record.stored_run)
        };
        assert_eq!(runs(a), (ImageStatus::Stored, 1, 2));
        assert_eq!(runs(b), (ImageStatus::Stored, 2, 2));
        assert_eq!(runs(c), (ImageStatus::Duplicate, 2, 2));
    }

    #[tokio::test]
    async fn a_chain_page_moves_its_checkpoint_in_the_same_commit() {
        let state = State::in_memory("t").unwrap();
        let (writer, thread) = start(&state);
        let checkpoint = ChainCheckpoint {
            pages_done: 1,
            ..ChainCheckpoint::default()
        };
        let mut commit = page(
            "https://a.test/1",
            Ok(vec![image("https://a.test/i.jpg")]),
            vec![],
        );
        commit.checkpoint = Some(checkpoint.clone());
        writer.commit_page(commit).await.unwrap();
        assert_eq!(state.chain("https://a.test/").unwrap(), Some(checkpoint));
        assert_eq!(state.pending_from(0, 10).unwrap().len(), 1);
        let record = state.page("https://a.test/1").unwrap().unwrap();
        assert_eq!((record.status, record.images_found), (PageStatus::Done, 1));
        drop(writer);
        thread.join().unwrap();
    }

    #[tokio::test]
    async fn a_partial_page_stores_its_images_and_stays_failed_for_the_next_run() {
        let state = State::in_memory("t").unwrap();
        let (writer, thread) = start(&state);
        let mut commit = page("https://a.test/d/1", Ok(Vec::new()), Vec::new());
        commit.result = PageResult::Partial {
            images: vec![image("https://a.test/full/1.jpg")],
            error: FailureRecord {
                class: "partial".into(),
                detail: "rendered in part: the page timed out while scrolling".into(),
            },
        };
        assert_eq!(
            writer.commit_page(commit).await.unwrap(),
            1,
            "its image is stored"
        );
        assert_eq!(state.pending_from(0, 10).unwrap().len(), 1);
        let record = state.page("https://a.test/d/1").unwrap().unwrap();
        assert_eq!(
            (record.status, record.images_found, record.class.as_deref()),
            (PageStatus::Failed, 1, Some("partial"))
        );
        assert!(
            queued(&state).is_empty(),
            "its links wait for the complete page"
        );
        let counters = state.counters().unwrap();
        assert_eq!((counters.pages_done, counters.pages_failed), (0, 1));

        let done = page(
            "https://a.test/d/1",
            Ok(vec![image("https://a.test/full/1.jpg")]),
            vec![],
        );
        assert_eq!(
            writer.commit_page(done).await.unwrap(),
            0,
            "nothing new the second time"
        );
        let counters = state.counters().unwrap();
        assert_eq!((counters.pages_done, counters.pages_failed), (1, 0));
        drop(writer);
        thread.join().unwrap();
    }

    #[tokio::test]
    async fn a_sitemap_keeps_its_pages_lastmod_and_its_listed_images_on_their_own_pages() {
        let state = State::in_memory("t").unwrap();
        let (writer, thread) = start(&state);
        let sitemap = "https://a.test/sitemap.xml";
        writer
            .queue_links(
                sitemap,
                sitemap,
                vec![NewLink {
                    level: "sitemap:file".into(),
                    depth: 0,
                    ..link(sitemap, 0)
                }],
            )
            .await
            .unwrap();
        writer
            .queue_links(sitemap, sitemap, vec![link(sitemap, 0)])
            .await
            .unwrap();
        assert_eq!(queued(&state), [sitemap], "queued once");
        let listed_page = NewLink {
            lastmod: Some("2024-05-01".into()),
            ..link("https://a.test/p/1", 0)
        };
        let mut commit = page(sitemap, Ok(vec![]), vec![listed_page]);
        commit.listed = vec![(
            "https://a.test/p/1".into(),
            vec![image("https://a.test/i/1.jpg")],
        )];
        assert_eq!(writer.commit_page(commit).await.unwrap(), 1);
        assert_eq!(
            queued(&state),
            ["https://a.test/p/1"],
            "the sitemap is done"
        );
        let (_, record) = &state.queued_links_from(0, 1).unwrap()[0];
        assert_eq!(record.lastmod.as_deref(), Some("2024-05-01"));
        assert_eq!(record.found_on, sitemap);
        let mut pages = Vec::new();
        state
            .for_each_image(|_, image| {
                pages.push(image.page.clone());
                Ok(())
            })
            .unwrap();
        assert_eq!(pages, ["https://a.test/p/1"], "found on its own page");
        assert_eq!(state.links_found("sitemap:file").unwrap(), 1);
        assert_eq!(state.links_found("photo").unwrap(), 1);

        // A sitemap that fails stores nothing it lists.
        let mut failed = page(
            "https://a.test/other.xml",
            Err(FailureRecord {
                class: "sitemap".into(),
                detail: "not XML".into(),
            }),
            vec![],
        );
        failed.listed = vec![(
            "https://a.test/p/2".into(),
            vec![image("https://a.test/i/2.jpg")],
        )];
        assert_eq!(writer.commit_page(failed).await.unwrap(), 0);
        drop(writer);
        thread.join().unwrap();
    }
}
