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
-- ARGV[14+4G .. 13+4G+3N] = per entry: slot, route, and the length of its record
--   in the last argument; record = "<now>,<kind><key length>:<key><bytes>"
--   (stored as it is when its stamp is now); a copy goes to the child's
--   partition route % its partitions
-- then per child: delay_ms, partitions, S (its slot count), and the partition
--   index of each of its S slots
-- ARGV[#ARGV] = the entries' records, one after the other: the server reads a
--   large argument in one go, and many records as many arguments in pieces,
--   one per turn of its event loop, each turn waiting for others' fsync
-- returns {"ok", stored, repeated, evicted} | {"no_topic"} | {"delay_child"}
--         | {"key_reused", index of the key (from 0)}
--         | {"stale_schema", current_version} | {"stale_children"}
--
-- Every call pays for what it allocates (Lua's collector runs on allocation)
-- and for each closure it creates: the state of every partition slot written
-- (the topic's, then each child's) lives in arrays indexed by a running slot
-- number, entries are queued in loops rather than through helpers, the
-- idempotency helpers are only made when there are keys to handle, and
-- redis.call gets numbers as they are (it writes an integral number as an
-- integer).
local idem, idem_at, idem_bytes = KEYS[2], KEYS[3], KEYS[4]
local m = redis.call('HMGET', KEYS[1], 'epoch', 'schema_version', 'retention_ms',
  'fanout_delay_ms', 'children')
if m[1] ~= ARGV[1] then
  return {'no_topic'}
end
local now = tonumber(ARGV[3])
local nslots, n = tonumber(ARGV[7]), tonumber(ARGV[8])
local window = tonumber(ARGV[9])
local guards = tonumber(ARGV[13])
local GUARDS = 14
local ENTRIES = GUARDS + 4 * guards
local SLOTS = 5
local FIRST_SLOT = 6
local budget = 2 * n + 100

-- -- idempotency keys: which entries a remembered key covers ------------------

-- A key counts while stored_at + window > now; an older one is dropped when
-- the keys are remembered (a bounded number per call) and treated as absent
-- meanwhile. skip[i] = true for an entry a remembered key covers; `fresh`
-- lists where the keys to remember are in ARGV.
local skip, repeated, fresh, absent, nfresh = nil, 0, nil, nil, 0
if guards > 0 then
  skip, fresh, absent = {}, {}, {}
  for g = 1, guards do
    local at = GUARDS + 4 * (g - 1)
    local key, digest = ARGV[at], ARGV[at + 1]
    local seen
    local stored_at = redis.call('ZSCORE', idem_at, key)
    if stored_at and tonumber(stored_at) + window > now then
      seen = redis.call('HGET', idem, key)
    end
    if seen == digest then
      for i = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]) do
        skip[i] = true
        repeated = repeated + 1
      end
    elseif seen then
      return {'key_reused', g - 1}
    else
      -- (A key with no score is in neither the hash nor the set.)
      nfresh = nfresh + 1
      fresh[nfresh], absent[nfresh] = at, not stored_at
    end
  end
end

-- -- partitions -----------------------------------------------------------------

local stored = n - repeated
-- Per slot g (the topic's 1..P, then each child's): its first key, the fields
-- as read, next, oldest, cursor, floor, last stamp, and the log fields queued
-- (offset, record, ...; filled by index: `#t` on a growing table searches each
-- time) with their count.
local base, raw, nx, ol, cu, fl, lt, pend, queued = {}, {}, {}, {}, {}, {}, {}, {}, {}
local nall = 0
local function load(b)
  nall = nall + 1
  local f = redis.call('HMGET', KEYS[b], 'next', 'oldest', 'cursor', 'floor', 'last_ts')
  base[nall], raw[nall] = b, f
  nx[nall], ol[nall] = tonumber(f[1] or '0'), tonumber(f[2] or '0')
  cu[nall], fl[nall] = tonumber(f[3] or '0'), tonumber(f[4] or '0')
  lt[nall], pend[nall], queued[nall] = tonumber(f[5] or '0'), {}, 0
  return nall
end

