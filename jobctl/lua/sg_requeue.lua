-- sg_requeue.lua: put pending (claimed, unacknowledged) stream entries back
-- where every worker reads: append a fresh entry with the same fields (same
-- jobId) to the stream and acknowledge the pending entry (jobctl requeue on
-- the stream-group layout; seed 000 s.11).  One atomic step per entry.
--
-- An entry moves only if it is still pending for the consumer and with the
-- delivery count the plan saw: a worker that acknowledged it, or recovered
-- it with XAUTOCLAIM/XCLAIM since, is left alone.  Each entry costs
-- XPENDING and XRANGE of that one id: O(log n), whatever the PEL's size.
--
-- Never a partial batch: every ARGV and the stream's TYPE are checked before
-- the first write (a key of the wrong type: a WRONGTYPE error reply, nothing
-- written).  Each entry's writes go through redis.pcall, the new entry
-- first, then the XACK; a failing XACK deletes the new entry again
-- ("error") and the entries after it are still handled.
--
-- KEYS[1]  stream                 stream:{t}:jobs
-- ARGV[1]  consumer group name
-- ARGV[2]  N
-- ARGV[3+4(i-1)..6+4(i-1)] per entry i: job id, entry id, consumer,
--          delivery count at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (no longer pending),
--          "changed" (another consumer or another delivery count), "error"
--          (a write failed; the entry is still pending)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local stream, group = KEYS[1], ARGV[1]
local n = tonumber(ARGV[2])
if not group or group == '' then
  return redis.error_reply('BADARG group')
end
if not n or n < 0 or n ~= math.floor(n) or #ARGV ~= 2 + 4 * n then
  return redis.error_reply('BADARG entry count ' .. tostring(ARGV[2]))
end
for i = 1, n do
  local base = 3 + 4 * (i - 1)
  if not string.match(ARGV[base + 1], '^%d+%-%d+$') or not tonumber(ARGV[base + 3]) then
    return redis.error_reply('BADARG entry ' .. i)
  end
end
--@prelude
local bad = jc_type_error(stream, 'stream')
if bad then return redis.error_reply(bad) end
local exists = redis.call('EXISTS', stream) == 1


local out = {}
for i = 1, n do
  local base = 3 + 4 * (i - 1)
  local job_id, entry, consumer, deliveries = ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]
  local code
  local p = exists and redis.pcall('XPENDING', stream, group, entry, entry, 1) or {}
  if jc_failed(p) or #p == 0 then
    code = 'gone'  -- no stream, no group, or not pending
  elseif p[1][2] ~= consumer or tonumber(p[1][4]) ~= tonumber(deliveries) then
    code = 'changed'
  else
    local e = redis.call('XRANGE', stream, entry, entry)
    local fields = { 'jobId', job_id }
    if #e > 0 then
      fields = e[1][2]
    end
    local new = redis.pcall('XADD', stream, '*', unpack(fields))
    if jc_failed(new) then
      code = 'error'
    elseif jc_failed(redis.pcall('XACK', stream, group, entry)) then
      redis.pcall('XDEL', stream, new)
      code = 'error'
    else
      code = 'moved'
    end
  end
  jc_reply(out, job_id, code)
end
return out
