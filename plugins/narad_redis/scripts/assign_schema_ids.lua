-- Give the versions of a topic's history stored before global schema ids
-- their ids: for each version named that has none, the id its identity has,
-- or the next unused one.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2] = narad:{<topic>}:schemas   (hash: version -> document, hc:, id:, fp:, r:<version>)
-- KEYS[3] = narad:{@schemas}:ids      (hash: identity -> global id)
-- KEYS[4] = narad:{@schemas}:next     (the last global id assigned)
-- KEYS[5] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = the prefix of the sets of each id's uses (narad:{@schemas}:uses:)
-- ARGV[3] = the topic's name
-- ARGV[4..] = per version: its number, its identity ("<type>:<fingerprint>"), its type
-- returns "ok" | "no_topic"
local meta, schemas, ids_key, next_key, docs_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
  KEYS[5]
if redis.call('HGET', meta, 'epoch') ~= ARGV[1] then
  return 'no_topic'
end
for i = 4, #ARGV, 3 do
  local v, identity = ARGV[i], ARGV[i + 1]
  local doc = redis.call('HGET', schemas, v)
  if doc and redis.call('HEXISTS', schemas, 'id:' .. v) == 0 then
    local id = redis.call('HGET', ids_key, identity)
    if not id then
      id = tostring(redis.call('INCR', next_key))
      redis.call('HSET', ids_key, identity, id)
    end
    if redis.call('HEXISTS', docs_key, id) == 0 then
      redis.call('HSET', docs_key, id, doc, 't:' .. id, ARGV[i + 2], 'r:' .. id, '')
    end
    redis.call('HSET', schemas, 'id:' .. v, id, 'fp:' .. v, identity, 'r:' .. v, '')
    redis.call('SADD', ARGV[2] .. id, ARGV[3] .. '-value\n' .. v)
  end
end
return 'ok'
