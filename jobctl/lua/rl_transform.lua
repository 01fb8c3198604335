-- rl_transform.lua: jobctl migrate --transform: replace job envelopes in
-- place, fenced to the payload the plan saw.  One atomic step per job.
--
-- Each replaced envelope is kept in jobctl's hash KEYS[1], field = job id,
-- as a stack of layers, the newest first, so that transformations stack and
-- `jobctl migrate QUEUE --rollback OPERATION` undoes them newest first.  A
-- layer is plain bytes (the envelope is stored as it was, never re-encoded):
--
--   "T1\n" <operation> "\n" <at_ms> "\n" <after_sha1> "\n" <#before> "\n" <before>
--
-- (<after_sha1>: the SHA1 of the envelope the transformation wrote).  A
-- transform pushes a layer over what the field holds; a rollback of
-- OPERATION pops the top layer only when it is OPERATION's and the job still
-- holds what OPERATION wrote.  The payload key keeps its TTL.
--
-- KEYS[1]   envelopes-before hash   queue:{t}:jobctl:envelopes-before
-- KEYS[1+i] payload key of job i    job:{t}:<id>
-- ARGV[1]   mode: "apply" | "rollback"
-- ARGV[2]   operation id (no newline), ARGV[3] now (epoch ms), ARGV[4] N
-- ARGV[5..] apply: per job id, sha1 the plan saw, new envelope (not empty)
--           rollback: per job id, "", "" (the kept layer decides)
-- Every argument and the type of every key are checked before the first
-- write: BADARG ... / WRONGTYPE key <KEYS[1]> ... (an error reply, nothing
-- written); a payload key of another type fails that job alone.
-- returns   { id1, code1, ... }: "moved" (replaced / restored), "changed"
--           (another payload than planned, or than the transform wrote),
--           "gone" (no payload key; rollback: no kept layer of that
--           operation), "transformed since by <op>" (rollback: a newer
--           transform's layer is on top: roll that one back first),
--           "wrongtype" (the payload key holds another type), "error" (a
--           write failed; the job's writes were undone)

local before = KEYS[1]
local mode, op, now = ARGV[1], ARGV[2], ARGV[3]
--@prelude

local function check_args()
  local _, err = jc_one_of(mode, 'mode', { apply = true, rollback = true })
  if not err and (op == '' or string.find(op, '\n', 1, true)) then err = 'BADARG operation id ' .. op end
  local at, n
  if not err then at, err = jc_int(now, 'now', 0) end
  if not err and at >= 2 ^ 53 then err = 'BADARG now ' .. now end
  if not err then n, err = jc_job_count(4, 3, 1) end
  for i = 1, (err and 0 or n) do
    local b = 5 + 3 * (i - 1)
    local id, sha, new = ARGV[b], ARGV[b + 1], ARGV[b + 2]
    local ok
    if mode == 'apply' then
      ok = #sha == 40 and string.match(sha, '^%x+$') and new ~= ''
    else
      ok = sha == '' and new == ''
    end
    if id == '' or not ok then err = 'BADARG job ' .. i .. ' (id, sha1, envelope)' end
  end
  return err or jc_check_types({ { before, 'hash' } }), n, at
end

-- The layer on top of a kept stack `rec` (see the header), with the rest
-- of the stack below it; nil when `rec` is nil or does not start with one.
local function top_layer(rec)
  if not rec then return nil end
  local head, pos = {}, 1
  for k = 1, 5 do
    local nl = string.find(rec, '\n', pos, true)
    if not nl then return nil end
    head[k], pos = string.sub(rec, pos, nl - 1), nl + 1
  end
  local len = tonumber(head[5])
  if head[1] ~= 'T1' or not len or pos + len - 1 > #rec then return nil end
  return { op = head[2], after = head[4], before = string.sub(rec, pos, pos + len - 1),
           rest = string.sub(rec, pos + len) }
end

-- true when a layer below the top one of stack `top` is operation `name`'s.
local function below(top, name)
  local layer = top_layer(top.rest)
  while layer do
    if layer.op == name then return true end
    layer = top_layer(layer.rest)
  end
  return false
end

local function apply_one(id, key, sha, new, at)
  local code, raw = jc_payload_code(key, sha, false)
  if code then return code end
  local rec = redis.call('HGET', before, id) or ''
  local layer = 'T1\n' .. op .. '\n' .. string.format('%d', at) .. '\n' .. redis.sha1hex(new) .. '\n'
    .. #raw .. '\n' .. raw
  return jc_move({ { { 'SET', key, new, 'KEEPTTL' }, { 'SET', key, raw, 'KEEPTTL' } },
                   { { 'HSET', before, id, layer .. rec }, nil } })
end

local function rollback_one(id, key)
  if jc_type_error(key, 'string') then return 'wrongtype' end
  local top = top_layer(redis.call('HGET', before, id))
  if not top then return 'gone' end
  if top.op ~= op then return below(top, op) and ('transformed since by ' .. top.op) or 'gone' end
  local raw = redis.call('GET', key)
  if not raw then return 'gone' end
  if redis.sha1hex(raw) ~= top.after then return 'changed' end
  local kept = top.rest == '' and { 'HDEL', before, id } or { 'HSET', before, id, top.rest }
  return jc_move({ { { 'SET', key, top.before, 'KEEPTTL' }, { 'SET', key, raw, 'KEEPTTL' } }, { kept, nil } })
end

local err, n, at = check_args()
if err then return redis.error_reply(err) end
return jc_each({}, 5, 3, n, function(i, b)
  if mode == 'apply' then return apply_one(ARGV[b], KEYS[1 + i], ARGV[b + 1], ARGV[b + 2], at) end
  return rollback_one(ARGV[b], KEYS[1 + i])
end)
