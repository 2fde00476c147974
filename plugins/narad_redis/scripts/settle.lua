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
--
-- Every call pays for what it allocates (Lua's collector runs on allocation)
-- and for each closure it creates: the leases are judged in one loop, a
-- partition's replies are kept as read, and redis.call gets numbers as they
-- are (it writes an integral number as an integer).
local m = redis.call('HMGET', KEYS[1], 'epoch', 'visibility_timeout_ms',
  'max_acked_ahead_per_partition', 'max_in_flight_per_partition', 'retention_ms')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local visibility, max_acked_ahead = tonumber(m[2]), tonumber(m[3])
local max_in_flight, retention = tonumber(m[4]), tonumber(m[5] or '0')
local action, now = ARGV[2], tonumber(ARGV[3])
-- Whether a consumer may be waiting: only then do acks look at the caps, and
-- only then is an event published (an extend never publishes one).
local waited = action ~= 'extend'
  and tonumber(redis.call('GET', KEYS[2]) or '0') >= now

-- A slot's keys are KEYS[base + STATE] .. KEYS[base + ACKED].
local STATE, LOG, LEASE, NONCE, ACKED = 0, 1, 2, 3, 4

-- Each partition's leases are read in two calls (deadlines, nonces) and its
-- changes written in a few at the end. The replies are kept, one entry per
-- distinct offset (`at` gives its place): in between, an entry holds the
-- offset's state as the leases before it left it (a deadline false once
-- acked, 0 once given back; a holder false once given back). `done` lists the
-- offsets this call changed, `ahead` (by offset as a number) those acked above
-- the floor, both written at the end. Every field is set in the constructor:
-- one added later would make Lua grow the table. Slots have keys of their own,
-- so the order they are read and written in does not matter.
local slots = {}
for i = 6, #ARGV, 3 do
  local s = tonumber(ARGV[i])
  local st = slots[s]
  if not st then
    st = {
      base = 3 + 5 * (s - 1), offsets = {}, at = {}, deadline = false,
      holder = false, done = {}, ahead = {}, pending = 0, stored = false,
      floor = 0, first_floor = 0, cursor = 0, in_flight = false,
      frontier_full = false, window = false, window_end = 0,
    }
    slots[s] = st
  end
  local offset = ARGV[i + 1]
  if not st.at[offset] then
    local k = #st.offsets + 1
    st.offsets[k], st.at[offset] = offset, k
  end
end
for _, st in pairs(slots) do
  local base = st.base
  st.deadline = redis.call('ZMSCORE', KEYS[base + LEASE], unpack(st.offsets))
  st.holder = redis.call('HMGET', KEYS[base + NONCE], unpack(st.offsets))
  local f = redis.call('HMGET', KEYS[base + STATE], 'floor', 'cursor')
  st.floor, st.cursor = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  st.first_floor = st.floor
  if waited and action == 'ack' then
    -- `stored`: the offsets acked above the floor in the acked set (read when
    -- first needed otherwise); `pending` counts this call's, in `ahead`.
    st.stored = redis.call('ZCARD', KEYS[base + ACKED])
    st.in_flight = redis.call('ZCARD', KEYS[base + LEASE])
    st.frontier_full = st.stored >= max_acked_ahead
  end
end

