-- The floor's batch ack: forget each leased value.
-- KEYS[1] = the leased values (a hash: id -> value)
-- ARGV[1 ..] = the ids
-- returns one 1 (acked) or 0 (not leased) per id
local results = {}
for i, id in ipairs(ARGV) do
  results[i] = redis.call('HDEL', KEYS[1], id)
end
return results
