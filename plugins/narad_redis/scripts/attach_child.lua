-- Attach a child to a parent: from this step on, every append to the parent is
-- copied to the child (append.lua). A child without a schema history adopts
-- the parent's; one with a history must have the parent's, version for
-- version (the caller compared them as JSON values; the versions it gives
-- vouch that neither moved on since: a type, encoding or Protobuf message
-- changes only with a version). The child takes the parent's compatibility
-- mode, schema type, encoding and Protobuf message either way. Adopted versions
-- keep their global schema ids, used by the child's subject too.
-- KEYS[1] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- KEYS[2] = narad:{<parent>}:meta
-- KEYS[3] = narad:{<parent>}:schemas
-- KEYS[4] = narad:{<child>}:meta
-- KEYS[5] = narad:{<child>}:schemas
-- ARGV[1] = the parent's epoch as the caller knows it
-- ARGV[2] = the child's epoch as the caller knows it
-- ARGV[3] = the parent's schema version the caller read
-- ARGV[4] = the child's schema version the caller read
-- ARGV[5] = delay_ms (0: an immediate child)
-- ARGV[6] = most children a parent may have
-- ARGV[7] = how much longer than a child's delay the parent keeps messages
-- ARGV[8] = per-topic schema byte budget
-- ARGV[9] = cluster schema byte budget
-- ARGV[10] = the child's item in the parent's "children" field:
--   "<name>:<epoch>:<partitions>:<delay_ms>" (items are comma-separated)
-- ARGV[11] = events channel; ARGV[12], ARGV[13] = the parent's and the child's
--   "topic_changed" events
-- ARGV[14], ARGV[15] = the parent's and the child's names
-- ARGV[16] = the parent's compatibility mode the caller read
-- ARGV[17] = the prefix of the sets of each global id's uses (narad:{@schemas}:uses:)
-- returns {"ok", version, stored, cluster} | {"no_topic", topic}
--         | {"parent_is_child"} | {"child_is_parent"} | {"attached", parent}
--         | {"too_many_children"} | {"retention_too_short"} | {"stale_schema"}
--         | {"schema_mismatch"} | {"topic_budget", stored, cluster, topic}
--         | {"cluster_budget", stored, cluster}
local cluster_key = KEYS[1]
local parent_meta, parent_schemas = KEYS[2], KEYS[3]
local child_meta, child_schemas = KEYS[4], KEYS[5]
local p = redis.call('HMGET', parent_meta, 'epoch', 'parent', 'children', 'retention_ms',
  'schema_version', 'schema_bytes', 'schema_high_cost', 'compatibility', 'schema_type',
  'encoding', 'proto_message')
local c = redis.call('HMGET', child_meta, 'epoch', 'parent', 'children', 'schema_version')
if p[1] ~= ARGV[1] then
  return {'no_topic', ARGV[14]}
end
if c[1] ~= ARGV[2] then
  return {'no_topic', ARGV[15]}
end
if p[2] then
  return {'parent_is_child'}
end
if c[3] then
  return {'child_is_parent'}
end
if c[2] then
  return {'attached', c[2]}
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
local parent_version, child_version = p[5] or '0', c[4] or '0'
-- A record stored before modes names none: "BACKWARD".
local mode = p[8] or 'BACKWARD'
if parent_version ~= ARGV[3] or child_version ~= ARGV[4] or mode ~= ARGV[16] then
  return {'stale_schema'}
end
if child_version ~= '0' and child_version ~= parent_version then
  return {'schema_mismatch'}
end

local cluster = tonumber(redis.call('GET', cluster_key) or '0')
local stored = tonumber(redis.call('HGET', child_meta, 'schema_bytes') or '0')
if child_version == '0' and parent_version ~= '0' then
  -- Adopt a copy of the parent's whole history, within both budgets.
  local size = tonumber(p[6] or '0')
  if size > tonumber(ARGV[8]) then
    return {'topic_budget', size, cluster, ARGV[14]}
  end
  if cluster + size > tonumber(ARGV[9]) then
    return {'cluster_budget', 0, cluster}
  end
  local history = redis.call('HGETALL', parent_schemas)
  for i = 1, #history, 500 do
    redis.call('HSET', child_schemas, unpack(history, i, math.min(i + 499, #history)))
  end
  for i = 1, #history, 2 do
    local v = string.match(history[i], '^id:(%d+)$')
    if v then
      redis.call('SADD', ARGV[17] .. history[i + 1], ARGV[15] .. '-value\n' .. v)
    end
  end
  redis.call('HSET', child_meta, 'schema_version', parent_version,
    'schema_high_cost', p[7] or '0', 'schema_bytes', size)
  stored = size
  cluster = redis.call('INCRBY', cluster_key, size)
end

-- A record stored before schema types names none: JSON over json payloads.
redis.call('HSET', child_meta, 'parent', ARGV[14], 'fanout_delay_ms', ARGV[5],
  'compatibility', mode, 'schema_type', p[9] or 'JSON', 'encoding', p[10] or 'json',
  'proto_message', p[11] or '')
if children == '' then
  children = ARGV[10]
else
  children = children .. ',' .. ARGV[10]
end
redis.call('HSET', parent_meta, 'children', children)
redis.call('PUBLISH', ARGV[11], ARGV[12])
redis.call('PUBLISH', ARGV[11], ARGV[13])
return {'ok', tonumber(parent_version), stored, cluster}
