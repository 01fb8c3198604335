-- hj_repair.lua: one unambiguous repair found by `jobctl check --repair`
-- (hash-job, seed 001).  Each repair re-checks its condition atomically, so
-- a state that changed since the check is left alone.
--
-- KEYS[1]  the state key holding the id: a list, or the suppressed zset
-- KEYS[2]  the job's hash                     queue:<n>:job:<id>
-- KEYS[3]  jobctl's suppressed info hash      queue:<n>:jobctl:suppressed:info
-- ARGV[1]  kind:
--          "dangling_list"  LREM the copies of the id within reach (below)
--                           from the list KEYS[1] if the job hash is still
--                           missing
--          "dangling_zset"  ZREM the id from KEYS[1] (and its info) if the
--                           job hash is still missing
--          "duplicate"      LREM ARGV[3]-1 extra copies, from the tail,
--                           among the copies within reach (one is kept)
--          "no_deadline"    HSET claimed_at_ms ARGV[3] if the id is still in
--                           the processing list KEYS[1] within reach and the
--                           hash still has neither claimed_at_ms nor
--                           enqueued_at_ms
-- ARGV[2]  job id
-- ARGV[3]  copy count, or the claimed_at_ms to set (epoch ms), per kind
-- ARGV[4]  reach R >= 1: a list is searched only in its R entries at each
--          end (all of it when it holds at most 2 x R), the reach of the
--          check's own atomic re-read; a copy deeper is left alone
-- returns  1 when repaired, 0 when the condition no longer held (or the id
--          is beyond reach)
-- errors   every argument and the type of every key the kind uses are
--          checked before any write: "BADKIND <kind>", "BADARG ...",
--          "WRONGTYPE key <key> holds a <type>, expected ..." (nothing written)
-- Cost: at most 2 x R list entries compared (LPOS ... MAXLEN, then LREM
-- with a count that stops within the same entries), whatever the list's
-- length: Redis has no bounded removal from the middle of a list.

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

local reach
-- every argument and the type of every key the kind uses, before any write
local function check()
  local specs = TYPES[kind]
  if not specs then return 'BADKIND ' .. tostring(kind) end
  local _, err = jc_nonempty(id, 'job id')
  if not err then reach, err = jc_int(ARGV[4], 'reach', 1) end
  if not err and kind == 'duplicate' then _, err = jc_int(arg, 'copy count', 0) end
  if not err and kind == 'no_deadline' then _, err = jc_number(arg, 'claimed_at_ms') end
  return err or jc_check_types(specs)
end

local bad = check()
if bad then return redis.error_reply(bad) end

-- the copies of the id in list `key` within reach: near its head and near
-- its tail, and whether that was the whole list (at most 2 x reach entries:
-- every copy is then counted as head)
local function near(key)
  if redis.call('LLEN', key) <= 2 * reach then
    return #redis.call('LPOS', key, id, 'COUNT', 0), 0, true
  end
  return #redis.call('LPOS', key, id, 'COUNT', 0, 'MAXLEN', reach),
         #redis.call('LPOS', key, id, 'RANK', -1, 'COUNT', 0, 'MAXLEN', reach), false
end

-- LREM `tail` copies from the tail end, then `head` from the head end: each
-- LREM stops at its count, within the entries `near` searched
local function remove(key, head, tail)
  if tail > 0 then redis.call('LREM', key, -tail, id) end
  if head > 0 then redis.call('LREM', key, head, id) end
  return (head + tail > 0) and 1 or 0
end

if kind == 'dangling_list' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    local head, tail = near(KEYS[1])
    return remove(KEYS[1], head, tail)
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
  local head, tail, whole = near(KEYS[1])
  local spare = head + tail - 1  -- the copies seen beyond the one kept
  if extra < 1 or spare < 1 then return 0 end
  if whole then  -- a short list: from the tail end, within its 2 x reach entries
    redis.call('LREM', KEYS[1], -math.min(extra, spare), id)
    return 1
  end
  local from_tail = math.min(extra, tail, spare)
  return remove(KEYS[1], math.min(extra - from_tail, spare - from_tail, head), from_tail)
end
-- no_deadline
local v = redis.call('HMGET', KEYS[2], 'claimed_at_ms', 'enqueued_at_ms')
if redis.call('EXISTS', KEYS[2]) == 1 and unset(v[1]) and unset(v[2]) then
  local head, tail = near(KEYS[1])
  if head + tail > 0 then
    redis.call('HSET', KEYS[2], 'claimed_at_ms', arg)
    return 1
  end
end
return 0
