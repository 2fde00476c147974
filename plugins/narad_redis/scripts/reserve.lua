-- Reserve up to N messages for a consumer: from each partition in turn, lapsed or
-- given-back leases first, then messages never delivered once they are due,
-- honouring both flow-control caps per message, and stopping before the
-- message that would take the batch's key and payload bytes past the budget
-- (the first message is always taken): what is left is offered next, in the
-- same order. N = 1 is a single consume.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2+5*(s-1) .. 6+5*(s-1)] = partition slot s: state, log, lease, nonce, acked
--   (layout as in append.lua); slots are tried in the order given
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = now, in milliseconds
-- ARGV[3] = the byte budget: key and payload bytes of the messages leased, -1 for
--   no limit
-- ARGV[4] = S, the number of slots; ARGV[5 .. 4+S] = the partition index of each
-- ARGV[5+S ..] = one nonce per message wanted (random, minted by the caller): the
--   k-th message leased gets the k-th
-- returns {"ok", -1, -1, partition, offset, "<ts>,<record>", partition, ...} with
--         at least one message
--         | {"ok", earliest lease deadline or -1, earliest due time or -1}
--         | {"no_topic"}
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'retention_ms', 'visibility_timeout_ms',
  'max_in_flight_per_partition', 'max_acked_ahead_per_partition')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local retention, visibility = tonumber(m[2]), tonumber(m[3])
local max_in_flight, max_acked_ahead = tonumber(m[4]), tonumber(m[5])
local now = tonumber(ARGV[2])
local nslots = tonumber(ARGV[4])
local first_nonce = 5 + nslots
local wanted = #ARGV - first_nonce + 1

local function int(n)
  return string.format('%d', n)
end

-- The budget bounds the reply (and what the caller builds from it), not the
-- count: a few large messages fill a batch that could hold many small ones.
local budget = tonumber(ARGV[3])
if budget < 0 then
  budget = math.huge
end
local spent, counted, full = 0, 0, false

-- Whether the batch has room for `rec` ("<ts>,<kind><key length>:<key><payload>"),
-- counting it if so; once a message does not fit, nothing more is taken.
local function fits(rec)
  local size = #rec - string.find(rec, ':', 1, true)
  if counted > 0 and spent + size > budget then
    full = true
    return false
  end
  spent, counted = spent + size, counted + 1
  return true
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

local function expired(st, offset)
  local rec = redis.call('HGET', st.log, offset)
  return not rec or tonumber(string.match(rec, '^(%d+),')) + retention <= now
end

-- The first offset retention keeps, given that `lo` is not kept: stamps never
-- decrease within a partition, so what it no longer keeps is a prefix.
local function first_kept(st, lo)
  local hi = st.next
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if expired(st, mid) then
      lo = mid
    else
      hi = mid
    end
  end
  return hi
end

-- As in append.lua: drop what retention no longer keeps. What the budget
-- leaves for later calls is passed over as if dropped: the cursor, the floor
-- and `kept_from` (below which a lapsed lease is not offered) move past it.
local function trim(st, budget)
  st.kept_from = st.oldest
  if retention <= 0 then
    return false
  end
  local before, floor = st.oldest, st.floor
  while st.oldest < st.next and budget > 0 do
    if not expired(st, st.oldest) then
      break
    end
    redis.call('HDEL', st.log, st.oldest)
    redis.call('ZREM', st.lease, st.oldest)
    redis.call('HDEL', st.nonce, st.oldest)
    redis.call('ZREM', st.acked, st.oldest)
    st.oldest = st.oldest + 1
    budget = budget - 1
  end
  st.kept_from = st.oldest
  if budget == 0 and st.oldest < st.next and expired(st, st.oldest) then
    st.kept_from = first_kept(st, st.oldest)
  end
  if st.cursor < st.kept_from then
    st.cursor = st.kept_from
  end
  if st.floor < st.kept_from then
    st.floor = st.kept_from
    -- Acks of what was passed over are below the floor now: drop them, or
    -- they would count against max_acked_ahead until later calls trim them.
    redis.call('ZREMRANGEBYSCORE', st.acked, '-inf', '(' .. int(st.kept_from))
    while redis.call('ZREM', st.acked, st.floor) == 1 do
      st.floor = st.floor + 1
    end
  end
  return st.oldest ~= before or st.floor ~= floor
end

-- A message is consumable from its timestamp on: a copy in a delay child is
-- stamped with the moment it falls due. Stamps never decrease within a
-- partition, so the first message not due holds back the ones after it.
-- The messages never delivered that are due and fit the budget, at most
-- `count` from the cursor (offsets and records; the cursor moves past them);
-- notes when the first held back by its due time falls due.
local next_due = -1
local function stamp(rec)
  return tonumber(string.match(rec, '^(%d+),'))
