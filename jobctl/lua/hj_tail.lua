-- hj_tail.lua: one window call of a tail walk over a hash-job failed list
-- (jobctl.ops.walk.tail: an unfiltered plan, a jobctl.ops.plan.TailRange).
-- Every tail position of the walk is planned: entry i is expected at tail
-- position ARGV[14] + i - 1 (read by the client just before), its job hash
-- KEYS[10+i] = ARGV[15] .. its id.  The walk pops the tail (the right end)
-- up to position ARGV[6], in runs of at most JC_WIN_BULK (one RPOP with a
-- count).  As the script pops each job it reads the hash's status and
-- payload (redrive: one HMGET; else HGET status, HEXISTS payload) and
-- sets aside, as the plan does, an id whose hash has no payload
-- ("dangling": the workers' TTL ran out) and, for a redrive, a payload
-- cjson refuses ("malformed"; cjson reads every document orjson reads, so
-- none the plan planned; the few orjson refuses and cjson reads, NaN or
-- bytes not UTF-8, move); then the fence: the
-- status is still "failed" (what the plan counted), else "changed".  Those,
-- and a job key of the wrong type ("wrongtype"), go to jobctl's hold list
-- in order (list_restore.lua puts them back in place).  The writes per job
-- are hj_window.lua's:
--   ready       HSET status pending, claim_token "", claimed_at_ms 0,
--               redriven_at_ms now, redrive_operation op, redrive_count +1;
--               PERSIST; the run's fenced ids reach the pending head first,
--               in one LPUSH (the order of one LMOVE each), then each hash
--               is written
--   suppressed  ZADD suppressed now id; HSET info id (ARGV[10] + "ttl_ms");
--               PERSIST (a step of its own under pcall, undone on an error)
--   purge       the run's job hashes in one UNLINK, their info in one HDEL
-- Each job's writes run under redis.pcall: a refused write leaves that job
-- as it was with code "error:<msg>", held (a redrive: a refused LPUSH has
-- written nothing and holds the run; a refused PERSIST or HSET takes the
-- id off the pending list again, and a PERSIST before a refused HSET is
-- taken back; HSET writes all its fields or none).
-- Walk hash, lease and the checks of every argument and fixed key's type
-- before the first write are those of hj_window.lua (prelude/window.lua).
-- KEYS[1..10] as hj_window.lua; KEYS[10+i] job hash of entry i
-- ARGV[1]  kind: "hj"; ARGV[2] mode: "ready" | "suppressed" | "purge"
-- ARGV[3..12] as hj_window.lua (ARGV[9] reset unused: a plan that resets
--          attempts walks per job; ARGV[11] slack unused; ARGV[12] N);
--          ARGV[13] W: "0"
-- ARGV[14] the tail position of entry 1; ARGV[15] the job-hash key prefix
-- returns  { popped_by_this_call, popped_total, ended, moved, held,
--          i1, code1, ..., iM, codeM }: one (entry index, code) pair per
--          entry popped and not moved: "not at its planned position",
--          "dangling", "malformed" (set aside: the caller counts neither),
--          "changed", "wrongtype", "error:<msg>"
-- Cost: per job one HMGET (status, payload, redrive_count), a cjson decode
--          of the payload, PTTL, HSET (redrive); HGET, HEXISTS (purge;
--          suppress: + PTTL, ZADD, HSET); per run one RPOP and one
--          LPUSH/UNLINK; at most ARGV[12] entries a call.

--@prelude
--@prelude window

local dead, hold, walk, lease, target = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local redriven, info_hash = KEYS[6], KEYS[7]

local a, err = jc_win_args('hj', { ready = true, suppressed = true, purge = true }, { ['0'] = true })
if not a then return redis.error_reply(err) end
local mode, n = a.mode, a.n
local w, first = jc_win_tail_open(a, 15, 10 + n)
if not w then return redis.error_reply(first) end
local prefix = ARGV[15]

local popped, limit, met = w.popped, w.limit, w.met
local this, ended, moved, held = 0, 0, 0, 0
local now, op, score, info, try = a.now, a.op, a.score, a.info, jc_win_try
local plen = #prefix

-- the redrive's redriven_at_ms: the string Lua would send, made once
local now_s = tostring(now)

-- the codes of one job hash, in the plan's order: nil (and, redrive, the
-- old redrive_count) when it moves, else "wrongtype", "dangling" (no
-- payload), "malformed" (redrive), "changed"
local function fence(key)
  if mode ~= 'ready' then  -- the payload's presence only (HEXISTS: its bytes not copied)
    local status = redis.pcall('HGET', key, 'status')
    if type(status) == 'table' and status['err'] then return 'wrongtype' end
    if redis.call('HEXISTS', key, 'payload') == 0 then return 'dangling' end
    if status ~= 'failed' then return 'changed' end
    return nil
  end
  local vals = redis.pcall('HMGET', key, 'status', 'payload', 'redrive_count')
  if vals['err'] then return 'wrongtype' end
  if not vals[2] then return 'dangling' end
  if not pcall(cjson.decode, vals[2]) then return 'malformed' end
  if vals[1] ~= 'failed' then return 'changed' end
  return nil, vals[3] or false
