-- Set a standalone registry subject's own compatibility mode, or clear it so
-- the subject follows the registry's default; a subject holding neither
-- versions nor a mode of its own goes.
-- KEYS[1] = the subject's meta (hash: latest, count, schema_bytes, compatibility)
-- ARGV[1] = the mode ("" to clear it)
-- returns "ok"
local meta = KEYS[1]
if ARGV[1] ~= '' then
  redis.call('HSET', meta, 'compatibility', ARGV[1])
  return 'ok'
end
redis.call('HDEL', meta, 'compatibility')
if tonumber(redis.call('HGET', meta, 'count') or '0') == 0 then
  redis.call('UNLINK', meta)
end
return 'ok'
