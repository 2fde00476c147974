-- Record or drop uses of global schema ids on a sharded storage: recorded before
-- the step in a topic's or subject's slot that stores the versions, dropped
-- after the one that deletes them (narad_redis.sharded). An id left without
-- uses loses its document (the id itself is never reused).
-- KEYS[1] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- ARGV[1] = the prefix of the sets of each id's uses (narad:{@schemas}:uses:)
-- ARGV[2] = "1" to record, "0" to drop
-- ARGV[3..] = id, use, id, use, ... (a use is "<subject>\n<version>")
-- returns "ok"
local prefix, add = ARGV[1], ARGV[2] == '1'
for i = 3, #ARGV, 2 do
  local id, use = ARGV[i], ARGV[i + 1]
  if add then
    redis.call('SADD', prefix .. id, use)
  else
    redis.call('SREM', prefix .. id, use)
    if redis.call('SCARD', prefix .. id) == 0 then
      redis.call('HDEL', KEYS[1], id, 't:' .. id, 'r:' .. id)
    end
  end
end
return 'ok'
