-- rl_requeue.lua: put claimed jobs back on a ready list (jobctl requeue;
-- the reaper of seed 000 section 8).  One atomic step per job.
--
-- A job moves only if its visibility deadline is still the one the plan saw
-- (a worker that acked, failed or renewed it since is left alone) and it is
-- still in the processing list.  The processing list is searched from its
-- tail (LREM count -1), where the oldest claims are.
--
-- KEYS[1]  processing list         queue:{t}:processing
-- KEYS[2]  deadline zset           queue:{t}:processing:deadline
-- KEYS[3]  target ready list       queue:{t}:ready | queue:{t}:ready:pN
-- ARGV[1]  N
-- ARGV[2+2(i-1)..3+2(i-1)] per job i: id, deadline at plan time (integer
--          string; "" when the plan saw no deadline)
-- returns  { id1, code1, ... }: "moved", "changed" (another deadline:
--          the lease was renewed or the job claimed again), "gone" (no
--          deadline any more where the plan saw one: acked, failed or
--          requeued since; or no longer in the processing list)

local processing, deadline, ready = KEYS[1], KEYS[2], KEYS[3]
local n = tonumber(ARGV[1])
local out = {}
for i = 1, n do
  local id, want = ARGV[2 + 2 * (i - 1)], ARGV[3 + 2 * (i - 1)]
  local sc = redis.call('ZSCORE', deadline, id)
  local code
  if want ~= '' and not sc then
    code = 'gone'
  elseif (want == '' and sc) or (want ~= '' and tonumber(sc) ~= tonumber(want)) then
    code = 'changed'
  elseif redis.call('LREM', processing, -1, id) == 0 then
    code = 'gone'
  else
    redis.call('ZREM', deadline, id)
    redis.call('LPUSH', ready, id)
    code = 'moved'
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
