-- Append the next schema version to a topic's history, iff it was checked
-- against the current version and both byte budgets and the version cap hold,
-- and apply the settings changes of the same PATCH with it: all or nothing.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2] = narad:{<topic>}:schemas   (hash: version -> document, hc:<version>)
-- KEYS[3] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = the version the compatibility check ran against ("0": none)
-- ARGV[3] = the new document (compact JSON)
-- ARGV[4] = "1" when the new document is high-cost, else "0"
-- ARGV[5] = most versions a topic may hold
-- ARGV[6] = per-topic schema byte budget
-- ARGV[7] = cluster schema byte budget
-- ARGV[8] = events channel; ARGV[9] = the "topic_changed" event for this topic
-- ARGV[10..] = settings to change with it: field, value, field, value, ...
-- returns {"ok", version, stored, cluster} | {"no_topic"}
--         | {"base_mismatch", current} | {"too_many_versions", current}
--         | {"topic_budget", stored, cluster} | {"cluster_budget", stored, cluster}
local meta, schemas, cluster_key = KEYS[1], KEYS[2], KEYS[3]
local m = redis.call('HMGET', meta, 'epoch', 'schema_version', 'schema_bytes')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local current = tonumber(m[2] or '0')
if current ~= tonumber(ARGV[2]) then
  return {'base_mismatch', current}
end
if current >= tonumber(ARGV[5]) then
  return {'too_many_versions', current}
end
local stored = tonumber(m[3] or '0')
local cluster = tonumber(redis.call('GET', cluster_key) or '0')
local size = string.len(ARGV[3])
if stored + size > tonumber(ARGV[6]) then
  return {'topic_budget', stored, cluster}
end
if cluster + size > tonumber(ARGV[7]) then
  return {'cluster_budget', stored, cluster}
end
local version = current + 1
redis.call('HSET', schemas, version, ARGV[3], 'hc:' .. version, ARGV[4])
redis.call('HSET', meta, 'schema_version', version, 'schema_high_cost', ARGV[4],
  'schema_bytes', stored + size)
local fields = {}
for i = 10, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
if #fields > 0 then
  redis.call('HSET', meta, unpack(fields))
end
cluster = redis.call('INCRBY', cluster_key, size)
redis.call('PUBLISH', ARGV[8], ARGV[9])
return {'ok', version, stored + size, cluster}
