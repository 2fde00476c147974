-- Append messages to a topic's partitions, all or nothing, and trim retention.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2+5*(s-1) .. 6+5*(s-1)] = partition slot s: state, log, lease, nonce, acked
--   state = narad:{<topic>}:p<i>        hash: next, oldest, cursor, floor, last_ts
--   log   = narad:{<topic>}:p<i>:log    hash: offset -> "<ts>,<record>"
--   lease = narad:{<topic>}:p<i>:lease  zset: offset scored by lease deadline
--   nonce = narad:{<topic>}:p<i>:nonce  hash: offset -> reservation nonce
--   acked = narad:{<topic>}:p<i>:acked  zset: offsets acked above the floor
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = schema version the payloads were validated against ("0": none)
-- ARGV[3] = now, in milliseconds (the commit timestamp)
-- ARGV[4] = events channel; ARGV[5] = the "messages" event for this topic
-- ARGV[6..] = slot, record, slot, record, ... (record = kind, key length, key, bytes)
-- returns {"ok", count} | {"no_topic"} | {"stale_schema", current_version}
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'schema_version', 'retention_ms')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
if (m[2] or '0') ~= ARGV[2] then
  return {'stale_schema', m[2] or '0'}
end
local retention = tonumber(m[3] or '0')
local now = tonumber(ARGV[3])

local function int(n)
  return string.format('%d', n)
end

local slots = {}
local function slot_state(s)
  local st = slots[s]
  if st then
    return st
  end
  local base = 2 + 5 * (s - 1)
  local f = redis.call('HMGET', KEYS[base], 'next', 'oldest', 'cursor', 'floor', 'last_ts')
  st = {
    state = KEYS[base], log = KEYS[base + 1], lease = KEYS[base + 2],
    nonce = KEYS[base + 3], acked = KEYS[base + 4],
    next = tonumber(f[1] or '0'), oldest = tonumber(f[2] or '0'),
    cursor = tonumber(f[3] or '0'), floor = tonumber(f[4] or '0'),
    last_ts = tonumber(f[5] or '0'),
  }
  slots[s] = st
  return st
end

-- Drop messages older than the retention window (at most `budget` of them),
-- with their leases and acks, and move the cursor and floor past them.
local function trim(st, budget)
  if retention <= 0 then
    return
  end
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
end

local count = 0
for i = 6, #ARGV, 2 do
  local st = slot_state(tonumber(ARGV[i]))
  local ts = math.max(now, st.last_ts)
  redis.call('HSET', st.log, st.next, int(ts) .. ',' .. ARGV[i + 1])
  st.next = st.next + 1
  st.last_ts = ts
  count = count + 1
end

for _, st in pairs(slots) do
  trim(st, 2 * count + 100)
  redis.call('HSET', st.state, 'next', int(st.next), 'oldest', int(st.oldest),
    'cursor', int(st.cursor), 'floor', int(st.floor), 'last_ts', int(st.last_ts))
end
redis.call('PUBLISH', ARGV[4], ARGV[5])
return {'ok', count}
