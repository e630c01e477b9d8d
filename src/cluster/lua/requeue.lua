local n = 0
for i = 1, #ARGV, 5 do
  local kind, key, stream, json, dead_id = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local taken
  if kind == 'dead' then
    taken = redis.call('XDEL', KEYS[5], dead_id) == 1
    if taken then
      redis.call('HINCRBY', KEYS[1], 'dead', -1)
    end
  else
    taken = redis.call('SISMEMBER', KEYS[2], key) == 1
    if taken then
      redis.call('HINCRBY', KEYS[1], 'images_failed', -1)
    end
  end
  if taken then
    redis.call('SREM', KEYS[2], key)
    local target = KEYS[4]
    if stream == 'p' then
      target = KEYS[3]
    end
    redis.call('XADD', target, '*', 'item', json)
    n = n + 1
  end
end
return n
