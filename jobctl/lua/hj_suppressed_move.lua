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
-- ARGV[2]  N
-- ARGV[3+3(i-1)..5+3(i-1)] per job i: id, score at plan time (integer
--          string), fence (hex SHA1) at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (not suppressed, or no
--          hash), "changed" (score or fence differs), "wrongtype" (the job
--          key is not a hash), "error" (a write failed; nothing of the job
--          moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local suppressed, info, failed = KEYS[1], KEYS[2], KEYS[3]
local mode = ARGV[1]
local n = tonumber(ARGV[2])
if mode ~= 'unsuppress' and mode ~= 'purge' then
  return redis.error_reply('BADARG mode ' .. tostring(mode))
end
--@prelude
local bad_args = jc_job_args(2, 3, 3)
if bad_args then return redis.error_reply(bad_args) end
local bad = jc_check_types({ { suppressed, 'zset' }, { info, 'hash' } })
if not bad and mode == 'unsuppress' then bad = jc_type_error(failed, 'list') end
if bad then return redis.error_reply(bad) end


local fence_fields = { 'status', 'attempts', 'claim_token', 'claimed_at_ms', 'last_error_at_ms', 'payload' }

local out = {}
for i = 1, n do
  local base = 3 + 3 * (i - 1)
  local id, want_score, want_fence = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local key = KEYS[3 + i]
  local code
  local sc = redis.call('ZSCORE', suppressed, id)
  if not sc or redis.call('EXISTS', key) == 0 then
    code = 'gone'
  elseif jc_type_error(key, 'hash') then
    code = 'wrongtype'
  elseif tonumber(sc) ~= tonumber(want_score) then
    code = 'changed'
  else
    local vals = redis.call('HMGET', key, unpack(fence_fields))
    for j = 1, #vals do
      if not vals[j] then vals[j] = '' end
    end
    if redis.sha1hex(table.concat(vals, '\31')) ~= want_fence then
      code = 'changed'
    else
      local record = redis.call('HGET', info, id)
      local writes
      if mode == 'unsuppress' then
        writes = {
          { { 'LPUSH', failed, id }, { 'LPOP', failed } },
          { { 'ZREM', suppressed, id }, nil },
        }
      else
        writes = { { { 'ZREM', suppressed, id }, { 'ZADD', suppressed, sc, id } }, { { 'DEL', key }, nil } }
      end
      if jc_apply_writes(writes) then
        redis.pcall('HDEL', info, id)
        if mode == 'unsuppress' then
          local ttl = record and tonumber(string.match(record, '"ttl_ms":(%-?%d+)'))
          if ttl and ttl > 0 then redis.pcall('PEXPIRE', key, ttl) end
        end
        code = 'moved'
      else
        code = 'error'
      end
    end
  end
  jc_reply(out, id, code)
end
return out
