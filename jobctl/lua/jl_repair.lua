-- jl_repair.lua: one unambiguous repair found by `jobctl check --repair`
-- (json-list, seed 002).  Each repair re-checks its condition atomically, so
-- a state that changed since the check is left alone.
--
-- KEYS[1]  the list holding the string (processing for the claim-time
--          kinds), or the suppressed zset for "dangling"
-- KEYS[2]  claim-time zset             <p>:processing:times
-- KEYS[3]  jobctl raw hash             <p>:jobctl:suppressed:raw
-- KEYS[4]  jobctl info hash            <p>:jobctl:suppressed:info
-- ARGV[1]  kind:
--          "duplicate"          LREM ARGV[3]-1 extra copies of the string
--                               ARGV[4], from the tail of KEYS[1]
--          "missing_claim_time" ZADD NX claim time ARGV[3] (epoch seconds)
--                               if the string ARGV[4] is still in KEYS[1]
--          "stray_claim_time"   ZREM the claim time if its score is still
--                               ARGV[3]
--          "dangling"           ZREM the id from KEYS[1] (and its info) if
--                               its kept string is still missing
-- ARGV[2]  job id
-- ARGV[3]  copy count, or a claim time in epoch seconds, per kind
-- ARGV[4]  the job string (exact bytes), for the list kinds
-- returns  1 when repaired, 0 when the condition no longer held
-- errors   every argument and the type of every key the kind uses are
--          checked before any write: "BADKIND <kind>", "BADARG ...",
--          "WRONGTYPE key <key> holds a <type>, expected ..." (nothing written)
-- Cost: LPOS/LREM scan the list (O(N): 5-10 ms on a 1M list, Redis 7.0.15);
-- one call per finding, `jobctl check --repair` only.  A bounded repair would
-- go through the window engine (Redis has no bounded removal from the
-- middle of a list).

local kind, id, arg, raw = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
--@prelude

-- the keys each kind uses, with their types
local TYPES = {
  duplicate = { { KEYS[1], 'list' } },
  missing_claim_time = { { KEYS[1], 'list' }, { KEYS[2], 'zset' } },
  stray_claim_time = { { KEYS[2], 'zset' } },
  dangling = { { KEYS[1], 'zset' }, { KEYS[3], 'hash' }, { KEYS[4], 'hash' } },
}

-- every argument and the type of every key the kind uses, before any write
local function check()
  local specs = TYPES[kind]
  if not specs then return 'BADKIND ' .. tostring(kind) end
  local _, err = jc_nonempty(id, 'job id')
  if not err and kind == 'duplicate' then _, err = jc_int(arg, 'copy count', 0) end
  if not err and kind ~= 'duplicate' and kind ~= 'dangling' then _, err = jc_number(arg, 'claim time') end
  if not err and (kind == 'duplicate' or kind == 'missing_claim_time') and raw == nil then
    err = 'BADARG job string missing'
  end
  return err or jc_check_types(specs)
end

local bad = check()
if bad then return redis.error_reply(bad) end

if kind == 'duplicate' then
  local extra = tonumber(arg) - 1
  if extra < 1 then return 0 end
  return redis.call('LREM', KEYS[1], -extra, raw) > 0 and 1 or 0
elseif kind == 'missing_claim_time' then
  if redis.call('LPOS', KEYS[1], raw) then
    return redis.call('ZADD', KEYS[2], 'NX', arg, id)
  end
  return 0
elseif kind == 'stray_claim_time' then
  local sc = redis.call('ZSCORE', KEYS[2], id)
  if sc and tonumber(sc) == tonumber(arg) then
    return redis.call('ZREM', KEYS[2], id)
  end
  return 0
end
-- dangling
if redis.call('HEXISTS', KEYS[3], id) == 0 then
  local removed = redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[4], id)
  return removed
end
return 0