end
local function due_from_cursor(st, count)
  local offsets, fields = {}, {}
  for k = 1, count do
    fields[k] = st.cursor + k - 1 -- redis.call writes a number as an integer
  end
  local records = redis.call('HMGET', st.log, unpack(fields))
  -- Stamps never decrease: when the last record read is due, so are the others.
  local all_due = stamp(records[count]) <= now
  local taken = {}
  for k, rec in ipairs(records) do
    local ts = not all_due and stamp(rec)
    if ts and ts > now then
      if next_due < 0 or ts < next_due then
        next_due = ts
      end
      break
    end
    if not fits(rec) then
      break
    end
    offsets[k], taken[k] = st.cursor + k - 1, rec
  end
  st.cursor = st.cursor + #offsets
  return offsets, taken
end

-- The offsets this partition hands out now, at most `want` and within the
-- budget, in the order a sequence of single reserves would take them, with
-- their records.
local function candidates(st, want)
  local room = math.min(want, max_in_flight - redis.call('ZCARD', st.lease),
    st.next - st.cursor)
  if redis.call('ZCARD', st.acked) >= max_acked_ahead then
    -- Only the message blocking the frontier may move: once leased, it no
    -- longer blocks, so at most one comes from here.
    local deadline = redis.call('ZSCORE', st.lease, st.floor)
    if deadline then
      local rec = tonumber(deadline) <= now and redis.call('HGET', st.log, st.floor)
      if rec and fits(rec) then
        return {st.floor}, {rec}
      end
      return {}, {}
    end
    if room > 0 and st.cursor == st.floor then
      return due_from_cursor(st, 1)
    end
    return {}, {}
  end
  local lapsed = redis.call('ZRANGEBYSCORE', st.lease, '-inf', now, 'LIMIT', 0, want)
  local kept = {}
  for _, offset in ipairs(lapsed) do
    if tonumber(offset) >= st.kept_from then
      kept[#kept + 1] = offset
    end
  end
  local offsets, records = {}, {}
  if #kept > 0 then
    for k, rec in ipairs(redis.call('HMGET', st.log, unpack(kept))) do
      if not fits(rec) then
        return offsets, records
      end
      offsets[k], records[k] = tonumber(kept[k]), rec
    end
  end
  -- Re-leasing a lapsed message holds no more leases than before; a message
  -- never delivered is one more.
  local relet = #offsets
  room = math.min(room, want - relet)
  if room > 0 then
    local fresh, read = due_from_cursor(st, room)
    for k, offset in ipairs(fresh) do
      offsets[relet + k], records[relet + k] = offset, read[k]
    end
  end
  return offsets, records
end

-- The reply, filled by index (`#out` on a growing table searches each time).
local out, filled = {'ok', -1, -1}, 3

-- Lease `offsets` of one partition under the next nonces; append them to `out`
-- with their records.
local function lease(st, partition, offsets, records, taken)
  local deadline = int(now + visibility)
  local deadlines, nonces = {}, {}
  for k, offset in ipairs(offsets) do
    deadlines[2 * k - 1], deadlines[2 * k] = deadline, offset
    nonces[2 * k - 1], nonces[2 * k] = offset, ARGV[first_nonce + taken + k - 1]
  end
  redis.call('ZADD', st.lease, unpack(deadlines))
  redis.call('HSET', st.nonce, unpack(nonces))
  for k, offset in ipairs(offsets) do
    out[filled + 1], out[filled + 2], out[filled + 3] = partition, offset, records[k]
    filled = filled + 3
  end
end

local taken = 0
local earliest = -1
for s = 1, nslots do
  local st = load(s)
  local before = st.cursor
  local changed = trim(st, 1000)
  local offsets, records = candidates(st, wanted - taken)
  if changed or st.cursor ~= before then
    redis.call('HSET', st.state, 'oldest', int(st.oldest), 'cursor', int(st.cursor),
      'floor', int(st.floor))
  end
  if #offsets > 0 then
    lease(st, tonumber(ARGV[4 + s]), offsets, records, taken)
    taken = taken + #offsets
  elseif taken == 0 then
    local first = redis.call('ZRANGE', st.lease, 0, 0, 'WITHSCORES')
    if first[2] and (earliest < 0 or tonumber(first[2]) < earliest) then
      earliest = tonumber(first[2])
    end
  end
  -- A full budget ends the batch: later partitions wait for the next call.
  if taken == wanted or full then
    return out
  end
end
if taken == 0 then
  out[2], out[3] = earliest, next_due
end
return out
