-- Append messages to a topic's partitions, all or nothing, storing nothing twice
-- for a retried request that carries idempotency keys, and trim retention.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[2] = narad:{<topic>}:idem        hash: idempotency key -> digest
-- KEYS[3] = narad:{<topic>}:idem:at     zset: idempotency key scored by when stored
-- KEYS[4] = narad:{<topic>}:idem:bytes  string: bytes the remembered keys count
-- KEYS[5+5*(s-1) .. 9+5*(s-1)] = partition slot s: state, log, lease, nonce, acked
--   state = narad:{<topic>}:p<i>        hash: next, oldest, cursor, floor, last_ts
--   log   = narad:{<topic>}:p<i>:log    hash: offset -> "<ts>,<record>"
--   lease = narad:{<topic>}:p<i>:lease  zset: offset scored by lease deadline
--   nonce = narad:{<topic>}:p<i>:nonce  hash: offset -> nonce of its last
--                                       reservation (kept once acked: a retried
--                                       ack with that nonce is recognised)
--   acked = narad:{<topic>}:p<i>:acked  zset: offsets acked above the floor
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = schema version the payloads were validated against ("0": none)
-- ARGV[3] = now, in milliseconds (the commit timestamp)
-- ARGV[4] = events channel; ARGV[5] = the "messages" event for this topic
-- ARGV[6] = idempotency window (ms); ARGV[7] = most keys; ARGV[8] = most bytes;
-- ARGV[9] = bytes counted per key besides its key and digest
-- ARGV[10] = G, the number of idempotency keys; then G times:
--   key, digest, first entry, last entry (entries numbered from 1)
-- ARGV[11+4*G ..] = slot, record, slot, record, ... one pair per entry; record =
--   "<now>,<kind><key length>:<key><bytes>", stored as it is unless the
--   partition's last timestamp is later than now
-- returns {"ok", stored, repeated, evicted} | {"no_topic"}
--         | {"key_reused", index of the key (from 0)} | {"stale_schema", current_version}
local meta = KEYS[1]
local idem, idem_at, idem_bytes = KEYS[2], KEYS[3], KEYS[4]
local m = redis.call('HMGET', meta, 'epoch', 'schema_version', 'retention_ms')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local retention = tonumber(m[3] or '0')
local now = tonumber(ARGV[3])
local window, max_keys = tonumber(ARGV[6]), tonumber(ARGV[7])
local max_bytes, per_key = tonumber(ARGV[8]), tonumber(ARGV[9])
local guards = tonumber(ARGV[10])
local first_entry = 11 + 4 * guards

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

-- A key counts while stored_at + window > now; an older one is dropped here
-- (at most `budget` of them per call) and treated as absent meanwhile.
local function remembered(key)
  local at = redis.call('ZSCORE', idem_at, key)
  if at and tonumber(at) + window > now then
    return redis.call('HGET', idem, key)
  end
  return nil
end

-- Which entries a remembered key covers (skip[i] = true), how many, and the
-- keys to remember; or the index of a key remembered for something else.
local function check_keys()
  local skip, repeated, fresh = {}, 0, {}
  for g = 1, guards do
    local at = 7 + 4 * g
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
-- dropping the earliest stored. Returns how many were dropped before their time.
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
  local evicted = 0
  while redis.call('ZCARD', idem_at) > max_keys or (bytes > max_bytes and bytes > 0) do
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

local slots = {}
local function slot_state(s)
  local st = slots[s]
  if st then
    return st
  end
  local base = 5 + 5 * (s - 1)
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

-- Append every entry not skipped, one HSET per partition; returns the count.
local function append_entries(skip)
  local fields = {}
  local count = 0
  for i = first_entry, #ARGV, 2 do
    if not skip[(i - first_entry) / 2 + 1] then
      local s = tonumber(ARGV[i])
      local st = slot_state(s)
      local ts = math.max(now, st.last_ts)
      local f = fields[s]
      if not f then
        f = {}
        fields[s] = f
      end
      f[#f + 1] = st.next
      if ts == now then
        f[#f + 1] = ARGV[i + 1]
      else
        f[#f + 1] = int(ts) .. string.sub(ARGV[i + 1], #ARGV[3] + 1)
      end
      st.next = st.next + 1
      st.last_ts = ts
      count = count + 1
    end
  end
  for s, f in pairs(fields) do
    redis.call('HSET', slots[s].log, unpack(f))
  end
  return count
end

local skip, repeated, fresh = check_keys()
if not skip then
  return {'key_reused', repeated}
end
local total = (#ARGV - first_entry + 1) / 2
if repeated < total and (m[2] or '0') ~= ARGV[2] then
  return {'stale_schema', m[2] or '0'}
end

local count = append_entries(skip)
local evicted = remember(fresh)
for _, st in pairs(slots) do
  trim(st, 2 * count + 100)
  redis.call('HSET', st.state, 'next', int(st.next), 'oldest', int(st.oldest),
    'cursor', int(st.cursor), 'floor', int(st.floor), 'last_ts', int(st.last_ts))
end
if count > 0 then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return {'ok', count, repeated, evicted}
