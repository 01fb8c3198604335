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
local budget = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
if not budget or budget < 1 or budget ~= math.floor(budget) then
  return redis.error_reply('BADARG budget ' .. tostring(ARGV[1]))
end
if not n or n < 0 or n ~= math.floor(n) or #ARGV ~= 2 + 3 * n then
  return redis.error_reply('BADARG job count ' .. tostring(ARGV[2]))
end
for i = 1, n do
  local want = ARGV[5 + 3 * (i - 1)]
  if want ~= '' and not tonumber(want) then
    return redis.error_reply('BADARG claim time of job ' .. i)
  end
end
--@prelude
local bad = jc_check_types({ { processing, 'list' }, { times, 'zset' }, { pending, 'list' } })
if bad then return redis.error_reply(bad) end

local st = { len = redis.call('LLEN', processing), left = budget, budget = budget }
local out = {}
for i = 1, n do
  local base = 3 + 3 * (i - 1)
  local id, raw, want = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local sc = redis.call('ZSCORE', times, id)
  local code
  if want ~= '' and not sc then
    code = 'gone'
  elseif (want == '' and sc) or (want ~= '' and tonumber(sc) ~= tonumber(want)) then
    code = 'changed'
  else
    local pos, miss = jc_find_tail(st, processing, raw)
    if not pos then
      code = miss
    elseif not jc_push_then_lrem('RPUSH', pending, processing, raw, 'RPOP') then
      code = 'error'
    else
      st.len = st.len - 1
      if sc then redis.pcall('ZREM', times, id) end
      code = 'moved'
    end
  end
  jc_reply(out, id, code)
end
return out
