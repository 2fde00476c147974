-- Append the next schema version to a topic's history, iff it was checked
-- against the current version and both byte budgets and the version cap hold,
-- under the compatibility mode it was checked in, with the same version in
-- every attached child's history, and apply the settings changes of the same
-- PATCH with it (a new compatibility mode, schema type, encoding or Protobuf
-- message in every child too): all or nothing. The one script that appends to
-- a topic's history. The version gets its global schema id here: the id its
-- identity has, or the next unused one.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2] = narad:{<topic>}:schemas   (hash: version -> document, hc:, id:, fp:, r:<version>)
-- KEYS[3] = narad:schema_bytes        (cluster-wide bytes of stored schemas)
-- KEYS[4] = narad:{@schemas}:ids      (hash: identity -> global id)
-- KEYS[5] = narad:{@schemas}:next     (the last global id assigned)
-- KEYS[6] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- KEYS[7+2*(c-1)], KEYS[8+2*(c-1)] = child c's meta and schemas, in ARGV order
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = the version the compatibility check ran against ("0": none)
-- ARGV[3] = the new document (compact JSON)
-- ARGV[4] = "1" when the new document is high-cost, else "0"
-- ARGV[5] = most versions a topic may hold
-- ARGV[6] = per-topic schema byte budget
-- ARGV[7] = cluster schema byte budget
-- ARGV[8] = events channel; ARGV[9] = the "topic_changed" event for this topic
-- ARGV[10] = the topic's "children" field as the caller read it ("" for none)
-- ARGV[11] = how much longer than its longest child delay a parent keeps messages
-- ARGV[12] = C, the number of children
-- ARGV[13] = the compatibility mode the check started from (the topic's as the
--   caller read it; a record stored before modes names none: "BACKWARD")
-- ARGV[14] = the version's identity ("<type>:<fingerprint>"); ARGV[15] = its type
-- ARGV[16] = its references (compact JSON, "" for none)
-- ARGV[17] = the prefix of the sets of each id's uses (narad:{@schemas}:uses:);
--   a use is "<subject>\n<version>", a topic's subject "<topic>-value"
-- ARGV[18] = the topic's name
-- ARGV[19 .. 18+2C] = per child: its name and its "topic_changed" event
-- ARGV[19+2C ..] = settings to change with it: field, value, field, value, ...
--   ("compatibility", "schema_type", "encoding", "proto_message" go to every
--   child too)
-- returns {"ok", version, stored, cluster, schema_id} | {"no_topic"} | {"attached", parent}
--         | {"stale_children"} | {"base_mismatch", current}
--         | {"too_many_versions", current}
--         | {"topic_budget", stored, cluster, topic} | {"cluster_budget", stored, cluster}
--         | {"retention_too_short"}
local meta, schemas, cluster_key = KEYS[1], KEYS[2], KEYS[3]
local m = redis.call('HMGET', meta, 'epoch', 'schema_version', 'schema_bytes', 'parent',
  'children', 'compatibility')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
if m[4] then
  return {'attached', m[4]}
end
if (m[5] or '') ~= ARGV[10] then
  return {'stale_children'}
end
local current = tonumber(m[2] or '0')
if current ~= tonumber(ARGV[2]) or (m[6] or 'BACKWARD') ~= ARGV[13] then
  return {'base_mismatch', current}
end
if current >= tonumber(ARGV[5]) then
  return {'too_many_versions', current}
end
local stored = tonumber(m[3] or '0')
local cluster = tonumber(redis.call('GET', cluster_key) or '0')
local size = string.len(ARGV[3])
local nchildren = tonumber(ARGV[12])
local CHILDREN = 19
local SETTINGS = CHILDREN + 2 * nchildren
if stored + size > tonumber(ARGV[6]) then
  return {'topic_budget', stored, cluster, ''}
end

-- Every child's history is its parent's, version for version (its bytes may
-- differ: identity is by JSON value), so each takes the version too.
local children = {}
for c = 1, nchildren do
  local child = {
    meta = KEYS[7 + 2 * (c - 1)], schemas = KEYS[8 + 2 * (c - 1)],
    name = ARGV[CHILDREN + 2 * (c - 1)], event = ARGV[CHILDREN + 1 + 2 * (c - 1)],
  }
  child.stored = tonumber(redis.call('HGET', child.meta, 'schema_bytes') or '0')
  if child.stored + size > tonumber(ARGV[6]) then
    return {'topic_budget', child.stored, cluster, child.name}
  end
  children[c] = child
end
if cluster + size * (1 + nchildren) > tonumber(ARGV[7]) then
  return {'cluster_budget', stored, cluster}
end

-- The lowest non-zero retention the topic's children allow it, or 0. The
-- "children" field lists "<name>:<epoch>:<partitions>:<delay_ms>" items,
-- comma-separated.
local function min_retention(list, margin)
  local longest = -1
  for item in string.gmatch(list or '', '[^,]+') do
    longest = math.max(longest, tonumber(string.match(item, ':(%d+)$')))
  end
  return longest < 0 and 0 or longest + margin
end

-- The settings a child follows its parent in.
local FAMILY = {compatibility = true, schema_type = true, encoding = true,
  proto_message = true}
local fields = {}
local family = {}
for i = SETTINGS, #ARGV, 2 do
  if FAMILY[ARGV[i]] then
    family[#family + 1] = ARGV[i]
    family[#family + 1] = ARGV[i + 1]
  end
  if ARGV[i] == 'retention_ms' then
    local retention = tonumber(ARGV[i + 1])
    if retention > 0 and retention < min_retention(m[5], tonumber(ARGV[11])) then
      return {'retention_too_short'}
    end
  end
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
end

-- The global id of the version's schema (its document is kept while some
-- version uses it).
local ids_key, next_key, docs_key = KEYS[4], KEYS[5], KEYS[6]
local identity, refs, uses = ARGV[14], ARGV[16], ARGV[17]
local id = redis.call('HGET', ids_key, identity)
if not id then
  id = tostring(redis.call('INCR', next_key))
  redis.call('HSET', ids_key, identity, id)
end
if redis.call('HEXISTS', docs_key, id) == 0 then
  redis.call('HSET', docs_key, id, ARGV[3], 't:' .. id, ARGV[15], 'r:' .. id, refs)
end

local version = current + 1
local record = {version, ARGV[3], 'hc:' .. version, ARGV[4], 'id:' .. version, id,
  'fp:' .. version, identity, 'r:' .. version, refs}
redis.call('HSET', schemas, unpack(record))
redis.call('SADD', uses .. id, ARGV[18] .. '-value\n' .. version)
redis.call('HSET', meta, 'schema_version', version, 'schema_high_cost', ARGV[4],
  'schema_bytes', stored + size)
if #fields > 0 then
  redis.call('HSET', meta, unpack(fields))
end
for _, child in ipairs(children) do
  redis.call('HSET', child.schemas, unpack(record))
  redis.call('SADD', uses .. id, child.name .. '-value\n' .. version)
  redis.call('HSET', child.meta, 'schema_version', version, 'schema_high_cost', ARGV[4],
    'schema_bytes', child.stored + size)
  if #family > 0 then
    redis.call('HSET', child.meta, unpack(family))
  end
end
cluster = redis.call('INCRBY', cluster_key, size * (1 + nchildren))
redis.call('PUBLISH', ARGV[8], ARGV[9])
for _, child in ipairs(children) do
  redis.call('PUBLISH', ARGV[8], child.event)
end
return {'ok', version, stored + size, cluster, tonumber(id)}
