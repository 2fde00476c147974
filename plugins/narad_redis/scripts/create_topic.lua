-- Create a topic, optionally with its first schema version, exactly once. The
-- version gets its global schema id here: the id its identity has, or the
-- next unused one. Refused while the registry subject "<topic>-value" holds a
-- standalone history (its keys share the topic's hash tag).
-- KEYS[1] = narad:topics              (sorted set of topic names, for listing)
-- KEYS[2] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- KEYS[3] = narad:{<topic>}:meta      (hash: the topic record)
-- KEYS[4] = narad:{<topic>}:schemas   (hash: version -> document, hc:, id:, fp:, r:<version>)
-- KEYS[5] = narad:{<topic>}:value:meta (the standalone subject "<topic>-value")
-- KEYS[6] = narad:{@schemas}:ids      (hash: identity -> global id)
-- KEYS[7] = narad:{@schemas}:next     (the last global id assigned)
-- KEYS[8] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- ARGV[1] = topic name
-- ARGV[2] = schema document ("" for none)
-- ARGV[3] = "1" when the schema is high-cost, else "0"
-- ARGV[4] = per-topic schema byte budget
-- ARGV[5] = cluster schema byte budget
-- ARGV[6] = events channel; ARGV[7] = the "topic_changed" event for this topic
-- ARGV[8] = the schema's identity ("<type>:<fingerprint>"); ARGV[9] = its type
-- ARGV[10] = its references (compact JSON, "" for none)
-- ARGV[11] = the prefix of the sets of each id's uses (narad:{@schemas}:uses:)
-- ARGV[12..] = meta field, value, field, value, ...
-- returns {"exists"} | {"subject_exists"} | {"cluster_budget", stored, cluster}
--         | {"topic_budget", stored, cluster} | {"ok", schema_version, stored, cluster, schema_id}
local index, cluster_key, meta, schemas = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local name, doc, high_cost = ARGV[1], ARGV[2], ARGV[3]
local topic_budget, cluster_budget = tonumber(ARGV[4]), tonumber(ARGV[5])

if redis.call('EXISTS', meta) == 1 then
  return {'exists'}
end
if tonumber(redis.call('HGET', KEYS[5], 'count') or '0') > 0 then
  return {'subject_exists'}
end

local cluster = tonumber(redis.call('GET', cluster_key) or '0')
local size = string.len(doc)
local version = 0
if size > 0 then
  if cluster + size > cluster_budget then
    return {'cluster_budget', 0, cluster}
  end
  if size > topic_budget then
    return {'topic_budget', 0, cluster}
  end
  version = 1
end

local fields = {}
for i = 12, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', meta, unpack(fields))
redis.call('HSET', meta, 'schema_version', version, 'schema_high_cost', high_cost,
  'schema_bytes', size)
local id = 0
if version == 1 then
  -- The global id of the schema (its document is kept while some version
  -- uses it).
  local ids_key, next_key, docs_key = KEYS[6], KEYS[7], KEYS[8]
  local identity, refs = ARGV[8], ARGV[10]
  id = redis.call('HGET', ids_key, identity)
  if not id then
    id = tostring(redis.call('INCR', next_key))
    redis.call('HSET', ids_key, identity, id)
  end
  if redis.call('HEXISTS', docs_key, id) == 0 then
    redis.call('HSET', docs_key, id, doc, 't:' .. id, ARGV[9], 'r:' .. id, refs)
  end
  redis.call('HSET', schemas, '1', doc, 'hc:1', high_cost, 'id:1', id, 'fp:1', identity,
    'r:1', refs)
  redis.call('SADD', ARGV[11] .. id, name .. '-value\n1')
  cluster = redis.call('INCRBY', cluster_key, size)
end
redis.call('ZADD', index, 0, name)
redis.call('PUBLISH', ARGV[6], ARGV[7])
return {'ok', version, size, cluster, tonumber(id)}
