-- jl_dead_restore.lua: put the dead job strings that jl_dead_window.lua
-- rotated to the tail of a json-list dead list back at its head, so that
-- after an operation the strings that stayed dead keep their relative order
-- (jobctl: redrive, suppress, purge; seed 002).
--
-- The caller passes the SHA1s of the rotated strings, most recently rotated
-- first: the order they sit in from the tail, except that workers may have
-- RPUSHed newly dead strings in between.  Each step looks at the tail:
--   * the next expected SHA1, or a later one (the ones before it left the
--     list in the meantime) -> moved to the head (LMOVE dead dead RIGHT LEFT);
--   * anything else (a string dead-lettered during the operation) -> set
--     aside (RPOP) and pushed back at the tail, in its order, before the
--     call returns.
-- Every string is in the dead list at the end of the call; the call moves
-- at most ARGV[1] strings and sets aside at most ARGV[2].
--
-- KEYS[1]  dead list                       <p>:dead
-- ARGV[1]  max strings to move to the head (>= 1)
-- ARGV[2]  max strings to set aside
-- ARGV[3..] expected SHA1s (hex), most recently rotated first
-- returns  { consumed, restored, set_aside }: how many expected SHA1s were
--          dealt with (restored or skipped as missing), how many strings
--          were moved to the head, how many were set aside and pushed back

local dead = KEYS[1]
local max_move = tonumber(ARGV[1])
local max_hold = tonumber(ARGV[2])
local n = #ARGV - 2

local index = {}
for i = 1, n do
  local sha = ARGV[2 + i]
  index[sha] = index[sha] or {}
  table.insert(index[sha], i)
end
local function first_from(list, i)
  if not list then return nil end
  for _, p in ipairs(list) do
    if p >= i then return p end
  end
  return nil
end

local held = {}
local i, restored = 1, 0
while i <= n and restored < max_move do
  local tail = redis.call('LINDEX', dead, -1)
  if not tail then break end
  local at = first_from(index[redis.sha1hex(tail)], i)
  if at then
    redis.call('LMOVE', dead, dead, 'RIGHT', 'LEFT')
    restored = restored + 1
    i = at + 1
  else
    if #held >= max_hold then break end
    held[#held + 1] = redis.call('RPOP', dead)
  end
end
for j = #held, 1, -1 do
  redis.call('RPUSH', dead, held[j])
end
return { i - 1, restored, #held }
