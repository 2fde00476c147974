-- Settle leases: ack them, extend them from now, or give the messages back. Each
-- lease is judged on its own, in the order given (one lease is a single ack).
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2+5*(s-1) .. 6+5*(s-1)] = partition slot s: state, log, lease, nonce, acked
--   (layout as in append.lua; the log is not touched)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = "ack" | "extend" | "release"
-- ARGV[3] = now, in milliseconds
-- ARGV[4] = events channel; ARGV[5] = the "messages" event (published by "release")
-- ARGV[6..] = slot, offset, nonce (from the receipt handle), one triple per lease
-- returns {"no_topic"} | one status per lease: "ok" | "repeated" (acked before
--         under that nonce: a retried ack) | "gone" (lapsed, settled or unknown)
--         | "acked_ahead_full"
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'visibility_timeout_ms',
  'max_acked_ahead_per_partition')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local visibility, max_acked_ahead = tonumber(m[2]), tonumber(m[3])
local action, now = ARGV[2], tonumber(ARGV[3])

local slots = {}
local function slot_state(s)
  local st = slots[s]
  if st then
    return st
  end
  local base = 2 + 5 * (s - 1)
  st = {
    state = KEYS[base], lease = KEYS[base + 2], nonce = KEYS[base + 3],
    acked = KEYS[base + 4],
    floor = tonumber(redis.call('HGET', KEYS[base], 'floor') or '0'),
  }
  st.first_floor = st.floor
  slots[s] = st
  return st
end

local function is_acked(st, n, offset)
  return n < st.floor or redis.call('ZSCORE', st.acked, offset) ~= false
end

local function ack(st, n, offset)
  if n ~= st.floor then
    if redis.call('ZCARD', st.acked) >= max_acked_ahead then
      return 'acked_ahead_full'
    end
    redis.call('ZADD', st.acked, n, offset)
  else
    st.floor = st.floor + 1
    while redis.call('ZREM', st.acked, string.format('%d', st.floor)) == 1 do
      st.floor = st.floor + 1
    end
  end
  -- The nonce stays: it says who acked, so that a retry of this ack is known.
  redis.call('ZREM', st.lease, offset)
  return 'ok'
end

local released = false
local function settle(st, offset, nonce)
  local n = tonumber(offset)
  local deadline = redis.call('ZSCORE', st.lease, offset)
  local holder = redis.call('HGET', st.nonce, offset)
  if not deadline then
    -- Out of the lease set with its nonce kept: acked under that nonce.
    if action == 'ack' and holder == nonce and is_acked(st, n, offset) then
      return 'repeated'
    end
    return 'gone'
  end
  if tonumber(deadline) <= now or holder ~= nonce then
    return 'gone'
  end
  if action == 'extend' then
    redis.call('ZADD', st.lease, now + visibility, offset)
    return 'ok'
  end
  if action == 'release' then
    -- A deadline of 0 has lapsed for every "now": the next reserve takes it.
    redis.call('ZADD', st.lease, 0, offset)
    redis.call('HDEL', st.nonce, offset)
    released = true
    return 'ok'
  end
  return ack(st, n, offset)
end

local results = {}
for i = 6, #ARGV, 3 do
  results[#results + 1] = settle(slot_state(tonumber(ARGV[i])), ARGV[i + 1], ARGV[i + 2])
end
for _, st in pairs(slots) do
  if st.floor ~= st.first_floor then
    redis.call('HSET', st.state, 'floor', string.format('%d', st.floor))
  end
end
if released then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return results
