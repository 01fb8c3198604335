-- jl_suppressed_move.lua: move planned json-list jobs out of jobctl's
-- suppressed keys (jobctl: unsuppress -> dead list, purge; seed 002).  One
-- atomic step per job; O(N log M) for N jobs.
--
-- A job moves only if it is still suppressed with the score the plan saw
-- and its kept string's SHA1 still equals the plan's.
--   unsuppress  ZREM; HDEL raw, info; RPUSH dead <bytes> (the newest end)
--   purge       ZREM; HDEL raw, info; HDEL attempts <id>; HDEL errors <id>
--
-- Never a partial batch: every ARGV and the TYPE of every key are checked
-- before the first write (a key of the wrong type: a WRONGTYPE error reply,
-- nothing written).  Each job's writes go through redis.pcall, the dead
-- list first, then jobctl's keys; the first failing write undoes the job's
-- earlier ones ("error") and the jobs after it are still handled.
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
--          string), "changed" (score or string differs), "error" (a write
--          failed; nothing of the job moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local suppressed, raw_hash, info_hash, dead, attempts, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local mode = ARGV[1]
local n = tonumber(ARGV[2])
if mode ~= 'unsuppress' and mode ~= 'purge' then
  return redis.error_reply('BADARG mode ' .. tostring(mode))
end
--@prelude
local bad_args = jc_job_args(2, 3, nil)
if bad_args then return redis.error_reply(bad_args) end
local bad = jc_check_types({ { suppressed, 'zset' }, { raw_hash, 'hash' }, { info_hash, 'hash' } })
if not bad and mode == 'unsuppress' then bad = jc_type_error(dead, 'list') end
if not bad and mode == 'purge' then bad = jc_check_types({ { attempts, 'hash' }, { errors, 'hash' } }) end
if bad then return redis.error_reply(bad) end


local out = {}
for i = 1, n do
  local base = 3 + 3 * (i - 1)
  local id, want_score, want_sha = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local code
  local sc = redis.call('ZSCORE', suppressed, id)
  local raw = redis.call('HGET', raw_hash, id)
  if not sc or not raw then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want_score) or redis.sha1hex(raw) ~= want_sha then
    code = 'changed'
  else
    local writes
    if mode == 'unsuppress' then
      writes = {
        { { 'RPUSH', dead, raw }, { 'RPOP', dead } },
        { { 'ZREM', suppressed, id }, { 'ZADD', suppressed, sc, id } },
        { { 'HDEL', raw_hash, id }, nil },
      }
    else
      writes = {
        { { 'ZREM', suppressed, id }, { 'ZADD', suppressed, sc, id } },
        { { 'HDEL', raw_hash, id }, nil },
      }
    end
    if jc_apply_writes(writes) then
      redis.pcall('HDEL', info_hash, id)
      if mode == 'purge' then
        redis.pcall('HDEL', attempts, id)
        redis.pcall('HDEL', errors, id)
      end
      code = 'moved'
    else
      code = 'error'
    end
  end
  jc_reply(out, id, code)
end
return out
