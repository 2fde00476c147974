-- Delete a topic with its messages, leases and schema history.
-- KEYS[1] = narad:topics
-- KEYS[2] = narad:schema_bytes
-- KEYS[3] = narad:{<topic>}:meta
-- KEYS[4..] = every other key of the topic (schemas, and each partition's keys)
-- ARGV[1] = topic name
-- ARGV[2] = the topic's epoch as the caller knows it
-- ARGV[3] = events channel; ARGV[4] = the "topic_changed" event for this topic
-- returns "ok" | "no_topic"
local index, cluster_key, meta = KEYS[1], KEYS[2], KEYS[3]
if redis.call('HGET', meta, 'epoch') ~= ARGV[2] then
  return 'no_topic'
end
local size = tonumber(redis.call('HGET', meta, 'schema_bytes') or '0')
if size > 0 then
  redis.call('DECRBY', cluster_key, size)
end
redis.call('ZREM', index, ARGV[1])
for i = 3, #KEYS do
  redis.call('UNLINK', KEYS[i])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 'ok'
