-- Change a topic's settings (retention, visibility, caps, compatibility mode).
-- A parent's new compatibility mode reaches every child in the same step: a
-- child follows its parent's mode while attached, and cannot change it.
-- KEYS[1] = narad:{<topic>}:meta
-- KEYS[1+c] = child c's meta, in ARGV order (only with a compatibility change)
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = events channel; ARGV[3] = the "topic_changed" event for this topic
-- ARGV[4] = how much longer than its longest child delay a parent keeps messages
-- ARGV[5] = the topic's "children" field as the caller read it ("" for none)
-- ARGV[6] = C, the children a compatibility change goes to (0 without one)
-- ARGV[7 .. 6+C] = per child: its "topic_changed" event
-- ARGV[7+C ..] = field, value, field, value, ...
-- returns "ok" | "no_topic" | "attached" | "stale_children" | "retention_too_short"
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'children', 'parent')
if m[1] ~= ARGV[1] then
  return 'no_topic'
end
local nchildren = tonumber(ARGV[6])
local SETTINGS = 7 + nchildren

local mode = nil
for i = SETTINGS, #ARGV, 2 do
  if ARGV[i] == 'compatibility' then
    mode = ARGV[i + 1]
  end
end
if mode then
  if m[3] then
    return 'attached'
  end
  if (m[2] or '') ~= ARGV[5] then
    return 'stale_children'
  end
end

-- The lowest non-zero retention the topic's children allow it, or 0. The
-- "children" field lists "<name>:<epoch>:<partitions>:<delay_ms>" items,
-- comma-separated.
local function min_retention(children, margin)
  local longest = -1
  for item in string.gmatch(children or '', '[^,]+') do
    longest = math.max(longest, tonumber(string.match(item, ':(%d+)$')))
  end
  return longest < 0 and 0 or longest + margin
end

local fields = {}
for i = SETTINGS, #ARGV, 2 do
  if ARGV[i] == 'retention_ms' then
    local retention = tonumber(ARGV[i + 1])
    if retention > 0 and retention < min_retention(m[2], tonumber(ARGV[4])) then
      return 'retention_too_short'
    end
  end
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
end
if #fields > 0 then
  redis.call('HSET', meta, unpack(fields))
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
if mode then
  for c = 1, nchildren do
    redis.call('HSET', KEYS[1 + c], 'compatibility', mode)
    redis.call('PUBLISH', ARGV[2], ARGV[6 + c])
  end
end
return 'ok'
