local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then
  redis.call('XACK', KEYS[1], ARGV[3], ARGV[2])
  return 'done'
end
local field = 'images_failed'
if ARGV[10] == 'stored' then
  redis.call('HSETNX', KEYS[5], ARGV[6], ARGV[4])
  if redis.call('HGET', KEYS[5], ARGV[6]) ~= ARGV[4] then
    return 'lost'
  end
  field = 'images_stored'
  redis.call('HINCRBY', KEYS[2], 'bytes', ARGV[7])
  redis.call('HINCRBY', KEYS[6], 'bytes', ARGV[7])
  if ARGV[11] ~= '' then
    redis.call('HSET', KEYS[10], ARGV[11], ARGV[12])
  end
elseif ARGV[10] == 'duplicate' then
  field = 'images_duplicate'
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
