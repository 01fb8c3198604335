-- cel_replay.lua: replay of failed Celery tasks from their result records
-- (jobctl.layouts.celery.replay), one call per batch, each record at most
-- once whatever the runs.
--
-- Per record: skipped "is-replay" when jobctl's replay hash names its task
-- id as a task jobctl sent (value "^" .. original id: a replay is never
-- replayed, else a failing replay would be sent again at every run),
-- "replayed" when the hash names it otherwise (an earlier or concurrent run
-- replayed it), "gone" when the record
-- no longer exists, "wrongtype" when its key holds another type, "changed"
-- when its bytes no longer have the SHA1 the plan saw; else LPUSH of the
-- message bytes the caller built (where Celery's producers push: the
-- workers' BRPOP serves it after the messages already queued) and HSET of
-- the task id -> new task id and new task id -> "^" .. task id in the
-- replay hash, in this one atomic call.
-- The record is never written; the message bytes are moved, never decoded.
--
-- Never a partial batch: every ARGV and the TYPE of the fixed keys are
-- checked before the first write (a WRONGTYPE / BADARG error reply,
-- nothing written).  At most 1000 records per call.
--
-- KEYS[1]  jobctl's replay hash (hash)  original task id -> new task id,
--          new task id -> "^" .. original task id
-- KEYS[2]  the queue's ready list (list)
-- KEYS[2+i] record i's result record (string)
-- ARGV[1]  N (0 .. 1000)
-- ARGV[2+4(i-1)..5+4(i-1)] per record i: original task id, SHA1 of the
--          record's bytes at plan time, the new task id, the new message's bytes
-- returns  { id1, code1, ... }: "moved", "replayed", "gone", "wrongtype",
--          "changed", "is-replay", or an error reply "BADARG ..." / "WRONGTYPE ..."

--@prelude checks

local n, err = jc_job_count(1, 4, 2)
if err then return redis.error_reply(err) end
if n > 1000 then return redis.error_reply('BADARG job count ' .. n .. ' above 1000') end
for i = 1, n do
  local at = 2 + 4 * (i - 1)
  if ARGV[at] == '' or ARGV[at + 2] == '' or ARGV[at + 3] == '' then
    return redis.error_reply('BADARG empty id or message of job ' .. i)
  end
  if not string.match(ARGV[at + 1], '^%x+$') or #ARGV[at + 1] ~= 40 then
    return redis.error_reply('BADARG sha1 of job ' .. i)
  end
end
err = jc_check_types({ { KEYS[1], 'hash' }, { KEYS[2], 'list' } })
if err then return redis.error_reply(err) end

local out = {}
for i = 1, n do
  local at = 2 + 4 * (i - 1)
  local id, sha, new_id, msg = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local key = KEYS[2 + i]
  local code = 'moved'
  local t = redis.call('TYPE', key)['ok']
  local mark = redis.call('HGET', KEYS[1], id)
  if mark and string.sub(mark, 1, 1) == '^' then code = 'is-replay'
  elseif mark then code = 'replayed'
  elseif t == 'none' then code = 'gone'
  elseif t ~= 'string' then code = 'wrongtype'
  elseif redis.sha1hex(redis.call('GET', key)) ~= sha then code = 'changed'
  else
    redis.call('LPUSH', KEYS[2], msg)
    redis.call('HSET', KEYS[1], id, new_id, new_id, '^' .. id)
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
