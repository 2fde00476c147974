-- Delete a topic with its messages, leases and schema history, and undo its
-- links: a child is detached from its parent; a parent's children are
-- detached and keep what they hold. The history's versions stop using their
-- global schema ids (an id whose last use goes loses its document; the id is
-- never reused).
-- KEYS[1] = narad:topics
-- KEYS[2] = narad:schema_bytes
-- KEYS[3] = narad:{<topic>}:meta
-- KEYS[4] = narad:{<topic>}:schemas
-- KEYS[5] = narad:{@schemas}:docs     (hash: id -> document, t:<id> type, r:<id> references)
-- KEYS[6 .. 5+L] = the meta of each linked topic: the parent, or every child
-- KEYS[6+L ..] = every other key of the topic (each partition's keys...)
-- ARGV[1] = topic name
-- ARGV[2] = the topic's epoch as the caller knows it
-- ARGV[3] = events channel; ARGV[4] = the "topic_changed" event for this topic
-- ARGV[5] = the topic's "parent" field as the caller read it ("" for none)
-- ARGV[6] = the topic's "children" field as the caller read it ("" for none)
-- ARGV[7] = L, the number of linked topics
-- ARGV[8 .. 7+L] = the "topic_changed" event of each linked topic
-- ARGV[8+L] = the prefix of the sets of each global id's uses (narad:{@schemas}:uses:)
-- returns "ok" | "no_topic" | "stale_children"
local index, cluster_key, meta, schemas, docs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local m = redis.call('HMGET', meta, 'epoch', 'schema_bytes', 'parent', 'children',
  'schema_version')
if m[1] ~= ARGV[2] then
  return 'no_topic'
end
if (m[3] or '') ~= ARGV[5] or (m[4] or '') ~= ARGV[6] then
  return 'stale_children'
end
local linked = tonumber(ARGV[7])

if m[3] then
  -- "children" lists "<name>:<epoch>:<partitions>:<delay_ms>" items.
  local parent_meta, kept = KEYS[6], {}
  local siblings = redis.call('HGET', parent_meta, 'children') or ''
  for item in string.gmatch(siblings, '[^,]+') do
    if string.match(item, '^[^:]+') ~= ARGV[1] then
      kept[#kept + 1] = item
    end
  end
  if #kept > 0 then
    redis.call('HSET', parent_meta, 'children', table.concat(kept, ','))
  else
    redis.call('HDEL', parent_meta, 'children')
  end
else
  for i = 6, 5 + linked do
    redis.call('HDEL', KEYS[i], 'parent', 'fanout_delay_ms')
  end
end

local size = tonumber(m[2] or '0')
if size > 0 then
  redis.call('DECRBY', cluster_key, size)
end
local uses = ARGV[8 + linked]
for v = 1, tonumber(m[5] or '0') do
  local id = redis.call('HGET', schemas, 'id:' .. v)
  if id then
    redis.call('SREM', uses .. id, ARGV[1] .. '-value\n' .. v)
    if redis.call('SCARD', uses .. id) == 0 then
      redis.call('HDEL', docs, id, 't:' .. id, 'r:' .. id)
    end
  end
end
redis.call('ZREM', index, ARGV[1])
redis.call('UNLINK', meta, schemas)
for i = 6 + linked, #KEYS do
  redis.call('UNLINK', KEYS[i])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
for i = 8, 7 + linked do
  redis.call('PUBLISH', ARGV[3], ARGV[i])
end
return 'ok'
