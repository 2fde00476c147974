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
--
-- Every call pays for what it allocates (Lua's collector runs on allocation)
-- and for each closure it creates: a partition's state lives in locals of the
-- loop below, messages go straight into the reply, and redis.call gets numbers
-- as they are (it writes an integral number as an integer).
local m = redis.call('HMGET', KEYS[1], 'epoch', 'retention_ms', 'visibility_timeout_ms',
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

-- Whether retention no longer keeps the message at `offset` of `log`.
local function expired(log, offset)
  local rec = redis.call('HGET', log, offset)
  return not rec or tonumber(string.match(rec, '^(%d+),')) + retention <= now
end

-- The reply, filled by index (`#out` on a growing table searches each time):
-- partition, offset, record per message.
local out, filled = {'ok', -1, -1}, 3
local taken, earliest, next_due = 0, -1, -1
for s = 1, nslots do
  local base = 2 + 5 * (s - 1)
  local state, log, lease = KEYS[base], KEYS[base + 1], KEYS[base + 2]
  local nonce, acked = KEYS[base + 3], KEYS[base + 4]
  local partition = tonumber(ARGV[4 + s])
  local f = redis.call('HMGET', state, 'next', 'oldest', 'cursor', 'floor')
  local next_offset, oldest = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  local cursor, floor = tonumber(f[3] or '0'), tonumber(f[4] or '0')
  local was_oldest, was_cursor, was_floor = oldest, cursor, floor

  -- As in append.lua: drop what retention no longer keeps, at most 1,000
  -- messages a call. What that leaves for later calls is passed over as if
  -- dropped: the cursor, the floor and `kept_from` (below which a lapsed lease
  -- is not offered) move past it.
  local kept_from = oldest
  if retention > 0 then
    while oldest < next_offset and oldest - was_oldest < 1000 do
      if not expired(log, oldest) then
        break
      end
      redis.call('HDEL', log, oldest)
      redis.call('ZREM', lease, oldest)
      redis.call('HDEL', nonce, oldest)
      redis.call('ZREM', acked, oldest)
      oldest = oldest + 1
    end
    kept_from = oldest
    if oldest - was_oldest == 1000 and oldest < next_offset and expired(log, oldest) then
      -- The first offset retention keeps: stamps never decrease within a
      -- partition, so what it no longer keeps is a prefix.
      local lo, hi = oldest, next_offset
      while hi - lo > 1 do
        local mid = math.floor((lo + hi) / 2)
        if expired(log, mid) then
          lo = mid
        else
          hi = mid
        end
      end
      kept_from = hi
    end
    if cursor < kept_from then
      cursor = kept_from
    end
    if floor < kept_from then
      floor = kept_from
      -- Acks of what was passed over are below the floor now: drop them, or
      -- they would count against max_acked_ahead until later calls trim them.
      redis.call('ZREMRANGEBYSCORE', acked, '-inf', string.format('(%d', kept_from))
      while redis.call('ZREM', acked, floor) == 1 do
        floor = floor + 1
      end
    end
  end

  -- The offsets this partition hands out now, at most `want` and within the
  -- budget, in the order a sequence of single reserves would take them: they
  -- go into the reply from `from` on. The earliest lease tells whether any has
  -- lapsed; when none has and no message waits past the cursor, there is
  -- nothing to offer whatever the caps say, and the caps are not read.
  local want, from, got = wanted - taken, filled, 0
  local first = redis.call('ZRANGE', lease, 0, 0, 'WITHSCORES')
  local soonest = first[2] and tonumber(first[2])
  local lapsed = soonest and soonest <= now
  local room = math.min(want, next_offset - cursor)
  if room > 0 then
    room = math.min(room, max_in_flight - redis.call('ZCARD', lease))
  end
  -- How many never-delivered messages to read from the cursor.
  local fresh = 0
  if lapsed or room > 0 then
    if redis.call('ZCARD', acked) >= max_acked_ahead then
      -- Only the message blocking the frontier may move: once leased, it no
      -- longer blocks, so at most one comes from here.
      local deadline = redis.call('ZSCORE', lease, floor)
      if deadline then
        local rec = tonumber(deadline) <= now and redis.call('HGET', log, floor)
        if rec and fits(rec) then
          out[filled + 1], out[filled + 2], out[filled + 3] = partition, floor, rec
          filled, got = filled + 3, 1
        end
      elseif room > 0 and cursor == floor then
        fresh = 1
      end
    else
      if lapsed then
        local kept = {}
        for _, offset in ipairs(redis.call('ZRANGEBYSCORE', lease, '-inf', now,
            'LIMIT', 0, want)) do
          if tonumber(offset) >= kept_from then
            kept[#kept + 1] = offset
          end
        end
        if #kept > 0 then
          for k, rec in ipairs(redis.call('HMGET', log, unpack(kept))) do
            if not fits(rec) then
              break
            end
            out[filled + 1], out[filled + 2], out[filled + 3] = partition,
              tonumber(kept[k]), rec
            filled, got = filled + 3, got + 1
          end
        end
      end
      -- Re-leasing a lapsed message holds no more leases than before; a
      -- message never delivered is one more.
      if not full then
        fresh = math.min(room, want - got)
      end
    end
  end

  -- A message is consumable from its timestamp on: a copy in a delay child is
  -- stamped with the moment it falls due. Stamps never decrease within a
  -- partition, so the first message not due holds back the ones after it;
  -- when the last record read is due, so are the others. The cursor moves
  -- past what is taken; the first held back notes when it falls due.
  if fresh > 0 then
    local fields = {}
    for k = 1, fresh do
      fields[k] = cursor + k - 1
    end
    local records = redis.call('HMGET', log, unpack(fields))
    local all_due = tonumber(string.match(records[fresh], '^(%d+),')) <= now
    for k = 1, fresh do
      local rec = records[k]
      local ts = not all_due and tonumber(string.match(rec, '^(%d+),'))
      if ts and ts > now then
        if next_due < 0 or ts < next_due then
          next_due = ts
        end
        break
      end
      if not fits(rec) then
        break
      end
      out[filled + 1], out[filled + 2], out[filled + 3] = partition, cursor, rec
      filled, got, cursor = filled + 3, got + 1, cursor + 1
    end
  end

  if oldest ~= was_oldest or cursor ~= was_cursor or floor ~= was_floor then
    redis.call('HSET', state, 'oldest', oldest, 'cursor', cursor, 'floor', floor)
  end
  if got > 0 then
    -- Lease what this partition gave under the next nonces.
    local deadline = now + visibility
    local deadlines, nonces = {}, {}
    for k = 1, got do
      local offset = out[from + 3 * k - 1]
      deadlines[2 * k - 1], deadlines[2 * k] = deadline, offset
      nonces[2 * k - 1], nonces[2 * k] = offset, ARGV[first_nonce + taken + k - 1]
    end
    redis.call('ZADD', lease, unpack(deadlines))
    redis.call('HSET', nonce, unpack(nonces))
    taken = taken + got
  elseif taken == 0 and soonest and (earliest < 0 or soonest < earliest) then
    earliest = soonest
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
