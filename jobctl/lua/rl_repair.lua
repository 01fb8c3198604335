-- rl_repair.lua: one unambiguous repair found by `jobctl check --repair`
-- (reliable-list).  Each repair re-checks its condition atomically, so a
-- state that changed since the check (workers keep claiming, acking and
-- dead-lettering while the check reads) is left alone.
--
-- KEYS[1]  the state key holding the id (list or zset), or the processing list
-- KEYS[2]  the job's payload key             job:{t}:<id>
-- KEYS[3]  the processing deadline zset      queue:{t}:processing:deadline
-- KEYS[4]  the processing list               queue:{t}:processing
-- ARGV[1]  kind:
--          "stray_deadline"   ZREM the deadline if its score is still ARGV[3]
--                             and the id is (still) not in processing
--          "missing_deadline" ZADD NX the deadline at ARGV[3] if the id is
--                             still in processing (makes the job visible as
--                             stuck, so `requeue --stuck` takes it)
--          "dangling_list"    LREM every copy of the id from the list KEYS[1]
--                             if the payload is still missing; when KEYS[1]
--                             is the processing list, ZREM its deadline too
--          "dangling_zset"    ZREM the id from KEYS[1] if the payload is still missing
--          "duplicate"        keep one copy of the id in the list KEYS[1],
--                             removing the others from the tail (never the
--                             last copy; ARGV[3], the copies the check saw,
--                             is informational)
-- ARGV[2]  job id
-- ARGV[3]  score (epoch ms) or copy count, per kind
-- returns  1 when repaired, 0 when the condition no longer held
-- errors   every argument and the type of every key the kind uses are
--          checked before any write (KEYS[3] a zset, KEYS[4] a list, KEYS[1]
--          a list or zset per kind): "BADKIND <kind>", "BADARG ...",
--          "WRONGTYPE key <key> holds a <type>, expected ..." (nothing written)
-- Cost: LPOS/LREM scan the list (O(N): 5-10 ms on a 1M list, Redis 7.0.15);
-- one call per finding, `jobctl check --repair` only.  A bounded repair would
-- go through the window engine (Redis has no bounded removal from the
-- middle of a list).

local kind, id, arg = ARGV[1], ARGV[2], ARGV[3]
--@prelude

-- the type KEYS[1] must have, per kind (false: KEYS[1] is not used)
local STATE = { stray_deadline = false, missing_deadline = false, dangling_list = 'list', dangling_zset = 'zset',
                duplicate = 'list' }

-- every argument and the type of every key the kind uses, before any write
local function check()
  local state = STATE[kind]
  if state == nil then return 'BADKIND ' .. tostring(kind) end
  local _, err = jc_nonempty(id, 'job id')
  if not err and (kind == 'stray_deadline' or kind == 'missing_deadline') then _, err = jc_number(arg, 'score') end
  if not err and kind == 'duplicate' then _, err = jc_int(arg, 'copy count', 0) end
  local specs = { { KEYS[3], 'zset' }, { KEYS[4], 'list' } }
  if state then specs[3] = { KEYS[1], state } end
  return err or jc_check_types(specs)
end

local bad = check()
if bad then return redis.error_reply(bad) end

if kind == 'stray_deadline' then
  local sc = redis.call('ZSCORE', KEYS[3], id)
  if sc and tonumber(sc) == tonumber(arg) and not redis.call('LPOS', KEYS[4], id) then
    return redis.call('ZREM', KEYS[3], id)
  end
  return 0
elseif kind == 'missing_deadline' then
  if not redis.call('LPOS', KEYS[4], id) then return 0 end
  return redis.call('ZADD', KEYS[3], 'NX', arg, id)
elseif kind == 'dangling_list' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    local removed = redis.call('LREM', KEYS[1], 0, id)
    if KEYS[1] == KEYS[4] and not redis.call('LPOS', KEYS[4], id) then
      redis.call('ZREM', KEYS[3], id)  -- a dangling processing id takes its deadline along
    end
    return removed > 0 and 1 or 0
  end
  return 0
elseif kind == 'dangling_zset' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return redis.call('ZREM', KEYS[1], id)
  end
  return 0
end
-- duplicate
local copies = #redis.call('LPOS', KEYS[1], id, 'COUNT', 0)
if copies < 2 then return 0 end
return redis.call('LREM', KEYS[1], -(copies - 1), id) > 0 and 1 or 0
