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
--@prelude
local mode, err = jc_one_of(ARGV[1], 'mode', { lpush = true, purge = true })
err = err or jc_job_args(2, 3, 3) or jc_check_types({ { src, 'zset' }, { info, 'hash' } })
  or (mode == 'lpush' and jc_type_error(target, 'list'))
if err then return redis.error_reply(err) end

return jc_zset_moves(src, 2, false, function(id, key)
  if mode == 'purge' then -- out of the state first, so no state ever holds an id without its payload
    return jc_move({ { { 'ZREM', src, id }, nil } }, { { 'HDEL', info, id }, { 'DEL', key } })
  end
  return jc_move({ { { 'LPUSH', target, id }, { 'LPOP', target } }, { { 'ZREM', src, id }, nil } },
                 { { 'HDEL', info, id } })
end)
