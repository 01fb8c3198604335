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
local mode, dead_kind = ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
if mode ~= 'promote' and mode ~= 'unsuppress' and mode ~= 'purge' then
  return redis.error_reply('BADARG mode ' .. tostring(mode))
end
if dead_kind ~= 'list' and dead_kind ~= 'stream' then
  return redis.error_reply('BADARG dead kind ' .. tostring(dead_kind))
end
--@prelude
local bad_args = jc_job_args(3, 3, 3)
if bad_args then return redis.error_reply(bad_args) end
local bad = jc_check_types({ { src, 'zset' }, { info, 'hash' } })
if not bad and mode == 'promote' then
  bad = jc_type_error(target, 'stream')
elseif not bad and mode == 'unsuppress' then
  bad = jc_type_error(target, dead_kind == 'stream' and 'stream' or 'list')
end
if bad then return redis.error_reply(bad) end


local out = {}
for i = 1, n do
  local base = 4 + 3 * (i - 1)
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
    if want_sha == '' and raw then
      code = 'changed'
    elseif want_sha ~= '' and not raw then
      code = 'gone'
    elseif want_sha ~= '' and redis.sha1hex(raw) ~= want_sha then
      code = 'changed'
    elseif mode == 'purge' then
      if jc_failed(redis.pcall('ZREM', src, id)) then
        code = 'error'
      else
        redis.pcall('HDEL', info, id)
        redis.pcall('DEL', key)
        code = 'moved'
      end
    else
      -- write the target first; undo it if the source cannot be updated
      local r, undo
      if mode == 'promote' then
        r = redis.pcall('XADD', target, '*', 'jobId', id)
        undo = function() redis.pcall('XDEL', target, r) end
      else
        local fields = { 'jobId', id }
        local saved = redis.call('HGET', info, id)
        if saved then
          local ok, doc = pcall(cjson.decode, saved)
          if ok and type(doc) == 'table' and type(doc['dead_fields']) == 'table' and #doc['dead_fields'] >= 2 then
            fields = doc['dead_fields']
          end
        end
        if dead_kind == 'stream' then
          r = redis.pcall('XADD', target, '*', unpack(fields))
          undo = function() redis.pcall('XDEL', target, r) end
        else
          r = redis.pcall('LPUSH', target, id)
          undo = function() redis.pcall('LPOP', target) end
        end
      end
      if jc_failed(r) then
        code = 'error'
      elseif jc_failed(redis.pcall('ZREM', src, id)) then
        undo()
        code = 'error'
      else
        if mode == 'unsuppress' then redis.pcall('HDEL', info, id) end
        code = 'moved'
      end
    end
  end
  jc_reply(out, id, code)
end
return out
