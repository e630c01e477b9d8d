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
return added
