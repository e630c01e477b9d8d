//! The Lua scripts that make each effect on a job atomic, so a retried command (after a
//! dropped connection) or a redelivered item never applies an effect twice.
//!
//! Time comes from Redis (`TIME`), never from a worker's clock: leases and pace hold across
//! machines whose clocks differ. Each script is a file of its own under `lua/`; what it takes
//! (KEYS, ARGV) and gives back is said here.

/// Adds the items `ARGV[from..]` (triples: stream `p`/`i`, key, JSON) that the seen set
/// (`KEYS[1]`) does not hold to the pages (`KEYS[2]`) or images (`KEYS[3]`) stream, counting
/// them in the counters (`KEYS[4]`); `added` is how many were new.
const ADD_ITEMS: &str = include_str!("lua/add_items.lua");

/// Enqueue: `ARGV[1]` is the job's name (for the job list `KEYS[5]`), items from `ARGV[2]`.
pub fn enqueue() -> String {
    format!("{ADD_ITEMS}{}", include_str!("lua/enqueue.lua"))
}

/// Commits a page: its record, its children (next page, linked pages, images), the counters,
/// the done mark and the acknowledgement, all or nothing. A page already done is only
/// acknowledged (returns -1).
///
/// KEYS: seen, pages stream, images stream, counters, done, page records, worker totals,
/// host totals, reclaims, workers.
/// ARGV: done key, entry id, group, page URL, record JSON, counter field, host field, worker,
/// then the children.
pub fn commit_page() -> String {
    format!("{ADD_ITEMS}{}", include_str!("lua/commit_page.lua"))
}

/// Commits an image: its record, the owner of its bytes (the first URL stored with them), the
/// shard it was placed in (WebDataset), the counters, the done mark and the acknowledgement.
/// Returns the counter it went to (`images_stored`, `images_duplicate`, `images_failed`),
/// `done` when it was done before, or `lost` (and does nothing) when it is to be stored but
/// another URL owns its bytes already: the worker then takes back what it placed and commits it
/// as a duplicate of them.
///
/// KEYS: images stream, counters, done, image records, owners, worker totals, host totals,
/// reclaims, workers, shards.
/// ARGV: done key, entry id, group, URL, record JSON, SHA-256 (empty when it failed), bytes,
/// host field, worker, `stored` / `duplicate` / `failed`, the shard's number (empty when it
/// was not placed in a shard) and its record JSON.
pub const COMMIT_IMAGE: &str = include_str!("lua/commit_image.lua");

/// Finds the stored picture nearest to a new one within a distance of perceptual hashes, and
/// adds the new one to the index unless it is to be dropped as a near-duplicate: one step, so
/// of two near-duplicates stored by two workers at once, exactly one finds the other, as in a
/// one-process run. Only the pictures sharing a band with it are compared (the band keys are
/// given); a picture of the same bytes (a redelivery) is not its own near-duplicate. Bytes
/// stored already under another URL are a plain duplicate: nothing is searched or indexed.
/// Returns nothing, or the nearest picture's SHA-256, path and distance (ties go to the
/// smaller SHA-256).
///
/// KEYS: owners, then the picture's band keys.
/// ARGV: URL, SHA-256, hash (16 hex digits), path, distance, `drop` or `keep`.
pub const NEAR_DUPLICATE: &str = include_str!("lua/near_duplicate.lua");

/// Where the bytes with SHA-256 `ARGV[1]` are stored: the path in the record of the URL that
/// owns them, or nothing. KEYS: owners, image records.
pub const STORED_PATH: &str = include_str!("lua/stored_path.lua");

/// Gives a worker the next shard number of the job (`KEYS[1]` counts them) and makes it the
/// shard's owner (`KEYS[2]` followed by the number) for `ARGV[2]` ms. ARGV: worker, lease ms.
pub const TAKE_SHARD: &str = include_str!("lua/take_shard.lua");

