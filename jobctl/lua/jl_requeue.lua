-- jl_requeue.lua: put claimed json-list job strings back on the pending list
-- (jobctl requeue; the recovery of seed 002).  One atomic step per job.
--
-- A job moves only if its claim time in processing:times is still the one
-- the plan saw (a worker that acked or nacked it since is left alone) and
-- its byte-identical string is still in the processing list, searched from
-- the tail (LREM count -1), where the oldest claims are.  It goes back with
-- RPUSH: the end the seed's own recovery puts a job back at (claimed next).
-- Attempts are not touched.
--
-- KEYS[1]  processing list         <p>:processing
-- KEYS[2]  claim-time zset         <p>:processing:times
-- KEYS[3]  pending list            <p>:pending
-- ARGV[1]  N
-- ARGV[2+3(i-1)..4+3(i-1)] per job i: id, the job string (exact bytes),
--          claim time at plan time (the score as text; "" when it had none)
-- returns  { id1, code1, ... }: "moved", "changed" (claim time differs),
--          "gone" (its claim time was removed: acked or nacked; or the
--          string is no longer in the processing list)

local processing, times, pending = KEYS[1], KEYS[2], KEYS[3]
local n = tonumber(ARGV[1])
local out = {}
for i = 1, n do
  local base = 2 + 3 * (i - 1)
  local id, raw, want = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local sc = redis.call('ZSCORE', times, id)
  local code
  if want ~= '' and not sc then
    code = 'gone'
  elseif (want == '' and sc) or (want ~= '' and tonumber(sc) ~= tonumber(want)) then
    code = 'changed'
  elseif redis.call('LREM', processing, -1, raw) == 0 then
    code = 'gone'
  else
    if sc then redis.call('ZREM', times, id) end
    redis.call('RPUSH', pending, raw)
    code = 'moved'
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
