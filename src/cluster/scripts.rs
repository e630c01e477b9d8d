//! The Lua scripts that make each effect on a job atomic, so a retried command (after a
//! dropped connection) or a redelivered item never applies an effect twice.
//!
//! Time comes from Redis (`TIME`), never from a worker's clock: leases and pace hold across
//! machines whose clocks differ.

/// Adds the items `ARGV[from..]` (triples: stream `p`/`i`, key, JSON) that the seen set
/// (`KEYS[1]`) does not hold to the pages (`KEYS[2]`) or images (`KEYS[3]`) stream, counting
/// them in the counters (`KEYS[4]`); `added` is how many were new.
const ADD_ITEMS: &str = r"
local function add_items(from)
  local added = 0
  for i = from, #ARGV, 3 do
    if redis.call('SADD', KEYS[1], ARGV[i + 1]) == 1 then
      if ARGV[i] == 'p' then
        redis.call('XADD', KEYS[2], '*', 'item', ARGV[i + 2])
        redis.call('HINCRBY', KEYS[4], 'enqueued_pages', 1)
      else
        redis.call('XADD', KEYS[3], '*', 'item', ARGV[i + 2])
        redis.call('HINCRBY', KEYS[4], 'enqueued_images', 1)
      end
      added = added + 1
    end
  end
  return added
end
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
";

/// Enqueue: `ARGV[1]` is the job's name (for the job list `KEYS[5]`), items from `ARGV[2]`.
pub fn enqueue() -> String {
    format!(
        "{ADD_ITEMS}
redis.call('SADD', KEYS[5], ARGV[1])
redis.call('HSETNX', KEYS[4], 'started_ms', now_ms)
return add_items(2)"
    )
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
    format!(
        "{ADD_ITEMS}
if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 1 then
  redis.call('XACK', KEYS[2], ARGV[3], ARGV[2])
  return -1
end
local added = add_items(9)
redis.call('HSET', KEYS[6], ARGV[4], ARGV[5])
redis.call('HINCRBY', KEYS[4], ARGV[6], 1)
redis.call('HINCRBY', KEYS[7], ARGV[6], 1)
redis.call('HSET', KEYS[7], 'last_ms', now_ms)
redis.call('SADD', KEYS[10], ARGV[8])
redis.call('HINCRBY', KEYS[8], ARGV[7], 1)
redis.call('SADD', KEYS[5], ARGV[1])
redis.call('XACK', KEYS[2], ARGV[3], ARGV[2])
redis.call('HDEL', KEYS[9], ARGV[2])
return added"
    )
}

/// Commits an image: its record, the owner of its bytes (the first URL stored with them), the
/// counters, the done mark and the acknowledgement. Returns the counter it went to
/// (`images_stored`, `images_duplicate`, `images_failed`), or `done` when it was done before.
///
/// KEYS: images stream, counters, done, image records, owners, worker totals, host totals,
/// reclaims, workers.
/// ARGV: done key, entry id, group, URL, record JSON, SHA-256 (empty when it failed), bytes,
/// host field, worker, `dropped` for a near-duplicate not stored (a duplicate that owns no
/// bytes) or empty.
pub const COMMIT_IMAGE: &str = r"
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  redis.call('XACK', KEYS[1], ARGV[3], ARGV[2])
  return 'done'
end
local field = 'images_failed'
if ARGV[10] == 'dropped' then
  field = 'images_duplicate'
elseif ARGV[6] ~= '' then
  redis.call('HSETNX', KEYS[5], ARGV[6], ARGV[4])
  if redis.call('HGET', KEYS[5], ARGV[6]) == ARGV[4] then
    field = 'images_stored'
    redis.call('HINCRBY', KEYS[2], 'bytes', ARGV[7])
    redis.call('HINCRBY', KEYS[6], 'bytes', ARGV[7])
  else
    field = 'images_duplicate'
  end
end
redis.call('HSET', KEYS[4], ARGV[4], ARGV[5])
redis.call('HINCRBY', KEYS[2], field, 1)
redis.call('HINCRBY', KEYS[6], field, 1)
redis.call('HSET', KEYS[6], 'last_ms', now_ms)
redis.call('SADD', KEYS[9], ARGV[9])
redis.call('HINCRBY', KEYS[7], ARGV[8], 1)
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('XACK', KEYS[1], ARGV[3], ARGV[2])
redis.call('HDEL', KEYS[8], ARGV[2])
return field
";

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
pub const NEAR_DUPLICATE: &str = r"
local owner = redis.call('HGET', KEYS[1], ARGV[2])
if owner and owner ~= ARGV[1] then
  return false
