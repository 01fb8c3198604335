-- rl_migrate_out.lua: jobctl migrate, step 3 of a copy-then-delete move, on
-- the SOURCE shard: for each job at the served end (tail) of the migrating
-- list, in order, either delete it here (it was copied to the destination)
-- or put it back where it was taken from (the destination refused it).
-- One atomic step per job; a job not at the tail is left alone.
--
-- KEYS[1]  migrating list      queue:{s}:jobctl:migrating
-- KEYS[2]  migrating info hash queue:{s}:jobctl:migrating:info
-- KEYS[3]  source ready list   queue:{s}:ready (put back: RPUSH, served next)
-- KEYS[4]  source scheduled    queue:{s}:scheduled (put back with its due time)
-- KEYS[4+i] source payload key of job i
-- ARGV[1]  N, then per job: id, action ("delete" | "back"), due time ("" none)
-- returns  { id1, code1, ... }: "moved" (deleted here), "back", "not-next"
--          (the migrating list's tail is another job)

local migrating, info, ready, scheduled = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local n = tonumber(ARGV[1])
local out = {}
for i = 1, n do
  local b = 2 + 3 * (i - 1)
  local id, action, due = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local code
  if redis.call('LINDEX', migrating, -1) ~= id then
    code = 'not-next'
  else
    redis.call('RPOP', migrating)
    redis.call('HDEL', info, id)
    if action == 'delete' then
      redis.call('DEL', KEYS[4 + i])
      code = 'moved'
    else
      if due ~= '' then
        redis.call('ZADD', scheduled, due, id)
      else
        redis.call('RPUSH', ready, id)
      end
      code = 'back'
    end
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
