-- rl_transform.lua: jobctl migrate --transform: replace job envelopes in
-- place, fenced to the payload the plan saw.  One atomic step per job.
--
-- The replaced envelope is kept in jobctl's hash KEYS[1] (id -> JSON
-- {operation, at_ms, before, after_sha1}) so that `jobctl migrate QUEUE
-- --rollback OPERATION` can put it back while the job still holds the
-- transformed envelope.  The payload key keeps its TTL.
--
-- KEYS[1]   envelopes-before hash   queue:{t}:jobctl:envelopes-before
-- KEYS[1+i] payload key of job i    job:{t}:<id>
-- ARGV[1]   mode: "apply" | "rollback"
-- ARGV[2]   operation id, ARGV[3] now (epoch ms), ARGV[4] N
-- ARGV[5..] apply: per job id, sha1 the plan saw, new envelope
--           rollback: per job id, "", "" (the kept record decides)
-- returns   { id1, code1, ... }: "moved" (replaced), "changed" (another
--           payload than planned, or than the transform wrote), "gone"
--           (no payload key; rollback: no kept record of that operation)

local before = KEYS[1]
local mode, op, now = ARGV[1], ARGV[2], ARGV[3]
--@prelude
return jc_each({}, 5, 3, tonumber(ARGV[4]), function(i, b)
  local id, sha, new = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local key = KEYS[1 + i]
  local raw = redis.call('GET', key)
  if mode == 'apply' then
    if not raw then return 'gone' end
    if redis.sha1hex(raw) ~= sha then return 'changed' end
    redis.call('SET', key, new, 'KEEPTTL')
    redis.call('HSET', before, id, cjson.encode({operation = op, at_ms = tonumber(now), before = raw,
                                                after_sha1 = redis.sha1hex(new)}))
    return 'moved'
  end
  local rec = redis.call('HGET', before, id)
  local doc = nil
  if rec then
    local ok, d = pcall(cjson.decode, rec)
    if ok and type(d) == 'table' and d['operation'] == op then doc = d end
  end
  if not doc or not raw then return 'gone' end
  if redis.sha1hex(raw) ~= doc['after_sha1'] then return 'changed' end
  redis.call('SET', key, doc['before'], 'KEEPTTL')
  redis.call('HDEL', before, id)
  return 'moved'
end)
