-- rl_tail.lua: one window call of a tail walk over a reliable-list or
-- stream-group dead list (jobctl.ops.walk.tail: an unfiltered plan, or a
-- filtered one's windows, a jobctl.ops.plan.PredicateRange).
-- Every tail position of the walk is planned: entry i is expected at tail
-- position ARGV[14] + i - 1 (read by the client just before), its payload
-- key KEYS[10+i] = ARGV[15] .. its id; an element that differs is held
-- ("not at its planned position").  The walk pops the tail (the right end)
-- up to position ARGV[6]; the moved ids leave in runs (bulk_step: one RPOP
-- with a count, one LPUSH / UNLINK), the rest one at a time (a step of
-- prelude/rl_step.lua under redis.pcall, or to jobctl's hold list in
-- order).  Bookkeeping in the walk hash, lease and walk ownership, and the
-- checks of every argument and fixed key's type before the first write are
-- those of rl_window.lua.
-- KEYS[1]  dead list; KEYS[2] hold list; KEYS[3] walk hash; KEYS[4] lease
-- KEYS[5]  target: ready list | stream | scheduled zset | suppressed zset |
--          (purge) KEYS[1]; KEYS[6] redrive record hash; KEYS[7]
--          suppressed-info hash; KEYS[8..10] KEYS[1] (as rl_window.lua)
-- KEYS[10+i] payload key of entry i (ARGV[15] .. its id)
-- ARGV[1]  kind: "rl"
-- ARGV[2]  mode: "ready" | "stream" | "scheduled" | "suppressed" | "purge"
-- ARGV[3..12] as rl_window.lua (ARGV[11] slack unused here; ARGV[12] N)
-- ARGV[13] W: "0"
-- ARGV[14] the tail position of entry 1; ARGV[15] the payload-key prefix
-- ARGV[16] (a filtered plan, mode ready) the plan's matches among the
--          entries, a bitmap (bit 7 - (i-1) % 8 of byte (i-1) // 8 + 1 for
--          entry i), ARGV[17] "1" when the client found the entries' plan
--          window unchanged (its digest), else "0"; with "1" the matches
--          whose tail element is the expected id and whose payload key
--          exists move, the rest is held without a code; with "0" nothing
--          moves (the matches: "not at its planned position")
-- returns  { popped_by_this_call, popped_total, ended, moved, held,
--          i1, code1, ..., iM, codeM }: one (entry index, code) pair per
--          entry not moved (a filtered plan: per match, "moved" included):
--          "gone", "not at its planned position", "wrongtype", "error:<msg>"

--@prelude
--@prelude window
--@prelude rl_step

local dead, hold, walk, lease, target = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local redriven, info_hash = KEYS[6], KEYS[7]

local a, err = jc_win_args('rl', { ready = true, stream = true, scheduled = true, suppressed = true, purge = true },
                           { ['0'] = true })
if not a then return redis.error_reply(err) end
local mode, n = a.mode, a.n
local nargs = #ARGV == 17 and 17 or 15
local prog, bits = nil, ''
if nargs == 17 then
  bits, prog = ARGV[16], ARGV[17]
  if mode ~= 'ready' then return redis.error_reply('BADARG a filtered tail plan needs mode ready') end
  if #bits < math.ceil(n / 8) then return redis.error_reply('BADARG bitmap shorter than the entries') end
end
local w, first = jc_win_tail_open(a, nargs, 10 + n)
if not w then return redis.error_reply(first) end
local prefix = ARGV[15]

local popped, limit, met, moved_ids = w.popped, w.limit, w.met, w.moved_ids
local this, ended, moved, held = 0, 0, 0, 0
local BULK = JC_WIN_BULK
local step = jc_rl_step(a, dead, target, info_hash)

-- entry i is the element at tail position first + i - 1
local plen = #prefix
local function tail_entry(el)
  local i = popped - first + 1
  if i < 1 or i > n then return nil end
  local key = KEYS[10 + i]
  if string.sub(key, plen + 1) ~= el then return nil, i end
  return { i = i, id = el, key = key, payload = '', sha = '' }, i
end

local function hold_it(code, i)
  redis.call('LMOVE', dead, hold, 'RIGHT', 'LEFT')
  held = held + 1
  if i then met[#met + 1] = i; met[#met + 1] = code end
end

-- ready, stream and purge, unfiltered: the bulk path.  From the walk's
-- position on, the run of entries whose element is the expected id (and,
-- to ready or stream, whose payload key exists: one EXISTS over the run)
-- leaves the tail in one RPOP with a count (<= BULK) and reaches the target
-- in one LPUSH of the run (the order of one LMOVE each) / one XADD each, in
-- tail order (stream) / has its payload keys unlinked in one UNLINK
-- (purge).  The LPUSH / XADDs run under redis.pcall: if one fails (OOM) the
-- run's entries are taken back, the run goes back to the tail as it was and
-- the per-job loops below take the rest of the call (each job's error then
-- moves nothing of that job).  An element that ends the run is left to the
-- per-job loops for one position.
local bulk_on = (mode == 'ready' or mode == 'stream' or mode == 'purge') and not prog

local function push_back(els, from, to)
  -- els[from..to] back at the tail, els[from] the tail again
  local back, m = {}, 0
  for j = to, from, -1 do m = m + 1; back[m] = els[j] end
  if m > 0 then redis.call('RPUSH', dead, unpack(back)) end
end

local function bulk_run(els, i)
  -- how many of els (from entry i on) are the expected ids (to ready: with a payload key)
  local run = 0
  for j = 1, #els do
    if KEYS[9 + i + j] ~= prefix .. els[j] then break end
    run = j
  end
  if run > 0 and mode ~= 'purge' and redis.call('EXISTS', unpack(KEYS, 10 + i, 9 + i + run)) ~= run then
    local ok = 0
    for j = 1, run do
      if redis.call('EXISTS', KEYS[9 + i + j]) == 0 then break end
      ok = j
    end
    run = ok
  end
  return run
end

-- the run's ids written to the target (ready: one LPUSH; stream: one XADD
-- each, taken back with XDEL when one is refused); false when refused
local function land_run(els, run)
  if mode == 'ready' then
    local r = redis.pcall('LPUSH', target, unpack(els, 1, run))
    return not (type(r) == 'table' and r['err'])
  end
  local added = {}
  for j = 1, run do
    local r = redis.pcall('XADD', target, '*', 'jobId', els[j])
    if type(r) == 'table' and r['err'] then
      if #added > 0 then redis.pcall('XDEL', target, unpack(added)) end
      return false
    end
    added[j] = r
  end
  return true
end

local function bulk_step()
  local i, k = jc_win_tail_run(w, popped, first, n)
  if k < 1 then return 0 end
  local els = redis.call('RPOP', dead, k)
  if not els then return 0 end
  local run = bulk_run(els, i)
  push_back(els, run + 1, #els)
  if run == 0 then return 0 end
  if mode ~= 'purge' then
    if not land_run(els, run) then
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

-- a filtered plan (ARGV[16..17]): the window's elements leave the tail in
-- one RPOP with a count (the window is <= BULK: the client's plan windows),
-- each checked against its expected id; then the plan's matches reach the
-- target in one LPUSH (under redis.pcall) and everything else the hold in
-- one LPUSH.  Each list gets its elements in the order of one LMOVE each,
-- as the lists are distinct.  A refused LPUSH sends the whole window to the
-- hold, in order, each match with code "error:<msg>".
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
    local act = acts[j]
    if act == 'move' and not failed then
      moved_ids[#moved_ids + 1] = els[j]
      met[#met + 1] = j; met[#met + 1] = 'moved'
    else
      local code = (act == 'move' and failed) or act
      if code ~= 'hold' then met[#met + 1] = j; met[#met + 1] = code end
    end
  end
  if not failed then moved = moved + #mv end
end

-- each popped element's action: 'move', 'hold' (no match) or its code
local function pred_acts(els, same)
  local acts, planned = {}, {}
  for j = 1, #els do
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
  return acts
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
  pred_runs(els, pred_acts(els, same))
  popped = popped + m; this = this + m
  if m < k then ended = 1 end
  while popped < limit do  -- past the entries the client read: held
    if not redis.call('LMOVE', dead, hold, 'RIGHT', 'LEFT') then ended = 1; break end
    held = held + 1; popped = popped + 1; this = this + 1
  end
end

while mode == 'ready' and not prog and popped < limit do
  if bulk_on and popped < limit then bulk_step() end
  if popped >= limit then break end
  -- the common case in two commands a job, no table or closure per job:
  -- EXISTS of the expected entry's payload key, then one LMOVE whose reply
  -- is checked against the expected id (another element is put back and held)
  local i = popped - first + 1
  local key = (i >= 1 and i <= n) and KEYS[10 + i] or nil
  if key and redis.call('EXISTS', key) == 1 then
    local r = redis.pcall('LMOVE', dead, target, 'RIGHT', 'LEFT')
    if not r then ended = 1; break end
    if type(r) == 'table' and r['err'] then
      if not redis.call('LINDEX', dead, -1) then ended = 1; break end
      hold_it('error:' .. tostring(r['err']), i)
    elseif string.sub(key, plen + 1) ~= r then
      redis.call('LMOVE', target, dead, 'LEFT', 'RIGHT')  -- not the expected element: back, then held
      hold_it('not at its planned position', i)
    else
      moved = moved + 1
      moved_ids[#moved_ids + 1] = r
    end
  else
    local el = redis.call('LMOVE', dead, hold, 'RIGHT', 'LEFT')
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

while mode ~= 'ready' and popped < limit do
  if bulk_on then bulk_step() end
  if popped >= limit then break end
  local el = redis.call('LINDEX', dead, -1)
  if not el then ended = 1; break end
  local e, i = tail_entry(el)
  if not e then
    hold_it('not at its planned position', i)
  else
    local code = jc_win_run_step(step, e, el)
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

w.popped, w.this, w.ended, w.moved, w.held = popped, this, ended, moved, held
jc_win_end(w, a, walk, lease, nil, false)
if mode ~= 'suppressed' and mode ~= 'purge' then jc_win_record(redriven, a, moved_ids, w.record_ttl) end
return jc_win_reply(w)
