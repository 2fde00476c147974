-- Delete versions of a standalone registry subject, all or none: soft (each is
-- marked deleted, and stays stored) or permanent (each must be soft-deleted
-- already; it goes, with its bytes and its use of its global schema id). A
-- subject left without versions goes, its compatibility included.
-- KEYS[1] = the subject's meta    (hash: latest, count, schema_bytes, compatibility)
-- KEYS[2] = the subject's schemas (hash: version -> document, hc:, id:, fp:, r:, del:<version>)
-- KEYS[3] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- KEYS[4] = narad:{@schemas}:subjects (sorted set of standalone subjects with versions)
-- KEYS[5] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- ARGV[1] = "1" for a permanent delete, else "0"
-- ARGV[2] = the prefix of the sets of each id's uses (narad:{@schemas}:uses:)
-- ARGV[3] = the subject's name
-- ARGV[4..] = the versions
-- returns "ok" | "no_subject" | "not_deleted"
local meta, schemas, cluster_key, docs = KEYS[1], KEYS[2], KEYS[3], KEYS[5]
local permanent, uses, name = ARGV[1] == '1', ARGV[2], ARGV[3]
for i = 4, #ARGV do
  local v = ARGV[i]
  if redis.call('HEXISTS', schemas, v) == 0 then
    return 'no_subject'
  end
  if permanent and redis.call('HEXISTS', schemas, 'del:' .. v) == 0 then
    return 'not_deleted'
  end
end
if not permanent then
  for i = 4, #ARGV do
    redis.call('HSET', schemas, 'del:' .. ARGV[i], '1')
  end
  return 'ok'
end

local m = redis.call('HMGET', meta, 'count', 'schema_bytes')
local count, stored, freed = tonumber(m[1] or '0'), tonumber(m[2] or '0'), 0
for i = 4, #ARGV do
  local v = ARGV[i]
  -- A version named twice goes once.
  if redis.call('HEXISTS', schemas, v) == 1 then
    local size = redis.call('HSTRLEN', schemas, v)
    local id = redis.call('HGET', schemas, 'id:' .. v)
    redis.call('HDEL', schemas, v, 'hc:' .. v, 'id:' .. v, 'fp:' .. v, 'r:' .. v, 'del:' .. v)
    redis.call('SREM', uses .. id, name .. '\n' .. v)
    if redis.call('SCARD', uses .. id) == 0 then
      redis.call('HDEL', docs, id, 't:' .. id, 'r:' .. id)
    end
    count, freed = count - 1, freed + size
  end
end
if freed > 0 then
  redis.call('DECRBY', cluster_key, freed)
end
if count <= 0 then
  redis.call('UNLINK', meta, schemas)
  redis.call('ZREM', KEYS[4], name)
else
  redis.call('HSET', meta, 'count', count, 'schema_bytes', stored - freed)
end
return 'ok'
