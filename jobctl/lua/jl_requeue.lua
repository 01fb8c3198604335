-- jl_requeue.lua: put claimed json-list job strings back on the pending list
-- (jobctl requeue; the recovery of seed 002).  One atomic step per job.
--
-- A job moves only if its claim time in processing:times is still the one
-- the plan saw (a worker that acked or nacked it since is left alone) and
-- its byte-identical string is still in the processing list.  It goes back
-- with RPUSH: the end the seed's own recovery puts a job back at (claimed
-- next).  Attempts are not touched.
--
-- Bounded: the processing list is searched from its tail, where the oldest
-- claims are, with LPOS RANK -1 MAXLEN and removed with LREM -1 (which stops
-- at that same element): a string at distance d from the tail costs 2(d+1)
-- element comparisons.  The call spends at most 2 * ARGV[1] of them: a
-- job not found within what is left of the budget is returned "deferred"
-- (untouched; the caller passes it again first in its next call, and the
-- first job of a call always has the whole budget).  Only the
-- ARGV[1] elements nearest the tail are ever searched: on a processing list
-- longer than that (worker concurrency keeps it far shorter), a string not
-- found there is "unreached" and left as it is.
--
-- Never a partial batch: every ARGV and the TYPE of every key are checked
-- before the first write (a key of the wrong type: a WRONGTYPE error reply,
-- nothing written).  Each job's writes go through redis.pcall, the pending
-- list first, then the processing list; a failing write undoes the job's
-- earlier ones ("error") and the jobs after it are still handled.
--
-- KEYS[1]  processing list         <p>:processing
-- KEYS[2]  claim-time zset         <p>:processing:times
-- KEYS[3]  pending list            <p>:pending
-- ARGV[1]  search budget: elements of the processing list one call may
--          search (>= 1)
-- ARGV[2]  N
-- ARGV[3+3(i-1)..5+3(i-1)] per job i: id, the job string (exact bytes),
--          claim time at plan time (the score as text; "" when it had none)
-- returns  { id1, code1, ... }: "moved", "changed" (claim time differs),
--          "gone" (its claim time was removed: acked or nacked; or the
--          string is no longer in the processing list), "deferred",
--          "unreached" (see above), "error" (a write failed; nothing of the
--          job moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local processing, times, pending = KEYS[1], KEYS[2], KEYS[3]
--@prelude
local budget, err = jc_budget(ARGV[1])
if not budget then return redis.error_reply(err) end
local n
n, err = jc_job_count(2, 3, nil)
err = err or jc_job_numbers(2, 3, 3, 'claim time', true)
if err then return redis.error_reply(err) end
local bad = jc_check_types({ { processing, 'list' }, { times, 'zset' }, { pending, 'list' } })
if bad then return redis.error_reply(bad) end

local st = { len = redis.call('LLEN', processing), left = budget, budget = budget }
return jc_each({}, 3, 3, n, function(i, b)
  local id, raw, want = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local sc = redis.call('ZSCORE', times, id)
  return jc_score_code(sc, want) or jc_requeue_tail(st, processing, raw,
    { { { 'RPUSH', pending, raw }, { 'RPOP', pending } }, { { 'LREM', processing, -1, raw }, nil } },
    sc and { { 'ZREM', times, id } })
end)
