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
