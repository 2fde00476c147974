-- Replace a user's grants, never leaving the store without an admin.
-- KEYS[1] = narad:{@users}:admins     (set of users holding admin on every topic)
-- KEYS[2] = narad:{@users}:u:<name>   (hash: the user record)
-- ARGV[1] = user name
-- ARGV[2] = grants (JSON text, stored as given)
-- ARGV[3] = "1" when the new grants make the user an admin of every topic, else "0"
-- ARGV[4] = the user's revision as the caller read it
-- ARGV[5] = events channel; ARGV[6] = the "user_changed" event for this user
-- returns "ok" | "no_user" | "stale_user" | "last_admin"
local admins, user = KEYS[1], KEYS[2]
local name = ARGV[1]

local revision = redis.call('HGET', user, 'revision')
if not revision then
  return 'no_user'
end
if revision ~= ARGV[4] then
  return 'stale_user'
end
if ARGV[3] == '0' and redis.call('SISMEMBER', admins, name) == 1
    and redis.call('SCARD', admins) <= 1 then
  return 'last_admin'
end

redis.call('HSET', user, 'grants', ARGV[2], 'admin', ARGV[3])
redis.call('HINCRBY', user, 'revision', 1)
if ARGV[3] == '1' then
  redis.call('SADD', admins, name)
else
  redis.call('SREM', admins, name)
end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 'ok'