end

-- ready: a fenced job hash rewritten once its id is on the pending list;
-- nil or an error code (a refused HSET writes nothing: only the PERSIST
-- before it is taken back)
local function redrive(key, count)
  local ttl = redis.call('PTTL', key)
  local r
  if ttl > 0 then
    r = redis.pcall('PERSIST', key)
    if type(r) == 'table' and r['err'] then return 'error:' .. tostring(r['err']) end
  end
  r = redis.pcall('HSET', key, 'status', 'pending', 'claim_token', '', 'claimed_at_ms', 0, 'redriven_at_ms', now_s,
                  'redrive_operation', op, 'redrive_count', (tonumber(count) or 0) + 1)
  if type(r) == 'table' and r['err'] then
    if ttl > 0 then redis.pcall('PEXPIRE', key, ttl) end
    return 'error:' .. tostring(r['err'])
  end
  return nil
end

-- suppressed: one step under pcall (jc_win_run_step undoes it on an error)
local function suppress(e, _, undo)
  local ttl = redis.call('PTTL', e.key)
  try('ZADD', target, score, e.id); undo[1] = { 'ZREM', target, e.id }
  local rec = info ~= '' and (string.sub(info, 1, -2) .. ',"ttl_ms":' .. ttl .. '}') or ('{"ttl_ms":' .. ttl .. '}')
  try('HSET', info_hash, e.id, rec); undo[2] = { 'HDEL', info_hash, e.id }
  if ttl > 0 then try('PERSIST', e.key); undo[3] = { 'PEXPIRE', e.key, ttl } end
  return 'moved'
end

-- one popped element (entry i, els[j]): nil when it moves, else its code;
-- `run` collects what the run's bulk commands need
local function take(i, j, el, run)
  local key = KEYS[10 + i]
  if string.sub(key, plen + 1) ~= el then return 'not at its planned position' end
  local code, count = fence(key)
  if code then return code end
  if mode == 'suppressed' then
    code = jc_win_run_step(suppress, { id = el, key = key }, el)
    if code == 'moved' then return nil end
    return code
  end
  run.keys[#run.keys + 1] = key; run.ids[#run.ids + 1] = el; run.js[#run.js + 1] = j
  if mode == 'ready' then run.counts[#run.counts + 1] = count; run.seen[el] = true end
  return nil
end

local function new_run() return { keys = {}, ids = {}, js = {}, counts = {}, seen = {} } end

-- the run's fenced ids to their place in one command, then (redrive) each
-- job hash rewritten; codes[j] set for els[j] when refused.  A refused
-- LPUSH has written nothing (the run's jobs held with its code); a job
-- whose hash write is refused is taken off the pending list again (LREM
-- from the head: the run's ids are distinct, its push the nearest)
local function land(run, codes)
  if #run.ids == 0 then return end
  if mode == 'purge' then
    redis.pcall('UNLINK', unpack(run.keys))
    redis.pcall('HDEL', info_hash, unpack(run.ids))
    return
  end
  local r = redis.pcall('LPUSH', target, unpack(run.ids))
  if type(r) == 'table' and r['err'] then
    for m = 1, #run.js do codes[run.js[m]] = 'error:' .. tostring(r['err']) end
    return
  end
  for m = 1, #run.ids do
    local code = redrive(run.keys[m], run.counts[m])
    if code then
      redis.pcall('LREM', target, 1, run.ids[m])
      codes[run.js[m]] = code
    end
  end
end

-- one run of entries from entry i: popped in one RPOP, each element fenced
-- or held, the fenced ones landed in one command and the held ones pushed
-- to the hold in one LPUSH (each list in the order of one LMOVE each).  A
-- redrive lands the run so far before an id it already fenced, so the
-- second fence sees the first's writes (as one job at a time would)
local function run_from(i, k)
  local els = redis.call('RPOP', dead, k)
  if not els then return 0 end
  local run, codes, hd = new_run(), {}, {}
  for j = 1, #els do
    if run.seen[els[j]] then land(run, codes); run = new_run() end
    codes[j] = take(i + j - 1, j, els[j], run)
  end
  land(run, codes)
  for j = 1, #els do
    if codes[j] then
      hd[#hd + 1] = els[j]; met[#met + 1] = i + j - 1; met[#met + 1] = codes[j]
    end
  end
  if #hd > 0 then redis.call('LPUSH', hold, unpack(hd)) end
  moved = moved + #els - #hd
  held = held + #hd
  return #els
end

while popped < limit do
  local i, k = jc_win_tail_run(w, popped, first, n)
  local got
  if i < 1 or i > n then  -- before or past this call's entries: held uncoded
    got = redis.call('LMOVE', dead, hold, 'RIGHT', 'LEFT') and 1 or 0
    held = held + got
  else
    got = run_from(i, k)
    if got < k then ended = 1 end
  end
  if got == 0 then ended = 1 end
  popped = popped + got
  this = this + got
  if ended == 1 then break end
end

w.popped, w.this, w.ended, w.moved, w.held = popped, this, ended, moved, held
jc_win_end(w, a, walk, lease, nil, false)
return jc_win_reply(w)
