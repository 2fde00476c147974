-- Append messages to a topic's partitions, all or nothing, copy each one to
-- every attached child in the same step (fan-out), and trim retention.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2+5*(s-1) .. 6+5*(s-1)] = the topic's partition slot s (1..P): state, log,
--   lease, nonce, acked
--   state = narad:{<topic>}:p<i>        hash: next, oldest, cursor, floor, last_ts
--   log   = narad:{<topic>}:p<i>:log    hash: offset -> "<ts>,<record>"
--   lease = narad:{<topic>}:p<i>:lease  zset: offset scored by lease deadline
--   nonce = narad:{<topic>}:p<i>:nonce  hash: offset -> reservation nonce
--   acked = narad:{<topic>}:p<i>:acked  zset: offsets acked above the floor
-- then, for each child in the order of ARGV: narad:{<child>}:meta, followed by
--   the 5 keys of each of the child's partition slots (as above, in slot order)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = schema version the payloads were validated against ("0": none)
-- ARGV[3] = now, in milliseconds (the commit timestamp)
-- ARGV[4] = events channel; ARGV[5] = the "messages" event for this topic and
--   each child, in one message
-- ARGV[6] = the topic's "children" field as the caller read it ("" for none)
-- ARGV[7] = P, the number of the topic's partition slots
-- ARGV[8] = N, the number of entries
-- ARGV[9 .. 8+3N] = per entry: slot, route, record (record = kind, key length,
--   key, bytes); a copy goes to the child's partition route % its partitions
-- then per child: delay_ms, partitions, S (its slot count), and the partition
--   index of each of its S slots
-- returns {"ok", count} | {"no_topic"} | {"delay_child"}
--         | {"stale_schema", current_version} | {"stale_children"}
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'schema_version', 'retention_ms',
  'fanout_delay_ms', 'children')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
if tonumber(m[4] or '0') > 0 then
  return {'delay_child'}
end
if (m[2] or '0') ~= ARGV[2] then
  return {'stale_schema', m[2] or '0'}
end
-- The children travel in KEYS, so a concurrent attach or detach must not slip
-- between the caller's read and this step: the caller reads again and retries.
if (m[5] or '') ~= ARGV[6] then
  return {'stale_children'}
end
local retention = tonumber(m[3] or '0')
local now = tonumber(ARGV[3])
local nslots, n = tonumber(ARGV[7]), tonumber(ARGV[8])
local ENTRIES = 9

local function int(n)
  return string.format('%d', n)
end

local function load(base)
  local f = redis.call('HMGET', KEYS[base], 'next', 'oldest', 'cursor', 'floor', 'last_ts')
  return {
    state = KEYS[base], log = KEYS[base + 1], lease = KEYS[base + 2],
    nonce = KEYS[base + 3], acked = KEYS[base + 4],
    next = tonumber(f[1] or '0'), oldest = tonumber(f[2] or '0'),
    cursor = tonumber(f[3] or '0'), floor = tonumber(f[4] or '0'),
    last_ts = tonumber(f[5] or '0'),
  }
end

-- Store a record at the partition's next offset, stamped at least `ts` and
-- never below the partition's last stamp; returns the stamp.
local function put(st, ts, record)
  ts = math.max(ts, st.last_ts)
  redis.call('HSET', st.log, st.next, int(ts) .. ',' .. record)
  st.next = st.next + 1
  st.last_ts = ts
  return ts
end

-- Drop messages older than the retention window (at most `budget` of them),
-- with their leases and acks, and move the cursor and floor past them.
local function trim(st, keep, budget)
  if keep <= 0 then
    return
  end
  while st.oldest < st.next and budget > 0 do
    local rec = redis.call('HGET', st.log, st.oldest)
    if rec and tonumber(string.match(rec, '^(%d+),')) + keep > now then
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

local function save(st, keep, budget)
  trim(st, keep, budget)
  redis.call('HSET', st.state, 'next', int(st.next), 'oldest', int(st.oldest),
    'cursor', int(st.cursor), 'floor', int(st.floor), 'last_ts', int(st.last_ts))
end

-- Fan-out, planned before anything is written (a script's writes are not
-- undone by a later error): each child's retention and partition slots, and
-- the slot every entry's copy goes to.
local function plan_fan_out(key_at)
  local plan, at = {}, ENTRIES + 3 * n
  while at <= #ARGV do
    local child = {
      delay = tonumber(ARGV[at]),
      retention = tonumber(redis.call('HGET', KEYS[key_at], 'retention_ms') or '0'),
      slots = {}, target = {},
    }
    local partitions, count = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    local by_partition = {}
    for s = 1, count do
      local st = load(key_at + 1 + 5 * (s - 1))
      child.slots[s] = st
      by_partition[tonumber(ARGV[at + 2 + s])] = st
    end
    for i = 1, n do
      local route = tonumber(ARGV[ENTRIES + 3 * (i - 1) + 1])
      child.target[i] = by_partition[route % partitions]
      if not child.target[i] then
        return nil
      end
    end
    plan[#plan + 1] = child
    key_at = key_at + 1 + 5 * count
    at = at + 3 + count
  end
  return plan
end

-- Copy each entry to every child in entry order, bytes and kind as they are,
-- stamped with the parent's commit time plus the child's delay: the moment a
-- copy in a delay child falls due. A child's caps never refuse a copy.
local function fan_out(plan, stamps)
  for _, child in ipairs(plan) do
    for i = 1, n do
      put(child.target[i], stamps[i] + child.delay, ARGV[ENTRIES + 3 * (i - 1) + 2])
    end
    for _, st in ipairs(child.slots) do
      save(st, child.retention, 2 * n + 100)
    end
  end
end

local parts = {}
for s = 1, nslots do
  parts[s] = load(2 + 5 * (s - 1))
end
local plan = plan_fan_out(2 + 5 * nslots)
if not plan then
  return redis.error_reply('append: an entry routed to a child partition with no slot')
end

local stamps = {}
for i = 1, n do
  local at = ENTRIES + 3 * (i - 1)
  stamps[i] = put(parts[tonumber(ARGV[at])], now, ARGV[at + 2])
end
for s = 1, nslots do
  save(parts[s], retention, 2 * n + 100)
end
fan_out(plan, stamps)
redis.call('PUBLISH', ARGV[4], ARGV[5])
return {'ok', n}
