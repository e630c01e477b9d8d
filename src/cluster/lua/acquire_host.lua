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
