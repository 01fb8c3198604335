-- bullmq_move.lua: redrive (failed -> wait / prioritized) or purge of a
-- BullMQ queue's failed jobs (jobctl.layouts.bullmq.ops).  One call per
-- batch, each job atomic and fenced; BullMQ's order of writes, its own score
-- rule for prioritized, the marker unless the queue is paused or at its
-- concurrency, the "waiting" event with prev=failed.  data and opts are
-- never read or rewritten.
--
-- Per job: the id must still be in failed with the score the plan saw, and
-- finishedOn, the SHA1 of failedReason, parentKey and deid must be the
-- plan's, else it is skipped ("gone" / "changed"); then ZREM, and only when
-- that removed it the redrive or purge.
--
-- Never a partial batch: every ARGV and the TYPE of the fixed keys are
-- checked before the first write (a WRONGTYPE / BADARG error reply, nothing
-- written).  A job whose hash, or (redrive) whose parent's unsuccessful /
-- failed / dependencies key, holds another type is answered "wrongtype"
-- before anything of it is written.  A purge DELs the job's side keys
-- whatever their type, and the dedup key only when it is a string holding
-- the job's id.
--
-- KEYS[1] failed, 2 wait, 3 prioritized, 4 pc, 5 marker, 6 meta, 7 events,
--   8 active, 9 paused (the legacy list: the target instead of wait while
--   the queue is paused and the list exists)
-- then per job i: redrive: hash, parent hash, parent:unsuccessful,
--   parent:failed, parent:dependencies (the hash 5 times when no parent);
--   purge: hash, :logs, :dependencies, :processed, :failed, :unsuccessful,
--   dedup key (the hash again when none)
-- ARGV[1]  mode: "redrive" | "purge"
-- ARGV[2]  reset: "1" drops atm / ats / attemptsMade, "0" keeps them
-- ARGV[3]  N (at most 1000)
-- ARGV[4+7(i-1)..10+7(i-1)] per job i: id, failed score at plan time (a
--          number), finishedOn, sha1 of failedReason, push ("LPUSH" |
--          "RPUSH"), parentKey or "", deid or ""
-- returns  { id1, code1, ... }: "moved", "gone" (not in failed, or no hash),
--          "changed" (score or a fenced field differs), "wrongtype"
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

--@prelude checks
--@prelude bullmq_queue

local mode, err = jc_one_of(ARGV[1], 'mode', { redrive = true, purge = true })
if err then return redis.error_reply(err) end
local reset
reset, err = jc_one_of(ARGV[2], 'reset', { ['0'] = true, ['1'] = true })
if err then return redis.error_reply(err) end
local n
n, err = jc_job_count(3, 7, nil)
if err then return redis.error_reply(err) end
local per = (mode == 'redrive') and 5 or 7
if n > 1000 or #KEYS ~= 9 + per * n then return redis.error_reply('BADARG job count ' .. tostring(ARGV[3])) end
for i = 1, n do
  local push = ARGV[4 + 7 * (i - 1) + 4]
  if push ~= 'LPUSH' and push ~= 'RPUSH' then return redis.error_reply('BADARG push of job ' .. i) end
end
err = jc_job_numbers(3, 7, 2, 'score', false) or jc_bull_queue_types()
if err then return redis.error_reply(err) end

local held, maxlen, target = jc_bull_queue_state()

-- (redrive) a parent's bookkeeping keys of another type: the job is skipped
local function parent_wrongtype(base)
  return jc_check_types({ { KEYS[base + 2], 'zset' }, { KEYS[base + 3], 'hash' }, { KEYS[base + 4], 'set' } })
end

local out, woke = {}, false
for i = 1, n do
  local a, base = 4 + 7 * (i - 1), 10 + per * (i - 1)
  local id, score, fin, why, push, parent, deid = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
    ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
  local job = KEYS[base]
  local code = 'moved'
  local sc = redis.call('ZSCORE', KEYS[1], id)
  local f = sc and redis.pcall('HMGET', job, 'finishedOn', 'failedReason', 'priority', 'parentKey', 'deid')
  if not sc then code = 'gone'
  elseif sc ~= score and tonumber(sc) ~= tonumber(score) then code = 'changed'
  elseif f['err'] then code = 'wrongtype'
  elseif not f[1] and redis.call('EXISTS', job) == 0 then code = 'gone'
  elseif (f[1] or '') ~= fin or redis.sha1hex(f[2] or '') ~= why or (f[4] or '') ~= parent
    or (f[5] or '') ~= deid then code = 'changed'
  elseif mode == 'redrive' and parent ~= '' and parent_wrongtype(base) then code = 'wrongtype'
  elseif redis.call('ZREM', KEYS[1], id) == 0 then code = 'gone'
  elseif mode == 'purge' then
    redis.call('DEL', job, KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5])
    if deid ~= '' and redis.pcall('GET', KEYS[base + 6]) == id then redis.call('DEL', KEYS[base + 6]) end
  else
    redis.call('HDEL', job, 'finishedOn', 'failedReason', 'stacktrace', 'returnvalue', 'processedOn')
    if reset == '1' then redis.call('HDEL', job, 'atm', 'ats', 'attemptsMade') end
    local prio = tonumber(f[3]) or 0
    if prio > 0 then
      local c = redis.call('INCR', KEYS[4])
      redis.call('ZADD', KEYS[3], prio * 0x100000000 + c % 0x100000000, id)
    else
      redis.call(push, target, id)
    end
    if parent ~= '' and redis.call('EXISTS', KEYS[base + 1]) == 1 then
      local z, h = redis.pcall('ZREM', KEYS[base + 2], job), 0
      if z ~= 1 then h = redis.pcall('HDEL', KEYS[base + 3], job) end
      if z == 1 or h == 1 then redis.pcall('SADD', KEYS[base + 4], job) end
    end
    redis.call('XADD', KEYS[7], 'MAXLEN', '~', maxlen, '*', 'event', 'waiting', 'jobId', id, 'prev', 'failed')
    woke = true
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
if woke and not held then redis.call('ZADD', KEYS[5], 0, '0') end
return out
