-- dz_move.lua: move planned members of a delay zset (layouts.md s.6; seed
-- 004): promote sets the score (due time) to now; purge removes the member.
-- One atomic step per member; the call touches only its N members.
--
-- A member moves only if it is still in the zset with the score the plan
-- saw (the member is the job itself, so the score is the whole fence).
--
-- Never a partial batch: every ARGV and the zset's TYPE are checked before
-- the first write (a key of the wrong type: a WRONGTYPE error reply, nothing
-- written); each member's write goes through redis.pcall, so a failing one
-- ("error") leaves it as it was and the members after it are still handled.
--
-- KEYS[1]  the delay zset          e.g. delay_queue
-- ARGV[1]  mode: "score" | "purge"
-- ARGV[2]  new score (score mode), epoch ms
-- ARGV[3]  N
-- ARGV[4+2(i-1)..5+2(i-1)] per member i: member (exact bytes), score at
--          plan time (integer string)
-- returns  { member1, code1, ... }: "moved", "gone", "changed", "error"
--          (the write failed; the member is as it was)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local zset, mode, at = KEYS[1], ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
if mode ~= 'score' and mode ~= 'purge' then
  return redis.error_reply('BADARG mode ' .. tostring(mode))
end
if mode == 'score' and not tonumber(at) then
  return redis.error_reply('BADARG score ' .. tostring(at))
end
if not n or n < 0 or n ~= math.floor(n) or #ARGV ~= 3 + 2 * n then
  return redis.error_reply('BADARG member count ' .. tostring(ARGV[3]))
end
for i = 1, n do
  if not tonumber(ARGV[5 + 2 * (i - 1)]) then
    return redis.error_reply('BADARG score of member ' .. i)
  end
end
--@prelude
local bad = jc_type_error(zset, 'zset')
if bad then return redis.error_reply(bad) end

local out = {}
for i = 1, n do
  local member, want = ARGV[4 + 2 * (i - 1)], ARGV[5 + 2 * (i - 1)]
  local sc = redis.call('ZSCORE', zset, member)
  local code
  if not sc then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want) then
    code = 'changed'
  else
    local r
    if mode == 'score' then
      r = redis.pcall('ZADD', zset, 'XX', tonumber(at), member)
    else
      r = redis.pcall('ZREM', zset, member)
    end
    code = (type(r) == 'table' and r['err']) and 'error' or 'moved'
  end
  jc_reply(out, member, code)
end
return out
