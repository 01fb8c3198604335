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
--@prelude
local mode, err = jc_one_of(ARGV[1], 'mode', { unsuppress = true, purge = true })
err = err or jc_job_args(2, 3, nil)
  or jc_check_types({ { suppressed, 'zset' }, { raw_hash, 'hash' }, { info_hash, 'hash' } })
  or (mode == 'unsuppress' and jc_type_error(dead, 'list'))
  or (mode == 'purge' and jc_check_types({ { attempts, 'hash' }, { errors, 'hash' } }))
if err then return redis.error_reply(err) end

return jc_each({}, 3, 3, tonumber(ARGV[2]), function(i, b)
  local id, want_score, want_sha = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local sc = redis.call('ZSCORE', suppressed, id)
  local raw = redis.call('HGET', raw_hash, id)
  if not sc or not raw then return 'gone' end
  if tonumber(sc) ~= tonumber(want_score) or redis.sha1hex(raw) ~= want_sha then return 'changed' end
  local unscore = { { 'ZREM', suppressed, id }, { 'ZADD', suppressed, sc, id } }
  local drop_raw = { { 'HDEL', raw_hash, id }, nil }
  if mode == 'purge' then
    return jc_move({ unscore, drop_raw },
                   { { 'HDEL', info_hash, id }, { 'HDEL', attempts, id }, { 'HDEL', errors, id } })
  end
  return jc_move({ { { 'RPUSH', dead, raw }, { 'RPOP', dead } }, unscore, drop_raw }, { { 'HDEL', info_hash, id } })
end)
