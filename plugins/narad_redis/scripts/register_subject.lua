-- Append the next version to a standalone registry subject (one that is not a
-- topic's history), creating the subject, iff no topic owns the subject's name,
-- the subject is where the caller's check left it, and the version cap and both
-- byte budgets hold. The version gets its global schema id here: the id its
-- identity has, or the next unused one.
-- KEYS[1] = the subject's meta    (hash: latest, count, schema_bytes, compatibility)
-- KEYS[2] = the subject's schemas (hash: version -> document, hc:, id:, fp:, r:, del:<version>)
-- KEYS[3] = narad:{<topic>}:meta for a subject "<topic>-value" (else KEYS[1] again)
-- KEYS[4] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- KEYS[5] = narad:{@schemas}:subjects (sorted set of standalone subjects with versions)
-- KEYS[6] = narad:{@schemas}:ids      (hash: identity -> global id)
-- KEYS[7] = narad:{@schemas}:next     (the last global id assigned)
-- KEYS[8] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- ARGV[1] = the subject's latest version the caller's check started from ("0": none)
-- ARGV[2] = the document (compact); ARGV[3] = "1" when it is high-cost, else "0"
-- ARGV[4] = most versions a subject may hold
-- ARGV[5] = per-subject schema byte budget; ARGV[6] = cluster schema byte budget
-- ARGV[7] = the version's identity ("<type>:<fingerprint>"); ARGV[8] = its type
-- ARGV[9] = its references (compact JSON, "" for none)
-- ARGV[10] = the prefix of the sets of each id's uses (narad:{@schemas}:uses:)
-- ARGV[11] = the subject's name
-- ARGV[12] = "1" when KEYS[3] is a topic's record to refuse, else "0"
-- returns {"ok", version, stored, cluster, schema_id} | {"exists"}
--         | {"base_mismatch", latest} | {"too_many_versions", latest}
--         | {"topic_budget", stored, cluster, ""} | {"cluster_budget", stored, cluster}
local meta, schemas, cluster_key = KEYS[1], KEYS[2], KEYS[4]
if ARGV[12] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  return {'exists'}
end
local m = redis.call('HMGET', meta, 'latest', 'count', 'schema_bytes')
local latest, count, stored = tonumber(m[1] or '0'), tonumber(m[2] or '0'),
  tonumber(m[3] or '0')
if latest ~= tonumber(ARGV[1]) then
  return {'base_mismatch', latest}
end
if count >= tonumber(ARGV[4]) then
  return {'too_many_versions', latest}
end
local cluster = tonumber(redis.call('GET', cluster_key) or '0')
local doc = ARGV[2]
local size = string.len(doc)
if stored + size > tonumber(ARGV[5]) then
  return {'topic_budget', stored, cluster, ''}
end
if cluster + size > tonumber(ARGV[6]) then
  return {'cluster_budget', stored, cluster}
end

-- The global id of the schema (its document is kept while some version uses it).
local ids_key, next_key, docs_key = KEYS[6], KEYS[7], KEYS[8]
local identity, refs = ARGV[7], ARGV[9]
local id = redis.call('HGET', ids_key, identity)
if not id then
  id = tostring(redis.call('INCR', next_key))
  redis.call('HSET', ids_key, identity, id)
end
if redis.call('HEXISTS', docs_key, id) == 0 then
  redis.call('HSET', docs_key, id, doc, 't:' .. id, ARGV[8], 'r:' .. id, refs)
end

local version = latest + 1
redis.call('HSET', schemas, version, doc, 'hc:' .. version, ARGV[3], 'id:' .. version, id,
  'fp:' .. version, identity, 'r:' .. version, refs)
redis.call('HSET', meta, 'latest', version, 'count', count + 1, 'schema_bytes', stored + size)
redis.call('ZADD', KEYS[5], 0, ARGV[11])
redis.call('SADD', ARGV[10] .. id, ARGV[11] .. '\n' .. version)
cluster = redis.call('INCRBY', cluster_key, size)
return {'ok', version, stored + size, cluster, tonumber(id)}
