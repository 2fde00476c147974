-- Set the registry's default compatibility mode for standalone subjects, or
-- clear it.
-- KEYS[1] = narad:{@schemas}:config
-- ARGV[1] = the mode ("" to clear it)
-- returns "ok"
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 'ok'
