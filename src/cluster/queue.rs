//! A job's queue in Redis: enqueue, read and reclaim entries through the consumer group, renew
//! leases, commit effects, dead-letter, and read the counters.
//!
//! Every call is retried with back-off while Redis is unreachable (a restart, a dropped
//! connection), and every write is safe to repeat: the scripts check the seen and done sets, so
//! a command whose reply was lost and that is sent again applies nothing twice.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::streams::{StreamAutoClaimReply, StreamReadReply};
use redis::{FromRedisValue, Value};
use tokio_util::sync::CancellationToken;

use super::item::{FIELD, Item};
use super::keys::{GROUP, JOBS, JobKeys, Stream};
use super::scripts;
use super::{ClusterError, hide_credentials, shown_url};
use crate::net::hosts::Window;
use crate::net::retry::backoff;
use crate::profile::NearDuplicates;
use crate::state::{ImageLedger, NearDuplicateOf, ShardRecord, StoredFile, phash_hex};

/// How long a blocking read waits for new entries; the connection's response timeout is
/// longer (see [`Connection::open`]).
pub const BLOCK: Duration = Duration::from_secs(1);

/// Entries, ids or records read from Redis at a time by the calls that read a whole set.
pub const BATCH: usize = 1000;

/// How long a worker keeps trying a Redis that does not answer before it gives up.
const PATIENCE: Duration = Duration::from_secs(120);

/// One entry read from a stream: its id and its item (or why the item cannot be read).
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    pub stream: Stream,
    /// The entry's raw JSON, kept for the dead-letter stream.
    pub json: String,
    pub item: Result<Item, String>,
}

/// A connection to Redis that reconnects by itself.
#[derive(Clone)]
pub struct Connection {
    manager: ConnectionManager,
    url: Arc<str>,
    /// `url` without its user and password, for messages and logs.
    shown: Arc<str>,
    /// Warnings that Redis did not answer: one per [`WARN_EVERY`] over every task of this
    /// process, with how many were held back, instead of one per task and attempt.
    warnings: Arc<Warnings>,
}

/// How long a worker's liveness key lasts; it is renewed three times as often. A worker not
/// heard of for this long has its host leases dropped when another worker needs the host.
pub const ALIVE: Duration = Duration::from_secs(5);

/// At most one "Redis did not answer" warning this often.
const WARN_EVERY: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Warnings {
    /// When the last warning was shown, in ms since the connection was opened (0: none yet).
    last_ms: std::sync::atomic::AtomicU64,
    held_back: std::sync::atomic::AtomicU64,
    opened: std::sync::OnceLock<tokio::time::Instant>,
}

impl Warnings {
    /// Whether a warning may be shown now, and how many were held back since the last one.
    fn take_turn(&self) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        let opened = self.opened.get_or_init(tokio::time::Instant::now);
        let now = (opened.elapsed().as_millis() as u64).max(1);
        let last = self.last_ms.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64;
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            return Some(self.held_back.swap(0, Relaxed));
        }
        self.held_back.fetch_add(1, Relaxed);
        None
    }
}

/// What a Redis keeps of a job across a restart and when it runs short of memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    /// `appendonly`: every write is logged, so a restart loses at most a second of them.
    pub appendonly: Option<bool>,
    /// `maxmemory-policy`: anything but `noeviction` may drop a job's keys when memory is
    /// short.
    pub eviction: Option<String>,
}

impl Durability {
    /// What in it can lose a job, in words; empty when nothing can (or it could not be read:
    /// see [`Durability::unknown`]).
    pub fn risks(&self) -> Vec<String> {
        let mut risks = Vec::new();
        if self.appendonly == Some(false) {
            risks.push(
                "`appendonly` is `no`: a restart of Redis loses the job (or all since its last snapshot)"
                    .to_owned(),
            );
        }
        if let Some(policy) = self.eviction.as_deref().filter(|p| *p != "noeviction") {
            risks.push(format!(
                "`maxmemory-policy` is `{policy}`: Redis may drop the job's keys when its memory is full"
            ));
        }
        risks
    }

    /// Whether the settings could not be read (`CONFIG` refused, as managed Redis services do).
    pub fn unknown(&self) -> bool {
        self.appendonly.is_none() || self.eviction.is_none()
    }
}

impl Connection {
    /// Connects to `url` (`redis://HOST:PORT/DB`); the response timeout outlasts a blocking
    /// read ([`BLOCK`]), which redis-rs' default would cut short.
    pub async fn open(url: &str) -> Result<Self, ClusterError> {
        let client = redis::Client::open(url).map_err(|source| ClusterError::Url {
            url: shown_url(url),
            source,
        })?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(BLOCK * 5))
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(1));
        let manager = client
            .get_connection_manager_with_config(config)
            .await
            .map_err(|source| ClusterError::Connect {
                url: shown_url(url),
                source,
            })?;
        Ok(Self {
            manager,
            url: url.into(),
            shown: shown_url(url).into(),
            warnings: Arc::new(Warnings::default()),
        })
    }

    /// Reads `appendonly` and `maxmemory-policy`; a setting that cannot be read (`CONFIG`
    /// refused) is `None`.
    pub async fn durability(&self) -> Durability {
        let setting = |name: &'static str| {
            let mut cmd = redis::cmd("CONFIG");
            cmd.arg("GET").arg(name);
            async move {
                let pairs: Result<Vec<String>, _> = self.query("CONFIG GET", None, cmd).await;
                pairs.ok().and_then(|p| p.get(1).cloned())
            }
        };
        Durability {
            appendonly: setting("appendonly").await.map(|v| v == "yes"),
            eviction: setting("maxmemory-policy").await,
        }
    }

    /// Runs `cmd`, retrying with back-off while Redis cannot be reached, for up to
    /// [`PATIENCE`] or until `cancel`.
    async fn retrying<T>(
        &self,
        what: &str,
        cancel: Option<&CancellationToken>,
        mut call: impl FnMut(
            ConnectionManager,
        ) -> futures_util::future::BoxFuture<'static, redis::RedisResult<T>>,
    ) -> Result<T, ClusterError> {
        let began = tokio::time::Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match call(self.manager.clone()).await {
                Ok(value) => return Ok(value),
                Err(e) if is_transient(&e) && began.elapsed() < PATIENCE => {
                    let wait = backoff(attempt, Duration::from_millis(100), Duration::from_secs(5));
                    if let Some(held_back) = self.warnings.take_turn() {
                        let error = hide_credentials(&e.to_string(), &self.url);
                        tracing::warn!(what, %error, held_back, "redis did not answer; trying again in {wait:?}");
                    }
                    match cancel {
                        Some(cancel) => tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = cancel.cancelled() => return Err(ClusterError::Cancelled),
                        },
                        None => tokio::time::sleep(wait).await,
                    }
                }
                Err(source) => {
                    return Err(ClusterError::Redis {
                        what: what.to_owned(),
                        url: self.shown.to_string(),
                        source,
                    });
                }
            }
        }
    }
}

