local url = redis.call('HGET', KEYS[1], ARGV[1])
if not url then
  return false
end
local record = redis.call('HGET', KEYS[2], url)
if not record then
  return false
end
local ok, decoded = pcall(cjson.decode, record)
if not ok or type(decoded) ~= 'table' or type(decoded.stored) ~= 'table'
    or type(decoded.stored.path) ~= 'string' then
  return false
end
return decoded.stored.path
