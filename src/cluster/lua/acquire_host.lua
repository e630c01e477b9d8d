local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local window = redis.call('GET', KEYS[3])
local epoch = 0
local limit = tonumber(ARGV[2])
if tonumber(ARGV[5]) > 0 then
  limit = math.min(limit, tonumber(ARGV[5]))
end
if window then
  limit = tonumber(ARGV[2])
  local w = cjson.decode(window)
  epoch = w.epoch
  limit = math.min(limit, math.max(1, w.size))
end
local pace = tonumber(redis.call('GET', KEYS[2]) or '0')
if pace > now then
  return {pace - now, epoch, 0}
end
local in_flight = redis.call('ZCARD', KEYS[1])
if in_flight >= limit then
  -- Full: the leases of workers no longer alive (killed, cut off) are dropped rather than
  -- left to expire; looked at once a second per host, each worker's liveness read once.
  if redis.call('SET', KEYS[1] .. ':swept', 1, 'NX', 'PX', 1000) then
    local alive = {}
    for _, token in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
      local worker = string.match(token, '^(.*) %d+$')
      if worker then
        if alive[worker] == nil then
          alive[worker] = redis.call('EXISTS', KEYS[4] .. worker) == 1
        end
        if not alive[worker] then
          redis.call('ZREM', KEYS[1], token)
        end
      end
    end
    in_flight = redis.call('ZCARD', KEYS[1])
  end
  if in_flight >= limit then
    return {-1, epoch, in_flight}
  end
end
local lease = tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], now + lease, ARGV[4])
redis.call('PEXPIRE', KEYS[1], lease * 2)
local interval = tonumber(ARGV[3])
if interval > 0 then
  redis.call('SET', KEYS[2], now + interval, 'PX', interval)
end
return {0, epoch, in_flight + 1}