impl Connection {
    /// Sends `cmd`, retrying as [`Connection::retrying`] does.
    async fn query<T: FromRedisValue + Send + 'static>(
        &self,
        what: &str,
        cancel: Option<&CancellationToken>,
        cmd: redis::Cmd,
    ) -> Result<T, ClusterError> {
        self.retrying(what, cancel, move |mut c| {
            let cmd = cmd.clone();
            Box::pin(async move { cmd.query_async(&mut c).await })
        })
        .await
    }
}

/// Whether `e` may pass by itself: the connection dropped, Redis is loading its data after a
/// restart, or did not answer in time.
fn is_transient(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
        )
        || e.code() == Some("LOADING")
        || e.code() == Some("TRYAGAIN")
}

/// The queue of one job.
#[derive(Clone)]
pub struct JobQueue {
    conn: Connection,
    keys: Arc<JobKeys>,
    /// A connection of its own for each stream's blocking reads: a blocked connection holds
    /// back every command sent after it on that connection.
    readers: Arc<HashMap<Stream, Connection>>,
    /// The consumer name of this worker.
    consumer: Arc<str>,
    scripts: Arc<Scripts>,
}

/// What [`JobQueue::acquire_host`] answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostGrant {
    /// 0: the lease is taken; above 0, the ms to wait (pace or back-off); -1, the host has as
    /// many requests in flight as its limit and window allow.
    pub wait: i64,
    /// The shared window's decreases so far: the request remembers it, so its failure narrows
    /// the window only once per event.
    pub epoch: u64,
    /// The host's requests in flight, this one included once taken.
    pub in_flight: usize,
}

struct Scripts {
    enqueue: Lua,
    commit_page: Lua,
    commit_image: Lua,
    near_duplicate: Lua,
    stored_path: Lua,
    take_shard: Lua,
    requeue: Lua,
    dead_letter: Lua,
    acquire_host: Lua,
    pause_host: Lua,
    renew_hosts: Lua,
    swap_window: Lua,
    trim: Lua,
    claim_format: Lua,
}

/// A Lua script and its SHA-1, sent by hash (`EVALSHA`) and loaded when Redis does not know
/// it (the first call, or after a restart).
struct Lua {
    code: String,
    hash: String,
}

impl Lua {
    fn new(code: &str) -> Self {
        Self {
            code: code.to_owned(),
            hash: redis::Script::new(code).get_hash().to_owned(),
        }
    }

    fn call(&self) -> Call<'_> {
        Call {
            lua: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }
}

/// One call of a script: its keys and arguments.
struct Call<'a> {
    lua: &'a Lua,
    keys: Vec<String>,
    args: Vec<String>,
}

impl Call<'_> {
    fn key(&mut self, key: impl Into<String>) -> &mut Self {
        self.keys.push(key.into());
        self
    }

    fn arg(&mut self, arg: impl ToString) -> &mut Self {
        self.args.push(arg.to_string());
        self
    }

    fn eval_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.lua.hash)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }

    fn load_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(&self.lua.code);
        cmd
    }
}

/// Totals of a job, from its counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub enqueued_pages: u64,
    pub enqueued_images: u64,
    pub pages_done: u64,
    pub pages_failed: u64,
    pub images_stored: u64,
    pub images_duplicate: u64,
    pub images_failed: u64,
    pub dead: u64,
    pub bytes: u64,
    pub started_ms: u64,
}

impl Counters {
    /// The totals as a run's progress shows them: images found are those enqueued, and items
    /// given up (dead letters) count with the failed images.
    pub fn as_run(&self) -> crate::state::Counters {
        crate::state::Counters {
            pages_done: self.pages_done,
            pages_failed: self.pages_failed,
            pages_robots: 0,
            images_found: self.enqueued_images,
            stored: self.images_stored,
            stored_bytes: self.bytes,
            duplicates: self.images_duplicate,
            failed: self.images_failed + self.dead,
            ..crate::state::Counters::default()
        }
    }

    fn from_map(map: &HashMap<String, u64>) -> Self {
        let get = |k: &str| map.get(k).copied().unwrap_or(0);
        Self {
            enqueued_pages: get("enqueued_pages"),
            enqueued_images: get("enqueued_images"),
            pages_done: get("pages_done"),
            pages_failed: get("pages_failed"),
            images_stored: get("images_stored"),
            images_duplicate: get("images_duplicate"),
            images_failed: get("images_failed"),
            dead: get("dead"),
            bytes: get("bytes"),
            started_ms: get("started_ms"),
        }
    }

