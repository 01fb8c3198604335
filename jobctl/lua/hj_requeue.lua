-- hj_requeue.lua: put claimed hash-job jobs back on the pending list
-- (jobctl requeue; the reclaimer of seed 001).  One atomic step per job.
--
-- A job moves only if its hash still exists and its fence (SHA1 of the
-- fields workers change) equals the plan's, and it is still in the
-- processing list.  Per job: HSET status pending, reclaimed_at_ms now,
-- claim_token "", claimed_at_ms 0 (the old claimant's complete/fail then
-- fails its claim-token check); LPUSH pending id; LREM processing -1 id.
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
-- before the first write (the processing or pending list of the wrong type:
-- a WRONGTYPE error reply, nothing written; a job key that is not a hash
-- skips only its job: "wrongtype").  Each job's writes go through
-- redis.pcall: the hash (its old fields kept to put back), the pending
-- list, then the processing list; a failing write undoes the job's earlier
-- ones ("error") and the jobs after it are still handled.
--
-- KEYS[1]  processing list      queue:<n>:processing
-- KEYS[2]  pending list         queue:<n>:pending
-- KEYS[2+i] job hash of job i   queue:<n>:job:<id>
-- ARGV[1]  search budget: elements of the processing list one call may
--          search (>= 1)
-- ARGV[2]  now (epoch ms): reclaimed_at_ms
-- ARGV[3]  fence fields: the hash fields the fence covers, separated by
--          single spaces (jobctl.layouts.hash_job.layout.FENCE_FIELDS, in order)
-- ARGV[4]  N
-- ARGV[5+2(i-1)..6+2(i-1)] per job i: id, fence (hex SHA1 of those fields'
--          values, a missing one as "", joined by \x1f) at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (no hash, or not in the
--          processing list), "changed" (fence differs), "wrongtype",
--          "deferred", "unreached" (see above), "error" (a write failed;
--          nothing of the job moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local processing, pending = KEYS[1], KEYS[2]
--@prelude
local now = ARGV[2]
local budget, err = jc_budget(ARGV[1])
local fence_fields, fields_err = jc_fields(ARGV[3])
local n, count_err = jc_job_count(4, 2, 2)
err = err or (not tonumber(now) and 'BADARG now ' .. tostring(now)) or fields_err or count_err
  or jc_check_types({ { processing, 'list' }, { pending, 'list' } })
if err then return redis.error_reply(err) end

local reclaim_fields = { 'status', 'reclaimed_at_ms', 'claim_token', 'claimed_at_ms' }

local st = { len = redis.call('LLEN', processing), left = budget, budget = budget }
return jc_each({}, 5, 2, n, function(i, b)
  local id, want = ARGV[b], ARGV[b + 1]
  local key = KEYS[2 + i]
  local code = jc_hash_code(key, fence_fields, want)
  if code then return code end
  local old = redis.call('HMGET', key, unpack(reclaim_fields))
  local function restore_hash()
    for j = 1, #reclaim_fields do
      if old[j] then
        redis.pcall('HSET', key, reclaim_fields[j], old[j])
      else
        redis.pcall('HDEL', key, reclaim_fields[j])
      end
    end
  end
  return jc_requeue_tail(st, processing, id, {
    { { 'HSET', key, 'status', 'pending', 'reclaimed_at_ms', now, 'claim_token', '', 'claimed_at_ms', 0 },
      function() return restore_hash end },
    { { 'LPUSH', pending, id }, { 'LPOP', pending } },
    { { 'LREM', processing, -1, id }, nil },
  })
end)
