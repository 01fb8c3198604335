-- rl_window.lua: one window call of a per-job walk over a reliable-list or
-- stream-group dead list (jobctl.ops.walk.per_job: redrive, suppress, purge).
-- The walk pops the dead list from its tail (the right end: workers push at
-- the left), one element at a time, up to tail position ARGV[6] of the walk.
-- A planned job (its id met at a tail position p' with p - slack <= p' <= p,
-- p the position the plan saw it at) moves in one step run under
-- redis.pcall (prelude/rl_step.lua: the target written first, then the id
-- leaves the tail; a failing step writes nothing of that job, code
-- "error:<msg>"); any other element goes to jobctl's hold list in order
-- (list_restore.lua puts it back).  The walk's bookkeeping (op, total,
-- popped, "met", "record_ttl") lives in the walk hash, so calls may be
-- pipelined; each call renews the lease and refuses to run unless its
-- operation owns the lease and the walk.  Every argument and every fixed
-- key's type is checked before the first write (an error reply, nothing
-- written); a payload key of the wrong type only holds its job ("wrongtype").
-- KEYS[1]  dead list                    queue:{t}:dead | <p>:dead
-- KEYS[2]  hold list (jobctl)           queue:{t}:jobctl:hold
-- KEYS[3]  walk hash (jobctl)           queue:{t}:jobctl:walk
-- KEYS[4]  lease string (jobctl)        queue:{t}:jobctl:lease
-- KEYS[5]  target: ready list | stream (XADD jobId <id>) | scheduled zset |
--          suppressed zset | (purge) KEYS[1]
-- KEYS[6]  redrive record hash (jobctl) queue:{t}:jobctl:redriven:<YYYY-MM-DD>
-- KEYS[7]  suppressed-info hash (jobctl)
-- KEYS[8..10] KEYS[1] (the json-list hashes' places)
-- KEYS[10+i] payload key of planned entry i (job:{t}:<id>)
-- ARGV[1]  kind: "rl"
-- ARGV[2]  mode: "ready" | "stream" | "scheduled" | "suppressed" | "purge"
-- ARGV[3]  operation id (owner of the walk)
-- ARGV[4]  lease value (owner of the lease) and ARGV[5] lease TTL (ms)
-- ARGV[6]  upto: pop while the walk has popped fewer tail positions than this
-- ARGV[7]  now (epoch ms); ARGV[8] score for a zset target (epoch ms)
-- ARGV[9]  unused here ("0"/"1"); ARGV[10] suppress: info JSON for the info hash
-- ARGV[11] slack (positions a planned job may have shifted towards the tail)
-- ARGV[12] N, the number of planned entries passed
-- ARGV[13] W, fields per entry: 3, or 5 when new payloads are passed
-- ARGV[14+W(i-1)..] per entry i: id, tail position at plan time, "" (the id),
--          and with W = 5: the new payload ("" keeps the stored one) and the
--          SHA1 of the stored payload it replaces
-- returns  { popped_by_this_call, popped_total, ended, moved, held,
--          i1, code1, ..., iM, codeM }: ended 1 when the dead list ran out;
--          one (entry index, code) pair per planned entry met: "moved",
--          "gone" (payload key missing), "changed" (payload differs from the
--          one the new payload replaces), "wrongtype", "error:<msg>"

--@prelude
--@prelude window
--@prelude rl_step

local dead, hold, walk, lease, target = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local redriven, info_hash = KEYS[6], KEYS[7]

local a, err = jc_win_args('rl', { ready = true, stream = true, scheduled = true, suppressed = true, purge = true },
                           { ['3'] = true, ['5'] = true })
if not a then return redis.error_reply(err) end
err = jc_win_counts(13 + a.width * a.n, 10 + a.n)
  or jc_check_types({ { dead, 'list' }, { hold, 'list' }, { walk, 'hash' }, { lease, 'string' },
                      { target, jc_win_target(a.mode) }, { redriven, 'hash' }, { info_hash, 'hash' } })
if err then return redis.error_reply(err) end
local w, met_before, planned
w, err, met_before, planned = jc_win_open(a, walk, lease, true)
if not w then return redis.error_reply(err) end

local met_dirty = jc_win_per_job(w, a, dead, hold, JC_WIN_RIGHT, planned, met_before, nil,
                                 jc_rl_step(a, dead, target, info_hash))
jc_win_end(w, a, walk, lease, met_before, met_dirty)
if a.mode ~= 'suppressed' and a.mode ~= 'purge' then jc_win_record(redriven, a, w.moved_ids, w.record_ttl) end
return jc_win_reply(w)