    /// Items whose effect is committed (or that were given up: failed, dead).
    pub fn settled(&self) -> u64 {
        self.pages_done
            + self.pages_failed
            + self.images_stored
            + self.images_duplicate
            + self.images_failed
            + self.dead
    }

    /// Items enqueued and not settled yet.
    pub fn pending(&self) -> u64 {
        (self.enqueued_pages + self.enqueued_images).saturating_sub(self.settled())
    }

    /// The job was seeded and every item of it is settled.
    pub fn is_finished(&self) -> bool {
        self.enqueued_pages + self.enqueued_images > 0 && self.pending() == 0
    }
}

/// What a committed page adds to the job.
pub struct PageEffect<'a> {
    pub url: &'a str,
    pub record_json: String,
    /// `pages_done` or `pages_failed`.
    pub counter: &'static str,
    pub host: &'a str,
    pub children: &'a [Item],
}

/// What a committed image adds to the job.
pub struct ImageEffect<'a> {
    pub url: &'a str,
    pub record_json: String,
    /// The bytes' SHA-256, `None` for a failed image.
    pub sha256: Option<&'a str>,
    pub bytes: u64,
    pub host: &'a str,
    pub outcome: ImageOutcome<'a>,
}

/// How an image ended, as its commit counts it.
#[derive(Debug, Clone, Copy)]
pub enum ImageOutcome<'a> {
    /// Its bytes were stored: as a file, or in `shard` (whose record after it is committed
    /// with it).
    Stored {
        shard: Option<&'a ShardRecord>,
    },
    /// A duplicate (by content, or a near-duplicate dropped): it owns no bytes.
    Duplicate,
    Failed,
}

/// What committing an image did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageCommitted {
    Counted,
    /// Its item was done before (a redelivery): only acknowledged.
    AlreadyDone,
    /// Nothing: it was to be stored, but another URL owns its bytes already.
    Lost,
}

/// An item to put back in its stream: a dead letter (its entry id in the dead-letter stream),
/// or a failed image.
#[derive(Debug, Clone)]
pub struct Requeue {
    pub item: Item,
    pub dead_letter: Option<String>,
}

impl JobQueue {
    /// The queue of job `job` over `conn`, read as consumer `consumer`.
    pub fn new(conn: Connection, job: &str, consumer: &str) -> Self {
        Self {
            conn,
            readers: Arc::new(HashMap::new()),
            keys: Arc::new(JobKeys::new(job)),
            consumer: consumer.into(),
            scripts: Arc::new(Scripts {
                enqueue: Lua::new(&scripts::enqueue()),
                commit_page: Lua::new(&scripts::commit_page()),
                commit_image: Lua::new(scripts::COMMIT_IMAGE),
                near_duplicate: Lua::new(scripts::NEAR_DUPLICATE),
                stored_path: Lua::new(scripts::STORED_PATH),
                take_shard: Lua::new(scripts::TAKE_SHARD),
                requeue: Lua::new(scripts::REQUEUE),
                dead_letter: Lua::new(scripts::DEAD_LETTER),
                acquire_host: Lua::new(scripts::ACQUIRE_HOST),
                pause_host: Lua::new(scripts::PAUSE_HOST),
                renew_hosts: Lua::new(scripts::RENEW_HOSTS),
                swap_window: Lua::new(scripts::SWAP_WINDOW),
                trim: Lua::new(scripts::TRIM),
                claim_format: Lua::new(scripts::CLAIM_FORMAT),
            }),
        }
    }

    /// With a connection of its own for each stream's blocking reads (workers).
    pub async fn with_readers(mut self) -> Result<Self, ClusterError> {
        let mut readers = HashMap::new();
        for stream in [Stream::Pages, Stream::Images] {
            readers.insert(stream, Connection::open(&self.conn.url).await?);
        }
        self.readers = Arc::new(readers);
        Ok(self)
    }

    pub fn keys(&self) -> &JobKeys {
        &self.keys
    }

    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Creates the consumer group of both streams (and the streams), once per job.
    pub async fn create_groups(&self) -> Result<(), ClusterError> {
        for stream in [Stream::Pages, Stream::Images] {
            let key = self.keys.stream(stream);
            self.conn
                .retrying("XGROUP CREATE", None, |mut c| {
                    let key = key.clone();
                    Box::pin(async move {
                        let created = redis::cmd("XGROUP")
                            .arg("CREATE")
                            .arg(&key)
                            .arg(GROUP)
                            .arg("0")
                            .arg("MKSTREAM")
                            .query_async::<Value>(&mut c)
                            .await;
                        match created {
                            // Another worker (or an earlier run) created it: what we want.
                            Err(e) if e.code() == Some("BUSYGROUP") => Ok(Value::Nil),
                            other => other,
                        }
                    })
                })
                .await?;
        }
        Ok(())
    }

    /// Adds `items` the job has not seen; how many were new. Repeating it adds nothing.
    pub async fn enqueue(&self, items: &[Item]) -> Result<u64, ClusterError> {
        let mut invocation = self.scripts.enqueue.call();
        invocation
            .key(self.keys.seen())
            .key(self.keys.stream(Stream::Pages))
            .key(self.keys.stream(Stream::Images))
            .key(self.keys.counters())
            .key(JOBS)
            .arg(self.keys.job());
        add_children(&mut invocation, items);
        self.invoke("enqueue", invocation, None).await
    }

