-- prelude/window.lua: the steps shared by the window scripts (rl_window.lua,
-- rl_tail.lua, jl_window.lua, hj_window.lua), inlined by jobctl/scripts.py at
-- a line "--@prelude window" (after "--@prelude": it calls jc_int, jc_one_of).
-- Local functions only; nothing here branches on the kind of list: a script
-- passes its own ends of the list, identity and per-job step.
--
--   jc_win_args(kind, modes, widths)
--        ARGV[1..13], common to every window call: ARGV[1] must be `kind`,
--        ARGV[2] one of `modes`, ARGV[13] one of `widths` (sets of strings),
--        ARGV[5] ttl >= 1, ARGV[6] upto, [7] now, [8] score, [11] slack,
--        [12] entries >= 0; returns { mode, op, op_json, lease_value, ttl,
--        upto, now, score, reset, info, slack, n, width }, or nil and the
--        error text "BADARG ..."
--   jc_win_counts(nargs, nkeys)
--        nil when #ARGV is nargs and #KEYS is nkeys, else "BADARG expected ..."
--   jc_win_target(mode) the Redis type a mode's target key must hold
--   jc_win_begin(a, walk, lease)
--        the lease must be a's (or gone) and the walk hash a's operation's;
--        returns the walk state { total, popped, record_ttl, limit, this,
--        ended, moved, held, met, moved_ids } or nil and "LEASE ..." /
--        "WALK ..."
--   jc_win_tail_open(a, nargs, nkeys, extra_types)
--        a tail call's opening after jc_win_args (rl_tail, hj_tail, jl_tail):
--        jc_win_counts, ARGV[14] the tail position of entry 1 (an integer
--        >= 0), the types of KEYS[1..7] (dead list, hold list, walk hash,
--        lease, the mode's target, redrive record hash, suppressed-info hash)
--        and of extra_types ({ {key, type}, ... }), then jc_win_begin;
--        returns w, first or nil and the first error (nothing written)
--   jc_win_tail_run(w, popped, first, n)
--        entry index i of the walk's position and k, how many elements one
--        bulk pop may take from it (<= JC_WIN_BULK, within the call's limit
--        and its entries); k < 1 when none
--   jc_win_met_before(walk)  the walk hash's "met" positions, as a set
--   jc_win_planned(a, keyed) the planned entries by identity (ARGV[14..],
--        a.width a job), each { i, pos, id, payload, sha, key = KEYS[10+i]
--        when keyed }, or nil and "BADARG position ..."
--   jc_win_open(a, walk, lease, keyed)
--        a per-job call's opening: jc_win_begin, jc_win_met_before and
--        jc_win_planned in that order; returns w, nil, met_before, planned
--        or nil and the first error
--   jc_win_try(...)          redis.pcall(...), an error reply raised
--   jc_win_run_step(step, e, el)
--        step(e, el, undo) under pcall: its code, or on an error the writes
--        in undo taken back (newest first) and "error:<msg>"
--   JC_WIN_RIGHT, JC_WIN_LEFT  a dead list's tail end (reliable-list and
--        hash-job: the right; json-list: the left) and its opposite
--   jc_win_per_job(w, a, dead, hold, ends, planned, met_before, ident_of, step)
--        the per-job walk of one call (below); returns whether met changed
--   jc_win_end(w, a, walk, lease, met_before, met_dirty)
--        the walk's popped count (and "met") saved, the lease renewed
--   jc_win_record(redriven, a, moved_ids, record_ttl)
--        the redrive record of the ids moved (one HMGET + HSET per 1000)
--   jc_win_reply(w)          { this, popped, ended, moved, held, i1, code1, ... }

--- Elements one RPOP/LPOP with a count and one unpack take at most.
local JC_WIN_BULK = 1000

local JC_WIN_INTS = { { 'ttl', 5, 1 }, { 'upto', 6, 0 }, { 'now', 7, 0 }, { 'score', 8, 0 }, { 'slack', 11, 0 },
                      { 'entries', 12, 0 } }

