-- The floor's single produce: append one body to a list.
-- KEYS[1] = the list
-- ARGV[1] = the body
-- returns the list's new length
return redis.call('RPUSH', KEYS[1], ARGV[1])
