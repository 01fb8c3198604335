-- sg_dead_restore.lua: put the dead jobs that sg_dead_window.lua rotated to
-- the head of a stream-group dead list back at its tail, so that after an
-- operation the jobs that stayed dead keep their relative order (jobctl:
-- redrive, suppress, purge).
--
-- The caller passes the rotated ids most recently rotated first; that is
-- the order they sit in from the head, except that workers may have LPUSHed
-- newly dead jobs in between.  Each step looks at the head element:
--   * the next expected id -> moved to the tail (LMOVE dead dead LEFT RIGHT);
--   * a later expected id (the ones before it were taken by someone else in
--     the meantime) -> the missing ones are skipped, it is moved to the tail;
--   * anything else (a job dead-lettered during the operation) -> set aside
--     (LPOP) and pushed back at the head, in its order, before the call
--     returns.
-- Every element stays in the dead list at the end of the call; the call
-- moves at most ARGV[1] elements and sets aside at most ARGV[2].  The dead
-- list's TYPE and the ARGV are checked before the first write.
--
-- KEYS[1]  dead list                       queue:{t}:dead
-- ARGV[1]  max elements to move to the tail (>= 1)
-- ARGV[2]  max elements to set aside (new dead jobs met at the head)
-- ARGV[3..] expected ids, most recently rotated first
-- returns  { consumed, restored, set_aside }: how many expected ids were
--          dealt with (restored or skipped as missing), how many elements
--          were moved to the tail, how many were set aside and pushed back
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local dead = KEYS[1]
--@prelude
local max_move, err = jc_int(ARGV[1], 'max_move', 1)
if not max_move then return redis.error_reply(err) end
local max_hold
max_hold, err = jc_int(ARGV[2], 'max_hold', 0)
if not max_hold then return redis.error_reply(err) end
local bad = jc_type_error(dead, 'list')
if bad then return redis.error_reply(bad) end
local n = #ARGV - 2

local index = {}
for i = 1, n do index[ARGV[2 + i]] = i end

local held = {}
local i, restored = 1, 0
while i <= n and restored < max_move do
  local head = redis.call('LINDEX', dead, 0)
  if not head then break end
  local at = index[head]
  if at and at >= i then
    redis.call('LMOVE', dead, dead, 'LEFT', 'RIGHT')
    restored = restored + 1
    i = at + 1
  else
    if #held >= max_hold then break end
    held[#held + 1] = redis.call('LPOP', dead)
  end
end
for j = #held, 1, -1 do
  redis.call('LPUSH', dead, held[j])
end
return { i - 1, restored, #held }
