-- Reserve schema bytes in the cluster-wide budget of a sharded storage before
-- the step in a topic's slot that stores them, or give them back after the
-- step that drops them (or when that step refused): narad_redis.sharded.
-- KEYS[1] = narad:{@schemas}:schema_bytes
-- ARGV[1] = the bytes to add (negative: to give back; never refused, and the
--   count never goes below 0)
-- ARGV[2] = the cluster schema byte budget
-- returns {"ok", count} | {"cluster_budget", count}
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local delta = tonumber(ARGV[1])
if delta > 0 and count + delta > tonumber(ARGV[2]) then
  return {'cluster_budget', count}
end
if count + delta < 0 then
  delta = -count
end
return {'ok', redis.call('INCRBY', KEYS[1], delta)}
