-- rl_zset_move.lua: move planned jobs out of a reliable-list zset state
-- (jobctl: promote scheduled -> ready, unsuppress suppressed -> dead,
-- purge suppressed).  One atomic step per job; the call touches only the
-- N jobs it is given, O(N log M).
--
-- A job moves only if it is still in the source zset with the score the
-- plan saw and its payload's SHA1 still equals the plan's.
--
-- Never a partial batch: every ARGV and the TYPE of every key are checked
-- before the first write.  A source, target or info key of the wrong type
-- stops the call with a WRONGTYPE error reply and nothing written; a
-- payload key of the wrong type only skips its own job ("wrongtype").
-- Each job's writes go through redis.pcall, target first, then the source:
-- a failing write ("error") leaves that job where it was (a target write
-- already done is undone), and the jobs after it are still handled.
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
--          payload), "changed" (score or payload differs from the plan),
--          "wrongtype" (the payload key holds another type), "error" (a
--          write failed; nothing of the job moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local src, target, info = KEYS[1], KEYS[2], KEYS[3]
local mode = ARGV[1]
local n = tonumber(ARGV[2])
if mode ~= 'lpush' and mode ~= 'purge' then
  return redis.error_reply('BADARG mode ' .. tostring(mode))
end
--@prelude
local bad_args = jc_job_args(2, 3, 3)
if bad_args then return redis.error_reply(bad_args) end
local bad = jc_check_types({ { src, 'zset' }, { info, 'hash' } })
if not bad and mode == 'lpush' then bad = jc_type_error(target, 'list') end
if bad then return redis.error_reply(bad) end


local out = {}
for i = 1, n do
  local base = 3 + 3 * (i - 1)
  local id, want_score, want_sha = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local key = KEYS[3 + i]
  local code
  local sc = redis.call('ZSCORE', src, id)
  local wrong = jc_type_error(key, 'string')
  if not sc then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want_score) then
    code = 'changed'
  elseif wrong then
    code = 'wrongtype'
  else
    local raw = redis.call('GET', key)
    if not raw then
      code = 'gone'
    elseif redis.sha1hex(raw) ~= want_sha then
      code = 'changed'
    elseif mode == 'lpush' then
      if jc_failed(redis.pcall('LPUSH', target, id)) then
        code = 'error'
      elseif jc_failed(redis.pcall('ZREM', src, id)) then
        redis.pcall('LPOP', target)  -- undo: the id just pushed at the head
        code = 'error'
      else
        redis.pcall('HDEL', info, id)
        code = 'moved'
      end
    else -- purge: out of the state first, so no state ever holds an id without its payload
      if jc_failed(redis.pcall('ZREM', src, id)) then
        code = 'error'
      else
        redis.pcall('HDEL', info, id)
        redis.pcall('DEL', key)
        code = 'moved'
      end
    end
  end
  jc_reply(out, id, code)
end
return out
