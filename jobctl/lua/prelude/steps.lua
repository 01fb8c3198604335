-- prelude/steps.lua: the per-job steps shared by jobctl's move scripts,
-- spliced by jobctl/scripts.py right after prelude/checks.lua (whose
-- functions it calls).  Local functions only: the fences read, the moves
-- write only what their caller passes them.
--
--   jc_fields(value)          the names in value (one ARGV, separated by
--                             single spaces: a fence field list from Python)
--                             as a list, or nil and "BADARG fence fields ..."
--   jc_score_code(sc, want)   fence on a zset score: nil when sc (a ZSCORE
--                             reply) is still want, the score the plan saw
--                             ("": it saw none, and there must still be
--                             none); else "gone" | "changed"
--   jc_payload_code(key, want, absent_ok)
--                             fence on a payload string: nil and its bytes
--                             when its SHA1 is want (absent_ok and want "":
--                             the plan saw no key, and it is still absent);
--                             else "wrongtype" | "gone" | "changed"
--   jc_hash_code(key, fields, want)
--                             fence on a job hash: nil when the SHA1 of its
--                             `fields` (a missing one as "", joined by \31)
--                             is want; else "gone" | "wrongtype" | "changed"
--   jc_move(writes, after)    jc_apply_writes(writes); when they all
--                             succeeded, each redis.pcall argument list of
--                             `after` (nil: none; their errors ignored) and
--                             "moved"; else "error"
--   jc_requeue_tail(st, list, member, writes, after)
--                             jc_find_tail(st, list, member), then
--                             jc_move(writes, after); a move shortens st.len;
--                             "moved" | "error" | the jc_find_tail code
--   jc_each(out, first, per, n, step)
--                             for each job i of n (arguments from ARGV[b],
--                             b = first + per * (i - 1)) appends ARGV[b] and
--                             step(i, b), its code, to out; returns out
--   jc_zset_moves(src, at, absent_ok, move)
--                             the jobs of a zset move: N = ARGV[at], then
--                             per job i: id, score the plan saw, payload SHA1
--                             the plan saw, its payload key KEYS[3 + i]; a job
--                             whose jc_score_code and jc_payload_code hold
--                             gets move(id, key), its code; returns the reply
--   jc_scored_requeue(processing, times, target, per, name, push, pop)
--                             a whole requeue fenced by a claim-score zset:
--                             ARGV[1] the search budget, ARGV[2] N, then per
--                             job `per` arguments: id, (per 3: the list
--                             member; per 2: the id is the member), the score
--                             in `times` the plan saw ("" none; BADARG
--                             "<name> of job i" when neither "" nor a number).
--                             A job still so scored and found from the tail
--                             of processing is pushed on target (push; undo
--                             pop), LREM'd and its score removed; returns the
--                             reply { id1, code1, ... } or an error reply

local function jc_fields(value)
  local fields = {}
  for name in string.gmatch(value or '', '[^ ]+') do fields[#fields + 1] = name end
  if #fields == 0 then return nil, 'BADARG fence fields ' .. tostring(value) end
  return fields
end

local function jc_score_code(sc, want)
  if want == '' then return sc and 'changed' or nil end
  if not sc then return 'gone' end
  if tonumber(sc) ~= tonumber(want) then return 'changed' end
  return nil
end

local function jc_payload_code(key, want, absent_ok)
  if jc_type_error(key, 'string') then return 'wrongtype' end
  local raw = redis.call('GET', key)
  if absent_ok and want == '' then
    if raw then return 'changed' end
  elseif not raw then
    return 'gone'
  elseif redis.sha1hex(raw) ~= want then
    return 'changed'
  end
  return nil, raw
end

local function jc_hash_code(key, fields, want)
  if redis.call('EXISTS', key) == 0 then return 'gone' end
  if jc_type_error(key, 'hash') then return 'wrongtype' end
  local vals = redis.call('HMGET', key, unpack(fields))
  for j = 1, #vals do
    if not vals[j] then vals[j] = '' end
  end
  if redis.sha1hex(table.concat(vals, '\31')) ~= want then return 'changed' end
  return nil
end

local function jc_move(writes, after)
  if not jc_apply_writes(writes) then return 'error' end
  for j = 1, #(after or {}) do redis.pcall(unpack(after[j])) end
  return 'moved'
end

local function jc_requeue_tail(st, list, member, writes, after)
  local pos, miss = jc_find_tail(st, list, member)
  if not pos then return miss end
  local code = jc_move(writes, after)
  if code == 'moved' then st.len = st.len - 1 end
  return code
end

local function jc_each(out, first, per, n, step)
  for i = 1, n do
    local b = first + per * (i - 1)
    jc_reply(out, ARGV[b], step(i, b))
  end
  return out
end

local function jc_zset_moves(src, at, absent_ok, move)
  return jc_each({}, at + 1, 3, tonumber(ARGV[at]), function(i, b)
    local id, key = ARGV[b], KEYS[3 + i]
    return jc_score_code(redis.call('ZSCORE', src, id), ARGV[b + 1]) or jc_payload_code(key, ARGV[b + 2], absent_ok)
      or move(id, key)
  end)
end

local function jc_scored_requeue(processing, times, target, per, name, push, pop)
  local budget, err = jc_budget(ARGV[1])
  local n, count_err = jc_job_count(2, per, nil)
  err = err or count_err or jc_job_numbers(2, per, per, name, true)
    or jc_check_types({ { processing, 'list' }, { times, 'zset' }, { target, 'list' } })
  if err then return redis.error_reply(err) end
  local st = { len = redis.call('LLEN', processing), left = budget, budget = budget }
  return jc_each({}, 3, per, n, function(i, b)
    local id, member, want = ARGV[b], ARGV[b + per - 2], ARGV[b + per - 1]
    local sc = redis.call('ZSCORE', times, id)
    return jc_score_code(sc, want) or jc_requeue_tail(st, processing, member,
      { { { push, target, member }, { pop, target } }, { { 'LREM', processing, -1, member }, nil } },
      sc and { { 'ZREM', times, id } })
  end)
end