local function jc_win_args(kind, modes, widths)
  local _, err = jc_one_of(ARGV[1], 'kind', { [kind] = true })
  if err then return nil, err end
  local a = { op = ARGV[3], lease_value = ARGV[4], reset = ARGV[9] == '1', info = ARGV[10] }
  a.mode, err = jc_one_of(ARGV[2], 'mode', modes)
  if not a.mode then return nil, err end
  for j = 1, #JC_WIN_INTS do
    local s = JC_WIN_INTS[j]
    a[s[1]], err = jc_int(ARGV[s[2]], s[1], s[3])
    if not a[s[1]] then return nil, err end
  end
  a.n = a.entries
  if not widths[ARGV[13]] then return nil, 'BADARG width ' .. tostring(ARGV[13]) end
  a.width = tonumber(ARGV[13])
  a.op_json = cjson.encode(a.op)
  return a
end

local function jc_win_counts(nargs, nkeys)
  if #ARGV ~= nargs then return 'BADARG expected ' .. nargs .. ' arguments' end
  if #KEYS ~= nkeys then return 'BADARG expected ' .. nkeys .. ' keys' end
  return nil
end

local JC_WIN_TARGET = { ready = 'list', purge = 'list', stream = 'stream', scheduled = 'zset', suppressed = 'zset' }

local function jc_win_target(mode)
  return JC_WIN_TARGET[mode]
end

local function jc_win_begin(a, walk, lease)
  local holder = redis.call('GET', lease)
  if holder ~= a.lease_value and holder then
    return nil, 'LEASE operation ' .. a.op .. ' does not hold the lease ' .. lease
  end
  local h = redis.call('HMGET', walk, 'op', 'total', 'popped', 'record_ttl')
  if h[1] ~= a.op then return nil, 'WALK no walk of operation ' .. a.op .. ' in ' .. walk end
  local total = tonumber(h[2])
  return { total = total, popped = tonumber(h[3]), record_ttl = tonumber(h[4]), limit = math.min(a.upto, total),
           this = 0, ended = 0, moved = 0, held = 0, met = {}, moved_ids = {} }
end

local function jc_win_tail_open(a, nargs, nkeys, extra_types)
  local err = jc_win_counts(nargs, nkeys)
  if err then return nil, err end
  local first
  first, err = jc_int(ARGV[14], 'first', 0)
  if not first then return nil, err end
  local specs = { { KEYS[1], 'list' }, { KEYS[2], 'list' }, { KEYS[3], 'hash' }, { KEYS[4], 'string' },
                  { KEYS[5], jc_win_target(a.mode) }, { KEYS[6], 'hash' }, { KEYS[7], 'hash' } }
  for j = 1, #(extra_types or {}) do specs[#specs + 1] = extra_types[j] end
  err = jc_check_types(specs)
  if err then return nil, err end
  local w
  w, err = jc_win_begin(a, KEYS[3], KEYS[4])
  if not w then return nil, err end
  return w, first
end

local function jc_win_tail_run(w, popped, first, n)
  local i = popped - first + 1
  if i < 1 or i > n then return i, 0 end
  return i, math.min(w.limit - popped, n - i + 1, JC_WIN_BULK)
end

-- planned positions of entries an earlier call met before their position
-- (jobs shifted towards the tail): a call packed before that call's reply
-- carries them again and must not match them twice (walk hash field "met",
-- comma-separated; only positions not yet popped are kept)
local function jc_win_met_before(walk)
  local met_before = {}
  local s = redis.call('HGET', walk, 'met')
  if s then for p in string.gmatch(s, '%d+') do met_before[tonumber(p)] = true end end
  return met_before
end

