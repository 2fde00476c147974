-- Read the positions of partitions for the metrics, writing nothing. A script
-- only so that the oldest unacked message's timestamp comes back without its
-- payload (a log record can be 1 MiB); it calls no write command, so it runs
-- while the server refuses writes for lack of memory. Only a write trims, so
-- the positions are those a trim at ARGV[1] would leave.
-- KEYS[1] .. KEYS[4] = partition slot 1: state, log, lease, acked; then the
--   same four keys for each further slot s at KEYS[4s-3] .. KEYS[4s]
--   state = narad:{<topic>}:p<i>        hash: next, oldest, cursor, floor
--   log   = narad:{<topic>}:p<i>:log    hash: offset -> "<ts>,<record>"
--   lease = narad:{<topic>}:p<i>:lease  zset: offsets in flight
--   acked = narad:{<topic>}:p<i>:acked  zset: offsets acked above the floor
-- ARGV[1] = now, in milliseconds
-- ARGV[1+s] = the retention_ms of slot s's topic (0: keeps forever)
-- returns per slot, in order: next, cursor, floor, in flight, acked above the
--   floor, and the timestamp of the message at the lowest unacked offset (-1
--   when every retained message is acked)
local now = tonumber(ARGV[1])

local function expired(log, offset, retention)
  local rec = redis.call('HGET', log, string.format('%d', offset))
  return not rec or tonumber(string.match(rec, '^(%d+),')) + retention <= now
end

local out = {}
for slot = 1, #KEYS / 4 do
  local base = 4 * slot - 3
  local state, log, lease, acked = KEYS[base], KEYS[base + 1], KEYS[base + 2],
    KEYS[base + 3]
  local retention = tonumber(ARGV[1 + slot])
  -- A trim keeps cursor and floor at or above the oldest retained offset.
  local f = redis.call('HMGET', state, 'next', 'oldest', 'cursor', 'floor')
  local nxt, oldest = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  local cursor, floor = tonumber(f[3] or '0'), tonumber(f[4] or '0')
  local in_flight = redis.call('ZCARD', lease)
  local ahead
  if retention > 0 and oldest < nxt and expired(log, oldest, retention) then
    -- What retention no longer keeps is a prefix (stamps never decrease):
    -- the first offset it keeps, as reserve.lua's trim finds it.
    local lo, hi = oldest, nxt
    while hi - lo > 1 do
      local mid = math.floor((lo + hi) / 2)
      if expired(log, mid, retention) then
        lo = mid
      else
        hi = mid
      end
    end
    cursor = math.max(cursor, hi)
    if floor < hi then
      floor = hi
      while redis.call('ZSCORE', acked, floor) do
        floor = floor + 1
      end
    end
    ahead = redis.call('ZCOUNT', acked, '(' .. string.format('%d', floor), '+inf')
    if in_flight > 0 then
      in_flight = 0
      for _, offset in ipairs(redis.call('ZRANGE', lease, 0, -1)) do
        if tonumber(offset) >= hi then
          in_flight = in_flight + 1
        end
      end
    end
  else
    ahead = redis.call('ZCARD', acked)
  end
  local ts = -1
  if floor < nxt then
    local rec = redis.call('HGET', log, string.format('%d', floor))
    if rec then
      ts = tonumber(string.match(rec, '^(%d+),'))
    end
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3] = nxt, cursor, floor
  out[n + 4] = in_flight
  out[n + 5] = ahead
  out[n + 6] = ts
end
return out
