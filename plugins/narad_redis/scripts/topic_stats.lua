-- Read the positions of partitions for the metrics, writing nothing. A script
-- only so that the oldest unacked message's timestamp comes back without its
-- payload (a log record can be 1 MiB); it calls no write command, so it runs
-- while the server refuses writes for lack of memory.
-- KEYS[1] .. KEYS[4] = partition slot 1: state, log, lease, acked; then the
--   same four keys for each further slot s at KEYS[4s-3] .. KEYS[4s]
--   state = narad:{<topic>}:p<i>        hash: next, oldest, cursor, floor
--   log   = narad:{<topic>}:p<i>:log    hash: offset -> "<ts>,<record>"
--   lease = narad:{<topic>}:p<i>:lease  zset: offsets in flight
--   acked = narad:{<topic>}:p<i>:acked  zset: offsets acked above the floor
-- ARGV[1] = none: the script takes no arguments
-- returns per slot, in order: next, cursor, floor, in flight, acked above the
--   floor, and the timestamp of the message at the lowest unacked offset (-1
--   when every retained message is acked)
local out = {}
for base = 1, #KEYS, 4 do
  -- A trim keeps cursor and floor at or above the oldest retained offset.
  local f = redis.call('HMGET', KEYS[base], 'next', 'cursor', 'floor')
  local nxt, cursor, floor = tonumber(f[1] or '0'), tonumber(f[2] or '0'),
    tonumber(f[3] or '0')
  local ts = -1
  if floor < nxt then
    local rec = redis.call('HGET', KEYS[base + 1], string.format('%d', floor))
    if rec then
      ts = tonumber(string.match(rec, '^(%d+),'))
    end
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3] = nxt, cursor, floor
  out[n + 4] = redis.call('ZCARD', KEYS[base + 2])
  out[n + 5] = redis.call('ZCARD', KEYS[base + 3])
  out[n + 6] = ts
end
return out
