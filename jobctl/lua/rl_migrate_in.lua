-- rl_migrate_in.lua: jobctl migrate, step 2 of a copy-then-delete move, on
-- the DESTINATION shard: copy each job's payload and make it ready (LPUSH,
-- the producers' end) or scheduled (its due time), once.  One atomic step
-- per job.
--
-- A job already copied by an earlier (crashed) run is recognised by the
-- marker hash (id -> the token of the move that took it out of the source)
-- and not copied again, even if a worker took it meanwhile.  A destination
-- payload key that exists without that marker is another job with the same
-- id: nothing is overwritten.
--
-- KEYS[1]  destination ready list      queue:{d}:ready
-- KEYS[2]  destination scheduled zset  queue:{d}:scheduled
-- KEYS[3]  marker hash                 queue:{d}:jobctl:migrated-in
-- KEYS[3+i] destination payload key of job i   job:{d}:<id>
-- ARGV[1]  N, then per job: id, payload, token (the take-out operation id),
--          state ("ready" | "scheduled"), due time (epoch ms; "" for ready)
-- returns  { id1, code1, ... }: "copied", "done" (copied by an earlier
--          run), "conflict" (another job has this id at the destination:
--          its payload key exists, whatever its type)
-- errors   every argument and the type of the ready list, scheduled zset
--          and marker hash are checked before any write: "BADARG ...",
--          "WRONGTYPE key <key> holds a <type>, expected ..." (nothing written)

local ready, scheduled, marker = KEYS[1], KEYS[2], KEYS[3]
--@prelude

-- every argument and the type of every key, before any write
local function check()
  local _
  local n, err = jc_job_count(1, 5, 3)
  for i = 1, (err and 0 or n) do
    local b = 2 + 5 * (i - 1)
    local state, due = ARGV[b + 3], ARGV[b + 4]
    _, err = jc_nonempty(ARGV[b], 'id of job ' .. i)
    if not err then _, err = jc_one_of(state, 'state of job ' .. i, { ready = true, scheduled = true }) end
    if not err and (state == 'scheduled') ~= (due ~= '') then err = 'BADARG due time of job ' .. i end
    if not err and due ~= '' then _, err = jc_number(due, 'due time of job ' .. i) end
    if err then break end
  end
  return err or jc_check_types({ { ready, 'list' }, { scheduled, 'zset' }, { marker, 'hash' } })
end

local bad = check()
if bad then return redis.error_reply(bad) end

return jc_each({}, 2, 5, tonumber(ARGV[1]), function(i, b)
  local id, payload, token, state, due = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local key = KEYS[3 + i]
  if redis.call('HGET', marker, id) == token then return 'done' end
  if redis.call('EXISTS', key) == 1 then return 'conflict' end  -- whatever its type: nothing is overwritten
  redis.call('SET', key, payload)
  if state == 'scheduled' then
    redis.call('ZADD', scheduled, due, id)
  else
    redis.call('LPUSH', ready, id)
  end
  redis.call('HSET', marker, id, token)
  return 'copied'
end)
