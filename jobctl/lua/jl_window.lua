-- jl_window.lua: one window call of a per-job walk over a json-list dead list
-- (jobctl.ops.walk.per_job: redrive, suppress, purge; an unfiltered redrive
-- or purge is a tail walk, jl_tail.lua).  The elements are
-- the jobs' JSON strings, moved byte for byte (never decoded); the tail is
-- the left end (workers push at the right).  The walk pops the tail one
-- element at a time up to tail position ARGV[6]; a planned job (the SHA1 of
-- the string met at a tail position p' with p - slack <= p' <= p, p the
-- position the plan saw it at) moves in one step under redis.pcall (the
-- target written first, then the string leaves the tail; a failing step
-- writes nothing of that job, code "error:<msg>"); any other element goes
-- to jobctl's hold list in order (list_restore.lua puts it back).  Walk
-- hash, lease and the checks of every argument and key type before the
-- first write are those of rl_window.lua (prelude/window.lua).
-- KEYS[1]  dead list                    <p>:dead
-- KEYS[2]  hold list (jobctl); KEYS[3] walk hash (jobctl); KEYS[4] lease string (jobctl)
-- KEYS[5]  target: pending list | suppressed zset | (purge) KEYS[1]
-- KEYS[6]  redrive record hash (jobctl) <p>:jobctl:redriven:<YYYY-MM-DD>
-- KEYS[7]  suppressed-info hash (jobctl)
-- KEYS[8]  suppressed-raw hash (jobctl): id -> the string
-- KEYS[9]  attempts hash; KEYS[10] errors hash (by job id)
-- ARGV[1]  kind: "jl"
-- ARGV[2]  mode: "ready" | "suppressed" | "purge"
-- ARGV[3]  operation id (owner of the walk)
-- ARGV[4]  lease value (owner of the lease) and ARGV[5] lease TTL (ms)
-- ARGV[6]  upto: pop while the walk has popped fewer tail positions than this
-- ARGV[7]  now (epoch ms); ARGV[8] score for the suppressed zset (epoch ms)
-- ARGV[9]  "1": a redrive resets attempts (HDEL attempts <id>)
-- ARGV[10] suppress: info JSON for the suppressed-info hash
-- ARGV[11] slack (positions a planned job may have shifted towards the tail)
-- ARGV[12] N, the number of planned entries passed; ARGV[13] W: "3"
-- ARGV[14+3(i-1)..] per entry i: SHA1 of the string, tail position at plan
--          time, job id
-- returns  { popped_by_this_call, popped_total, ended, moved, held,
--          i1, code1, ..., iM, codeM }: ended 1 when the dead list ran out;
--          one (entry index, code) pair per planned entry met: "moved",
--          "duplicate" (already suppressed), "error:<msg>"

--@prelude
--@prelude window

local dead, hold, walk, lease, target = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local redriven, info_hash, raw_hash, attempts, errors = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]

local a, err = jc_win_args('jl', { ready = true, suppressed = true, purge = true }, { ['3'] = true })
if not a then return redis.error_reply(err) end
err = jc_win_counts(13 + 3 * a.n, 10)
  or jc_check_types({ { dead, 'list' }, { hold, 'list' }, { walk, 'hash' }, { lease, 'string' },
                      { target, jc_win_target(a.mode) }, { redriven, 'hash' }, { info_hash, 'hash' },
                      { raw_hash, 'hash' }, { attempts, 'hash' }, { errors, 'hash' } })
if err then return redis.error_reply(err) end
local w, met_before, planned
w, err, met_before, planned = jc_win_open(a, walk, lease, false)
if not w then return redis.error_reply(err) end

local mode, score, info, reset, try = a.mode, a.score, a.info, a.reset, jc_win_try

-- one job's step: the target first, then the string leaves the tail
local function step(e, el, undo)
  if mode == 'ready' then
    -- one atomic command writes the target and takes the element off the tail
    try('LMOVE', dead, target, 'LEFT', 'LEFT')
    if reset then redis.pcall('HDEL', attempts, e.id) end
    return 'moved'
  elseif mode == 'suppressed' then
    if redis.call('ZSCORE', target, e.id) then return 'duplicate' end
    try('ZADD', target, score, e.id); undo[1] = { 'ZREM', target, e.id }
    if info ~= '' then try('HSET', info_hash, e.id, info); undo[2] = { 'HDEL', info_hash, e.id } end
    try('HSET', raw_hash, e.id, el); undo[3] = { 'HDEL', raw_hash, e.id }
  end
  try('LPOP', dead)
  -- the job has left the dead list: clean-ups that cannot lose it
  if mode == 'purge' then redis.pcall('HDEL', attempts, e.id); redis.pcall('HDEL', errors, e.id) end
  return 'moved'
end

local met_dirty = jc_win_per_job(w, a, dead, hold, JC_WIN_LEFT, planned, met_before, redis.sha1hex, step)
jc_win_end(w, a, walk, lease, met_before, met_dirty)
if mode == 'ready' then jc_win_record(redriven, a, w.moved_ids, w.record_ttl) end
return jc_win_reply(w)
