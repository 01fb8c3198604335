-- sg_pel_summary.lua: stuck count and the next visibility deadline of a
-- stream-group shard's pending entries list (jobctl status; seed 000 s.11).
-- Nothing is returned over the wire but three integers.
--
-- KEYS[1]  stream                 stream:{t}:jobs
-- ARGV[1]  consumer group name
-- ARGV[2]  visibility timeout (ms): an entry idle at least this long is stuck
-- ARGV[3]  bound: at most this many stuck entries are counted, and the
--          next deadline is taken from the oldest <bound> entries
-- returns  { stuck, truncated (1 when stuck reached the bound), max idle (ms)
--          of a not-yet-stuck entry among the oldest <bound>, or -1 }

local stream, group = KEYS[1], ARGV[1]
local vt, bound = tonumber(ARGV[2]), tonumber(ARGV[3])
local stuck = redis.call('XPENDING', stream, group, 'IDLE', vt, '-', '+', bound)
local page = redis.call('XPENDING', stream, group, '-', '+', bound)
local max_idle = -1
for _, e in ipairs(page) do
  local idle = tonumber(e[3])
  if idle < vt and idle > max_idle then
    max_idle = idle
  end
end
local truncated = 0
if #stuck >= bound then
  truncated = 1
end
return { #stuck, truncated, max_idle }
