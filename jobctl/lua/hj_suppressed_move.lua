-- hj_suppressed_move.lua: move planned hash-job jobs out of jobctl's
-- suppressed zset (jobctl: unsuppress -> failed list, purge).  One atomic
-- step per job; O(N log M) for N jobs, whatever the lists' lengths.
--
-- A job moves only if it is still suppressed with the score the plan saw,
-- its hash exists and its fence (SHA1 of the fields workers change) equals
-- the plan's.
--   unsuppress  ZREM; LPUSH failed id (newest end); PEXPIRE the hash with
--               the remaining TTL recorded at suppress time (if any); HDEL info
--   purge       ZREM; DEL the job hash; HDEL info
--
-- Never a partial batch: every ARGV and the TYPE of every key are checked
-- before the first write (the zset, info hash or failed list of the wrong
-- type: a WRONGTYPE error reply, nothing written; a job key that is not a
-- hash skips only its job).  Each job's writes go through redis.pcall, the
-- failed list first, then the zset; the first failing write undoes the
-- job's earlier ones ("error") and the jobs after it are still handled.
--
-- KEYS[1]  suppressed zset      queue:<n>:jobctl:suppressed
-- KEYS[2]  suppressed info hash queue:<n>:jobctl:suppressed:info
-- KEYS[3]  failed list          queue:<n>:failed
-- KEYS[3+i] job hash of job i   queue:<n>:job:<id>
-- ARGV[1]  mode: "unsuppress" | "purge"
-- ARGV[2]  fence fields: the hash fields the fence covers, separated by
--          single spaces (jobctl.layouts.hash_job.layout.FENCE_FIELDS, in order)
-- ARGV[3]  N
-- ARGV[4+3(i-1)..6+3(i-1)] per job i: id, score at plan time (integer
--          string), fence (hex SHA1 of those fields' values, a missing one
--          as "", joined by \x1f) at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (not suppressed, or no
--          hash), "changed" (score or fence differs), "wrongtype" (the job
--          key is not a hash), "error" (a write failed; nothing of the job
--          moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local suppressed, info, failed = KEYS[1], KEYS[2], KEYS[3]
--@prelude
local mode, err = jc_one_of(ARGV[1], 'mode', { unsuppress = true, purge = true })
local fence_fields, fields_err = jc_fields(ARGV[2])
err = err or fields_err or jc_job_args(3, 3, 3) or jc_check_types({ { suppressed, 'zset' }, { info, 'hash' } })
  or (mode == 'unsuppress' and jc_type_error(failed, 'list'))
if err then return redis.error_reply(err) end

return jc_each({}, 4, 3, tonumber(ARGV[3]), function(i, b)
  local id, want_score, want_fence = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local key = KEYS[3 + i]
  local sc = redis.call('ZSCORE', suppressed, id)
  if not sc then return 'gone' end
  local code = jc_hash_code(key, fence_fields, want_fence) or jc_score_code(sc, want_score)
  if code then return code end
  if mode == 'purge' then
    return jc_move({ { { 'ZREM', suppressed, id }, { 'ZADD', suppressed, sc, id } }, { { 'DEL', key }, nil } },
                   { { 'HDEL', info, id } })
  end
  local record = redis.call('HGET', info, id)
  local ttl = record and tonumber(string.match(record, '"ttl_ms":(%-?%d+)'))
  local after = { { 'HDEL', info, id } }
  if ttl and ttl > 0 then after[2] = { 'PEXPIRE', key, ttl } end
  return jc_move({ { { 'LPUSH', failed, id }, { 'LPOP', failed } }, { { 'ZREM', suppressed, id }, nil } }, after)
end)