    async fn invoke<T: FromRedisValue + Send + 'static>(
        &self,
        what: &str,
        invocation: Call<'_>,
        cancel: Option<&CancellationToken>,
    ) -> Result<T, ClusterError> {
        let load = invocation.load_cmd();
        let eval = invocation.eval_cmd();
        self.conn
            .retrying(what, cancel, move |mut c| {
                let (load, eval) = (load.clone(), eval.clone());
                Box::pin(async move {
                    match eval.query_async::<T>(&mut c).await {
                        Err(e)
                            if e.kind()
                                == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                        {
                            load.query_async::<Value>(&mut c).await?;
                            eval.query_async::<T>(&mut c).await
                        }
                        other => other,
                    }
                })
            })
            .await
    }

    /// Up to `count` new entries of `stream` for this worker, waiting up to [`BLOCK`] for one.
    pub async fn read(
        &self,
        stream: Stream,
        count: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<Entry>, ClusterError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(self.keys.stream(stream))
            .arg(">");
        let reader = self.readers.get(&stream).unwrap_or(&self.conn);
        let reply: Option<StreamReadReply> = reader.query("XREADGROUP", Some(cancel), cmd).await?;
        Ok(reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .map(|id| entry(stream, id.id, &id.map))
            .collect())
    }

    /// Up to `count` entries of `stream` that another worker took more than `lease` ago and
    /// did not renew (it died, or lost Redis): they become this worker's.
    pub async fn reclaim(
        &self,
        stream: Stream,
        lease: Duration,
        count: usize,
    ) -> Result<Vec<Entry>, ClusterError> {
        let mut cmd = redis::cmd("XAUTOCLAIM");
        cmd.arg(self.keys.stream(stream))
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg(lease.as_millis() as u64)
            .arg("0-0")
            .arg("COUNT")
            .arg(count);
        let reply: StreamAutoClaimReply = self.conn.query("XAUTOCLAIM", None, cmd).await?;
        Ok(reply
            .claimed
            .into_iter()
            .map(|id| entry(stream, id.id, &id.map))
            .collect())
    }

    /// Counts one more reclaim of each entry; the deliveries so far (reclaims + 1), in order.
    pub async fn count_reclaims(&self, entries: &[Entry]) -> Result<Vec<u64>, ClusterError> {
        let key = self.keys.reclaims();
        let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
        let counts: Vec<u64> = self
            .conn
            .retrying("HINCRBY", None, move |mut c| {
                let (key, ids) = (key.clone(), ids.clone());
                Box::pin(async move {
                    let mut pipe = redis::pipe();
                    for id in &ids {
                        pipe.cmd("HINCRBY").arg(&key).arg(id).arg(1);
                    }
                    pipe.query_async(&mut c).await
                })
            })
            .await?;
        Ok(counts.into_iter().map(|n| n + 1).collect())
    }

    /// Which of `entries` are done already (committed by a worker that died before it could
    /// read the acknowledgement, say).
    pub async fn are_done(&self, entries: &[Entry]) -> Result<Vec<bool>, ClusterError> {
        let members: Vec<String> = entries
            .iter()
            .map(|e| match &e.item {
                Ok(item) => item.key(),
                Err(_) => String::new(),
            })
            .collect();
        self.are_members(self.keys.done(), members).await
    }

    /// Which of `keys` (items' keys, [`Item::key`]) the job has seen: found by a page, or
    /// enqueued.
    pub async fn seen(&self, keys: Vec<String>) -> Result<Vec<bool>, ClusterError> {
        self.are_members(self.keys.seen(), keys).await
    }

    /// Which of `members` the set `key` holds.
    async fn are_members(
        &self,
        key: String,
        members: Vec<String>,
    ) -> Result<Vec<bool>, ClusterError> {
        if members.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("SMISMEMBER");
        cmd.arg(key).arg(members);
        self.conn.query("SMISMEMBER", None, cmd).await
    }

    /// Acknowledges `id` of `stream` without an effect (an entry already done).
    pub async fn ack(&self, stream: Stream, id: &str) -> Result<(), ClusterError> {
        let mut cmd = redis::cmd("XACK");
        cmd.arg(self.keys.stream(stream)).arg(GROUP).arg(id);
        self.conn.query::<u64>("XACK", None, cmd).await.map(drop)
    }

    /// Renews this worker's lease on `ids` of `stream`: their idle time starts again, so no
    /// other worker reclaims a long task that is still going.
    pub async fn renew(&self, stream: Stream, ids: Vec<String>) -> Result<(), ClusterError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("XCLAIM");
        cmd.arg(self.keys.stream(stream))
            .arg(GROUP)
            .arg(&*self.consumer)
            .arg(0)
            .arg(ids)
            .arg("JUSTID");
        self.conn
            .query::<Value>("XCLAIM", None, cmd)
            .await
            .map(drop)
    }

    /// The ids of `stream`'s entries delivered to a worker and not acknowledged yet, of every
    /// worker (a few per task in flight: it is read whole, in pages).
    pub async fn pending_ids(&self, stream: Stream) -> Result<HashSet<String>, ClusterError> {
        let mut ids = HashSet::new();
        let mut from = "-".to_owned();
        loop {
            let mut cmd = redis::cmd("XPENDING");
            cmd.arg(self.keys.stream(stream))
                .arg(GROUP)
                .arg(&from)
                .arg("+")
                .arg(BATCH);
            let page: redis::streams::StreamPendingCountReply =
                self.conn.query("XPENDING", None, cmd).await?;
            let Some(last) = page.ids.last() else {
                return Ok(ids);
            };
            from = format!("({}", last.id);
            let full = page.ids.len() >= BATCH;
            ids.extend(page.ids.into_iter().map(|p| p.id));
            if !full {
                return Ok(ids);
            }
        }
    }

    /// Commits a page's effect and acknowledges its entry; `false` when it was done before.
    pub async fn commit_page(
        &self,
        entry: &Entry,
        key: &str,
        effect: PageEffect<'_>,
    ) -> Result<bool, ClusterError> {
        let mut invocation = self.scripts.commit_page.call();
        invocation
            .key(self.keys.seen())
            .key(self.keys.stream(Stream::Pages))
            .key(self.keys.stream(Stream::Images))
            .key(self.keys.counters())
            .key(self.keys.done())
            .key(self.keys.pages())
            .key(self.keys.worker(&self.consumer))
            .key(self.keys.hosts())
            .key(self.keys.reclaims())
            .key(self.keys.workers())
            .key(self.keys.shards())
            .arg(key)
            .arg(&entry.id)
            .arg(GROUP)
            .arg(effect.url)
            .arg(&effect.record_json)
            .arg(effect.counter)
            .arg(super::keys::host_field(Stream::Pages, effect.host))
            .arg(&*self.consumer);
        add_children(&mut invocation, effect.children);
        let added: i64 = self.invoke("commit page", invocation, None).await?;
        Ok(added >= 0)
    }

    /// Commits an image's effect and acknowledges its entry; the counter it went to.
    pub async fn commit_image(
        &self,
        entry: &Entry,
        key: &str,
        effect: ImageEffect<'_>,
    ) -> Result<ImageCommitted, ClusterError> {
        let mut invocation = self.scripts.commit_image.call();
        invocation
            .key(self.keys.stream(Stream::Images))
            .key(self.keys.counters())
            .key(self.keys.done())
            .key(self.keys.images())
            .key(self.keys.owners())
            .key(self.keys.worker(&self.consumer))
            .key(self.keys.hosts())
            .key(self.keys.reclaims())
            .key(self.keys.workers())
            .key(self.keys.shards())
            .arg(key)
            .arg(&entry.id)
            .arg(GROUP)
            .arg(effect.url)
            .arg(&effect.record_json)
            .arg(effect.sha256.unwrap_or_default())
            .arg(effect.bytes)
            .arg(super::keys::host_field(Stream::Images, effect.host))
            .arg(&*self.consumer);
        let (outcome, shard) = match effect.outcome {
            ImageOutcome::Stored { shard } => ("stored", shard),
            ImageOutcome::Duplicate => ("duplicate", None),
            ImageOutcome::Failed => ("failed", None),
        };
        invocation.arg(outcome);
        match shard {
            Some(record) => invocation
                .arg(record.shard)
                .arg(serde_json::to_string(record).unwrap_or_default()),
            None => invocation.arg("").arg(""),
        };
        let counted: String = self.invoke("commit image", invocation, None).await?;
        Ok(match counted.as_str() {
            "done" => ImageCommitted::AlreadyDone,
            "lost" => ImageCommitted::Lost,
            _ => ImageCommitted::Counted,
        })
    }

    /// Where the job stores the bytes with SHA-256 `sha256`, if it does (the path in the
    /// record of the URL that owns them).
    pub async fn stored_path(&self, sha256: &str) -> Result<Option<String>, ClusterError> {
        let mut invocation = self.scripts.stored_path.call();
        invocation
            .key(self.keys.owners())
            .key(self.keys.images())
            .arg(sha256);
        self.invoke("stored path", invocation, None).await
    }

    /// A new shard number for this worker, which owns it for `lease`.
    pub async fn take_shard(&self, lease: Duration) -> Result<u64, ClusterError> {
        let mut invocation = self.scripts.take_shard.call();
        invocation
            .key(self.keys.shard_count())
            .key(self.keys.shard_owner_prefix())
            .arg(&*self.consumer)
            .arg(lease.as_millis() as u64);
        self.invoke("take shard", invocation, None).await
    }

    /// Says this worker is alive for [`ALIVE`] more.
    pub async fn heartbeat(&self) -> Result<(), ClusterError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.keys.alive(&self.consumer))
            .arg(1)
            .arg("PX")
            .arg(ALIVE.as_millis() as u64);
        self.conn.query::<Value>("SET", None, cmd).await.map(drop)
    }

    /// This worker stops: its host leases are no longer kept for it.
    pub async fn farewell(&self) -> Result<(), ClusterError> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keys.alive(&self.consumer));
        self.conn.query::<Value>("DEL", None, cmd).await.map(drop)
    }

    /// Extends this worker's ownership of shard `number` by `lease`.
    pub async fn hold_shard(&self, number: u64, lease: Duration) -> Result<(), ClusterError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.keys.shard_owner(number))
            .arg(&*self.consumer)
            .arg("PX")
            .arg(lease.as_millis() as u64);
        self.conn.query::<Value>("SET", None, cmd).await.map(drop)
    }

    /// Makes this worker the owner of shard `number` for `lease` if no worker owns it (its
    /// owner died); whether it did.
    pub async fn adopt_shard(&self, number: u64, lease: Duration) -> Result<bool, ClusterError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.keys.shard_owner(number))
            .arg(&*self.consumer)
            .arg("NX")
            .arg("PX")
            .arg(lease.as_millis() as u64);
        let set: Option<String> = self.conn.query("SET", None, cmd).await?;
        Ok(set.is_some())
    }

    /// Every shard record the job committed, in shard order.
    pub async fn shard_records(&self) -> Result<Vec<ShardRecord>, ClusterError> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(self.keys.shards());
        let map: HashMap<u64, String> = self.conn.query("HGETALL", None, cmd).await?;
        let mut records = Vec::with_capacity(map.len());
        for (number, json) in map {
            let record: ShardRecord = serde_json::from_str(&json).map_err(|e| {
                ClusterError::Job(format!(
                    "the record of shard {number} in Redis is damaged: {e}"
                ))
            })?;
            records.push(record);
        }
        records.sort_by_key(|r| r.shard);
        Ok(records)
    }

    /// Records shard `record` as it is now (finished).
    pub async fn save_shard(&self, record: &ShardRecord) -> Result<(), ClusterError> {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(self.keys.shards())
            .arg(record.shard)
            .arg(serde_json::to_string(record).unwrap_or_default());
        self.conn.query::<Value>("HSET", None, cmd).await.map(drop)
    }

    /// Moves `entry` to the dead-letter stream after `deliveries` deliveries.
    pub async fn dead_letter(
        &self,
        entry: &Entry,
        deliveries: u64,
        reason: &str,
    ) -> Result<(), ClusterError> {
        let key = match &entry.item {
            Ok(item) => item.key(),
            Err(_) => super::item::item_key('x', &entry.id),
        };
        let mut invocation = self.scripts.dead_letter.call();
        invocation
            .key(self.keys.stream(entry.stream))
            .key(self.keys.dead())
            .key(self.keys.counters())
            .key(self.keys.done())
            .key(self.keys.reclaims())
            .arg(key)
            .arg(&entry.id)
            .arg(GROUP)
            .arg(&entry.json)
            .arg(entry.stream.name())
            .arg(deliveries)
            .arg(&*self.consumer)
            .arg(reason);
        self.invoke::<i64>("dead letter", invocation, None)
            .await
            .map(drop)
    }

    /// Asks for a lease (`token`) on one request of `stream` to `host` within `limit` and the
    /// host's shared window (`start` before it has one; 0 for a fixed limit), at most one
    /// request per `interval`: see [`HostGrant`].
    pub async fn acquire_host(
        &self,
        stream: Stream,
        host: &str,
        lease: Duration,
        (limit, start): (usize, usize),
        interval: Duration,
        token: &str,
    ) -> Result<HostGrant, ClusterError> {
        let mut invocation = self.scripts.acquire_host.call();
        invocation
            .key(self.keys.host_leases(stream, host))
            .key(self.keys.host_pace(stream, host))
            .key(self.keys.host_window(stream, host))
            .key(self.keys.alive_prefix())
            .arg(lease.as_millis() as u64)
            .arg(limit)
            .arg(interval.as_millis() as u64)
            .arg(token)
            .arg(start);
        let (wait, epoch, in_flight): (i64, u64, usize) =
            self.invoke("acquire host", invocation, None).await?;
        Ok(HostGrant {
            wait,
            epoch,
            in_flight,
        })
    }

    /// Changes the shared window of `stream`'s requests to `host` with `change` (a window
    /// capped at `cap` when there is none yet): read, changed, and put back only if no worker
    /// changed it meanwhile, else read again. Kept for `ttl` after the last change.
    pub async fn change_window(
        &self,
        stream: Stream,
        host: &str,
        cap: usize,
        ttl: Duration,
        change: impl Fn(&mut Window),
    ) -> Result<(), ClusterError> {
        let key = self.keys.host_window(stream, host);
        // Past a few tries the change is dropped: other workers are changing it right now.
        for _ in 0..4 {
            let mut get = redis::cmd("GET");
            get.arg(&key);
            let was: Option<String> = self.conn.query("GET", None, get).await?;
            let mut window = was
                .as_deref()
                .and_then(|json| serde_json::from_str(json).ok())
                .unwrap_or_else(|| Window::new(cap, true));
            change(&mut window);
            let now = serde_json::to_string(&window).unwrap_or_default();
            if was.as_deref() == Some(now.as_str()) {
                return Ok(());
            }
            let mut invocation = self.scripts.swap_window.call();
            invocation
                .key(&key)
                .arg(was.unwrap_or_default())
                .arg(now)
                .arg(ttl.as_millis().max(1) as u64);
            let swapped: i64 = self.invoke("change window", invocation, None).await?;
            if swapped == 1 {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Gives back a lease on a request to `host`.
    pub async fn release_host(
        &self,
        stream: Stream,
        host: &str,
        token: &str,
    ) -> Result<(), ClusterError> {
        let mut cmd = redis::cmd("ZREM");
        cmd.arg(self.keys.host_leases(stream, host)).arg(token);
        self.conn.query::<u64>("ZREM", None, cmd).await.map(drop)
    }

    /// Holds every worker's requests of `stream` to `host` back for `wait`.
    pub async fn pause_host(
        &self,
        stream: Stream,
        host: &str,
        wait: Duration,
    ) -> Result<(), ClusterError> {
        let mut invocation = self.scripts.pause_host.call();
        invocation
            .key(self.keys.host_pace(stream, host))
            .arg(wait.as_millis().max(1) as u64);
        self.invoke::<i64>("pause host", invocation, None)
            .await
            .map(drop)
    }

    /// Extends the host leases `held` (lease set key, token).
    pub async fn renew_hosts(
        &self,
        held: &[(String, String)],
        lease: Duration,
    ) -> Result<(), ClusterError> {
        if held.is_empty() {
            return Ok(());
        }
        let mut invocation = self.scripts.renew_hosts.call();
        invocation.arg(lease.as_millis() as u64);
        for (key, token) in held {
            invocation.key(key).arg(token);
        }
        self.invoke::<i64>("renew hosts", invocation, None)
            .await
            .map(drop)
    }

    /// Records `digest` as the digest of the job's profile unless one is recorded already;
    /// the recorded one when it is another.
    pub async fn claim_profile(&self, digest: &str) -> Result<Option<String>, ClusterError> {
        let mut set = redis::cmd("SET");
        set.arg(self.keys.profile()).arg(digest).arg("NX");
        self.conn.query::<Value>("SET", None, set).await?;
        let mut get = redis::cmd("GET");
        get.arg(self.keys.profile());
        let recorded: Option<String> = self.conn.query("GET", None, get).await?;
        Ok(recorded.filter(|recorded| recorded != digest))
    }

    /// Records how this binary keeps the job's seen and done sets, or refuses the job when it
    /// keeps them otherwise (begun by an older binary, which held whole URLs there): enqueued
    /// again with other keys, every item would be done twice.
    pub async fn claim_key_format(&self) -> Result<(), ClusterError> {
        let mut invocation = self.scripts.claim_format.call();
        invocation
            .key(self.keys.format())
            .key(self.keys.seen())
            .arg(super::item::KEY_FORMAT);
        let other: Option<String> = self.invoke("claim key format", invocation, None).await?;
        match other {
            None => Ok(()),
            Some(other) => Err(ClusterError::Job(format!(
                "job `{}` keeps its items as `{other}`, not as `{}` as this version does: it was \
                 begun by another version of scrape; finish it with that version, or start it \
                 again as another job with `--job NAME`",
                self.keys.job(),
                super::item::KEY_FORMAT
            ))),
        }
    }

    /// Drops the entries of both work streams that every worker is done with (see
    /// [`super::scripts::TRIM`]); how many went.
    pub async fn trim(&self) -> Result<u64, ClusterError> {
        let mut invocation = self.scripts.trim.call();
        invocation
            .key(self.keys.stream(Stream::Pages))
            .key(self.keys.stream(Stream::Images))
            .arg(GROUP);
        self.invoke("trim", invocation, None).await
    }

    /// The job's totals.
    pub async fn counters(&self) -> Result<Counters, ClusterError> {
        let map: HashMap<String, u64> = self.hash_u64(self.keys.counters()).await?;
        Ok(Counters::from_map(&map))
    }

    /// A hash of counts (the counters, a worker's totals, the host totals).
    pub async fn hash_u64(&self, key: String) -> Result<HashMap<String, u64>, ClusterError> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(key);
        self.conn.query("HGETALL", None, cmd).await
    }

    /// The values of `fields` of the hash at `key` (`None` for a field it does not hold).
    pub async fn hash_values(
        &self,
        key: String,
        fields: &[String],
    ) -> Result<Vec<Option<String>>, ClusterError> {
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(key).arg(fields);
        self.conn.query("HMGET", None, cmd).await
    }

    /// The members of a set.
    pub async fn members(&self, key: String) -> Result<Vec<String>, ClusterError> {
        let mut cmd = redis::cmd("SMEMBERS");
        cmd.arg(key);
        self.conn.query("SMEMBERS", None, cmd).await
    }

    /// Up to `count` entries of the stream at `key` after the entry `after` (`None`: from the
    /// first), in order: their ids and fields.
    pub async fn stream_range(
        &self,
        key: String,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<(String, HashMap<String, String>)>, ClusterError> {
        let from = after.map_or_else(|| "-".to_owned(), |id| format!("({id}"));
        let mut cmd = redis::cmd("XRANGE");
        cmd.arg(key).arg(from).arg("+").arg("COUNT").arg(count);
        let reply: redis::streams::StreamRangeReply = self.conn.query("XRANGE", None, cmd).await?;
        Ok(reply
            .ids
            .into_iter()
            .map(|id| {
                let fields = id
                    .map
                    .iter()
                    .map(|(k, v)| {
                        let value = String::from_redis_value(v.clone()).unwrap_or_default();
                        (k.clone(), value)
                    })
                    .collect();
                (id.id, fields)
            })
            .collect())
    }

    /// Puts `items` back in their streams (see [`super::scripts::REQUEUE`]); how many were.
    pub async fn requeue(&self, items: &[Requeue]) -> Result<u64, ClusterError> {
        let mut total = 0;
        for batch in items.chunks(BATCH) {
            let mut invocation = self.scripts.requeue.call();
            invocation
                .key(self.keys.counters())
                .key(self.keys.done())
                .key(self.keys.stream(Stream::Pages))
                .key(self.keys.stream(Stream::Images))
                .key(self.keys.dead());
            for item in batch {
                let (kind, dead_id) = match &item.dead_letter {
                    Some(id) => ("dead", id.as_str()),
                    None => ("failed", ""),
                };
                let stream = match item.item.stream() {
                    Stream::Pages => "p",
                    Stream::Images => "i",
                };
                invocation
                    .arg(kind)
                    .arg(item.item.key())
                    .arg(stream)
                    .arg(item.item.encode())
                    .arg(dead_id);
            }
            let added: u64 = self.invoke("requeue", invocation, None).await?;
            total += added;
        }
        Ok(total)
    }

    /// Up to about `count` fields of the hash at `key` from `cursor` (0: the start): the next
    /// cursor (0 at the end) and the fields with their values.
    pub async fn scan_hash(
        &self,
        key: String,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<(String, String)>), ClusterError> {
        let mut cmd = redis::cmd("HSCAN");
        cmd.arg(key).arg(cursor).arg("COUNT").arg(count);
        self.conn.query("HSCAN", None, cmd).await
    }

    /// The dead-letter stream's entries: their fields.
    pub async fn dead_entries(&self) -> Result<Vec<HashMap<String, String>>, ClusterError> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .stream_range(self.keys.dead(), after.as_deref(), BATCH)
                .await?;
            let full = page.len() >= BATCH;
            after = page.last().map(|(id, _)| id.clone());
            all.extend(page.into_iter().map(|(_, fields)| fields));
            if !full {
                return Ok(all);
            }
        }
    }
}

