-- Claim a topic's name in the name's own hash slot for a topic stored in
-- another topic's slot (a child in its parent's, on a sharded storage:
-- narad_redis.sharded): the name's record key holds a stub naming where the
-- topic lives, so no other topic takes the name and a read by name finds it.
-- The stub has no "epoch" field, so no script takes it for a topic's record.
-- KEYS[1] = narad:{<name>}:meta
-- KEYS[2] = narad:{<name>}:value:meta (the standalone subject "<name>-value")
-- ARGV[1] = the hash tag the topic is stored under; ARGV[2] = its epoch
-- ARGV[3] = now (ms)
-- returns {"ok"} | {"subject_exists"}
--         | {"exists", home, home_epoch, claimed_ms} ("" for a topic's own record)
if redis.call('EXISTS', KEYS[1]) == 1 then
  local m = redis.call('HMGET', KEYS[1], 'home', 'home_epoch', 'claimed_ms')
  return {'exists', m[1] or '', m[2] or '', m[3] or ''}
end
if tonumber(redis.call('HGET', KEYS[2], 'count') or '0') > 0 then
  return {'subject_exists'}
end
redis.call('HSET', KEYS[1], 'home', ARGV[1], 'home_epoch', ARGV[2], 'claimed_ms', ARGV[3])
return {'ok'}
