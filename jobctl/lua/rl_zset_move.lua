-- rl_zset_move.lua: move planned jobs out of a reliable-list zset state
-- (jobctl: promote scheduled -> ready, unsuppress suppressed -> dead,
-- purge suppressed).  One atomic step per job; the call touches only the
-- N jobs it is given, O(N log M).
--
-- A job moves only if it is still in the source zset with the score the
-- plan saw and its payload's SHA1 still equals the plan's.
--
-- KEYS[1]  source zset                  queue:{t}:scheduled | queue:{t}:jobctl:suppressed
-- KEYS[2]  target: ready list | dead list | (purge) the source again
-- KEYS[3]  jobctl suppressed-info hash  queue:{t}:jobctl:suppressed:info
-- KEYS[3+i] payload key of job i        job:{t}:<id>
-- ARGV[1]  mode: "lpush" (to a list) | "purge"
-- ARGV[2]  N
-- ARGV[3+3(i-1)..5+3(i-1)] per job i: id, score at plan time (integer
--          string), payload SHA1 (hex) at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (not in the source or no
--          payload), "changed" (score or payload differs from the plan)

local src, target, info = KEYS[1], KEYS[2], KEYS[3]
local mode = ARGV[1]
if mode ~= 'lpush' and mode ~= 'purge' then
  return redis.error_reply('BADMODE ' .. tostring(mode))  -- before any write
end
local n = tonumber(ARGV[2])
local out = {}
for i = 1, n do
  local base = 3 + 3 * (i - 1)
  local id, want_score, want_sha = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local key = KEYS[3 + i]
  local code
  local sc = redis.call('ZSCORE', src, id)
  if not sc then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want_score) then
    code = 'changed'
  else
    local raw = redis.call('GET', key)
    if not raw then
      code = 'gone'
    elseif redis.sha1hex(raw) ~= want_sha then
      code = 'changed'
    else
      redis.call('ZREM', src, id)
      redis.call('HDEL', info, id)
      if mode == 'lpush' then
        redis.call('LPUSH', target, id)
      elseif mode == 'purge' then
        redis.call('DEL', key)
      else
        return redis.error_reply('BADMODE ' .. mode)
      end
      code = 'moved'
    end
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