end
local function popcount(x)
  local n = 0
  while x ~= 0 do
    x = bit.band(x, x - 1)
    n = n + 1
  end
  return n
end
local function halves(hex)
  return tonumber(string.sub(hex, 1, 8), 16), tonumber(string.sub(hex, 9, 16), 16)
end
local hi, lo = halves(ARGV[3])
local limit = tonumber(ARGV[5])
local best_sha, best_path, best_bits = nil, nil, nil
for i = 2, #KEYS do
  for _, member in ipairs(redis.call('SMEMBERS', KEYS[i])) do
    local hash, sha, path = string.match(member, '^(%x+) (%x+) (.*)$')
    if hash and sha ~= ARGV[2] then
      local other_hi, other_lo = halves(hash)
      local bits = popcount(bit.bxor(hi, other_hi)) + popcount(bit.bxor(lo, other_lo))
      if bits <= limit and (best_bits == nil or bits < best_bits
          or (bits == best_bits and sha < best_sha)) then
        best_sha, best_path, best_bits = sha, path, bits
      end
    end
  end
end
if best_sha == nil or ARGV[6] ~= 'drop' then
  local member = ARGV[3] .. ' ' .. ARGV[2] .. ' ' .. ARGV[4]
  for i = 2, #KEYS do
    redis.call('SADD', KEYS[i], member)
  end
end
if best_sha == nil then
  return false
end
return {best_sha, best_path, best_bits}
";

/// Moves an item delivered too often to the dead-letter stream: it counts as settled (done
/// set, counter `dead`) and is acknowledged. Returns 0 when it was done meanwhile.
///
/// KEYS: stream, dead stream, counters, done, reclaims.
/// ARGV: done key, entry id, group, item JSON, stream name, deliveries, worker, reason.
pub const DEAD_LETTER: &str = r"
if redis.call('SISMEMBER', KEYS[4], ARGV[1]) == 1 then
  redis.call('XACK', KEYS[1], ARGV[3], ARGV[2])
  return 0
end
redis.call('XADD', KEYS[2], '*', 'item', ARGV[4], 'stream', ARGV[5], 'id', ARGV[2],
  'deliveries', ARGV[6], 'worker', ARGV[7], 'reason', ARGV[8])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'dead', 1)
redis.call('XACK', KEYS[1], ARGV[3], ARGV[2])
redis.call('HDEL', KEYS[5], ARGV[2])
return 1
";

/// Takes a lease on a request to a host, if the job's limits allow one now: expired leases
/// (of workers that died) are dropped first. Returns 0 when the lease (`ARGV[4]`, expiring
/// after `ARGV[1]` ms) is taken, else how many ms to wait (the pace or back-off), or -1 when
/// the host has `ARGV[2]` requests in flight.
///
/// KEYS: the host's leases, the host's pace. ARGV: lease ms, limit, interval ms, token.
pub const ACQUIRE_HOST: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local pace = tonumber(redis.call('GET', KEYS[2]) or '0')
if pace > now then
  return pace - now
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return -1
end
local lease = tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], now + lease, ARGV[4])
redis.call('PEXPIRE', KEYS[1], lease * 2)
local interval = tonumber(ARGV[3])
if interval > 0 then
  redis.call('SET', KEYS[2], now + interval, 'PX', interval)
end
return 0
";

/// Holds a host back for `ARGV[1]` ms (a 429 or 503 and its `Retry-After`), unless it is
/// held back longer already. KEYS: the host's pace.
pub const PAUSE_HOST: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local until_ms = now + tonumber(ARGV[1])
local pace = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ms > pace then
  redis.call('SET', KEYS[1], until_ms, 'PX', ARGV[1])
end
return 0
";

/// Extends leases still held: KEYS are the hosts' lease sets, ARGV[1] the lease ms and the
/// tokens after it, one per key. A lease already expired and dropped is not brought back.
pub const RENEW_HOSTS: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local lease = tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', now + lease, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], lease * 2)
end
return #KEYS
";
