-- list_restore.lua: put the hold list of the window engine back at the tail
-- of its dead list, in the original order (jobctl.ops.walk).
--
-- The window scripts (rl_window.lua, rl_tail.lua, jl_window.lua,
-- hj_window.lua) moved each element they kept from the dead list's tail to
-- the hold (LMOVE dead hold <tail> <other end>); this moves them back the
-- other way, the last held first, so that after the hold is empty the dead
-- list holds them at its tail in their old order, with any job
-- dead-lettered meanwhile at the other end.  At every instant each element
-- is in exactly one of the two lists.  When the hold is empty the walk hash
-- is deleted.  Moves at most ARGV[2] elements per call.
--
-- KEYS[1]  dead list             queue:{t}:dead | <p>:dead | queue:<n>:failed
-- KEYS[2]  hold list (jobctl)    queue:{t}:jobctl:hold
-- KEYS[3]  walk hash (jobctl)    queue:{t}:jobctl:walk
-- ARGV[1]  kind: "rl", "hj" (tail = right) | "jl" (tail = left)
-- ARGV[2]  max elements to move back (>= 1)
-- returns  { moved_back, left_in_hold }

--@prelude

local dead, hold, walk = KEYS[1], KEYS[2], KEYS[3]
local kind, err = jc_one_of(ARGV[1], 'kind', { rl = true, jl = true, hj = true })
if not kind then return redis.error_reply(err) end
local max_move
max_move, err = jc_int(ARGV[2], 'max', 1)
if not max_move then return redis.error_reply(err) end
err = jc_check_types({ { dead, 'list' }, { hold, 'list' }, { walk, 'hash' } })
if err then return redis.error_reply(err) end

local from, to = 'LEFT', 'RIGHT'
if kind == 'jl' then from, to = 'RIGHT', 'LEFT' end
-- in chunks of up to 1000: one LPOP/RPOP with a count and one RPUSH/LPUSH
-- each, the same order as one LMOVE per element
local moved = 0
while moved < max_move do
  local els = redis.call(from == 'LEFT' and 'LPOP' or 'RPOP', hold, math.min(max_move - moved, 1000))
  if not els then break end
  redis.call(to == 'RIGHT' and 'RPUSH' or 'LPUSH', dead, unpack(els))
  moved = moved + #els
end
local left = redis.call('LLEN', hold)
if left == 0 then redis.call('DEL', walk) end
return { moved, left }
