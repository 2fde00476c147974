-- Append messages to a topic's partitions, all or nothing, copy each one to
-- every attached child in the same step (fan-out), store nothing twice for a
-- retried request that carries idempotency keys, and trim retention.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2] = narad:{<topic>}:idem        hash: idempotency key -> digest
-- KEYS[3] = narad:{<topic>}:idem:at     zset: idempotency key scored by when stored
-- KEYS[4] = narad:{<topic>}:idem:bytes  string: bytes the remembered keys count
-- KEYS[5] = narad:{<topic>}:waited      string: until when consumers may wait
--   on the topic (ms; see mark_waiting.lua)
-- KEYS[6+5*(s-1) .. 10+5*(s-1)] = the topic's partition slot s (1..P): state, log,
--   lease, nonce, acked
--   state = narad:{<topic>}:p<i>        hash: next, oldest, cursor, floor, last_ts
--   log   = narad:{<topic>}:p<i>:log    hash: offset -> "<ts>,<record>"
--   lease = narad:{<topic>}:p<i>:lease  zset: offset scored by lease deadline
--   nonce = narad:{<topic>}:p<i>:nonce  hash: offset -> nonce of its last
--                                       reservation (kept once acked: a retried
--                                       ack with that nonce is recognised)
--   acked = narad:{<topic>}:p<i>:acked  zset: offsets acked above the floor
-- then, for each child in the order of ARGV: narad:{<child>}:meta,
--   narad:{<child>}:waited, and the 5 keys of each of the child's partition
--   slots (as above, in slot order)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = schema version the payloads were validated against ("0": none)
-- ARGV[3] = now, in milliseconds (the commit timestamp)
-- ARGV[4] = events channel (one with a hash tag, a sharded cluster's
--   shard channel of the topic's slot, is published with SPUBLISH)
-- ARGV[5] = the "messages" event for this topic and
--   each child, in one message, published when the topic's or a child's
--   mark is at or after now (nobody waits otherwise: no worker needs it)
-- ARGV[6] = the topic's "children" field as the caller read it ("" for none)
-- ARGV[7] = P, the number of the topic's partition slots
-- ARGV[8] = N, the number of entries
-- ARGV[9] = idempotency window (ms); ARGV[10] = most keys; ARGV[11] = most bytes;
-- ARGV[12] = bytes counted per key besides its key and digest
-- ARGV[13] = G, the number of idempotency keys; then G times:
--   key, digest, first entry, last entry (entries numbered from 1)
-- ARGV[14+4G .. 13+4G+3N] = per entry: slot, route, record; record =
--   "<now>,<kind><key length>:<key><bytes>" (stored as it is when its stamp is
--   now); a copy goes to the child's partition route % its partitions
-- then per child: delay_ms, partitions, S (its slot count), and the partition
--   index of each of its S slots
-- returns {"ok", stored, repeated, evicted} | {"no_topic"} | {"delay_child"}
--         | {"key_reused", index of the key (from 0)}
--         | {"stale_schema", current_version} | {"stale_children"}
local meta = KEYS[1]
local idem, idem_at, idem_bytes = KEYS[2], KEYS[3], KEYS[4]
local waited = KEYS[5]
local m = redis.call('HMGET', meta, 'epoch', 'schema_version', 'retention_ms',
  'fanout_delay_ms', 'children')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local retention = tonumber(m[3] or '0')
local now = tonumber(ARGV[3])
local nslots, n = tonumber(ARGV[7]), tonumber(ARGV[8])
local window, max_keys = tonumber(ARGV[9]), tonumber(ARGV[10])
local max_bytes, per_key = tonumber(ARGV[11]), tonumber(ARGV[12])
local guards = tonumber(ARGV[13])
local GUARDS = 14
local ENTRIES = GUARDS + 4 * guards
local SLOTS = 5
local FIRST_SLOT = 6

local function int(n)
  return string.format('%d', n)
end

-- -- idempotency keys ---------------------------------------------------------

local function forget(keys, bytes)
  for _, key in ipairs(keys) do
    local digest = redis.call('HGET', idem, key)
    if digest then
      bytes = bytes - (#key + #digest + per_key)
      redis.call('HDEL', idem, key)
    end
    redis.call('ZREM', idem_at, key)
  end
  return bytes
end

-- A key counts while stored_at + window > now; an older one is dropped by
-- `remember` (a bounded number per call) and treated as absent meanwhile.
local function remembered(key)
  local at = redis.call('ZSCORE', idem_at, key)
  if at and tonumber(at) + window > now then
    return redis.call('HGET', idem, key)
  end
  return nil
end

-- Which entries a remembered key covers (skip[i] = true), how many, and the
-- keys to remember; or nil and the index of a key remembered for other content.
local function check_keys()
  local skip, repeated, fresh = {}, 0, {}
  for g = 1, guards do
    local at = GUARDS + 4 * (g - 1)
    local key, digest = ARGV[at], ARGV[at + 1]
    local seen = remembered(key)
    if seen == digest then
      for i = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]) do
        skip[i] = true
        repeated = repeated + 1
      end
    elseif seen then
      return nil, g - 1
    else
      fresh[#fresh + 1] = at
    end
  end
  return skip, repeated, fresh
end

-- Remember the new keys at `now`, drop expired ones, and keep within bounds by
-- dropping the earliest stored. Each is bounded per call (2 per key this call
-- brings, plus 100): a topic far over bounds that were just lowered gets back
-- within them over several appends, without one blocking the server while it
-- drops them all. Returns how many were dropped before their time.
local function remember(fresh)
  if guards == 0 and redis.call('EXISTS', idem_at) == 0 then
    return 0
  end
  local bytes = tonumber(redis.call('GET', idem_bytes) or '0')
  local expired = redis.call('ZRANGEBYSCORE', idem_at, '-inf', now - window,
    'LIMIT', 0, 2 * guards + 100)
  bytes = forget(expired, bytes)
  for _, at in ipairs(fresh) do
    local key, digest = ARGV[at], ARGV[at + 1]
    bytes = forget({key}, bytes) -- an expired entry of the same key not yet dropped
    redis.call('HSET', idem, key, digest)
    redis.call('ZADD', idem_at, now, key)
    bytes = bytes + #key + #digest + per_key
  end
  local evicted, budget = 0, 2 * guards + 100
  while evicted < budget
      and (redis.call('ZCARD', idem_at) > max_keys or (bytes > max_bytes and bytes > 0)) do
    local oldest = redis.call('ZRANGE', idem_at, 0, 0)
    if not oldest[1] then
      break
    end
    bytes = forget(oldest, bytes)
    evicted = evicted + 1
  end
  if redis.call('EXISTS', idem_at) == 1 then
    redis.call('SET', idem_bytes, int(bytes))
  else
    redis.call('DEL', idem_bytes)
  end
  return evicted
end

-- -- partitions ---------------------------------------------------------------

local function load(base)
  local f = redis.call('HMGET', KEYS[base], 'next', 'oldest', 'cursor', 'floor', 'last_ts')
  return {
    state = KEYS[base], log = KEYS[base + 1], lease = KEYS[base + 2],
    nonce = KEYS[base + 3], acked = KEYS[base + 4], pending = {}, queued = 0,
    next = tonumber(f[1] or '0'), oldest = tonumber(f[2] or '0'),
    cursor = tonumber(f[3] or '0'), floor = tonumber(f[4] or '0'),
    last_ts = tonumber(f[5] or '0'),
  }
end

-- Entry i's record from its comma on, for a stamp other than now (cut once).
local stamp_length = #ARGV[3]
local tails = {}
local function tail(i)
  local t = tails[i]
  if not t then
    t = string.sub(ARGV[ENTRIES + 3 * (i - 1) + 2], stamp_length + 1)
    tails[i] = t
  end
  return t
end

-- Queue entry i at the partition's next offset, stamped at least `ts` and
-- never below the partition's last stamp; returns the stamp. `save` writes
-- the partition's queue in one command (redis.call writes the offset, a
-- number, as an integer). The queue is filled by index: `#t` on a growing
-- table searches each time.
local function put(st, ts, i)
  ts = math.max(ts, st.last_ts)
  local record
  if ts == now then
    record = ARGV[ENTRIES + 3 * (i - 1) + 2]
  else
    record = int(ts) .. tail(i)
  end
  local queued = st.queued
  st.pending[queued + 1], st.pending[queued + 2] = st.next, record
  st.queued = queued + 2
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
  if st.queued > 0 then
    redis.call('HSET', st.log, unpack(st.pending))
    st.pending, st.queued = {}, 0
  end
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
      waited = KEYS[key_at + 1],
      delay = tonumber(ARGV[at]),
      retention = tonumber(redis.call('HGET', KEYS[key_at], 'retention_ms') or '0'),
      slots = {}, target = {},
    }
    local partitions, count = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    local by_partition = {}
    for s = 1, count do
      local st = load(key_at + 2 + SLOTS * (s - 1))
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
    key_at = key_at + 2 + SLOTS * count
    at = at + 3 + count
  end
  return plan