/// A worker's ledger: the job in Redis. Its near-duplicate search enters the picture in the
/// job's shared index unless it is dropped as a near-duplicate (see
/// [`super::scripts::NEAR_DUPLICATE`]).
impl ImageLedger for JobQueue {
    type Error = ClusterError;

    async fn stored_path(&self, key: &str) -> Result<Option<String>, ClusterError> {
        JobQueue::stored_path(self, key).await
    }

    async fn nearest(
        &self,
        url: &str,
        file: &StoredFile,
        rule: NearDuplicates,
        hash: u64,
    ) -> Result<Option<NearDuplicateOf>, ClusterError> {
        let mut invocation = self.scripts.near_duplicate.call();
        invocation.key(self.keys.owners());
        for (band, value) in scrape_core::phash::bands(hash, rule.distance) {
            invocation.key(self.keys.phash_band(rule.distance, band, value));
        }
        invocation
            .arg(url)
            .arg(file.content_key())
            .arg(phash_hex(hash))
            .arg(&file.path)
            .arg(rule.distance)
            .arg(if rule.drop { "drop" } else { "keep" });
        let found: Option<(String, String, u32)> = self
            .invoke("near-duplicate search", invocation, None)
            .await?;
        let Some((sha256, path, distance)) = found else {
            return Ok(None);
        };
        let mut near = NearDuplicateOf {
            sha256,
            path,
            distance,
        };
        // Where the earlier picture's bytes are: its record says (a shard member).
        if let Some(path) = JobQueue::stored_path(self, &near.sha256).await? {
            near.path = path;
        }
        Ok(Some(near))
    }
}

