-- The floor's batch consume: take up to N values off the queue and hold each
-- under a new id until it is acked (no deadline, no caps, no log kept).
-- KEYS[1] = the queue (a list), KEYS[2] = the leased values (a hash: id -> value),
-- KEYS[3] = the id counter
-- ARGV[1] = N
-- returns {id, value, id, value, ...}, empty when the queue is
local values = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
if not values then
  return {}
end
local last = redis.call('INCRBY', KEYS[3], #values)
local reply, fields = {}, {}
for i, value in ipairs(values) do
  local id = tostring(last - #values + i)
  reply[#reply + 1] = id
  reply[#reply + 1] = value
  fields[#fields + 1] = id
  fields[#fields + 1] = value
end
redis.call('HSET', KEYS[2], unpack(fields))
return reply
