-- Change a topic's settings (retention, visibility, caps).
-- KEYS[1] = narad:{<topic>}:meta
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = events channel; ARGV[3] = the "topic_changed" event for this topic
-- ARGV[4..] = field, value, field, value, ...
-- returns "ok" | "no_topic"
local meta = KEYS[1]
if redis.call('HGET', meta, 'epoch') ~= ARGV[1] then
  return 'no_topic'
end
local fields = {}
for i = 4, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
if #fields > 0 then
  redis.call('HSET', meta, unpack(fields))
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 'ok'
