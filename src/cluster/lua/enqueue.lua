redis.call('SADD', KEYS[5], ARGV[1])
redis.call('HSETNX', KEYS[4], 'started_ms', now_ms)
return add_items(2)
