-- hj_window.lua: one window call of a per-job walk over a hash-job failed
-- list (jobctl.ops.walk.per_job: redrive, suppress, purge).  The elements
-- are ids, each job's state in its job hash; the tail is the right end
-- (workers push at the left).  The walk pops the tail one element at a time
-- up to tail position ARGV[6]; a planned job (its id met at a tail position
-- p' with p - slack <= p' <= p, p the position the plan saw it at, and the
-- SHA1 of its job hash's fence fields, joined by \31 with a missing one as
-- "", equal to the plan's when the plan gives one) moves in one step under
-- redis.pcall (its writes undone if one fails, code "error:<msg>"); any
-- other element goes to jobctl's hold list in order (list_restore.lua puts
-- it back).  The steps (the writes of the hash-job reference clients):
--   ready       HSET status pending, claim_token "", claimed_at_ms 0,
--               redriven_at_ms now, redrive_operation op, redrive_count +1
--               (attempts 0 with ARGV[9]); PERSIST; LMOVE failed -> pending head
--   suppressed  ZADD suppressed now id; HSET info id (ARGV[10] + "ttl_ms":
--               the hash's remaining TTL, -1 for none); PERSIST; RPOP
--   purge       RPOP, then DEL the hash, HDEL info id
-- Walk hash, lease and the checks of every argument and fixed key's type
-- before the first write are those of rl_window.lua (prelude/window.lua); a
-- job hash of the wrong type only holds its job ("wrongtype").
-- KEYS[1]  failed list                  queue:<n>:failed
-- KEYS[2]  hold list (jobctl); KEYS[3] walk hash (jobctl); KEYS[4] lease string (jobctl)
-- KEYS[5]  target: queue:<n>:pending | queue:<n>:jobctl:suppressed | (purge) KEYS[1]
-- KEYS[6]  KEYS[7] (unused: a redrive is recorded on the job hash)
-- KEYS[7]  suppressed-info hash (jobctl)
-- KEYS[8..10] KEYS[1]
-- KEYS[10+i] job hash of entry i (queue:<n>:job:<id>)
-- ARGV[1]  kind: "hj"
-- ARGV[2]  mode: "ready" | "suppressed" | "purge"
-- ARGV[3]  operation id (owner of the walk)
-- ARGV[4]  lease value (owner of the lease) and ARGV[5] lease TTL (ms)
-- ARGV[6]  upto: pop while the walk has popped fewer tail positions than this
-- ARGV[7]  now (epoch ms); ARGV[8] score for the suppressed zset (epoch ms)
-- ARGV[9]  "1": a redrive resets attempts; ARGV[10] suppress: info JSON
-- ARGV[11] slack (positions a planned job may have shifted towards the tail)
-- ARGV[12] N, the number of planned entries passed; ARGV[13] W: "4"
-- ARGV[14+4(i-1)..] per entry i: id, tail position at plan time, "" (the
--          id), the fence (SHA1 hex, "" for none)
-- ARGV[14+4N..] the fence field list (jobctl.layouts.hash_job.layout.FENCE_FIELDS)
-- returns  { popped_by_this_call, popped_total, ended, moved, held,
--          i1, code1, ..., iM, codeM }: ended 1 when the dead list ran out;
--          one (entry index, code) pair per planned entry met: "moved",
--          "gone" (job hash missing), "changed" (the fence differs),
--          "wrongtype" (job hash of the wrong type), "error:<msg>"

--@prelude
--@prelude window

local dead, hold, walk, lease, target = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local redriven, info_hash = KEYS[6], KEYS[7]

local a, err = jc_win_args('hj', { ready = true, suppressed = true, purge = true }, { ['4'] = true })
if not a then return redis.error_reply(err) end
local fence_fields = {}
for j = 14 + 4 * a.n, #ARGV do fence_fields[#fence_fields + 1] = ARGV[j] end
if #fence_fields == 0 then return redis.error_reply('BADARG hj needs the fence field list') end
err = jc_win_counts(#ARGV, 10 + a.n)
  or jc_check_types({ { dead, 'list' }, { hold, 'list' }, { walk, 'hash' }, { lease, 'string' },
                      { target, jc_win_target(a.mode) }, { redriven, 'hash' }, { info_hash, 'hash' } })
if err then return redis.error_reply(err) end
local w, met_before, planned
w, err, met_before, planned = jc_win_open(a, walk, lease, true)
if not w then return redis.error_reply(err) end

local mode, now, op, score, info, reset, try = a.mode, a.now, a.op, a.score, a.info, a.reset, jc_win_try

-- one HMGET a job reads the fence fields and, for a redrive, the fields it
-- rewrites (their old values undo it): the name list is built once per call
local names, at = {}, {}
local REDRIVE = { 'status', 'claim_token', 'claimed_at_ms', 'redriven_at_ms', 'redrive_operation', 'redrive_count',
                  'attempts' }
for j = 1, #fence_fields do names[j] = fence_fields[j]; at[fence_fields[j]] = at[fence_fields[j]] or j end
if mode == 'ready' then
  for j = 1, #REDRIVE do
    local f = REDRIVE[j]
    if not at[f] then names[#names + 1] = f; at[f] = #names end
  end
end
local nfence = #fence_fields

-- a redrive's writes to the job hash taken back (old values in vals; ttl > 0: its TTL again)
local function undo_redrive(key, vals, ttl)
  if ttl > 0 then redis.pcall('PEXPIRE', key, ttl) end
  local back, gone = { 'HSET', key }, { 'HDEL', key }
  for j = 1, #REDRIVE do
    local f = REDRIVE[j]
    local old = vals[at[f]]
    if old then back[#back + 1] = f; back[#back + 1] = old else gone[#gone + 1] = f end
  end
  if #back > 2 then redis.pcall(unpack(back)) end
  if #gone > 2 then redis.pcall(unpack(gone)) end
end

local function refused(r)
  return type(r) == 'table' and r['err']
end

-- the redrive's writes to the job hash (old values in vals), then the id to
-- the pending head; a refused write takes back the earlier ones (the undo
-- is built only then: HSET writes all its fields or none)
local function redrive(key, vals, ttl)
  local count = (tonumber(vals[at['redrive_count']]) or 0) + 1
  local r
  if reset then
    r = redis.pcall('HSET', key, 'status', 'pending', 'claim_token', '', 'claimed_at_ms', 0, 'redriven_at_ms', now,
                    'redrive_operation', op, 'redrive_count', count, 'attempts', 0)
  else
    r = redis.pcall('HSET', key, 'status', 'pending', 'claim_token', '', 'claimed_at_ms', 0, 'redriven_at_ms', now,
                    'redrive_operation', op, 'redrive_count', count)
  end
  if refused(r) then return 'error:' .. tostring(r['err']) end
  if ttl > 0 then
    r = redis.pcall('PERSIST', key)
    if refused(r) then undo_redrive(key, vals, 0); return 'error:' .. tostring(r['err']) end
  end
  r = redis.pcall('LMOVE', dead, target, 'RIGHT', 'LEFT')
  if refused(r) then undo_redrive(key, vals, ttl); return 'error:' .. tostring(r['err']) end
  return 'moved'
end

-- the SHA1 of the fence fields (the first nfence of vals) joined by \31, a missing one as ""
local function fence_of(vals)
  for j = 1, nfence do
    if not vals[j] then
      local fv = {}
      for x = 1, nfence do fv[x] = vals[x] or '' end
      return redis.sha1hex(table.concat(fv, '\31'))
    end
  end
  return redis.sha1hex(table.concat(vals, '\31', 1, nfence))
end

local function step(e, el, undo)
  local key = e.key
  local vals = redis.pcall('HMGET', key, unpack(names))
  if vals['err'] then return 'wrongtype' end
  local any = false
  for j = 1, #names do if vals[j] then any = true; break end end
  if not any and redis.call('EXISTS', key) == 0 then return 'gone' end
  if e.sha ~= '' and fence_of(vals) ~= e.sha then return 'changed' end
  if mode == 'purge' then
    try('RPOP', dead)
    redis.pcall('DEL', key); redis.pcall('HDEL', info_hash, e.id)
    return 'moved'
  end
  local ttl = redis.call('PTTL', key)
  if mode == 'ready' then return redrive(key, vals, ttl) end
  -- suppressed
  try('ZADD', target, score, e.id); undo[1] = { 'ZREM', target, e.id }
  local rec = info ~= '' and (string.sub(info, 1, -2) .. ',"ttl_ms":' .. ttl .. '}') or ('{"ttl_ms":' .. ttl .. '}')
  try('HSET', info_hash, e.id, rec); undo[2] = { 'HDEL', info_hash, e.id }
  if ttl > 0 then try('PERSIST', key); undo[3] = { 'PEXPIRE', key, ttl } end
  try('RPOP', dead)
  return 'moved'
end

local met_dirty = jc_win_per_job(w, a, dead, hold, JC_WIN_RIGHT, planned, met_before, nil, step)
jc_win_end(w, a, walk, lease, met_before, met_dirty)
return jc_win_reply(w)
