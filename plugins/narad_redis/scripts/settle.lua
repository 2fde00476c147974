-- Settle a lease: ack it, extend it from now, or give the message back.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2..6] = the partition's state, log, lease, nonce, acked (see append.lua)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = offset
-- ARGV[3] = the reservation nonce from the receipt handle
-- ARGV[4] = "ack" | "extend" | "release"
-- ARGV[5] = now, in milliseconds
-- ARGV[6] = events channel; ARGV[7] = the "messages" event (published by "release")
-- returns "ok" | "gone" (lapsed, settled or unknown) | "acked_ahead_full" | "no_topic"
local meta, state, lease, nonces, acked = KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]
local m = redis.call('HMGET', meta, 'epoch', 'visibility_timeout_ms',
  'max_acked_ahead_per_partition')
if m[1] ~= ARGV[1] then
  return 'no_topic'
end
local offset, nonce, action, now = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])

local deadline = redis.call('ZSCORE', lease, offset)
if not deadline or tonumber(deadline) <= now
    or redis.call('HGET', nonces, offset) ~= nonce then
  return 'gone'
end

if action == 'extend' then
  redis.call('ZADD', lease, now + tonumber(m[2]), offset)
  return 'ok'
end
if action == 'release' then
  -- A deadline of 0 has lapsed for every "now": the next reserve takes it.
  redis.call('ZADD', lease, 0, offset)
  redis.call('HDEL', nonces, offset)
  redis.call('PUBLISH', ARGV[6], ARGV[7])
  return 'ok'
end

local floor = tonumber(redis.call('HGET', state, 'floor') or '0')
local n = tonumber(offset)
if n ~= floor then
  if redis.call('ZCARD', acked) >= tonumber(m[3]) then
    return 'acked_ahead_full'
  end
  redis.call('ZADD', acked, n, offset)
else
  floor = floor + 1
  while redis.call('ZREM', acked, string.format('%d', floor)) == 1 do
    floor = floor + 1
  end
  redis.call('HSET', state, 'floor', string.format('%d', floor))
end
redis.call('ZREM', lease, offset)
redis.call('HDEL', nonces, offset)
return 'ok'
