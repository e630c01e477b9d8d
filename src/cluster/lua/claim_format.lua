local recorded = redis.call('GET', KEYS[1])
if recorded then
  if recorded == ARGV[1] then
    return false
  end
  return recorded
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 'urls'
end
redis.call('SET', KEYS[1], ARGV[1])
return false
