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
-- errors   every argument and the type of every key (the payload key of
--          each job to delete: a string or missing) are checked before any
--          write: "BADARG ...", "WRONGTYPE key <key> holds a <type>,
--          expected ..." (nothing written)

local migrating, info, ready, scheduled = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@prelude

-- every argument and the type of every key, before any write
local function check()
  local _
  local n, err = jc_job_count(1, 3, 4)
  local specs = { { migrating, 'list' }, { info, 'hash' }, { ready, 'list' }, { scheduled, 'zset' } }
  for i = 1, (err and 0 or n) do
    local b = 2 + 3 * (i - 1)
    local action, due = ARGV[b + 1], ARGV[b + 2]
    _, err = jc_nonempty(ARGV[b], 'id of job ' .. i)
    if not err then _, err = jc_one_of(action, 'action of job ' .. i, { delete = true, back = true }) end
    if not err and due ~= '' then _, err = jc_number(due, 'due time of job ' .. i) end
    if err then break end
    if action == 'delete' then specs[#specs + 1] = { KEYS[4 + i], 'string' } end
  end
  return err or jc_check_types(specs)
end

local bad = check()
if bad then return redis.error_reply(bad) end

return jc_each({}, 2, 3, tonumber(ARGV[1]), function(i, b)
  local id, action, due = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  if redis.call('LINDEX', migrating, -1) ~= id then return 'not-next' end
  redis.call('RPOP', migrating)
  redis.call('HDEL', info, id)
  if action == 'delete' then
    redis.call('DEL', KEYS[4 + i])
    return 'moved'
  end
  if due ~= '' then
    redis.call('ZADD', scheduled, due, id)
  else
    redis.call('RPUSH', ready, id)
  end
  return 'back'
end)
