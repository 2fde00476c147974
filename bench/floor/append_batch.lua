-- The floor's batch produce: append every value to the queue.
-- KEYS[1] = the queue (a list)
-- ARGV[1 ..] = the values
-- returns the queue's new length
return redis.call('RPUSH', KEYS[1], unpack(ARGV))
