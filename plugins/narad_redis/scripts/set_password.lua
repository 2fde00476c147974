-- Replace a user's password hash.
-- KEYS[1] = narad:{@users}:u:<name>   (hash: the user record)
-- ARGV[1] = the new password hash
-- ARGV[2] = the user's revision as the caller read it
-- ARGV[3] = events channel; ARGV[4] = the "user_changed" event for this user
-- returns "ok" | "no_user" | "stale_user"
local user = KEYS[1]

local revision = redis.call('HGET', user, 'revision')
if not revision then
  return 'no_user'
end
if revision ~= ARGV[2] then
  return 'stale_user'
end

redis.call('HSET', user, 'password', ARGV[1])
redis.call('HINCRBY', user, 'revision', 1)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 'ok'
