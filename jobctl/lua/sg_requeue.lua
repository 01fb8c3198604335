-- sg_requeue.lua: put pending (claimed, unacknowledged) stream entries back
-- where every worker reads: acknowledge the pending entry and append a fresh
-- entry with the same fields (same jobId) to the stream (jobctl requeue on
-- the stream-group layout; seed 000 s.11).  One atomic step per entry.
--
-- An entry moves only if it is still pending for the consumer and with the
-- delivery count the plan saw: a worker that acknowledged it, or recovered
-- it with XAUTOCLAIM/XCLAIM since, is left alone.
--
-- KEYS[1]  stream                 stream:{t}:jobs
-- ARGV[1]  consumer group name
-- ARGV[2]  N
-- ARGV[3+4(i-1)..6+4(i-1)] per entry i: job id, entry id, consumer,
--          delivery count at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (no longer pending),
--          "changed" (another consumer or another delivery count)

local stream, group = KEYS[1], ARGV[1]
local n = tonumber(ARGV[2])
local out = {}
for i = 1, n do
  local base = 3 + 4 * (i - 1)
  local job_id, entry, consumer, deliveries = ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]
  local code
  local p = redis.call('XPENDING', stream, group, entry, entry, 1)
  if #p == 0 then
    code = 'gone'
  elseif p[1][2] ~= consumer or tonumber(p[1][4]) ~= tonumber(deliveries) then
    code = 'changed'
  else
    local e = redis.call('XRANGE', stream, entry, entry)
    local fields = { 'jobId', job_id }
    if #e > 0 then
      fields = e[1][2]
    end
    redis.call('XACK', stream, group, entry)
    redis.call('XADD', stream, '*', unpack(fields))
    code = 'moved'
  end
  out[#out + 1] = job_id
  out[#out + 1] = code
end
return out