local function jc_win_planned(a, keyed)
  local planned, width = {}, a.width
  for i = 1, a.n do
    local b = 14 + width * (i - 1)
    local ident = ARGV[b]
    local pos = tonumber(ARGV[b + 1])
    if not pos then return nil, 'BADARG position ' .. tostring(ARGV[b + 1]) end
    local id = ARGV[b + 2]
    if id == '' then id = ident end
    local e = { i = i, pos = pos, id = id, payload = '', sha = '' }
    if width == 5 then e.payload, e.sha = ARGV[b + 3], ARGV[b + 4] end
    if width == 4 then e.sha = ARGV[b + 3] end
    if keyed then e.key = KEYS[10 + i] end
    local list = planned[ident]
    if not list then planned[ident] = { e } else list[#list + 1] = e end
  end
  return planned
end

local function jc_win_open(a, walk, lease, keyed)
  local w, err = jc_win_begin(a, walk, lease)
  if not w then return nil, err end
  local met_before = jc_win_met_before(walk)
  local planned
  planned, err = jc_win_planned(a, keyed)
  if not planned then return nil, err end
  return w, nil, met_before, planned
end

local function jc_win_try(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r['err'] then error(r['err'], 0) end
  return r
end

local function jc_win_run_step(step, e, el)
  local undo = {}
  local ok, res = pcall(step, e, el, undo)
  if ok then return res end
  for j = table.maxn(undo), 1, -1 do if undo[j] then redis.pcall(unpack(undo[j])) end end
  if type(res) == 'table' then res = res['err'] or res['message'] or 'error' end
  return 'error:' .. tostring(res)
end

-- the tail end of a dead list: LINDEX base + sign * k is the k-th element
-- from the tail; pop takes from it, push_far pushes at the hold's far end
local JC_WIN_RIGHT = { tail = -1, pop = 'RPOP', near = 'RIGHT', far = 'LEFT', push_far = 'LPUSH', base = -1, sign = -1 }
local JC_WIN_LEFT = { tail = 0, pop = 'LPOP', near = 'LEFT', far = 'RIGHT', push_far = 'RPUSH', base = 0, sign = 1 }

-- The per-job walk of one call: pops while the walk has popped fewer than
-- w.limit positions.  An element whose identity (ident_of(el), or el) is a
-- planned entry's met within [pos - slack, pos] runs step (moved, or held
-- with its code); the others go to the hold in runs, one pop with a count
-- and one push per run (the order of one LMOVE each), a run flushed
-- before any step touches the tail.
local function jc_win_per_job(w, a, dead, hold, ends, planned, met_before, ident_of, step)
  local popped, limit, slack = w.popped, w.limit, a.slack
  local this, held, moved, ended, met, moved_ids = 0, 0, 0, 0, w.met, w.moved_ids
  local near, far, base, sign = ends.near, ends.far, ends.base, ends.sign
  local met_dirty, run = false, 0
  local function flush()
    while run > 0 do
      local k = math.min(run, JC_WIN_BULK)
      local els = redis.call(ends.pop, dead, k)
      redis.call(ends.push_far, hold, unpack(els))
      held = held + #els
      run = run - k
    end
  end
  while popped < limit do
    -- the element at this position: the tail, past the run not yet flushed
    local el = redis.call('LINDEX', dead, base + sign * run)
    if not el then ended = 1; break end
    local entry, list = nil, planned[ident_of and ident_of(el) or el]
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
      local code = jc_win_run_step(step, entry, el)
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
  w.popped, w.this, w.held, w.moved, w.ended = popped, w.this + this, w.held + held, w.moved + moved, ended
  return met_dirty
end

local function jc_win_end(w, a, walk, lease, met_before, met_dirty)
  redis.call('HSET', walk, 'popped', w.popped)
  if met_before and (met_dirty or next(met_before)) then
    local keep = {}
    for p in pairs(met_before) do if p >= w.popped then keep[#keep + 1] = p end end
    if #keep > 0 then redis.call('HSET', walk, 'met', table.concat(keep, ',')) else redis.call('HDEL', walk, 'met') end
  end
  redis.call('SET', lease, a.lease_value, 'PX', a.ttl)  -- renewed (and taken back if it had expired)
end

-- where a redrive is recorded: one HMGET + one HSET per chunk into the
-- day's record hash, the value the JSON array [op id, redriven at (epoch
-- ms), count]; the hash then expires record_ttl ms after this write (the
-- walk's "record_ttl", from lease.lua begin; jobctl.ops.redrive_record)
local function jc_win_record(redriven, a, moved_ids, record_ttl)
  if #moved_ids == 0 then return end
  local head, first_time = '[' .. a.op_json .. ',' .. a.now .. ',', '[' .. a.op_json .. ',' .. a.now .. ',1]'
  for c = 1, #moved_ids, JC_WIN_BULK do  -- in chunks (unpack's limit)
    local last = math.min(c + JC_WIN_BULK - 1, #moved_ids)
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

local function jc_win_reply(w)
  local out, met = { w.this, w.popped, w.ended, w.moved, w.held }, w.met
  for j = 1, #met do out[#out + 1] = met[j] end
  return out
end
