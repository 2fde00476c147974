-- Reserve one message for a consumer: a lapsed or given-back lease first, then
-- the next message never delivered once it is due, honouring both flow-control
-- caps.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2+5*(s-1) .. 6+5*(s-1)] = partition slot s: state, log, lease, nonce, acked
--   (layout as in append.lua); slots are tried in the order given
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = now, in milliseconds
-- ARGV[3] = nonce for this reservation (random, minted by the caller)
-- ARGV[4..] = the partition index of each slot, in slot order
-- returns {"ok", partition, offset, "<ts>,<record>"}
--         | {"none", earliest_lease_deadline or -1, earliest_due_time or -1}
--         | {"no_topic"}
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'retention_ms', 'visibility_timeout_ms',
  'max_in_flight_per_partition', 'max_acked_ahead_per_partition')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local retention, visibility = tonumber(m[2]), tonumber(m[3])
local max_in_flight, max_acked_ahead = tonumber(m[4]), tonumber(m[5])
local now, nonce = tonumber(ARGV[2]), ARGV[3]

local function int(n)
  return string.format('%d', n)
end

local function load(s)
  local base = 2 + 5 * (s - 1)
  local f = redis.call('HMGET', KEYS[base], 'next', 'oldest', 'cursor', 'floor')
  return {
    state = KEYS[base], log = KEYS[base + 1], lease = KEYS[base + 2],
    nonce = KEYS[base + 3], acked = KEYS[base + 4],
    next = tonumber(f[1] or '0'), oldest = tonumber(f[2] or '0'),
    cursor = tonumber(f[3] or '0'), floor = tonumber(f[4] or '0'),
  }
end

-- As in append.lua: drop what retention no longer keeps.
local function trim(st, budget)
  if retention <= 0 then
    return false
  end
  local before = st.oldest
  while st.oldest < st.next and budget > 0 do
    local rec = redis.call('HGET', st.log, st.oldest)
    if rec and tonumber(string.match(rec, '^(%d+),')) + retention > now then
      break
    end
    redis.call('HDEL', st.log, st.oldest)
    redis.call('ZREM', st.lease, st.oldest)
    redis.call('HDEL', st.nonce, st.oldest)
    redis.call('ZREM', st.acked, st.oldest)
    st.oldest = st.oldest + 1
    budget = budget - 1
  end
  if st.cursor < st.oldest then
    st.cursor = st.oldest
  end
  if st.floor < st.oldest then
    st.floor = st.oldest
    while redis.call('ZREM', st.acked, st.floor) == 1 do
      st.floor = st.floor + 1
    end
  end
  return st.oldest ~= before
end

-- A message is consumable from its timestamp on: a copy in a delay child is
-- stamped with the moment it falls due. Stamps never decrease within a
-- partition, so the message at the cursor holds back the ones after it.
-- Whether it is due; if not, it notes when it will be.
local next_due = -1
local function due(st)
  local rec = redis.call('HGET', st.log, st.cursor)
  local ts = rec and tonumber(string.match(rec, '^(%d+),'))
  if ts and ts > now then
    if next_due < 0 or ts < next_due then
      next_due = ts
    end
    return false
  end
  return true
end

-- The offset this partition can hand out now, or nil.
local function candidate(st)
  local fresh = st.cursor < st.next and redis.call('ZCARD', st.lease) < max_in_flight
    and due(st)
  if redis.call('ZCARD', st.acked) >= max_acked_ahead then
    -- Only the message blocking the frontier may move.
    local deadline = redis.call('ZSCORE', st.lease, st.floor)
    if deadline then
      if tonumber(deadline) <= now then
        return st.floor, false
      end
      return nil, false
    end
    if fresh and st.cursor == st.floor then
      return st.cursor, true
    end
    return nil, false
  end
  local lapsed = redis.call('ZRANGEBYSCORE', st.lease, '-inf', now, 'LIMIT', 0, 1)
  if lapsed[1] then
    return tonumber(lapsed[1]), false
  end
  if fresh then
    return st.cursor, true
  end
  return nil, false
end

local earliest = -1
for s = 1, #ARGV - 3 do
  local st = load(s)
  local changed = trim(st, 1000)
  local offset, from_cursor = candidate(st)
  if offset then
    if from_cursor then
      st.cursor = st.cursor + 1
      changed = true
    end
    if changed then
      redis.call('HSET', st.state, 'oldest', int(st.oldest), 'cursor', int(st.cursor),
        'floor', int(st.floor))
    end
    redis.call('ZADD', st.lease, now + visibility, offset)
    redis.call('HSET', st.nonce, offset, nonce)
    return {'ok', tonumber(ARGV[3 + s]), offset, redis.call('HGET', st.log, offset)}
  end
  if changed then
    redis.call('HSET', st.state, 'oldest', int(st.oldest), 'cursor', int(st.cursor),
      'floor', int(st.floor))
  end
  local first = redis.call('ZRANGE', st.lease, 0, 0, 'WITHSCORES')
  if first[2] and (earliest < 0 or tonumber(first[2]) < earliest) then
    earliest = tonumber(first[2])
  end
end
return {'none', earliest, next_due}
