local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local until_ms = now + tonumber(ARGV[1])
local pace = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ms > pace then
  redis.call('SET', KEYS[1], until_ms, 'PX', ARGV[1])
end
return 0
