-- Create a topic, optionally with its first schema version, exactly once.
-- KEYS[1] = narad:topics              (sorted set of topic names, for listing)
-- KEYS[2] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- KEYS[3] = narad:{<topic>}:meta      (hash: the topic record)
-- KEYS[4] = narad:{<topic>}:schemas   (hash: version -> document, hc:<version>)
-- ARGV[1] = topic name
-- ARGV[2] = schema document ("" for none)
-- ARGV[3] = "1" when the schema is high-cost, else "0"
-- ARGV[4] = per-topic schema byte budget
-- ARGV[5] = cluster schema byte budget
-- ARGV[6] = events channel; ARGV[7] = the "topic_changed" event for this topic
-- ARGV[8..] = meta field, value, field, value, ...
-- returns {"exists"} | {"cluster_budget", stored, cluster} | {"topic_budget", stored, cluster}
--         | {"ok", schema_version, stored, cluster}
local index, cluster_key, meta, schemas = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local name, doc, high_cost = ARGV[1], ARGV[2], ARGV[3]
local topic_budget, cluster_budget = tonumber(ARGV[4]), tonumber(ARGV[5])

if redis.call('EXISTS', meta) == 1 then
  return {'exists'}
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
for i = 8, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', meta, unpack(fields))
redis.call('HSET', meta, 'schema_version', version, 'schema_high_cost', high_cost,
  'schema_bytes', size)
if version == 1 then
  redis.call('HSET', schemas, '1', doc, 'hc:1', high_cost)
  cluster = redis.call('INCRBY', cluster_key, size)
end
redis.call('ZADD', index, 0, name)
redis.call('PUBLISH', ARGV[6], ARGV[7])
return {'ok', version, size, cluster}
