-- jl_tail.lua: one window call of a tail walk over a json-list dead list
-- (jobctl.ops.walk.tail: an unfiltered redrive or purge plan).  Every tail
-- position of the walk is planned: entry i is expected at tail position
-- ARGV[14] + i - 1, its exact bytes ARGV[16 + 2(i-1)] as the client read
-- them just before, its job id ARGV[17 + 2(i-1)] ("" for an element the
-- plan excludes: a malformed string a redrive leaves dead, held uncounted).
-- The tail is the left end (workers push at the right).  An element that
-- is not the expected bytes is held ("not at its planned position").  The
-- moved strings leave in runs (one LPOP with a count, one LPUSH to
-- pending), the stored bytes moved as they are (never decoded); the rest
-- one at a time.  Walk hash, lease and the checks of every argument and
-- key type before the first write are those of jl_window.lua.
-- KEYS[1..10] as jl_window.lua (dead, hold, walk, lease, target, redriven,
--          suppressed-info, suppressed-raw, attempts, errors)
-- ARGV[1]  kind: "jl"; ARGV[2] mode: "ready" | "purge"
-- ARGV[3..12] as jl_window.lua (ARGV[9] reset and ARGV[11] slack unused;
--          ARGV[12] N); ARGV[13] W: "0"
-- ARGV[14] the tail position of entry 1; ARGV[15] unused ("")
-- ARGV[16..] per entry: its string, its job id
-- returns  { popped_by_this_call, popped_total, ended, moved, held,
--          i1, code1, ..., iM, codeM }: one (entry index, code) pair per
--          planned entry not moved: "not at its planned position",
--          "error:<msg>"

--@prelude
--@prelude window

local dead, hold, walk, lease, target = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local redriven, info_hash, raw_hash, attempts, errors = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]

local a, err = jc_win_args('jl', { ready = true, purge = true }, { ['0'] = true })
if not a then return redis.error_reply(err) end
local mode, n = a.mode, a.n
local w, first = jc_win_tail_open(a, 15 + 2 * n, 10,
                                  { { raw_hash, 'hash' }, { attempts, 'hash' }, { errors, 'hash' } })
if not w then return redis.error_reply(first) end

local popped, limit, met, moved_ids = w.popped, w.limit, w.met, w.moved_ids
local this, ended, moved, held = 0, 0, 0, 0

local function expected(i) return ARGV[14 + 2 * i], ARGV[15 + 2 * i] end

local function hold_one(code, i)
  redis.call('LMOVE', dead, hold, 'LEFT', 'RIGHT')
  held = held + 1
  if code then met[#met + 1] = i; met[#met + 1] = code end
end

local function push_back(els, from, to)
  -- els[from..to] back at the tail (the left), els[from] the tail again
  local back, m = {}, 0
  for j = to, from, -1 do m = m + 1; back[m] = els[j] end
  if m > 0 then redis.call('LPUSH', dead, unpack(back)) end
end

-- the purged jobs' attempts and errors entries (after they left the list)
local function forget(ids, from, to)
  if to < from then return end
  redis.pcall('HDEL', attempts, unpack(ids, from, to))
  redis.pcall('HDEL', errors, unpack(ids, from, to))
end

-- From the walk's position on, the run of entries whose element is the
-- expected string (and not excluded) leaves the tail in one LPOP with a
-- count and reaches pending in one LPUSH (the order of one LMOVE LEFT LEFT
-- each) under redis.pcall: a refused LPUSH puts the run back as it was and
-- the per-job loop takes the rest of the call.
local bulk_on = true
local function bulk_step()
  local i, k = jc_win_tail_run(w, popped, first, n)
  if k < 1 then return 0 end
  local els = redis.call('LPOP', dead, k)
  if not els then return 0 end
  local run, ids = 0, {}
  for j = 1, #els do
    local want, id = expected(i + j - 1)
    if els[j] ~= want or id == '' then break end
    run = j; ids[j] = id
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
  else
    forget(ids, 1, run)
  end
  local m = #moved_ids
  for j = 1, run do moved_ids[m + j] = ids[j] end
  moved = moved + run; popped = popped + run; this = this + run
  return run
end

-- one position: the expected string moves (one command), any other element is held
local function one_step()
  local el = redis.call('LINDEX', dead, 0)
  if not el then ended = 1; return end
  local i = popped - first + 1
  local want, id
  if i >= 1 and i <= n then want, id = expected(i) end
  if not want or id == '' then
    hold_one(nil, i)
  elseif el ~= want then
    hold_one('not at its planned position', i)
  else
    local r
    if mode == 'ready' then r = redis.pcall('LMOVE', dead, target, 'LEFT', 'LEFT') else r = redis.pcall('LPOP', dead) end
    if type(r) == 'table' and r['err'] then
      hold_one('error:' .. tostring(r['err']), i)
    else
      if mode == 'purge' then forget({ id }, 1, 1) end
      moved = moved + 1
      moved_ids[#moved_ids + 1] = id
    end
  end
  popped = popped + 1; this = this + 1
end

while popped < limit and ended == 0 do
  if bulk_on then bulk_step() end
  if popped < limit then one_step() end
end

w.popped, w.this, w.ended, w.moved, w.held = popped, this, ended, moved, held
jc_win_end(w, a, walk, lease, nil, false)
if mode == 'ready' then jc_win_record(redriven, a, moved_ids, w.record_ttl) end
return jc_win_reply(w)
