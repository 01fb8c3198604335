-- sg_count_after.lua: how many stream entries come after an id (the ready
-- count of a consumer group when XINFO GROUPS reports no lag, e.g. Redis 7.0
-- after an XDEL; seed 000 s.11).  Bounded: counts at most ARGV[2] entries.
--
-- KEYS[1]  stream                 stream:{t}:jobs
-- ARGV[1]  the group's last-delivered id (exclusive)
-- ARGV[2]  bound
-- returns  the count (== bound means "at least bound")

local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', tonumber(ARGV[2]))
return #entries
