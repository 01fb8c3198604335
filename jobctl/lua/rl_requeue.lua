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
--@prelude
local budget, err = jc_budget(ARGV[1])
if not budget then return redis.error_reply(err) end
local n
n, err = jc_job_count(2, 2, nil)
err = err or jc_job_numbers(2, 2, 2, 'deadline', true)
if err then return redis.error_reply(err) end
local bad = jc_check_types({ { processing, 'list' }, { deadline, 'zset' }, { ready, 'list' } })
if bad then return redis.error_reply(bad) end

local st = { len = redis.call('LLEN', processing), left = budget, budget = budget }
return jc_each({}, 3, 2, n, function(i, b)
  local id, want = ARGV[b], ARGV[b + 1]
  local sc = redis.call('ZSCORE', deadline, id)
  return jc_score_code(sc, want) or jc_requeue_tail(st, processing, id,
    { { { 'LPUSH', ready, id }, { 'LPOP', ready } }, { { 'LREM', processing, -1, id }, nil } },
    sc and { { 'ZREM', deadline, id } })
end)