/// Puts items back in their streams to be done again (`scrape retry --redis`): dead letters
/// (taken out of the dead-letter stream, counter `dead`) and failed images (counter
/// `images_failed`), each leaving the done set. An item already put back (its dead letter gone,
/// or its image no longer done) is skipped, so a repeated retry adds nothing. Returns how many
/// were put back.
///
/// KEYS: counters, done, pages stream, images stream, dead stream.
/// ARGV: groups of five: `dead` or `failed`, the item's key, its stream (`p`/`i`), its JSON,
/// the dead letter's entry id (empty for a failed image).
pub const REQUEUE: &str = include_str!("lua/requeue.lua");

/// Moves an item delivered too often to the dead-letter stream: it counts as settled (done
/// set, counter `dead`) and is acknowledged. Returns 0 when it was done meanwhile.
///
/// KEYS: stream, dead stream, counters, done, reclaims.
/// ARGV: done key, entry id, group, item JSON, stream name, deliveries, worker, reason.
pub const DEAD_LETTER: &str = include_str!("lua/dead_letter.lua");

/// Takes a lease on a request to a host, if the job's limits allow one now: expired leases
/// (of workers that died) are dropped first, and the limit is the smaller of `ARGV[2]` and
/// the host's shared window (`KEYS[3]`, see [`SWAP_WINDOW`]) when it has one, else of `ARGV[5]`
/// (the size an adaptive window starts at; 0 when the limit is fixed). Returns
/// `{wait, epoch, in flight}`: `wait` is 0 when the lease (`ARGV[4]`, expiring after `ARGV[1]`
/// ms) is taken, else how many ms to wait (the pace or back-off), or -1 when the host is full;
/// `epoch` is the window's count of decreases, for the request to remember.
///
/// A host that is full first drops the leases of workers no longer alive (their liveness key,
/// `KEYS[4]` followed by the worker's name, the part of a token before its last space, is
/// gone), so a killed worker holds a host for seconds, not for a whole lease; it looks at most
/// once a second per host (`KEYS[1]` followed by `:swept`).
///
/// KEYS: the host's leases, the host's pace, the host's window, the liveness key prefix.
/// ARGV: lease ms, limit, interval ms, token (`WORKER N`), starting window.
pub const ACQUIRE_HOST: &str = include_str!("lua/acquire_host.lua");

/// Holds a host back for `ARGV[1]` ms (a 429 or 503 and its `Retry-After`), unless it is
/// held back longer already. KEYS: the host's pace.
pub const PAUSE_HOST: &str = include_str!("lua/pause_host.lua");

/// Extends leases still held: KEYS are the hosts' lease sets, ARGV[1] the lease ms and the
/// tokens after it, one per key. A lease already expired and dropped is not brought back.
pub const RENEW_HOSTS: &str = include_str!("lua/renew_hosts.lua");

/// Replaces a host's shared window (its JSON, `net::hosts::Window`) with `ARGV[2]` if it is
/// still `ARGV[1]` (empty: none yet), to expire after `ARGV[3]` ms; 1 when it was replaced.
/// KEYS: the host's window.
pub const SWAP_WINDOW: &str = include_str!("lua/swap_window.lua");

/// Drops the entries of the work streams (KEYS) that the group `ARGV[1]` is done with: those
/// before the first entry still pending (delivered, not acknowledged) or, with none pending,
/// every entry delivered so far. An entry not yet delivered or still pending stays, so a
/// worker that died keeps its entries for another to take over. Returns how many went.
pub const TRIM: &str = include_str!("lua/trim.lua");

/// Records how the job's seen and done sets hold items (`ARGV[1]`, see
/// [`super::item::KEY_FORMAT`]) at `KEYS[1]` unless a format is recorded already; returns
/// nothing when the job holds its items so, else the format it holds (`urls` for a job begun
/// before formats were recorded: its seen set, `KEYS[2]`, exists without one).
pub const CLAIM_FORMAT: &str = include_str!("lua/claim_format.lua");
