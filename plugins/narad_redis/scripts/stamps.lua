-- Read the timestamps of messages, writing nothing. A script only so that a
-- timestamp comes back without its payload (a log record can be 1 MiB): lag
-- counts and partition stats binary-search logs by timestamp.
-- KEYS[1] .. KEYS[n] = partition logs: narad:{<topic>}:p<i>:log
--   hash: offset -> "<ts>,<record>"
-- ARGV[1] .. ARGV[n] = the offset to read in the log of the same index
-- returns per key, in order: the timestamp of the message at that offset, or
--   -1 when it holds none (trimmed)
local out = {}
for i = 1, #KEYS do
  local rec = redis.call('HGET', KEYS[i], ARGV[i])
  out[i] = rec and tonumber(string.match(rec, '^(%d+),')) or -1
end
return out
