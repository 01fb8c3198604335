-- sg_zset_move.lua: move planned jobs out of a stream-group zset state
-- (jobctl promote: scheduled -> stream, as the scheduler of seed 000 s.13
-- does; unsuppress: suppressed -> dead; purge suppressed).  One atomic step
-- per job; the call touches only the N jobs it is given.
--
-- A job moves only if it is still in the source zset with the score the
-- plan saw and its payload's SHA1 still equals the plan's (SHA1 "": the
-- plan saw no payload key, the suppressed dead-stream entry carried the job;
-- a payload key must still be absent).
--
-- Never a partial batch: every ARGV and the TYPE of every key are checked
-- before the first write.  A source, target or info key of the wrong type
-- stops the call with a WRONGTYPE error reply and nothing written; a
-- payload key of the wrong type only skips its own job ("wrongtype").
-- Each job's writes go through redis.pcall, target first, then the source:
-- a failing write ("error") leaves that job where it was (a target write
-- already done is undone), and the jobs after it are still handled.
--
-- KEYS[1]  source zset            queue:{t}:scheduled | queue:{t}:jobctl:suppressed
-- KEYS[2]  target: stream:{t}:jobs (promote) | the dead list or dead stream
--          (unsuppress) | the source again (purge)
-- KEYS[3]  jobctl suppressed-info hash  queue:{t}:jobctl:suppressed:info
-- KEYS[3+i] payload key of job i  job:{t}:<id>
-- ARGV[1]  mode: "promote" | "unsuppress" | "purge"
-- ARGV[2]  dead kind: "list" | "stream" (unsuppress)
-- ARGV[3]  N
-- ARGV[4+3(i-1)..6+3(i-1)] per job i: id, score at plan time (integer
--          string), payload SHA1 (hex) at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (not in the source or no
--          payload), "changed" (score or payload differs from the plan),
--          "wrongtype" (the payload key holds another type), "error" (a
--          write failed; nothing of the job moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local src, target, info = KEYS[1], KEYS[2], KEYS[3]
--@prelude
local mode, err = jc_one_of(ARGV[1], 'mode', { promote = true, unsuppress = true, purge = true })
local dead_kind, kind_err = jc_one_of(ARGV[2], 'dead kind', { list = true, stream = true })
local target_type = ({ promote = 'stream', unsuppress = dead_kind })[mode]
err = err or kind_err or jc_job_args(3, 3, 3) or jc_check_types({ { src, 'zset' }, { info, 'hash' } })
  or (target_type and jc_type_error(target, target_type))
if err then return redis.error_reply(err) end

local function xdel(r) return { 'XDEL', target, r } end

return jc_zset_moves(src, 3, true, function(id, key)
  if mode == 'purge' then
    return jc_move({ { { 'ZREM', src, id }, nil } }, { { 'HDEL', info, id }, { 'DEL', key } })
  end
  -- write the target first; undo it if the source cannot be updated
  local first
  if mode == 'promote' then
    first = { { 'XADD', target, '*', 'jobId', id }, xdel }
  elseif dead_kind == 'stream' then
    local fields = { 'jobId', id }
    local saved = redis.call('HGET', info, id)
    if saved then
      local ok, doc = pcall(cjson.decode, saved)
      if ok and type(doc) == 'table' and type(doc['dead_fields']) == 'table' and #doc['dead_fields'] >= 2 then
        fields = doc['dead_fields']
      end
    end
    first = { { 'XADD', target, '*', unpack(fields) }, xdel }
  else
    first = { { 'LPUSH', target, id }, { 'LPOP', target } }
  end
  return jc_move({ first, { { 'ZREM', src, id }, nil } }, mode == 'unsuppress' and { { 'HDEL', info, id } })
end)
