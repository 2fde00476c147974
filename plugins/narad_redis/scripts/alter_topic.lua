-- Change a topic's settings (retention, visibility, caps).
-- KEYS[1] = narad:{<topic>}:meta
-- ARGV[1] = the topic's epoch as the caller knows it
-- ARGV[2] = events channel; ARGV[3] = the "topic_changed" event for this topic
-- ARGV[4] = how much longer than its longest child delay a parent keeps messages
-- ARGV[5..] = field, value, field, value, ...
-- returns "ok" | "no_topic" | "retention_too_short"
local meta = KEYS[1]
local m = redis.call('HMGET', meta, 'epoch', 'children')
if m[1] ~= ARGV[1] then
  return 'no_topic'
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
for i = 5, #ARGV, 2 do
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
return 'ok'
