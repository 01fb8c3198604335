-- sk_move.lua: redrive (a sorted set -> its job's queue list) or purge of
-- Sidekiq jobs kept in the `dead`, `retry` or `schedule` sorted set
-- (jobctl.layouts.sidekiq.ops).  One call per batch, each job atomic and
-- fenced; the job JSON is never decoded here (cjson would mangle 64-bit
-- integers and escape "/"): the client sends the exact stored member and,
-- for a redrive, the bytes to push (edited client-side).
--
-- Per job: the exact member must still be in the set with the score the
-- plan saw, else it is skipped ("gone" / "changed": a job that failed
-- again since the plan has another member, so it is "gone" and never
-- redriven twice); then ZREM of the exact member, and only when that
-- removed it:
--   redrive: LPUSH queue:<q> <new bytes> and (once per queue) SADD queues <q>,
--            as Sidekiq's own Client.push does;
--   purge:   nothing more (Sidekiq OSS keeps no other per-job key).
--
-- Never a partial batch: every ARGV and the TYPE of the fixed keys are
-- checked before the first write (a WRONGTYPE / BADARG error reply, nothing
-- written).  A job whose queue list holds another type is answered
-- "wrongtype" before anything of it is written.
--
-- KEYS[1]  the sorted set (zset)    dead | retry | schedule
-- KEYS[2]  the queue set (set)      queues
-- then per job i: redrive: its queue list queue:<q>; purge: none
-- ARGV[1]  mode: "redrive" | "purge"
-- ARGV[2]  N
-- ARGV[3+5(i-1)..7+5(i-1)] per job i: jid (reply name), member (exact
--          bytes), score at plan time (a number), then for a redrive the
--          queue name and the bytes to push (purge: both "")
-- returns  { jid1, code1, ... }: "moved", "gone", "changed", "wrongtype"
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

--@prelude checks

local mode, err = jc_one_of(ARGV[1], 'mode', { redrive = true, purge = true })
if err then return redis.error_reply(err) end
local n
n, err = jc_job_count(2, 5, nil)
if err then return redis.error_reply(err) end
local per = (mode == 'redrive') and 1 or 0
if #KEYS ~= 2 + per * n then return redis.error_reply('BADARG job count ' .. tostring(ARGV[2])) end
err = jc_job_numbers(2, 5, 3, 'score', false) or jc_check_types({ { KEYS[1], 'zset' }, { KEYS[2], 'set' } })
if err then return redis.error_reply(err) end
for i = 1, n do
  local at = 3 + 5 * (i - 1)
  if ARGV[at + 1] == '' then return redis.error_reply('BADARG member of job ' .. i) end
  if mode == 'redrive' and (ARGV[at + 3] == '' or ARGV[at + 4] == '') then
    return redis.error_reply('BADARG queue or payload of job ' .. i)
  end
end

local out, pushed, qtype = {}, {}, {}
for i = 1, n do
  local at = 3 + 5 * (i - 1)
  local jid, member, want, queue, payload = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local target = KEYS[2 + i * per]
  local code = 'moved'
  local sc = redis.call('ZSCORE', KEYS[1], member)
  if mode == 'redrive' and sc and qtype[target] == nil then qtype[target] = redis.call('TYPE', target)['ok'] end
  if not sc then code = 'gone'
  elseif sc ~= want and tonumber(sc) ~= tonumber(want) then code = 'changed'
  elseif mode == 'redrive' and qtype[target] ~= 'none' and qtype[target] ~= 'list' then code = 'wrongtype'
  elseif redis.call('ZREM', KEYS[1], member) == 0 then code = 'gone'
  elseif mode == 'redrive' then
    redis.call('LPUSH', target, payload)
    qtype[target] = 'list'
    pushed[queue] = true
  end
  out[#out + 1] = jid
  out[#out + 1] = code
end
for queue in pairs(pushed) do redis.call('SADD', KEYS[2], queue) end
return out
