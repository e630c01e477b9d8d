local number = redis.call('INCR', KEYS[1]) - 1
redis.call('SET', KEYS[2] .. number, ARGV[1], 'PX', ARGV[2])
return number
