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
--          payload), "changed" (score or payload differs from the plan)

local src, target, info = KEYS[1], KEYS[2], KEYS[3]
local mode, dead_kind = ARGV[1], ARGV[2]
if mode ~= 'promote' and mode ~= 'unsuppress' and mode ~= 'purge' then
  return redis.error_reply('BADMODE ' .. tostring(mode))  -- before any write
end
local n = tonumber(ARGV[3])
local out = {}
for i = 1, n do
  local base = 4 + 3 * (i - 1)
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
    if want_sha == '' and raw then
      code = 'changed'
    elseif want_sha ~= '' and not raw then
      code = 'gone'
    elseif want_sha ~= '' and redis.sha1hex(raw) ~= want_sha then
      code = 'changed'
    else
      redis.call('ZREM', src, id)
      if mode == 'promote' then
        redis.call('XADD', target, '*', 'jobId', id)
      elseif mode == 'unsuppress' then
        local fields = { 'jobId', id }
        local saved = redis.call('HGET', info, id)
        if saved then
          local ok, doc = pcall(cjson.decode, saved)
          if ok and type(doc) == 'table' and type(doc['dead_fields']) == 'table' then
            fields = doc['dead_fields']
          end
        end
        if dead_kind == 'stream' then
          redis.call('XADD', target, '*', unpack(fields))
        else
          redis.call('LPUSH', target, id)
        end
        redis.call('HDEL', info, id)
      elseif mode == 'purge' then
        redis.call('HDEL', info, id)
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
