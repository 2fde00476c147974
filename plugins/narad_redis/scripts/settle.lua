-- Settle leases: ack them, extend them from now, or give the messages back. Each
-- lease is judged on its own, in the order given (one lease is a single ack).
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2] = narad:{<topic>}:waited (see mark_waiting.lua)
-- KEYS[3+5*(s-1) .. 7+5*(s-1)] = partition slot s: state, log, lease, nonce, acked
--   (layout as in append.lua; the log is only read, for the stamps retention
--   judges)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = "ack" | "extend" | "release"
-- ARGV[3] = now, in milliseconds
-- ARGV[4] = events channel (one with a hash tag, a sharded cluster's
--   shard channel of the topic's slot, is published with SPUBLISH)
-- ARGV[5] = the "messages" event, published while the
--   topic's mark is at or after now by a "release" that gave anything back, and
--   by an "ack" that let a partition's next message past a flow-control cap
--   (its leases fell below max_in_flight_per_partition, or its floor moved while
--   it held max_acked_ahead_per_partition acks above it)
-- ARGV[6..] = slot, offset, nonce (from the receipt handle), one triple per lease
-- returns {"no_topic"} | one status per lease: "ok" | "repeated" (acked before
--         under that nonce: a retried ack) | "gone" (lapsed, settled or unknown)
--         | "acked_ahead_full"
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'visibility_timeout_ms',
  'max_acked_ahead_per_partition', 'max_in_flight_per_partition', 'retention_ms')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local visibility, max_acked_ahead = tonumber(m[2]), tonumber(m[3])
local max_in_flight, retention = tonumber(m[4]), tonumber(m[5] or '0')
local action, now = ARGV[2], tonumber(ARGV[3])
-- Whether a consumer may be waiting: only then do acks look at the caps.
local waited = tonumber(redis.call('GET', KEYS[2]) or '0') >= now

local function int(n)
  return string.format('%d', n)
end

