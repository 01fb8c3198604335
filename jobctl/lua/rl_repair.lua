-- rl_repair.lua: one unambiguous repair found by `jobctl check --repair`
-- (reliable-list).  Each repair re-checks its condition atomically, so a
-- state that changed since the check is left alone.
--
-- KEYS[1]  the state key holding the id (list or zset), or the deadline zset
-- KEYS[2]  the job's payload key             job:{t}:<id>
-- KEYS[3]  the processing deadline zset      queue:{t}:processing:deadline
-- ARGV[1]  kind:
--          "stray_deadline"   ZREM the deadline if its score is still ARGV[3]
--          "missing_deadline" ZADD NX the deadline at ARGV[3] (makes the job
--                             visible as stuck, so `requeue --stuck` takes it)
--          "dangling_list"    LREM every copy of the id from the list KEYS[1]
--                             if the payload is still missing
--          "dangling_zset"    ZREM the id from KEYS[1] if the payload is still missing
--          "duplicate"        LREM ARGV[3]-1 extra copies, from the tail
-- ARGV[2]  job id
-- ARGV[3]  score (epoch ms) or copy count, per kind
-- returns  1 when repaired, 0 when the condition no longer held

local kind, id, arg = ARGV[1], ARGV[2], ARGV[3]
if kind == 'stray_deadline' then
  local sc = redis.call('ZSCORE', KEYS[3], id)
  if sc and tonumber(sc) == tonumber(arg) then
    return redis.call('ZREM', KEYS[3], id)
  end
  return 0
elseif kind == 'missing_deadline' then
  return redis.call('ZADD', KEYS[3], 'NX', arg, id)
elseif kind == 'dangling_list' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return redis.call('LREM', KEYS[1], 0, id) > 0 and 1 or 0
  end
  return 0
elseif kind == 'dangling_zset' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return redis.call('ZREM', KEYS[1], id)
  end
  return 0
elseif kind == 'duplicate' then
  local extra = tonumber(arg) - 1
  if extra < 1 then return 0 end
  return redis.call('LREM', KEYS[1], -extra, id) > 0 and 1 or 0
end
return redis.error_reply('BADKIND ' .. kind)
