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
  return {-1, epoch, in_flight}
end
local lease = tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], now + lease, ARGV[4])
redis.call('PEXPIRE', KEYS[1], lease * 2)
local interval = tonumber(ARGV[3])
if interval > 0 then
  redis.call('SET', KEYS[2], now + interval, 'PX', interval)
end
return {0, epoch, in_flight + 1}