-- Move the floor past the acked offsets at it: this call's, and the stored
-- ones (another consumer's batch acked first leaves a run of them). Those are
-- read a window at a time, kept for the rest of the call (nothing else
-- changes the set meanwhile), and dropped in one command.
local WINDOW = 128
local function advance(st)
  local acked = KEYS[st.base + ACKED]
  local from, passed = st.floor, 0
  while true do
    if st.ahead[st.floor] then
      st.ahead[st.floor] = nil
      st.pending = st.pending - 1
    elseif st.stored > passed then
      if not st.window or st.floor >= st.window_end then
        st.window, st.window_end = {}, st.floor + WINDOW
        for _, offset in ipairs(redis.call('ZRANGEBYSCORE', acked, st.floor,
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
    redis.call('ZREMRANGEBYSCORE', acked, from, st.floor - 1)
    st.stored = st.stored - passed
  end
end

-- Retention may have aged out messages at the floor that no write trimmed
-- yet: the floor moves past them (as a trim would, at most to the cursor,
-- stamps never decreasing), so that acks of messages no consumer can get any
-- more do not count against the acked-ahead cap. Only looked at when the cap
-- is reached: an ack reads no log record otherwise.
local function pass_expired(st)
  local function expired(offset)
    local rec = redis.call('HGET', KEYS[st.base + LOG], offset)
    return not rec or tonumber(string.match(rec, '^(%d+),')) + retention <= now
  end
  if retention <= 0 or not expired(st.floor) then
    return
  end
  local lo, hi = st.floor, st.cursor
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if expired(mid) then
      lo = mid
    else
      hi = mid
    end
  end
  st.stored = st.stored - redis.call('ZREMRANGEBYSCORE', KEYS[st.base + ACKED], '-inf',
    string.format('(%d', hi))
  for offset in pairs(st.ahead) do
    if offset < hi then
      st.ahead[offset] = nil
      st.pending = st.pending - 1
    end
  end
  st.floor = hi
  advance(st)
end

-- Ack the live lease of `offset`, the k-th distinct offset of its slot.
local function ack(st, offset, k)
  local n = tonumber(offset)
  if n >= st.floor and not st.stored then
    st.stored = redis.call('ZCARD', KEYS[st.base + ACKED])
  end
  if n > st.floor and st.stored + st.pending >= max_acked_ahead then
    pass_expired(st)
  end
  if n > st.floor then
    if st.stored + st.pending >= max_acked_ahead then
      return 'acked_ahead_full'
    end
    st.ahead[n] = true
    st.pending = st.pending + 1
  elseif n == st.floor then
    st.floor = st.floor + 1
    advance(st)
  end
  -- Below the floor (retention passed it over): ending the lease is all.
  -- The nonce stays: it says who acked, so that a retry of this ack is known.
  st.deadline[k] = false
  st.done[#st.done + 1] = offset
  return 'ok'
end

-- Each lease in the order given.
local results, wake = {}, false
for i = 6, #ARGV, 3 do
  local st = slots[tonumber(ARGV[i])]
  local offset, nonce = ARGV[i + 1], ARGV[i + 2]
  local k = st.at[offset]
  local deadline, holder = st.deadline[k], st.holder[k]
  local result = 'gone'
  if not deadline then
    -- Out of the lease set with its nonce kept: acked under that nonce.
    if action == 'ack' and holder == nonce then
      local n = tonumber(offset)
      if n < st.floor or st.ahead[n]
          or redis.call('ZSCORE', KEYS[st.base + ACKED], n) then
        result = 'repeated'
      end
    end
  elseif tonumber(deadline) <= now or holder ~= nonce then
    result = 'gone'
  elseif action == 'ack' then
    result = ack(st, offset, k)
  else
    if action == 'extend' then
      st.deadline[k] = now + visibility
    else -- release
      -- A deadline of 0 has lapsed for every "now": the next reserve takes it.
      st.deadline[k], st.holder[k] = 0, false
      wake = true
    end
    st.done[#st.done + 1] = offset
    result = 'ok'
  end
  results[(i - 3) / 3] = result -- the lease's place in ARGV
end

-- Each partition's changes, in a few commands.
for _, st in pairs(slots) do
  local base, done = st.base, st.done
  if #done > 0 and action == 'ack' then
    redis.call('ZREM', KEYS[base + LEASE], unpack(done))
  elseif #done > 0 then
    -- Extended from now, or given back (0): every lease this call changed
    -- has the same deadline.
    local deadline = action == 'extend' and now + visibility or 0
    local scores = {}
    for k, offset in ipairs(done) do
      scores[2 * k - 1], scores[2 * k] = deadline, offset
    end
    redis.call('ZADD', KEYS[base + LEASE], unpack(scores))
    if action == 'release' then
      redis.call('HDEL', KEYS[base + NONCE], unpack(done))
    end
  end
  if next(st.ahead) then
    local ahead, n_ahead = {}, 0
    for offset in pairs(st.ahead) do
      ahead[n_ahead + 1], ahead[n_ahead + 2] = offset, offset
      n_ahead = n_ahead + 2
    end
    redis.call('ZADD', KEYS[base + ACKED], unpack(ahead))
  end
  if st.floor ~= st.first_floor then
    redis.call('HSET', KEYS[base + STATE], 'floor', st.floor)
    if st.frontier_full then
      wake = true
    end
  end
  -- An ack took a lease that was live when read: the set holds one fewer
  -- for each.
  if st.in_flight and st.in_flight >= max_in_flight
      and st.in_flight - #done < max_in_flight then
    wake = true
  end
end
if wake and waited then
  local publish = string.find(ARGV[4], '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
  redis.call(publish, ARGV[4], ARGV[5])
end
return results
