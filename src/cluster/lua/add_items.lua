local function add_items(from)
  local added = 0
  for i = from, #ARGV, 3 do
    if redis.call('SADD', KEYS[1], ARGV[i + 1]) == 1 then
      if ARGV[i] == 'p' then
        redis.call('XADD', KEYS[2], '*', 'item', ARGV[i + 2])
        redis.call('HINCRBY', KEYS[4], 'enqueued_pages', 1)
      else
        redis.call('XADD', KEYS[3], '*', 'item', ARGV[i + 2])
        redis.call('HINCRBY', KEYS[4], 'enqueued_images', 1)
      end
      added = added + 1
    end
  end
  return added
end
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
