local owner = redis.call('HGET', KEYS[1], ARGV[2])
if owner and owner ~= ARGV[1] then
  return false
end
local function popcount(x)
  local n = 0
  while x ~= 0 do
    x = bit.band(x, x - 1)
    n = n + 1
  end
  return n
end
local function halves(hex)
  return tonumber(string.sub(hex, 1, 8), 16), tonumber(string.sub(hex, 9, 16), 16)
end
local hi, lo = halves(ARGV[3])
local limit = tonumber(ARGV[5])
local best_sha, best_path, best_bits = nil, nil, nil
for i = 2, #KEYS do
  for _, member in ipairs(redis.call('SMEMBERS', KEYS[i])) do
    local hash, sha, path = string.match(member, '^(%x+) (%x+) (.*)$')
    if hash and sha ~= ARGV[2] then
      local other_hi, other_lo = halves(hash)
      local bits = popcount(bit.bxor(hi, other_hi)) + popcount(bit.bxor(lo, other_lo))
      if bits <= limit and (best_bits == nil or bits < best_bits
          or (bits == best_bits and sha < best_sha)) then
        best_sha, best_path, best_bits = sha, path, bits
      end
    end
  end
end
if best_sha == nil or ARGV[6] ~= 'drop' then
  local member = ARGV[3] .. ' ' .. ARGV[2] .. ' ' .. ARGV[4]
  for i = 2, #KEYS do
    redis.call('SADD', KEYS[i], member)
  end
end
if best_sha == nil then
  return false
end
return {best_sha, best_path, best_bits}
