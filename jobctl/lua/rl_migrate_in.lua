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
--          run), "conflict" (another job has this id at the destination)

local ready, scheduled, marker = KEYS[1], KEYS[2], KEYS[3]
--@prelude
return jc_each({}, 2, 5, tonumber(ARGV[1]), function(i, b)
  local id, payload, token, state, due = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local key = KEYS[3 + i]
  if redis.call('HGET', marker, id) == token then return 'done' end
  if redis.call('EXISTS', key) == 1 then return 'conflict' end
  redis.call('SET', key, payload)
  if state == 'scheduled' and due ~= '' then
    redis.call('ZADD', scheduled, due, id)
  else
    redis.call('LPUSH', ready, id)
  end
  redis.call('HSET', marker, id, token)
  return 'copied'
end)
