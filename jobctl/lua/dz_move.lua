-- dz_move.lua: move planned members of a delay zset (layouts.md s.6; seed
-- 004): promote sets the score (due time) to now; purge removes the member.
-- One atomic step per member; the call touches only its N members.
--
-- A member moves only if it is still in the zset with the score the plan
-- saw (the member is the job itself, so the score is the whole fence).
--
-- KEYS[1]  the delay zset          e.g. delay_queue
-- ARGV[1]  mode: "score" | "purge"
-- ARGV[2]  new score (score mode), epoch ms
-- ARGV[3]  N
-- ARGV[4+2(i-1)..5+2(i-1)] per member i: member (exact bytes), score at
--          plan time (integer string)
-- returns  { member1, code1, ... }: "moved", "gone", "changed"

local zset, mode, at = KEYS[1], ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
local out = {}
for i = 1, n do
  local member, want = ARGV[4 + 2 * (i - 1)], ARGV[5 + 2 * (i - 1)]
  local sc = redis.call('ZSCORE', zset, member)
  local code
  if not sc then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want) then
    code = 'changed'
  elseif mode == 'score' then
    redis.call('ZADD', zset, 'XX', tonumber(at), member)
    code = 'moved'
  elseif mode == 'purge' then
    redis.call('ZREM', zset, member)
    code = 'moved'
  else
    return redis.error_reply('BADMODE ' .. mode)
  end
  out[#out + 1] = member
  out[#out + 1] = code
end
return out
