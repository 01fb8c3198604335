-- rl_requeue.lua: put claimed jobs back on a ready list (jobctl requeue;
-- the reaper of seed 000 section 8).  One atomic step per job.
--
-- A job moves only if its visibility deadline is still the one the plan saw
-- (a worker that acked, failed or renewed it since is left alone) and it is
-- still in the processing list.
--
-- Bounded: the processing list is searched from its tail, where the oldest
-- claims are, with LPOS RANK -1 MAXLEN and removed with LREM -1 (which stops
-- at that same element): a job at distance d from the tail costs 2(d+1)
-- element comparisons.  The call spends at most 2 * ARGV[1] of them: a
-- job not found within what is left of the budget is returned "deferred"
-- (untouched; the caller passes it again first in its next call, and the
-- first job of a call always has the whole budget).  Only the
-- ARGV[1] elements nearest the tail are ever searched: on a processing list
-- longer than that (worker concurrency keeps it far shorter), a job not
-- found there is "unreached" and left as it is.
--
-- Never a partial batch: every ARGV and the TYPE of every key are checked
-- before the first write (a key of the wrong type: a WRONGTYPE error reply,
-- nothing written).  Each job's writes go through redis.pcall, the ready
-- list first, then the processing list; a failing write undoes the job's
-- earlier ones ("error") and the jobs after it are still handled.
--
-- KEYS[1]  processing list         queue:{t}:processing
-- KEYS[2]  deadline zset           queue:{t}:processing:deadline
-- KEYS[3]  target ready list       queue:{t}:ready | queue:{t}:ready:pN
-- ARGV[1]  search budget: elements of the processing list one call may
--          search (>= 1)
-- ARGV[2]  N
-- ARGV[3+2(i-1)..4+2(i-1)] per job i: id, deadline at plan time (integer
--          string; "" when the plan saw no deadline)
-- returns  { id1, code1, ... }: "moved", "changed" (another deadline:
--          the lease was renewed or the job claimed again), "gone" (no
--          deadline any more where the plan saw one: acked, failed or
--          requeued since; or no longer in the processing list),
--          "deferred", "unreached" (see above), "error" (a write failed;
--          nothing of the job moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local processing, deadline, ready = KEYS[1], KEYS[2], KEYS[3]
local budget = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
if not budget or budget < 1 or budget ~= math.floor(budget) then
  return redis.error_reply('BADARG budget ' .. tostring(ARGV[1]))
end
if not n or n < 0 or n ~= math.floor(n) or #ARGV ~= 2 + 2 * n then
  return redis.error_reply('BADARG job count ' .. tostring(ARGV[2]))
end
for i = 1, n do
  local want = ARGV[4 + 2 * (i - 1)]
  if want ~= '' and not tonumber(want) then
    return redis.error_reply('BADARG deadline of job ' .. i)
  end
end
--@prelude
local bad = jc_check_types({ { processing, 'list' }, { deadline, 'zset' }, { ready, 'list' } })
if bad then return redis.error_reply(bad) end

local st = { len = redis.call('LLEN', processing), left = budget, budget = budget }
local out = {}
for i = 1, n do
  local id, want = ARGV[3 + 2 * (i - 1)], ARGV[4 + 2 * (i - 1)]
  local sc = redis.call('ZSCORE', deadline, id)
  local code
  if want ~= '' and not sc then
    code = 'gone'
  elseif (want == '' and sc) or (want ~= '' and tonumber(sc) ~= tonumber(want)) then
    code = 'changed'
  else
    local pos, miss = jc_find_tail(st, processing, id)
    if not pos then
      code = miss
    elseif not jc_push_then_lrem('LPUSH', ready, processing, id, 'LPOP') then
      code = 'error'
    else
      st.len = st.len - 1
      if sc then redis.pcall('ZREM', deadline, id) end
      code = 'moved'
    end
  end
  jc_reply(out, id, code)
end
return out
