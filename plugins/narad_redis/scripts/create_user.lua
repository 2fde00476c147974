-- Create a user exactly once; when seeding, only into a store with no user.
-- KEYS[1] = narad:{@users}            (sorted set of user names, for listing)
-- KEYS[2] = narad:{@users}:admins     (set of users holding admin on every topic)
-- KEYS[3] = narad:{@users}:u:<name>   (hash: the user record)
-- ARGV[1] = user name
-- ARGV[2] = password hash
-- ARGV[3] = grants (JSON text, stored as given)
-- ARGV[4] = "1" when the user is an admin of every topic, else "0"
-- ARGV[5] = created_ms
-- ARGV[6] = "1": only if no user exists at all (seeding), else "0"
-- ARGV[7] = events channel; ARGV[8] = the "user_changed" event for this user
-- returns "ok" | "exists"
local names, admins, user = KEYS[1], KEYS[2], KEYS[3]
local name = ARGV[1]

if ARGV[6] == '1' and redis.call('ZCARD', names) > 0 then
  return 'exists'
end
if redis.call('EXISTS', user) == 1 then
  return 'exists'
end

redis.call('HSET', user, 'name', name, 'password', ARGV[2], 'grants', ARGV[3],
  'admin', ARGV[4], 'created_ms', ARGV[5], 'revision', 1)
redis.call('ZADD', names, 0, name)
if ARGV[4] == '1' then
  redis.call('SADD', admins, name)
end
redis.call('PUBLISH', ARGV[7], ARGV[8])
return 'ok'