end

-- Copy each stored entry to every child in entry order, bytes and kind as they
-- are, stamped with the parent's commit time plus the child's delay: the
-- moment a copy in a delay child falls due. A child's caps never refuse a copy.
local function fan_out(plan, stamps, skip)
  for _, child in ipairs(plan) do
    for i = 1, n do
      if not skip[i] then
        put(child.target[i], stamps[i] + child.delay, i)
      end
    end
    for _, st in ipairs(child.slots) do
      save(st, child.retention, 2 * n + 100)
    end
  end
end

-- Whether a consumer may wait on the topic or a child: their marks, the
-- topic's read first (the one read when it has no children or is waited on).
local function marked(key)
  return tonumber(redis.call('GET', key) or '0') >= now
end

local function anyone_waits(plan)
  if marked(waited) then
    return true
  end
  for _, child in ipairs(plan) do
    if marked(child.waited) then
      return true
    end
  end
  return false
end

local skip, repeated, fresh = check_keys()
if not skip then
  return {'key_reused', repeated}
end
local stored = n - repeated
local plan = {}
if stored > 0 then
  -- A delay child takes messages only from its parent; a retry of what it
  -- stored before it became one (every key remembered) stores nothing.
  if tonumber(m[4] or '0') > 0 then
    return {'delay_child'}
  end
  if (m[2] or '0') ~= ARGV[2] then
    return {'stale_schema', m[2] or '0'}
  end
  -- The children travel in KEYS, so a concurrent attach or detach must not
  -- slip between the caller's read and this step: the caller reads again and
  -- retries.
  if (m[5] or '') ~= ARGV[6] then
    return {'stale_children'}
  end
  local parts = {}
  for s = 1, nslots do
    parts[s] = load(FIRST_SLOT + SLOTS * (s - 1))
  end
  plan = plan_fan_out(FIRST_SLOT + SLOTS * nslots)
  if not plan then
    return redis.error_reply('append: an entry routed to a child partition with no slot')
  end
  local stamps = {}
  for i = 1, n do
    if not skip[i] then
      stamps[i] = put(parts[tonumber(ARGV[ENTRIES + 3 * (i - 1)])], now, i)
    end
  end
  for s = 1, nslots do
    save(parts[s], retention, 2 * n + 100)
  end
  fan_out(plan, stamps, skip)
end
local evicted = remember(fresh)
if stored > 0 and anyone_waits(plan) then
  local publish = string.find(ARGV[4], '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
  redis.call(publish, ARGV[4], ARGV[5])
end
return {'ok', stored, repeated, evicted}
