-- Mark a topic as waited on until a time: appends and give-backs publish the
-- "messages" event while the mark is at or after their "now".
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2] = narad:{<topic>}:waited   string: latest "until" asked for (ms)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = until, in milliseconds (the caller's now + how long it may wait)
-- returns "ok" | "no_topic"
-- The epoch check keeps a mark from outliving its topic: a deleted topic's
-- keys are gone, and a mark is never written without the record beside it.
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then
  return 'no_topic'
end
local until_ms = tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[2]) or '0') < until_ms then
  redis.call('SET', KEYS[2], string.format('%d', until_ms))
end
return 'ok'
