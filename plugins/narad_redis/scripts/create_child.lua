-- Create a topic attached to a parent, exactly once: the record, a copy of the
-- parent's whole schema history, its compatibility mode, schema type, encoding
-- and Protobuf message, and the link, all or nothing (never a half-linked
-- topic). Each copied version keeps its global schema id, used by the child's
-- subject too. Refused while the registry subject "<child>-value" holds a
-- standalone history.
-- KEYS[1] = narad:topics              (sorted set of topic names, for listing)
-- KEYS[2] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- KEYS[3] = narad:{<child>}:meta
-- KEYS[4] = narad:{<child>}:schemas
-- KEYS[5] = narad:{<parent>}:meta
-- KEYS[6] = narad:{<parent>}:schemas
-- KEYS[7] = narad:{<child>}:value:meta (the standalone subject "<child>-value")
-- ARGV[1] = the child's name; ARGV[2] = the parent's name
-- ARGV[3] = the parent's epoch as the caller knows it
-- ARGV[4] = the parent's schema version the caller read
-- ARGV[5] = delay_ms (0: an immediate child)
-- ARGV[6] = most children a parent may have
-- ARGV[7] = how much longer than a child's delay the parent keeps messages
-- ARGV[8] = per-topic schema byte budget
-- ARGV[9] = cluster schema byte budget
-- ARGV[10] = the child's item in the parent's "children" field:
--   "<name>:<epoch>:<partitions>:<delay_ms>" (items are comma-separated)
-- ARGV[11] = events channel; ARGV[12], ARGV[13] = the child's and the parent's
--   "topic_changed" events
-- ARGV[14] = the parent's compatibility mode the caller read
-- ARGV[15] = the prefix of the sets of each global id's uses (narad:{@schemas}:uses:)
-- ARGV[16..] = the child's meta field, value, field, value, ...
-- returns {"ok", schema_version, stored, cluster} | {"exists"} | {"subject_exists"}
--         | {"no_topic", parent}
--         | {"parent_is_child"} | {"too_many_children"} | {"retention_too_short"}
--         | {"stale_schema"} | {"topic_budget", stored, cluster, parent}
--         | {"cluster_budget", stored, cluster}
local index, cluster_key = KEYS[1], KEYS[2]
local child_meta, child_schemas = KEYS[3], KEYS[4]
local parent_meta, parent_schemas = KEYS[5], KEYS[6]

if redis.call('EXISTS', child_meta) == 1 then
  return {'exists'}
end
if tonumber(redis.call('HGET', KEYS[7], 'count') or '0') > 0 then
  return {'subject_exists'}
end
local p = redis.call('HMGET', parent_meta, 'epoch', 'parent', 'children', 'retention_ms',
  'schema_version', 'schema_bytes', 'schema_high_cost', 'compatibility', 'schema_type',
  'encoding', 'proto_message')
if p[1] ~= ARGV[3] then
  return {'no_topic', ARGV[2]}
end
if p[2] then
  return {'parent_is_child'}
end
local children = p[3] or ''
local count = 0
for _ in string.gmatch(children, '[^,]+') do
  count = count + 1
end
if count >= tonumber(ARGV[6]) then
  return {'too_many_children'}
end
local retention, delay = tonumber(p[4] or '0'), tonumber(ARGV[5])
if retention > 0 and retention < delay + tonumber(ARGV[7]) then
  return {'retention_too_short'}
end
local version = p[5] or '0'
-- A record stored before modes names none: "BACKWARD".
local mode = p[8] or 'BACKWARD'
if version ~= ARGV[4] or mode ~= ARGV[14] then
  return {'stale_schema'}
end
-- The child adopts a copy of the parent's whole history, within both budgets.
local cluster = tonumber(redis.call('GET', cluster_key) or '0')
local size = tonumber(p[6] or '0')
if size > 0 and size > tonumber(ARGV[8]) then
  return {'topic_budget', size, cluster, ARGV[2]}
end
if size > 0 and cluster + size > tonumber(ARGV[9]) then
  return {'cluster_budget', 0, cluster}
end

local fields = {}
for i = 16, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', child_meta, unpack(fields))
redis.call('HSET', child_meta, 'schema_version', version, 'schema_high_cost',
  p[7] or '0', 'schema_bytes', size, 'parent', ARGV[2], 'fanout_delay_ms', ARGV[5],
  'compatibility', mode, 'schema_type', p[9] or 'JSON', 'encoding', p[10] or 'json',
  'proto_message', p[11] or '')
if size > 0 then
  local history = redis.call('HGETALL', parent_schemas)
  for i = 1, #history, 500 do
    redis.call('HSET', child_schemas, unpack(history, i, math.min(i + 499, #history)))
  end
  for i = 1, #history, 2 do
    local v = string.match(history[i], '^id:(%d+)$')
    if v then
      redis.call('SADD', ARGV[15] .. history[i + 1], ARGV[1] .. '-value\n' .. v)
    end
  end
  cluster = redis.call('INCRBY', cluster_key, size)
end
if children == '' then
  children = ARGV[10]
else
  children = children .. ',' .. ARGV[10]
end
redis.call('HSET', parent_meta, 'children', children)
redis.call('ZADD', index, 0, ARGV[1])
redis.call('PUBLISH', ARGV[11], ARGV[12])
redis.call('PUBLISH', ARGV[11], ARGV[13])
return {'ok', tonumber(version), size, cluster}
