-- list_window.lua: one bounded window of the window engine over a dead list
-- (jobctl.ops.window; reliable-list, stream-group and json-list dead lists,
-- the hash-job failed list: redrive, suppress, purge).
--
-- The walk pops the dead list from its tail (the end workers never push at:
-- reliable-list and hash-job the right, json-list the left), one element at a time, up to
-- tail position ARGV[6] of the walk.  Each popped element is either
--   * a planned job whose fence holds (identity = the id, or the SHA1 of a
--     json-list string, met at a tail position p' with p - slack <= p' <= p,
--     p being the position the plan saw it at; hash-job also: the SHA1 of
--     its job hash's fence fields equals the plan's) -> moved in one step run
--     under redis.pcall: the target is written first, then the element leaves
--     the dead list; a failing step writes nothing of that job (its partial
--     writes are undone) and the job stays dead with code "error:<msg>";
--   * anything else -> moved to jobctl's hold list (order kept; runs of such
--     elements in one RPOP/LPOP with a count + one LPUSH/RPUSH): it
--     stays dead (every read counts the hold as dead) until list_restore.lua
--     puts the hold back at the tail.
-- The walk's bookkeeping (op, total positions, popped so far, the planned
-- positions met before their position: "met", the redrive record's TTL:
-- "record_ttl") lives in the
-- walk hash, so calls are independent and may be pipelined; each call renews
-- the lease and refuses to run unless its operation owns the lease and the
-- walk.  Every key's type and every argument is checked before the first
-- write; a failed check is an error reply and nothing is written.
--
-- KEYS[1]  dead list                    queue:{t}:dead | <p>:dead | queue:<n>:failed
-- KEYS[2]  hold list (jobctl)           queue:{t}:jobctl:hold
-- KEYS[3]  walk hash (jobctl)           queue:{t}:jobctl:walk
-- KEYS[4]  lease string (jobctl)        queue:{t}:jobctl:lease
-- KEYS[5]  target: ready list | stream (stream-group: XADD jobId <id>) |
--          scheduled zset | suppressed zset | (purge) KEYS[1]
--          (hash-job: queue:<n>:pending | queue:<n>:jobctl:suppressed | KEYS[1])
-- KEYS[6]  redrive record hash (jobctl) queue:{t}:jobctl:redriven:<YYYY-MM-DD>
--          (hash-job: KEYS[7], unused: a redrive is recorded on the job hash)
-- KEYS[7]  suppressed-info hash (jobctl)
-- KEYS[8]  json-list: suppressed-raw hash (jobctl); reliable-list, hash-job: KEYS[1]
-- KEYS[9]  json-list: attempts hash; reliable-list, hash-job: KEYS[1]
-- KEYS[10] json-list: errors hash; reliable-list, hash-job: KEYS[1]
-- KEYS[10+i] reliable-list: payload key of planned entry i (job:{t}:<id>);
--          hash-job: job hash of entry i (queue:<n>:job:<id>)
-- ARGV[1]  kind: "rl" (elements are ids) | "jl" (elements are JSON strings)
--          | "hj" (hash-job failed list: ids, job hashes, modes ready,
--          suppressed, purge; the failed list's tail is its right end)
-- ARGV[2]  mode: "ready" | "stream" | "scheduled" | "suppressed" | "purge"
-- ARGV[3]  operation id (owner of the walk)
-- ARGV[4]  lease value (owner of the lease) and ARGV[5] lease TTL (ms)
-- ARGV[6]  upto: pop while the walk has popped fewer tail positions than this
-- ARGV[7]  now (epoch ms); ARGV[8] score for a zset target (epoch ms)
-- ARGV[9]  "1": redrive resets attempts (json-list: HDEL attempts)
-- ARGV[10] suppress: info JSON for the suppressed-info hash
-- ARGV[11] slack (positions a planned job may have shifted towards the tail)
-- ARGV[12] N, the number of planned entries passed
-- ARGV[13] W, fields per entry: 3, or 5 when new payloads are passed, or 0
--          (tail mode, reliable-list and stream-group only: an unfiltered plan), or
--          4 (hash-job, always: the 4th field is the fence, SHA1 hex, "" for none)
-- ARGV[14+W(i-1)..] per entry i: identity, tail position at plan time, job
--          id ("": the identity), and with W = 5: the new payload ("" keeps
--          the stored one) and the SHA1 of the stored payload it replaces
--          W = 0: ARGV[14] the tail position of entry 1 (entry i is expected
--          at ARGV[14] + i - 1, read by the client just before: an element
--          that differs is held, "not at its planned position"), ARGV[15]
--          the payload-key prefix (entry i's id is KEYS[10+i] without it)
--          W = 0 with a filtered plan (jobctl.ops.plan.PredicateRange, mode
--          ready): ARGV[16] the plan's matches among the entries, a bitmap
--          (bit 7 - (i-1) % 8 of byte (i-1) // 8 + 1 for entry i), ARGV[17]
--          "1" when the client found the entries' plan window unchanged
--          (its digest), else "0"; with "1" the matches whose tail element
--          is the expected id and whose payload key exists move, the rest is
--          held without a code; with "0" nothing moves (the matches: "not at
--          its planned position").  The reply then has a pair for each match
--          (code "moved" included)
-- ARGV[14+4N..] hash-job only (W = 4): the fence field list
--          (jobctl.layouts.hash_job.layout.FENCE_FIELDS, passed from Python)
-- returns  { popped_by_this_call, popped_total, ended, moved, held,
--          i1, code1, ..., iM, codeM }: ended 1 when the dead list ran out;
--          one (entry index, code) pair per planned entry met (tail mode:
--          per entry not moved; the others moved): "moved",
--          "gone" (payload key missing), "changed" (payload differs from the
--          one the new payload replaces; hash-job: the fence differs),
--          "duplicate" (already suppressed),
--          "wrongtype" (payload key or job hash of the wrong type), "error:<msg>"

--@prelude

local dead, hold, walk, lease, target = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local redriven, info_hash, raw_hash, attempts, errors = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]

local kind, err = jc_one_of(ARGV[1], 'kind', { rl = true, jl = true, hj = true })
if not kind then return redis.error_reply(err) end
local mode
mode, err = jc_one_of(ARGV[2], 'mode', { ready = true, stream = true, scheduled = true, suppressed = true,
                                         purge = true })
if not mode then return redis.error_reply(err) end
if kind == 'hj' and (mode == 'stream' or mode == 'scheduled') then
  return redis.error_reply('BADARG mode ' .. mode .. ' for kind hj')
end
local op, lease_value = ARGV[3], ARGV[4]
local op_json = cjson.encode(op)
local ttl, upto, now, score, slack, n
ttl, err = jc_int(ARGV[5], 'ttl', 1); if not ttl then return redis.error_reply(err) end
upto, err = jc_int(ARGV[6], 'upto', 0); if not upto then return redis.error_reply(err) end
now, err = jc_int(ARGV[7], 'now', 0); if not now then return redis.error_reply(err) end
score, err = jc_int(ARGV[8], 'score', 0); if not score then return redis.error_reply(err) end
slack, err = jc_int(ARGV[11], 'slack', 0); if not slack then return redis.error_reply(err) end
n, err = jc_int(ARGV[12], 'entries', 0); if not n then return redis.error_reply(err) end
local width = ARGV[13]
if (kind == 'hj' and width ~= '4') or (kind ~= 'hj' and width ~= '3' and width ~= '5' and width ~= '0') then
  return redis.error_reply('BADARG width ' .. tostring(width))
end
width = tonumber(width)
local reset, info = ARGV[9] == '1', ARGV[10]
local nargs = width == 0 and 15 or 13 + width * n
if width == 0 and #ARGV == 17 then nargs = 17 end
-- hash-job: the fence field list (jobctl.layouts.hash_job.layout.FENCE_FIELDS) follows
local fence_fields = {}
if kind == 'hj' then
  for j = nargs + 1, #ARGV do fence_fields[#fence_fields + 1] = ARGV[j] end
  if #fence_fields == 0 then return redis.error_reply('BADARG hj needs the fence field list') end
  nargs = #ARGV
end
if #ARGV ~= nargs then return redis.error_reply('BADARG expected ' .. nargs .. ' arguments') end
local prog, bits = nil, ''
if width == 0 and nargs == 17 then
  bits, prog = ARGV[16], ARGV[17]
  if mode ~= 'ready' or kind ~= 'rl' then return redis.error_reply('BADARG a filtered tail plan needs mode ready') end
  if #bits < math.ceil(n / 8) then return redis.error_reply('BADARG bitmap shorter than the entries') end
end
local first, prefix = 0, ''
if width == 0 then
  if kind ~= 'rl' then return redis.error_reply('BADARG tail mode needs kind rl') end
  first, err = jc_int(ARGV[14], 'first', 0); if not first then return redis.error_reply(err) end
  prefix = ARGV[15]
end
if kind ~= 'jl' and #KEYS ~= 10 + n then return redis.error_reply('BADARG expected ' .. (10 + n) .. ' keys') end

local target_type = (mode == 'ready' or mode == 'purge') and 'list' or (mode == 'stream' and 'stream' or 'zset')
err = jc_check_types({ { dead, 'list' }, { hold, 'list' }, { walk, 'hash' }, { lease, 'string' },
                       { target, target_type }, { redriven, 'hash' }, { info_hash, 'hash' } })
if not err and kind == 'jl' then
  err = jc_check_types({ { raw_hash, 'hash' }, { attempts, 'hash' }, { errors, 'hash' } })
end
if err then return redis.error_reply(err) end
local holder = redis.call('GET', lease)
if holder ~= lease_value then
  if holder then return redis.error_reply('LEASE operation ' .. op .. ' does not hold the lease ' .. lease) end
end
local w = redis.call('HMGET', walk, 'op', 'total', 'popped', 'record_ttl')
if w[1] ~= op then return redis.error_reply('WALK no walk of operation ' .. op .. ' in ' .. walk) end
local total, popped, record_ttl = tonumber(w[2]), tonumber(w[3]), tonumber(w[4])
local limit = math.min(upto, total)

-- planned positions of entries an earlier call met before their position
-- (jobs shifted towards the tail): a call packed before that call's reply
-- carries them again and must not match them twice (walk hash field "met",
-- comma-separated; only positions not yet popped are kept)
local met_before, met_dirty = {}, false
if width ~= 0 then
  local s = redis.call('HGET', walk, 'met')
  if s then for p in string.gmatch(s, '%d+') do met_before[tonumber(p)] = true end end
end

-- planned entries by identity
local planned = {}
for i = 1, (width == 0 and 0 or n) do
  local b = 14 + width * (i - 1)
  local ident = ARGV[b]
  local pos = tonumber(ARGV[b + 1])
  if not pos then return redis.error_reply('BADARG position ' .. tostring(ARGV[b + 1])) end
  local id = ARGV[b + 2]
  if id == '' then id = ident end
  local e = { i = i, pos = pos, id = id, payload = '', sha = '' }
  if width == 5 then e.payload, e.sha = ARGV[b + 3], ARGV[b + 4] end
  if width == 4 then e.sha = ARGV[b + 3] end
  if kind ~= 'jl' then e.key = KEYS[10 + i] end
  local list = planned[ident]
  if not list then planned[ident] = { e } else list[#list + 1] = e end
end

-- the tail end of the dead list and the opposite end
local tail, pop_cmd, far = -1, 'RPOP', 'LEFT'
local near = 'RIGHT'
if kind == 'jl' then tail, pop_cmd, far, near = 0, 'LPOP', 'RIGHT', 'LEFT' end

local function try(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r['err'] then error(r['err'], 0) end
  return r
end

-- one job's step (run under pcall); returns its code.  Reads first, then
-- the target, then the element leaves the dead list; `undo` collects the
-- writes to take back if a later one fails.
local function step(e, el, undo)
  local old = nil
  if kind == 'rl' then
    if e.payload ~= '' then
      local t = redis.call('TYPE', e.key)
      t = type(t) == 'table' and t['ok'] or t
      if t == 'none' then return 'gone' end
      if t ~= 'string' then return 'wrongtype' end
      old = try('GET', e.key)
      if redis.sha1hex(old) ~= e.sha then return 'changed' end
    elseif mode ~= 'purge' and redis.call('EXISTS', e.key) == 0 then
      return 'gone'
    end
  end
  if mode == 'ready' then
    -- one atomic command writes the target and takes the element off the tail
    if old then try('SET', e.key, e.payload, 'KEEPTTL'); undo[1] = { 'SET', e.key, old, 'KEEPTTL' } end
    try('LMOVE', dead, target, near, 'LEFT')
    if kind == 'jl' and reset then redis.pcall('HDEL', attempts, e.id) end
    return 'moved'
  elseif mode == 'stream' then
    local entry = try('XADD', target, '*', 'jobId', e.id); undo[1] = { 'XDEL', target, entry }
  elseif mode == 'scheduled' then
    try('ZADD', target, score, e.id); undo[1] = { 'ZREM', target, e.id }
  elseif mode == 'suppressed' then
    if kind == 'jl' and redis.call('ZSCORE', target, e.id) then return 'duplicate' end
    try('ZADD', target, score, e.id); undo[1] = { 'ZREM', target, e.id }
    if info ~= '' then try('HSET', info_hash, e.id, info); undo[2] = { 'HDEL', info_hash, e.id } end
    if kind == 'jl' then try('HSET', raw_hash, e.id, el); undo[3] = { 'HDEL', raw_hash, e.id } end
  end
  if old then try('SET', e.key, e.payload, 'KEEPTTL'); undo[4] = { 'SET', e.key, old, 'KEEPTTL' } end
  try(pop_cmd, dead)
  -- the job has left the dead list: clean-ups that cannot lose it
  if mode == 'purge' then
    if kind == 'rl' then redis.pcall('UNLINK', e.key)
    else redis.pcall('HDEL', attempts, e.id); redis.pcall('HDEL', errors, e.id) end
  end
  return 'moved'
end

-- hash-job (kind "hj"): the element is the id, e.key its job hash.  Fence:
-- the SHA1 of the fence fields' values joined by \31 (missing as ""), when
-- the plan gives one.  Today's seed-001 writes, then the id leaves the tail:
--   ready       HSET status pending, claim_token "", claimed_at_ms 0,
--               redriven_at_ms now, redrive_operation op, redrive_count +1
--               (attempts 0 with ARGV[9]); PERSIST; LMOVE failed -> pending head
--   suppressed  ZADD suppressed now id; HSET info id (ARGV[10] + "ttl_ms":
--               the hash's remaining TTL, -1 for none); PERSIST
--   purge       the id leaves the list, then DEL the hash, HDEL info id
-- one HMGET a job reads the fence fields and, for a redrive, the fields it
-- rewrites (their old values undo it): the name list is built once per call
local hj_names, hj_at = {}, {}
local hj_redrive = { 'status', 'claim_token', 'claimed_at_ms', 'redriven_at_ms', 'redrive_operation',
                     'redrive_count', 'attempts' }
if kind == 'hj' then
  for j = 1, #fence_fields do hj_names[j] = fence_fields[j]; hj_at[fence_fields[j]] = hj_at[fence_fields[j]] or j end
  if mode == 'ready' then
    for j = 1, #hj_redrive do
      local f = hj_redrive[j]
      if not hj_at[f] then hj_names[#hj_names + 1] = f; hj_at[f] = #hj_names end
    end
  end
end
local nfence = #fence_fields

local function step_hj(e, el, undo)
  local key = e.key
  local vals = redis.pcall('HMGET', key, unpack(hj_names))
  if vals['err'] then return 'wrongtype' end
  local any = false
  for j = 1, #hj_names do if vals[j] then any = true; break end end
  if not any and redis.call('EXISTS', key) == 0 then return 'gone' end
  if e.sha ~= '' then
    local fv = {}
    for j = 1, nfence do fv[j] = vals[j] or '' end
    if redis.sha1hex(table.concat(fv, '\31')) ~= e.sha then return 'changed' end
  end
  if mode == 'purge' then
    try(pop_cmd, dead)
    redis.pcall('DEL', key); redis.pcall('HDEL', info_hash, e.id)
    return 'moved'
  end
  local ttl = redis.call('PTTL', key)
  if mode == 'ready' then
    local back, gone = { 'HSET', key }, { 'HDEL', key }
    for j = 1, #hj_redrive do
      local f = hj_redrive[j]
      local old = vals[hj_at[f]]
      if old then back[#back + 1] = f; back[#back + 1] = old else gone[#gone + 1] = f end
    end
    local w = { 'HSET', key, 'status', 'pending', 'claim_token', '', 'claimed_at_ms', 0, 'redriven_at_ms', now,
                'redrive_operation', op, 'redrive_count', (tonumber(vals[hj_at['redrive_count']]) or 0) + 1 }
    if reset then w[#w + 1] = 'attempts'; w[#w + 1] = 0 end
    try(unpack(w))
    if #back > 2 then undo[1] = back end
    if #gone > 2 then undo[2] = gone end
    if ttl > 0 then try('PERSIST', key); undo[3] = { 'PEXPIRE', key, ttl } end
    try('LMOVE', dead, target, near, 'LEFT')
    return 'moved'
  end
  -- suppressed
  try('ZADD', target, score, e.id); undo[1] = { 'ZREM', target, e.id }
  local rec = info ~= '' and (string.sub(info, 1, -2) .. ',"ttl_ms":' .. ttl .. '}') or ('{"ttl_ms":' .. ttl .. '}')
  try('HSET', info_hash, e.id, rec); undo[2] = { 'HDEL', info_hash, e.id }
  if ttl > 0 then try('PERSIST', key); undo[3] = { 'PEXPIRE', key, ttl } end
  try(pop_cmd, dead)
  return 'moved'
end

local function run_step(e, el)
  local undo = {}
  local ok, res = pcall(kind == 'hj' and step_hj or step, e, el, undo)
  if ok then return res end
  for j = table.maxn(undo), 1, -1 do if undo[j] then redis.pcall(unpack(undo[j])) end end
  if type(res) == 'table' then res = res['err'] or res['message'] or 'error' end
  return 'error:' .. tostring(res)
end

local met, moved_ids = {}, {}
local this, ended, moved, held = 0, 0, 0, 0

-- tail mode: entry i is the element at tail position first + i - 1
local plen = #prefix
local function tail_entry(el)
  local i = popped - first + 1
  if i < 1 or i > n then return nil end
  local key = KEYS[10 + i]
  if string.sub(key, plen + 1) ~= el then return nil, i end
  return { i = i, id = el, key = key, payload = '', sha = '' }, i
end

local function hold_it(code, i)
  redis.call('LMOVE', dead, hold, near, far)
  held = held + 1
  if i then met[#met + 1] = i; met[#met + 1] = code end
end

-- tail mode, ready and purge: the bulk path.  From the walk's position on,
-- the run of entries whose element is the expected id (and, to ready, whose
-- payload key exists: one EXISTS over the run) leaves the tail in one RPOP
-- with a count (<= BULK) and reaches the target in one LPUSH of the run
-- (the order of one LMOVE each) / has its payload keys unlinked in one
-- UNLINK (purge).  The LPUSH runs under redis.pcall: if it fails (OOM) the
-- run goes back to the tail as it was and the per-job loops below take the
-- rest of the call (each job's error then moves nothing of that job).  An
-- element that ends the run is left to the per-job loops for one position.
local BULK = 1000
local bulk_on = width == 0 and kind == 'rl' and (mode == 'ready' or mode == 'purge') and not prog

local function push_back(els, from, to)
  -- els[from..to] back at the tail, els[from] the tail again
  local back, m = {}, 0
  for j = to, from, -1 do m = m + 1; back[m] = els[j] end
  if m > 0 then redis.call('RPUSH', dead, unpack(back)) end
end

local function bulk_step()
  local i = popped - first + 1
  if i < 1 or i > n then return 0 end
  local k = math.min(limit - popped, n - i + 1, BULK)
  if k < 1 then return 0 end
  local els = redis.call('RPOP', dead, k)
  if not els then return 0 end
  local run = 0
  for j = 1, #els do
    if KEYS[9 + i + j] ~= prefix .. els[j] then break end
    run = j
  end
  if run > 0 and mode == 'ready' and redis.call('EXISTS', unpack(KEYS, 10 + i, 9 + i + run)) ~= run then
    local ok = 0
    for j = 1, run do
      if redis.call('EXISTS', KEYS[9 + i + j]) == 0 then break end
      ok = j
    end
    run = ok
  end
  push_back(els, run + 1, #els)
  if run == 0 then return 0 end
  if mode == 'ready' then
    local r = redis.pcall('LPUSH', target, unpack(els, 1, run))
    if type(r) == 'table' and r['err'] then
      push_back(els, 1, run)
      bulk_on = false
      return 0
    end
    local m = #moved_ids
    for j = 1, run do moved_ids[m + j] = els[j] end
  else
    redis.pcall('UNLINK', unpack(KEYS, 10 + i, 9 + i + run))
  end
  moved = moved + run
  popped = popped + run
  this = this + run
  return run
end

-- tail mode with a filtered plan (W = 0 and ARGV[16..17]): the window's
-- elements leave the tail in one RPOP with a count (the window is <= BULK:
-- the client's plan windows), each checked against its expected id; then
-- the plan's matches reach the target in one LPUSH (under redis.pcall) and
-- everything else the hold in one LPUSH.  Each list gets its elements in
-- the order of one LMOVE each, as the lists are distinct.  A refused LPUSH
-- sends the whole window to the hold, in order, each match with code
-- "error:<msg>".
local function pred_runs(els, acts)
  local mv, hd = {}, {}
  for j = 1, #els do
    if acts[j] == 'move' then mv[#mv + 1] = els[j] else hd[#hd + 1] = els[j] end
  end
  local failed = nil
  if #mv > 0 then
    local r = redis.pcall('LPUSH', target, unpack(mv))
    if type(r) == 'table' and r['err'] then failed = 'error:' .. tostring(r['err']); hd = els end
  end
  if #hd > 0 then redis.call('LPUSH', hold, unpack(hd)) end
  held = held + #hd
  for j = 1, #els do
    local a = acts[j]
    if a == 'move' and not failed then
      moved_ids[#moved_ids + 1] = els[j]
      met[#met + 1] = j; met[#met + 1] = 'moved'
    else
      local code = (a == 'move' and failed) or a
      if code ~= 'hold' then met[#met + 1] = j; met[#met + 1] = code end
    end
  end
  if not failed then moved = moved + #mv end
end

if prog then
  -- the window as planned (the client checked its digest), then each tail element
  local same = prog == '1'
  -- never more elements than the entries passed (a call that starts before
  -- its first entry, e.g. after an earlier call of the round trip ended the
  -- walk, holds what it pops: nothing is read past the bitmap or the KEYS)
  local k = math.min(limit - popped, n - (popped - first), n, BULK)
  if popped ~= first or k < 1 then same = false; k = math.max(k, 0) end
  local els = {}
  if k >= 1 then els = redis.call('RPOP', dead, k) or {} end  -- tail first
  local m = #els
  local acts, planned = {}, {}
  for j = 1, m do
    local byte = string.byte(bits, math.floor((j - 1) / 8) + 1) or 0
    local on = bit.band(byte, bit.rshift(128, (j - 1) % 8)) ~= 0
    if not on then acts[j] = 'hold'
    elseif same and KEYS[10 + j] == prefix .. els[j] then acts[j] = 'move'; planned[#planned + 1] = j
    else acts[j] = 'not at its planned position' end
  end
  if #planned > 0 then  -- payload keys: one EXISTS for all, per key only when some are gone
    local keys = {}
    for x = 1, #planned do keys[x] = KEYS[10 + planned[x]] end
    if redis.call('EXISTS', unpack(keys)) ~= #keys then
      for x = 1, #planned do
        if redis.call('EXISTS', keys[x]) == 0 then acts[planned[x]] = 'gone' end
      end
    end
  end
  pred_runs(els, acts)
  popped = popped + m; this = this + m
  if m < k then ended = 1 end
  while popped < limit do  -- past the entries the client read: held
    if not redis.call('LMOVE', dead, hold, near, far) then ended = 1; break end
    held = held + 1; popped = popped + 1; this = this + 1
  end
end

while width == 0 and mode == 'ready' and not prog and popped < limit do
  if bulk_on and popped < limit then bulk_step() end
  if popped >= limit then break end
  -- the common case in two commands a job, no table or closure per job:
  -- EXISTS of the expected entry's payload key, then one LMOVE whose reply
  -- is checked against the expected id (another element is put back and held)
  local i = popped - first + 1
  local key = (i >= 1 and i <= n) and KEYS[10 + i] or nil
  if key and redis.call('EXISTS', key) == 1 then
    local r = redis.pcall('LMOVE', dead, target, near, 'LEFT')
    if not r then ended = 1; break end
    if type(r) == 'table' and r['err'] then
      if not redis.call('LINDEX', dead, tail) then ended = 1; break end
      hold_it('error:' .. tostring(r['err']), i)
    elseif string.sub(key, plen + 1) ~= r then
      redis.call('LMOVE', target, dead, 'LEFT', near)  -- not the expected element: back, then held
      hold_it('not at its planned position', i)
    else
      moved = moved + 1
      moved_ids[#moved_ids + 1] = r
    end
  else
    local el = redis.call('LMOVE', dead, hold, near, far)
    if not el then ended = 1; break end
    held = held + 1
    if i >= 1 and i <= n then
      met[#met + 1] = i
      met[#met + 1] = (string.sub(KEYS[10 + i], plen + 1) == el) and 'gone' or 'not at its planned position'
    end
  end
  popped = popped + 1
  this = this + 1
end

while width == 0 and mode ~= 'ready' and popped < limit do
  if bulk_on then bulk_step() end
  if popped >= limit then break end
  local el = redis.call('LINDEX', dead, tail)
  if not el then ended = 1; break end
  local e, i = tail_entry(el)
  if not e then
    hold_it('not at its planned position', i)
  else
    local code = run_step(e, el)
    if code == 'moved' then
      moved = moved + 1
      moved_ids[#moved_ids + 1] = e.id
    else
      hold_it(code, i)
    end
  end
  popped = popped + 1
  this = this + 1
end

-- elements that are no planned job go to the hold in runs: one RPOP/LPOP
-- with a count and one LPUSH/RPUSH per run (the same order as one LMOVE
-- each); a run is flushed before any step touches the tail
local run = 0
local function flush()
  while run > 0 do
    local k = math.min(run, 1000)
    local els = redis.call(pop_cmd, dead, k)
    redis.call(far == 'LEFT' and 'LPUSH' or 'RPUSH', hold, unpack(els))
    held = held + #els
    run = run - k
  end
end

while width ~= 0 and popped < limit do
  -- the element at this position: the tail, past the run not yet flushed
  local el = redis.call('LINDEX', dead, kind == 'jl' and run or -(run + 1))
  if not el then ended = 1; break end
  local ident = el
  if kind == 'jl' then ident = redis.sha1hex(el) end
  local entry = nil
  local list = planned[ident]
  if list then
    for j = 1, #list do
      local e = list[j]
      if not e.used and not met_before[e.pos] and popped <= e.pos and popped >= e.pos - slack then
        entry = e; break
      end
    end
  end
  if entry then
    flush()
    entry.used = true
    if entry.pos > popped then met_before[entry.pos] = true; met_dirty = true end
    local code = run_step(entry, el)
    met[#met + 1] = entry.i
    met[#met + 1] = code
    if code == 'moved' then
      moved = moved + 1
      moved_ids[#moved_ids + 1] = entry.id
    else
      redis.call('LMOVE', dead, hold, near, far)
      held = held + 1
    end
  else
    run = run + 1
  end
  popped = popped + 1
  this = this + 1
end
flush()
redis.call('HSET', walk, 'popped', popped)
if met_dirty or next(met_before) then
  local keep = {}
  for p in pairs(met_before) do if p >= popped then keep[#keep + 1] = p end end
  if #keep > 0 then redis.call('HSET', walk, 'met', table.concat(keep, ',')) else redis.call('HDEL', walk, 'met') end
end
redis.call('SET', lease, lease_value, 'PX', ttl)  -- renewed (and taken back if it had expired)

-- where a redrive is recorded: one HMGET + one HSET per call into the day's
-- record hash, the value the JSON array [op id, redriven at (epoch ms),
-- count]; the hash then expires record_ttl ms after this write (the walk's
-- "record_ttl", from lease.lua begin; jobctl.ops.redrive_record)
if kind ~= 'hj' and (mode == 'ready' or mode == 'stream' or mode == 'scheduled') then
  if #moved_ids > 0 then
    local head, first_time = '[' .. op_json .. ',' .. now .. ',', '[' .. op_json .. ',' .. now .. ',1]'
    for c = 1, #moved_ids, BULK do  -- in chunks of BULK ids (unpack's limit)
      local last = math.min(c + BULK - 1, #moved_ids)
      local prev = redis.call('HMGET', redriven, unpack(moved_ids, c, last))
      local args, k = {}, 0
      for j = c, last do
        args[k + 1] = moved_ids[j]
        local p = prev[j - c + 1]
        if p then
          local count = tonumber(string.match(p, ',(%d+)%]$')) or 0
          args[k + 2] = head .. (count + 1) .. ']'
        else
          args[k + 2] = first_time  -- the common case: no earlier redrive, one shared string
        end
        k = k + 2
      end
      redis.pcall('HSET', redriven, unpack(args))
    end
    if record_ttl then redis.pcall('PEXPIRE', redriven, record_ttl) end
  end
end

local out = { this, popped, ended, moved, held }
for j = 1, #met do out[#out + 1] = met[j] end
return out