-- Each partition's leases are read in two calls (deadlines, nonces) and its
-- changes written in a few at the end; in between, `deadline` and `holder`
-- hold each offset's state as the leases before it left it.
local slots, order = {}, {}
local function slot_state(s)
  local st = slots[s]
  if not st then
    local base = 3 + 5 * (s - 1)
    st = {
      state = KEYS[base], log = KEYS[base + 1], lease = KEYS[base + 2],
      nonce = KEYS[base + 3],
      acked = KEYS[base + 4], offsets = {}, deadline = {}, holder = {},
      ahead = {}, changed = {}, acked_now = {},
    }
    slots[s] = st
    order[#order + 1] = s
  end
  return st
end

for i = 6, #ARGV, 3 do
  local st = slot_state(tonumber(ARGV[i]))
  st.offsets[#st.offsets + 1] = ARGV[i + 1]
end
for _, s in ipairs(order) do
  local st = slots[s]
  local deadlines = redis.call('ZMSCORE', st.lease, unpack(st.offsets))
  local holders = redis.call('HMGET', st.nonce, unpack(st.offsets))
  for k, offset in ipairs(st.offsets) do
    st.deadline[offset] = deadlines[k] and tonumber(deadlines[k]) or false
    st.holder[offset] = holders[k]
  end
  local f = redis.call('HMGET', st.state, 'floor', 'cursor')
  st.floor, st.cursor = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  st.first_floor = st.floor
  if waited and action == 'ack' then
    st.full = redis.call('ZCARD', st.lease) >= max_in_flight
    st.frontier_full = redis.call('ZCARD', st.acked) >= max_acked_ahead
  end
end

-- Offsets acked above the floor: those stored in the acked set, and those
-- acked by this call (`ahead`, by offset as a number, written at the end).
local function acked_count(st)
  if not st.stored then
    st.stored = redis.call('ZCARD', st.acked)
    st.pending = 0
  end
  return st.stored + st.pending
end

local function acked_above_floor(st, n)
  return st.ahead[n] or redis.call('ZSCORE', st.acked, n) ~= false
end

-- Move the floor past the acked offsets at it: this call's, and the stored
-- ones (another consumer's batch acked first leaves a run of them). Those are
-- read a window at a time, kept for the rest of the call (nothing else
-- changes the set meanwhile), and dropped in one command.
local WINDOW = 128
local function advance(st)
  local from, passed = st.floor, 0
  while true do
    if st.ahead[st.floor] then
      st.ahead[st.floor] = nil
      st.pending = st.pending - 1
    elseif st.stored > passed then
      if not st.window or st.floor >= st.window_end then
        st.window, st.window_end = {}, st.floor + WINDOW
        for _, offset in ipairs(redis.call('ZRANGEBYSCORE', st.acked, st.floor,
            st.window_end - 1)) do
          st.window[tonumber(offset)] = true
        end
      end
      if not st.window[st.floor] then
        break
      end
      passed = passed + 1
    else
      break
    end
    st.floor = st.floor + 1
  end
  if passed > 0 then
    redis.call('ZREMRANGEBYSCORE', st.acked, from, st.floor - 1)
    st.stored = st.stored - passed
  end
end

local function expired(st, offset)
  local rec = redis.call('HGET', st.log, offset)
  return not rec or tonumber(string.match(rec, '^(%d+),')) + retention <= now
end

-- Retention may have aged out messages at the floor that no write trimmed
-- yet: the floor moves past them (as a trim would, at most to the cursor,
-- stamps never decreasing), so that acks of messages no consumer can get any
-- more do not count against the acked-ahead cap. Only looked at when the cap
-- is reached: an ack reads no log record otherwise.
local function pass_expired(st)
  if retention <= 0 or not expired(st, st.floor) then
    return
  end
  local lo, hi = st.floor, st.cursor
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if expired(st, mid) then
      lo = mid
    else
      hi = mid
    end
  end
  st.stored = st.stored - redis.call('ZREMRANGEBYSCORE', st.acked, '-inf', '(' .. int(hi))
  for offset in pairs(st.ahead) do
    if offset < hi then
      st.ahead[offset] = nil
      st.pending = st.pending - 1
    end
  end
  st.floor = hi
  advance(st)
end

local function ack(st, n, offset)
  if n > st.floor and acked_count(st) >= max_acked_ahead then
    pass_expired(st)
  end
  if n > st.floor then
    if acked_count(st) >= max_acked_ahead then
      return 'acked_ahead_full'
    end
    st.ahead[n] = true
    st.pending = st.pending + 1
  elseif n == st.floor then
    acked_count(st)
    st.floor = st.floor + 1
    advance(st)
  end
  -- Below the floor (retention passed it over): ending the lease is all.
  -- The nonce stays: it says who acked, so that a retry of this ack is known.
  st.deadline[offset] = false
  st.changed[offset] = true
  st.acked_now[#st.acked_now + 1] = offset
  return 'ok'
end

local wake = false
local function settle(st, offset, nonce)
  local n = tonumber(offset)
  local deadline, holder = st.deadline[offset], st.holder[offset]
  if not deadline then
    -- Out of the lease set with its nonce kept: acked under that nonce.
    if action == 'ack' and holder == nonce
        and (n < st.floor or acked_above_floor(st, n)) then
      return 'repeated'
    end
    return 'gone'
  end
  if deadline <= now or holder ~= nonce then
    return 'gone'
  end
  if action == 'extend' then
    st.deadline[offset] = now + visibility
    st.changed[offset] = true
    return 'ok'
  end
  if action == 'release' then
    -- A deadline of 0 has lapsed for every "now": the next reserve takes it.
    st.deadline[offset] = 0
    st.holder[offset] = false
    st.changed[offset] = true
    wake = true
    return 'ok'
  end
  return ack(st, n, offset)
end

local results = {}
for i = 6, #ARGV, 3 do
  results[#results + 1] = settle(slots[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end

-- Each partition's changes, in a few commands; the lists are filled by index
-- (`#t` on a growing table searches each time). redis.call writes a number
-- (offset, deadline) as an integer.
for _, s in ipairs(order) do
  local st = slots[s]
  local scores, gone, nonces_gone, ahead = {}, {}, {}, {}
  local n_scores, n_gone, n_nonces, n_ahead = 0, 0, 0, 0
  for offset in pairs(st.changed) do
    local deadline = st.deadline[offset]
    if deadline then -- extended, or given back (0); false: acked
      scores[n_scores + 1], scores[n_scores + 2] = deadline, offset
      n_scores = n_scores + 2
    end
    if st.holder[offset] == false then
      n_nonces = n_nonces + 1
      nonces_gone[n_nonces] = offset
    end
  end
  for _, offset in ipairs(st.acked_now) do
    if st.deadline[offset] == false then
      n_gone = n_gone + 1
      gone[n_gone] = offset
    end
  end
  for offset in pairs(st.ahead) do
    ahead[n_ahead + 1], ahead[n_ahead + 2] = offset, offset
    n_ahead = n_ahead + 2
  end
  if n_scores > 0 then
    redis.call('ZADD', st.lease, unpack(scores))
  end
  if n_gone > 0 then
    redis.call('ZREM', st.lease, unpack(gone))
  end
  if n_nonces > 0 then
    redis.call('HDEL', st.nonce, unpack(nonces_gone))
  end
  if n_ahead > 0 then
    redis.call('ZADD', st.acked, unpack(ahead))
  end
  if st.floor ~= st.first_floor then
    redis.call('HSET', st.state, 'floor', st.floor)
    if st.frontier_full then
      wake = true
    end
  end
  if st.full and n_gone > 0 and redis.call('ZCARD', st.lease) < max_in_flight then
    wake = true
  end
end
if wake and waited then
  local publish = string.find(ARGV[4], '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
  redis.call(publish, ARGV[4], ARGV[5])
end
return results
