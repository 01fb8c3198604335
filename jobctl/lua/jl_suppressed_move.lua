-- jl_suppressed_move.lua: move planned json-list jobs out of jobctl's
-- suppressed keys (jobctl: unsuppress -> dead list, purge; seed 002).  One
-- atomic step per job; O(N log M) for N jobs.
--
-- A job moves only if it is still suppressed with the score the plan saw
-- and its kept string's SHA1 still equals the plan's.
--   unsuppress  ZREM; HDEL raw, info; RPUSH dead <bytes> (the newest end)
--   purge       ZREM; HDEL raw, info; HDEL attempts <id>; HDEL errors <id>
--
-- KEYS[1]  suppressed zset        <p>:jobctl:suppressed
-- KEYS[2]  raw hash               <p>:jobctl:suppressed:raw
-- KEYS[3]  info hash              <p>:jobctl:suppressed:info
-- KEYS[4]  dead list              <p>:dead
-- KEYS[5]  attempts hash          <p>:attempts
-- KEYS[6]  errors hash            <p>:errors
-- ARGV[1]  mode: "unsuppress" | "purge"
-- ARGV[2]  N
-- ARGV[3+3(i-1)..5+3(i-1)] per job i: id, score at plan time (integer
--          string), SHA1 (hex) of the string at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (not suppressed, or no kept
--          string), "changed" (score or string differs)

local suppressed, raw_hash, info_hash, dead, attempts, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local mode = ARGV[1]
local n = tonumber(ARGV[2])
if mode ~= 'unsuppress' and mode ~= 'purge' then
  return redis.error_reply('BADMODE ' .. mode)
end

local out = {}
for i = 1, n do
  local base = 3 + 3 * (i - 1)
  local id, want_score, want = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local code
  local sc = redis.call('ZSCORE', suppressed, id)
  local raw = redis.call('HGET', raw_hash, id)
  if not sc or not raw then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want_score) or redis.sha1hex(raw) ~= want then
    code = 'changed'
  else
    redis.call('ZREM', suppressed, id)
    redis.call('HDEL', raw_hash, id)
    redis.call('HDEL', info_hash, id)
    if mode == 'unsuppress' then
      redis.call('RPUSH', dead, raw)
    else
      redis.call('HDEL', attempts, id)
      redis.call('HDEL', errors, id)
    end
    code = 'moved'
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
