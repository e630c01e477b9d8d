//! The Redis keys of one job: every key of a job starts with `scrape:{JOB}:`, so all of them
//! hash to one slot of a Redis Cluster and the scripts may touch them together.

/// The set of every job's name, for `status` and `export` without `--job`.
pub const JOBS: &str = "scrape:jobs";

/// The consumer group every worker of a job reads both streams in.
pub const GROUP: &str = "workers";

/// The two work streams of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Pages of the frontier (chain pages and pages reached through links).
    Pages,
    /// Images to download.
    Images,
}

impl Stream {
    /// The stage name: in key names, per-host counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pages => "pages",
            Self::Images => "images",
        }
    }
}

/// The keys of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobKeys {
    job: String,
    prefix: String,
}

impl JobKeys {
    pub fn new(job: &str) -> Self {
        Self {
            job: job.to_owned(),
            prefix: format!("scrape:{{{job}}}:"),
        }
    }

    /// The job's name.
    pub fn job(&self) -> &str {
        &self.job
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The stream of `stream`'s work items.
    pub fn stream(&self, stream: Stream) -> String {
        self.key(stream.name())
    }

    /// Items delivered too often: one entry each, with the item, its stream and why.
    pub fn dead(&self) -> String {
        self.key("dead")
    }

    /// Item keys ever enqueued: a second enqueue of one is a no-op.
    pub fn seen(&self) -> String {
        self.key("seen")
    }

    /// Item keys whose effect is committed: a redelivered one is acknowledged unread.
    pub fn done(&self) -> String {
        self.key("done")
    }

    /// Stream entry id -> times it was reclaimed from a worker that stopped answering.
    pub fn reclaims(&self) -> String {
        self.key("reclaims")
    }

    /// Image URL -> its record (JSON of `state::ImageRecord`).
    pub fn images(&self) -> String {
        self.key("image-records")
    }

    /// Page URL -> its record (JSON of `state::PageRecord`).
    pub fn pages(&self) -> String {
        self.key("page-records")
    }

    /// SHA-256 -> the first image URL stored with those bytes.
    pub fn owners(&self) -> String {
        self.key("owners")
    }

    /// One entry of the index of perceptual hashes (`near_duplicate_distance`): the set of
    /// stored pictures (`HASH SHA256 PATH`) whose hash has `value` in band `band` of the
    /// bands cut for `distance`, as `scrape_core::phash::bands` cuts them.
    pub fn phash_band(&self, distance: u32, band: u32, value: u64) -> String {
        self.key(&format!("phash:{distance}:{band}:{value:x}"))
    }

    /// WebDataset shard number -> its record as committed (JSON of `state::ShardRecord`).
    pub fn shards(&self) -> String {
        self.key("shards")
    }

    /// How many shard numbers were given out.
    pub fn shard_count(&self) -> String {
        self.key("shard_count")
    }

    /// The worker that writes shard `number`, while its lease lasts: [`Self::shard_owner_prefix`]
    /// followed by the number.
    pub fn shard_owner(&self, number: u64) -> String {
        format!("{}{number}", self.shard_owner_prefix())
    }

    pub fn shard_owner_prefix(&self) -> String {
        self.key("shard_owner:")
    }

    /// How the job's seen and done sets hold its items ([`super::item::KEY_FORMAT`]).
    pub fn format(&self) -> String {
        self.key("format")
    }

    /// The digest of the profile the job runs ([`super::identity::profile_digest`]).
    pub fn profile(&self) -> String {
        self.key("profile")
    }

    /// Job totals: enqueued, done, failed, duplicate, dead, bytes, first enqueue time.
    pub fn counters(&self) -> String {
        self.key("counters")
    }

    /// Totals of one worker; the set of workers is [`JobKeys::workers`].
    pub fn worker(&self, name: &str) -> String {
        self.key(&format!("worker:{name}"))
    }

    /// Set while worker `name` runs, for a few seconds at a time ([`super::queue::ALIVE`]):
    /// [`JobKeys::alive_prefix`] followed by the name. The host leases of a worker whose key
    /// is gone are dropped.
    pub fn alive(&self, name: &str) -> String {
        format!("{}{name}", self.alive_prefix())
    }

    pub fn alive_prefix(&self) -> String {
        self.key("alive:")
    }

    /// Every worker that committed something.
    pub fn workers(&self) -> String {
        self.key("workers")
    }

    /// `STAGE HOST` -> items of that host done.
    pub fn hosts(&self) -> String {
        self.key("hosts")
    }

    /// Leases on requests in flight to `host` for `stream` (a sorted set scored by expiry).
    pub fn host_leases(&self, stream: Stream, host: &str) -> String {
        self.key(&format!("lease:{}:{host}", stream.name()))
    }

    /// The shared congestion window of `stream`'s requests to `host` (JSON).
    pub fn host_window(&self, stream: Stream, host: &str) -> String {
        self.key(&format!("window:{}:{host}", stream.name()))
    }

    /// When the next request of `stream` to `host` may start (ms since the epoch, Redis time).
    pub fn host_pace(&self, stream: Stream, host: &str) -> String {
        self.key(&format!("pace:{}:{host}", stream.name()))
    }
}

/// The field of [`JobKeys::hosts`] counting `stream`'s items of `host`.
pub fn host_field(stream: Stream, host: &str) -> String {
    format!("{} {host}", stream.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_job_shares_one_cluster_hash_tag() {
        let keys = JobKeys::new("demo");
        for key in [
            keys.stream(Stream::Pages),
            keys.stream(Stream::Images),
            keys.dead(),
            keys.seen(),
            keys.done(),
            keys.counters(),
            keys.worker("w1"),
            keys.phash_band(4, 2, 0xab),
            keys.host_leases(Stream::Images, "127.0.0.1:80"),
        ] {
            assert!(key.starts_with("scrape:{demo}:"), "{key}");
        }
    }

    #[test]
    fn jobs_do_not_share_keys() {
        assert_ne!(JobKeys::new("a").seen(), JobKeys::new("b").seen());
        assert_ne!(
            JobKeys::new("a").stream(Stream::Pages),
            JobKeys::new("a").stream(Stream::Images)
        );
    }
}
