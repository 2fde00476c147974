-- The global schema id of a schema on a sharded storage, given before the step
-- in a topic's or subject's slot that stores the version (which then finds the
-- id under the identity): the id the identity has, or the next unused one, its
-- document kept under it (narad_redis.sharded).
-- KEYS[1] = narad:{@schemas}:ids      (hash: identity -> global id)
-- KEYS[2] = narad:{@schemas}:next     (the last global id assigned)
-- KEYS[3] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- ARGV[1] = the identity ("<type>:<fingerprint>"); ARGV[2] = its type
-- ARGV[3] = its references (compact JSON, "" for none); ARGV[4] = the document
-- returns the id
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then
  id = tostring(redis.call('INCR', KEYS[2]))
  redis.call('HSET', KEYS[1], ARGV[1], id)
end
if redis.call('HEXISTS', KEYS[3], id) == 0 then
  redis.call('HSET', KEYS[3], id, ARGV[4], 't:' .. id, ARGV[2], 'r:' .. id, ARGV[3])
end
return tonumber(id)