-- Write slot g's queued messages, drop those older than the retention window
-- `keep` (at most `budget` of them) with their leases and acks, move the
-- cursor and floor past them, and write the fields of its state that changed
-- (or were absent).
local function save(g, keep)
  local b = base[g]
  local log = KEYS[b + 1]
  if queued[g] > 0 then
    redis.call('HSET', log, unpack(pend[g]))
  end
  local oldest, cursor, floor = ol[g], cu[g], fl[g]
  if keep > 0 then
    local next_offset, left = nx[g], budget
    local lease, nonce, acked = KEYS[b + 2], KEYS[b + 3], KEYS[b + 4]
    while oldest < next_offset and left > 0 do
      local rec = redis.call('HGET', log, oldest)
      if rec and tonumber(string.match(rec, '^(%d+),')) + keep > now then
        break
      end
      redis.call('HDEL', log, oldest)
      redis.call('ZREM', lease, oldest)
      redis.call('HDEL', nonce, oldest)
      redis.call('ZREM', acked, oldest)
      oldest = oldest + 1
      left = left - 1
    end
    if cursor < oldest then
      cursor = oldest
    end
    if floor < oldest then
      floor = oldest
      while redis.call('ZREM', acked, floor) == 1 do
        floor = floor + 1
      end
    end
  end
  local f = raw[g]
  if f[2] and f[3] and f[4] and oldest == ol[g] and cursor == cu[g] and floor == fl[g] then
    redis.call('HSET', KEYS[b], 'next', nx[g], 'last_ts', lt[g])
  else
    redis.call('HSET', KEYS[b], 'next', nx[g], 'oldest', oldest, 'cursor', cursor,
      'floor', floor, 'last_ts', lt[g])
  end
end

-- Entry i's record from its comma on, for a stamp other than now.
local stamp_length = #ARGV[3]

local nchildren, cwaited, cdelay, ckeep, cfirst, clast, ctarget = 0, {}, {}, {}, {}, {}, {}
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
  for s = 1, nslots do
    load(FIRST_SLOT + SLOTS * (s - 1))
  end

  -- Fan-out, planned before anything is written (a script's writes are not
  -- undone by a later error): each child's retention and partition slots, and
  -- the slot every entry's copy goes to.
  local key_at, at = FIRST_SLOT + SLOTS * nslots, ENTRIES + 3 * n
  local nargs = #ARGV
  while at < nargs do
    nchildren = nchildren + 1
    local c = nchildren
    cwaited[c] = KEYS[key_at + 1]
    cdelay[c] = tonumber(ARGV[at])
    ckeep[c] = tonumber(redis.call('HGET', KEYS[key_at], 'retention_ms') or '0')
    local partitions, count = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    local by_partition = {}
    cfirst[c] = nall + 1
    for s = 1, count do
      by_partition[tonumber(ARGV[at + 2 + s])] = load(key_at + 2 + SLOTS * (s - 1))
    end
    clast[c] = nall
    local target = {}
    for i = 1, n do
      local g = by_partition[tonumber(ARGV[ENTRIES + 3 * (i - 1) + 1]) % partitions]
      if not g then
        return redis.error_reply('append: an entry routed to a child partition with no slot')
      end
      target[i] = g
    end
    ctarget[c] = target
    key_at = key_at + 2 + SLOTS * count
    at = at + 3 + count
  end

  -- Queue each entry at its partition's next offset, stamped now or, when
  -- the partition's last stamp is later, with that stamp (stamps never
  -- decrease within a partition).
  -- `stamps` and `cut` (the records as cut, stamped now) keep what the
  -- children's copies need.
  local stamps, cut = nil, nil
  if nchildren > 0 then
    stamps, cut = {}, {}
  end
  -- Entry i's record (`record`, stamped now) stamped `ts` instead; the part
  -- after the stamp is cut once per entry. Rare: only a clock gone back or
  -- a delay child stamps otherwise.
  local tails = nil
  local function restamped(i, record, ts)
    if not tails then
      tails = {}
    end
    local t = tails[i]
    if not t then
      t = string.sub(record, stamp_length + 1)
      tails[i] = t
    end
    return string.format('%d', ts) .. t
  end
  local slot_of = {}
  local blob, from = ARGV[nargs], 1
  local at = ENTRIES
  for i = 1, n do
    local to = from + tonumber(ARGV[at + 2])
    if not (skip and skip[i]) then
      local slot = ARGV[at]
      local g = slot_of[slot]
      if not g then
        g = tonumber(slot)
        slot_of[slot] = g
      end
      local ts, record = lt[g], string.sub(blob, from, to - 1)
      if cut then
        cut[i] = record
      end
      if ts <= now then
        ts = now
      else
        record = restamped(i, record, ts)
      end
      local q, p = queued[g], pend[g]
      p[q + 1], p[q + 2] = nx[g], record
      queued[g], nx[g], lt[g] = q + 2, nx[g] + 1, ts
      if stamps then
        stamps[i] = ts
      end
    end
    from, at = to, at + 3
  end
  local retention = tonumber(m[3] or '0')
  for g = 1, nslots do
    save(g, retention)
  end

  -- Copy each stored entry to every child in entry order, bytes and kind as
  -- they are, stamped with the parent's commit time plus the child's delay:
  -- the moment a copy in a delay child falls due. A child's caps never refuse
  -- a copy.
  for c = 1, nchildren do
    local delay, target = cdelay[c], ctarget[c]
    for i = 1, n do
      if not (skip and skip[i]) then
        local g = target[i]
        local ts, record = stamps[i] + delay, cut[i]
        if ts < lt[g] then
          ts = lt[g]
        end
        if ts ~= now then
          record = restamped(i, record, ts)
        end
        local q, p = queued[g], pend[g]
        p[q + 1], p[q + 2] = nx[g], record
        queued[g], nx[g], lt[g] = q + 2, nx[g] + 1, ts
      end
    end
    for g = cfirst[c], clast[c] do
      save(g, ckeep[c])
    end
  end
