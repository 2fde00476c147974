-- Give back a name claimed by claim_name.lua, iff the stub is still the one
-- claimed for that topic (a sharded storage: narad_redis.sharded).
-- KEYS[1] = narad:{<name>}:meta
-- ARGV[1] = the topic's epoch the stub names
-- returns 1 if the stub went, else 0
local m = redis.call('HMGET', KEYS[1], 'home', 'home_epoch', 'name')
if m[1] and not m[3] and m[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
