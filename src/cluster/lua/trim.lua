local trimmed = 0
for i = 1, #KEYS do
  local delivered = nil
  local groups = {}
  if redis.call('EXISTS', KEYS[i]) == 1 then
    groups = redis.call('XINFO', 'GROUPS', KEYS[i])
  end
  for _, group in ipairs(groups) do
    local fields = {}
    for j = 1, #group, 2 do
      fields[group[j]] = group[j + 1]
    end
    if fields['name'] == ARGV[1] then
      delivered = fields['last-delivered-id']
    end
  end
  if delivered then
    local ms, seq = string.match(delivered, '^(%d+)-(%d+)$')
    local keep = ms .. '-' .. (tonumber(seq) + 1)
    local pending = redis.call('XPENDING', KEYS[i], ARGV[1])
    if pending[1] > 0 then
      keep = pending[2]
    end
    trimmed = trimmed + redis.call('XTRIM', KEYS[i], 'MINID', keep)
  end
end
return trimmed