end

-- -- idempotency keys: remember ------------------------------------------------

-- Remember the new keys at `now`, drop expired ones, and keep within bounds by
-- dropping the earliest stored. Each is bounded per call (2 per key this call
-- brings, plus 100): a topic far over bounds that were just lowered gets back
-- within them over several appends, without one blocking the server while it
-- drops them all. `evicted` counts those dropped before their time.
local evicted = 0
if guards > 0 or redis.call('EXISTS', idem_at) == 1 then
  local max_keys, max_bytes = tonumber(ARGV[10]), tonumber(ARGV[11])
  local per_key = tonumber(ARGV[12])
  local bytes = tonumber(redis.call('GET', idem_bytes) or '0')
  local function forget(key)
    local digest = redis.call('HGET', idem, key)
    if digest then
      bytes = bytes - (#key + #digest + per_key)
      redis.call('HDEL', idem, key)
    end
    redis.call('ZREM', idem_at, key)
  end
  local limit = 2 * guards + 100
  for _, key in ipairs(redis.call('ZRANGEBYSCORE', idem_at, '-inf', now - window,
      'LIMIT', 0, limit)) do
    forget(key)
  end
  local added = nfresh > 0 and {} or nil
  for k = 1, nfresh do
    local at = fresh[k]
    local key, digest = ARGV[at], ARGV[at + 1]
    if not absent[k] or added[key] then
      forget(key) -- an expired entry of the same key not yet dropped
    end
    added[key] = true
    redis.call('HSET', idem, key, digest)
    redis.call('ZADD', idem_at, now, key)
    bytes = bytes + #key + #digest + per_key
  end
  while evicted < limit
      and (redis.call('ZCARD', idem_at) > max_keys or (bytes > max_bytes and bytes > 0)) do
    local oldest = redis.call('ZRANGE', idem_at, 0, 0)
    if not oldest[1] then
      break
    end
    forget(oldest[1])
    evicted = evicted + 1
  end
  -- A key added this call and none dropped for the bounds: the set exists.
  if (nfresh > 0 and evicted == 0) or redis.call('EXISTS', idem_at) == 1 then
    redis.call('SET', idem_bytes, string.format('%d', bytes))
  else
    redis.call('DEL', idem_bytes)
  end
end

-- Whether a consumer may wait on the topic or a child: their marks, the
-- topic's read first (the one read when it has no children or is waited on).
if stored > 0 then
  local waits = tonumber(redis.call('GET', KEYS[5]) or '0') >= now
  local c = 1
  while not waits and c <= nchildren do
    waits = tonumber(redis.call('GET', cwaited[c]) or '0') >= now
    c = c + 1
  end
  if waits then
    local publish = string.find(ARGV[4], '{', 1, true) and 'SPUBLISH' or 'PUBLISH'
    redis.call(publish, ARGV[4], ARGV[5])
  end
end
return {'ok', stored, repeated, evicted}
