-- hj_repair.lua: one unambiguous repair found by `jobctl check --repair`
-- (hash-job, seed 001).  Each repair re-checks its condition atomically, so
-- a state that changed since the check is left alone.
--
-- KEYS[1]  the state key holding the id: a list, or the suppressed zset
-- KEYS[2]  the job's hash                     queue:<n>:job:<id>
-- KEYS[3]  jobctl's suppressed info hash      queue:<n>:jobctl:suppressed:info
-- ARGV[1]  kind:
--          "dangling_list"  LREM every copy of the id from the list KEYS[1]
--                           if the job hash is still missing
--          "dangling_zset"  ZREM the id from KEYS[1] (and its info) if the
--                           job hash is still missing
--          "duplicate"      LREM ARGV[3]-1 extra copies, from the tail
--          "no_deadline"    HSET claimed_at_ms ARGV[3] if the id is still in
--                           the processing list KEYS[1] and the hash still
--                           has neither claimed_at_ms nor enqueued_at_ms
-- ARGV[2]  job id
-- ARGV[3]  copy count, or the claimed_at_ms to set (epoch ms), per kind
-- returns  1 when repaired, 0 when the condition no longer held
-- errors   every argument and the type of every key the kind uses are
--          checked before any write: "BADKIND <kind>", "BADARG ...",
--          "WRONGTYPE key <key> holds a <type>, expected ..." (nothing written)
-- Cost: LPOS/LREM scan the list (O(N): 5-10 ms on a 1M list, Redis 7.0.15);
-- one call per finding, `jobctl check --repair` only.  A bounded repair would
-- go through the window engine (Redis has no bounded removal from the
-- middle of a list).

local kind, id, arg = ARGV[1], ARGV[2], ARGV[3]
--@prelude
local function unset(v) return (not v) or v == '' or tonumber(v) == 0 end

-- the keys each kind uses, with their types
local TYPES = {
  dangling_list = { { KEYS[1], 'list' } },
  dangling_zset = { { KEYS[1], 'zset' }, { KEYS[3], 'hash' } },
  duplicate = { { KEYS[1], 'list' } },
  no_deadline = { { KEYS[1], 'list' }, { KEYS[2], 'hash' } },
}

-- every argument and the type of every key the kind uses, before any write
local function check()
  local specs = TYPES[kind]
  if not specs then return 'BADKIND ' .. tostring(kind) end
  local _, err = jc_nonempty(id, 'job id')
  if not err and kind == 'duplicate' then _, err = jc_int(arg, 'copy count', 0) end
  if not err and kind == 'no_deadline' then _, err = jc_number(arg, 'claimed_at_ms') end
  return err or jc_check_types(specs)
end

local bad = check()
if bad then return redis.error_reply(bad) end

if kind == 'dangling_list' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return redis.call('LREM', KEYS[1], 0, id) > 0 and 1 or 0
  end
  return 0
elseif kind == 'dangling_zset' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    local removed = redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[3], id)
    return removed
  end
  return 0
elseif kind == 'duplicate' then
  local extra = tonumber(arg) - 1
  if extra < 1 then return 0 end
  return redis.call('LREM', KEYS[1], -extra, id) > 0 and 1 or 0
end
-- no_deadline
local v = redis.call('HMGET', KEYS[2], 'claimed_at_ms', 'enqueued_at_ms')
if redis.call('EXISTS', KEYS[2]) == 1 and unset(v[1]) and unset(v[2])
    and redis.call('LPOS', KEYS[1], id) then
  redis.call('HSET', KEYS[2], 'claimed_at_ms', arg)
  return 1
end
return 0
