-- Detach a child from its parent: no later append to the parent is copied to
-- it. The child keeps its messages and its schema history, and manages that
-- history again.
-- KEYS[1] = narad:{<parent>}:meta
-- KEYS[2] = narad:{<child>}:meta
-- ARGV[1] = the parent's epoch as the caller knows it
-- ARGV[2] = the child's name
-- ARGV[3] = events channel; ARGV[4], ARGV[5] = the parent's and the child's
--   "topic_changed" events
-- returns "ok" | "no_topic" | "not_child"
local parent_meta, child_meta = KEYS[1], KEYS[2]
local p = redis.call('HMGET', parent_meta, 'epoch', 'children')
if p[1] ~= ARGV[1] then
  return 'no_topic'
end
-- "children" lists "<name>:<epoch>:<partitions>:<delay_ms>" items, comma-separated.
local kept, found = {}, false
for item in string.gmatch(p[2] or '', '[^,]+') do
  if string.match(item, '^[^:]+') == ARGV[2] then
    found = true
  else
    kept[#kept + 1] = item
  end
end
if not found then
  return 'not_child'
end
if #kept > 0 then
  redis.call('HSET', parent_meta, 'children', table.concat(kept, ','))
else
  redis.call('HDEL', parent_meta, 'children')
end
redis.call('HDEL', child_meta, 'parent', 'fanout_delay_ms')
redis.call('PUBLISH', ARGV[3], ARGV[4])
redis.call('PUBLISH', ARGV[3], ARGV[5])
return 'ok'