/// Adds `items` as (stream, key, JSON) triples to a script's arguments.
fn add_children(invocation: &mut Call<'_>, items: &[Item]) {
    for item in items {
        let stream = match item.stream() {
            Stream::Pages => "p",
            Stream::Images => "i",
        };
        invocation.arg(stream).arg(item.key()).arg(item.encode());
    }
}

/// The entry `id` of `stream` with its fields.
fn entry(stream: Stream, id: String, map: &HashMap<String, Value>) -> Entry {
    let json = map
        .get(FIELD)
        .and_then(|v| String::from_redis_value(v.clone()).ok());
    let item = match &json {
        Some(json) => {
            Item::decode(stream, json).map_err(|e| format!("not a {} item: {e}", stream.name()))
        }
        None => Err(format!("the entry has no `{FIELD}` field")),
    };
    Entry {
        id,
        stream,
        json: json.unwrap_or_default(),
        item,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_redis_that_can_lose_a_job_says_how() {
        let safe = super::Durability {
            appendonly: Some(true),
            eviction: Some("noeviction".into()),
        };
        assert_eq!(safe.risks(), Vec::<String>::new());
        assert!(!safe.unknown());
        let volatile = super::Durability {
            appendonly: Some(false),
            eviction: Some("allkeys-lru".into()),
        };
        let risks = volatile.risks();
        assert_eq!(risks.len(), 2, "{risks:?}");
        assert!(risks[0].contains("appendonly") && risks[1].contains("allkeys-lru"));
        let managed = super::Durability {
            appendonly: None,
            eviction: None,
        };
        assert!(managed.unknown() && managed.risks().is_empty());
    }

    #[test]
    fn warnings_that_redis_did_not_answer_come_once_in_a_while_with_the_count_held_back() {
        let warnings = super::Warnings::default();
        assert_eq!(warnings.take_turn(), Some(0), "the first is shown");
        for _ in 0..1000 {
            assert_eq!(warnings.take_turn(), None);
        }
        assert_eq!(
            warnings
                .held_back
                .load(std::sync::atomic::Ordering::Relaxed),
            1000
        );
    }

    use super::*;

    fn counters(pairs: &[(&str, u64)]) -> Counters {
        Counters::from_map(&pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect())
    }

    #[test]
    fn a_job_is_finished_once_every_enqueued_item_is_settled() {
        let running = counters(&[
            ("enqueued_pages", 2),
            ("enqueued_images", 5),
            ("pages_done", 2),
            ("images_stored", 3),
            ("images_duplicate", 1),
        ]);
        assert_eq!(running.pending(), 1);
        assert!(!running.is_finished());
        let finished = counters(&[
            ("enqueued_pages", 2),
            ("enqueued_images", 5),
            ("pages_done", 1),
            ("pages_failed", 1),
            ("images_stored", 3),
            ("images_failed", 1),
            ("dead", 1),
        ]);
        assert_eq!(finished.pending(), 0);
        assert!(finished.is_finished());
    }

    #[test]
    fn a_job_not_seeded_yet_is_not_finished() {
        assert!(!counters(&[]).is_finished());
    }

    #[test]
    fn a_script_call_sends_its_keys_before_its_arguments() {
        let lua = Lua::new("return 1");
        let mut call = lua.call();
        call.key("k1").arg(7).key("k2").arg("a");
        let packed = String::from_utf8_lossy(&call.eval_cmd().get_packed_command()).into_owned();
        let words: Vec<&str> = packed
            .split("\r\n")
            .filter(|w| !w.starts_with(['*', '$']) && !w.is_empty())
            .collect();
        assert_eq!(
            words,
            ["EVALSHA", lua.hash.as_str(), "2", "k1", "k2", "7", "a"]
        );
    }
}
