-- Delete a user, never the last admin.
-- KEYS[1] = narad:{@users}            (sorted set of user names, for listing)
-- KEYS[2] = narad:{@users}:admins     (set of users holding admin on every topic)
-- KEYS[3] = narad:{@users}:u:<name>   (hash: the user record)
-- ARGV[1] = user name
-- ARGV[2] = the user's revision as the caller read it
-- ARGV[3] = events channel; ARGV[4] = the "user_changed" event for this user
-- returns "ok" | "no_user" | "stale_user" | "last_admin"
local names, admins, user = KEYS[1], KEYS[2], KEYS[3]
local name = ARGV[1]

local revision = redis.call('HGET', user, 'revision')
if not revision then
  return 'no_user'
end
if revision ~= ARGV[2] then
  return 'stale_user'
end
if redis.call('SISMEMBER', admins, name) == 1 and redis.call('SCARD', admins) <= 1 then
  return 'last_admin'
end

redis.call('UNLINK', user)
redis.call('ZREM', names, name)
redis.call('SREM', admins, name)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 'ok'
