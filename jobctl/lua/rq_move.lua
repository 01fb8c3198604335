-- rq_move.lua: redrive (failed -> ready) or purge of jobs in an RQ queue's
-- failed registry (jobctl.layouts.rq.ops).  One call per batch, each job
-- fenced; the call is one atomic step, so is each job.
--
-- Per job: the id must still be in the failed registry with the score the
-- plan saw (one ZMSCORE for the call) and its hash's status must be
-- "failed" with the same origin, else it is skipped ("gone" / "changed"; an
-- id met twice in one call is "gone" the second time).  Then one ZREM of
-- every job that passed, checked to have removed each of them before any
-- other write, and per job:
--   redrive: HSET status queued, enqueued_at <now>, started_at and ended_at
--            blanked (as RQ's own requeue), the hash made persistent (or
--            given its own ttl); then, per queue pushed to, one RPUSH
--            rq:queue:<origin> of its jobs in call order and SADD rq:queues:
--            RQ's enqueue.  The pickled data is never read or rewritten;
--   purge:   DEL of the hash, its dependents / dependencies keys, its
--            executions registry and its results stream (whatever their type).
--
-- Never a partial batch: every ARGV and the TYPE of the fixed keys are
-- checked before the first write (a WRONGTYPE / BADARG error reply, nothing
-- written).  A job whose hash, or whose target list, holds another type is
-- answered "wrongtype" before anything of it is written.
--
-- KEYS[1]  failed registry (zset)   rq:failed:<q>
-- KEYS[2]  queue set (set)          rq:queues
-- then per job i: redrive: hash rq:job:<id>, list rq:queue:<origin>
--                 purge:   hash, dependents, dependencies, executions, results
-- ARGV[1]  mode: "redrive" | "purge"
-- ARGV[2]  enqueued_at (RQ's ISO format; not empty)
-- ARGV[3]  N
-- ARGV[4+3(i-1)..6+3(i-1)] per job i: id, registry score at plan time (a
--          number), origin
-- returns  { id1, code1, ... }: "moved", "gone" (not in the registry, or no
--          hash), "changed" (score, status or origin differ), "wrongtype"
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

--@prelude checks

local mode, err = jc_one_of(ARGV[1], 'mode', { redrive = true, purge = true })
if err then return redis.error_reply(err) end
local now
now, err = jc_nonempty(ARGV[2], 'enqueued_at')
if err then return redis.error_reply(err) end
local n
n, err = jc_job_count(3, 3, nil)
if err then return redis.error_reply(err) end
local per = (mode == 'redrive') and 2 or 5
if #KEYS ~= 2 + per * n then return redis.error_reply('BADARG job count ' .. tostring(ARGV[3])) end
err = jc_job_numbers(3, 3, 2, 'score', false) or jc_check_types({ { KEYS[1], 'zset' }, { KEYS[2], 'set' } })
if err then return redis.error_reply(err) end

if n == 0 then return {} end
local function typ(k) return redis.call('TYPE', k)['ok'] end
local ids = {}
for i = 1, n do ids[i] = ARGV[1 + 3 * i] end
local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local out, seen, qtype, chosen, ttls = {}, {}, {}, {}, {}
for i = 1, n do
  local id, want, origin = ids[i], ARGV[2 + 3 * i], ARGV[3 + 3 * i]
  local base = 3 + per * (i - 1)
  local job, target = KEYS[base], KEYS[base + 1]
  local sc, code = scores[i], 'moved'
  if not sc or seen[id] then code = 'gone'
  elseif sc ~= want and tonumber(sc) ~= tonumber(want) then code = 'changed'
  else
    local f = redis.pcall('HMGET', job, 'status', 'origin', 'ttl')
    if mode == 'redrive' and qtype[target] == nil then qtype[target] = typ(target) end
    if f['err'] then code = 'wrongtype'
    elseif not f[1] and redis.call('EXISTS', job) == 0 then code = 'gone'
    elseif f[1] ~= 'failed' or f[2] ~= origin then code = 'changed'
    elseif mode == 'redrive' and qtype[target] ~= 'none' and qtype[target] ~= 'list' then code = 'wrongtype'
    else
      seen[id], chosen[#chosen + 1], ttls[i] = true, i, f[3]
    end
  end
  out[2 * i - 1], out[2 * i] = id, code
end
if #chosen == 0 then return out end
local gone = {}
for j, i in ipairs(chosen) do gone[j] = ids[i] end
-- every chosen id was read in the registry by this atomic call, each once
if redis.call('ZREM', KEYS[1], unpack(gone)) ~= #gone then
  return redis.error_reply('ERR rq_move: the failed registry changed inside the call')
end
local pushes = {}
for _, i in ipairs(chosen) do
  local base = 3 + per * (i - 1)
  local job = KEYS[base]
  if mode == 'redrive' then
    redis.call('HSET', job, 'status', 'queued', 'enqueued_at', now, 'started_at', '', 'ended_at', '')
    local ttl = tonumber(ttls[i])
    if ttl and ttl > 0 then redis.call('EXPIRE', job, ttl) else redis.call('PERSIST', job) end
    local target = KEYS[base + 1]
    local list = pushes[target]
    if not list then list = {}; pushes[target] = list end
    list[#list + 1] = ids[i]
  else
    redis.call('DEL', job, KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4])
  end
end
for target, list in pairs(pushes) do
  redis.call('RPUSH', target, unpack(list))
  redis.call('SADD', KEYS[2], target)
end
return out
