-- rl_pause_move.lua: jobctl pause / resume on the reliable-list layout.
-- One atomic step per job, inside one bounded window of the source list.
--
-- pause  (ready list -> paused): the window counts positions from the
--        source's TAIL (the served end); each found job is overwritten with
--        a tombstone (LSET), the tombstones are removed with one
--        LREM count -n (it stops at the window's depth), then the jobs are
--        LPUSHed on the paused list in the order given (oldest first), so
--        the paused list keeps the ready order (tail: served first).
-- pause_tail: the same, but the jobs are given newest first and RPUSHed
--        (appended at the paused list's served end).
-- pause_zset (scheduled zset -> paused): a job moves only while its score
--        is the planned one (ZREM, then LPUSH on the paused list).
-- resume_all, pause_all: resume or pause, but only when the window holds
--        every given job (nothing moves otherwise).
-- resume (paused -> where it was paused from): the window counts from the
--        paused list's HEAD (newest first); jobs are given newest first and
--        each is RPUSHed on the ready list it came from (or ZADDed back on
--        the scheduled zset with its old due time), so that the oldest paused
--        job ends at the served end and the original order is restored.
-- Pause moves a job only while its payload SHA1 is the planned one and, in
-- a hold cycle, only while the hold record exists.
--
-- KEYS[1]  source      ready list | scheduled zset | paused list
-- KEYS[2]  paused list queue:{t}:jobctl:paused
-- KEYS[3]  paused info queue:{t}:jobctl:paused:info (hash id -> JSON)
-- KEYS[4]  holds       queue:{t}:jobctl:holds
-- KEYS[5]  scheduled   queue:{t}:scheduled (resume of jobs paused from it)
-- KEYS[6..5+R]         resume: the shard's ready lists (a job goes back to
--                      the one named in its info; the last one by default)
-- KEYS[6+R..]          pause: one payload key per job, in ARGV order
-- ARGV[1]  mode        pause | pause_all | pause_tail | pause_zset | resume | resume_all
-- ARGV[2]  lo, ARGV[3] hi: window positions (inclusive; list modes; at
--          most 4096 positions: the script's one window read)
-- ARGV[4]  tombstone   a value no job id has
-- ARGV[5]  hold id     "" when not a hold cycle
-- ARGV[6]  R           how many ready lists follow in KEYS (resume)
-- ARGV[7]  N, then per job: id, sha1 (resume: ""), planned position (list
--          modes) or due time (pause_zset) ("" none), info JSON (pause)
-- returns  { found, shift, id1, code1, ... }: code "moved", "changed"
--          (payload or due time differs), "gone" (payload key missing),
--          "unseen" (not in the window: claimed, moved, or drifted out of
--          it), "unheld" (the hold record is gone), "wrongtype" (pause:
--          the payload key holds another type), "error" (pause_zset: a
--          write failed; the job's writes were undone, it stays scheduled);
--          found: how many given jobs the window held; shift: the largest
--          (planned position - found position) among them (0 when none)
-- errors   every argument (mode, window, counts, ids, positions, due
--          times) and the type of every key but the payload keys are
--          checked before any write: "BADARG ...", "WRONGTYPE key <key>
--          holds a <type>, expected ..." (nothing written)

local src, paused, info, holds, scheduled = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
--@prelude
local MODES = { pause = true, pause_all = true, pause_tail = true, pause_zset = true, resume = true,
                resume_all = true }
-- list modes: one window read (bounded: at most MAX_WINDOW elements)
local MAX_WINDOW = 4096

-- each job's arguments (ARGV[7] N, then 4 per job)
local function job(i)
  local b = 8 + 4 * (i - 1)
  return ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
end

-- the window, the ready-list count and the jobs' arguments; nil or the error text
local function check_args(mode, resuming)
  local _, lo, hi, nready, n, err
  lo, err = jc_int(ARGV[2], 'lo', 0)
  if not err then hi, err = jc_int(ARGV[3], 'hi', 0) end
  if not err and mode ~= 'pause_zset' and (hi < lo or hi - lo + 1 > MAX_WINDOW) then
    err = 'BADARG window ' .. lo .. '..' .. hi .. ' (at most ' .. MAX_WINDOW .. ' positions)'
  end
  if not err then _, err = jc_nonempty(ARGV[4], 'tombstone') end
  if not err then nready, err = jc_int(ARGV[6], 'ready list count', resuming and 1 or 0) end
  if not err then n, err = jc_job_count(7, 4, (not resuming) and 5 + nready or nil) end
  if not err and resuming and #KEYS ~= 5 + nready then
    err = 'BADARG keys: ' .. (5 + nready) .. ' expected, got ' .. #KEYS
  end
  for i = 1, (err and 0 or n) do
    local id, _, where = job(i)
    _, err = jc_nonempty(id, 'id of job ' .. i)
    if not err and (where ~= '' or mode == 'pause_zset') then
      _, err = jc_number(where, (mode == 'pause_zset' and 'due time' or 'position') .. ' of job ' .. i)
    end
    if err then break end
  end
  return err
end

-- every argument and the type of every key (a payload key of another type
-- only skips its job: "wrongtype"), before any write
local function check(mode)
  local resuming = mode == 'resume' or mode == 'resume_all'
  local err = check_args(mode, resuming)
  if err then return err end
  local specs = { { src, mode == 'pause_zset' and 'zset' or 'list' }, { paused, 'list' }, { info, 'hash' },
                  { holds, 'hash' }, { scheduled, 'zset' } }
  for r = 1, (resuming and tonumber(ARGV[6]) or 0) do specs[#specs + 1] = { KEYS[5 + r], 'list' } end
  return jc_check_types(specs)
end

local mode, err = jc_one_of(ARGV[1], 'mode', MODES)
err = err or check(mode)
if err then return redis.error_reply(err) end

local lo, hi, tomb, hold = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local nready = tonumber(ARGV[6])
local n = tonumber(ARGV[7])
local out = {0, 0}

if hold ~= '' and redis.call('HEXISTS', holds, hold) == 0 then
  return jc_each(out, 8, 4, n, function() return 'unheld' end)
end

if mode == 'pause_zset' then
  -- the paused list and the record first, the zset last: a failing write
  -- undoes the job's earlier ones ("error") and the job stays scheduled
  return jc_each(out, 8, 4, n, function(i)
    local id, sha, score, rec = job(i)
    local sc = redis.call('ZSCORE', src, id)
    if not sc then return 'unseen' end
    local code = jc_payload_code(KEYS[5 + nready + i], sha, false)
    if code then return code end
    if tonumber(sc) ~= tonumber(score) then return 'changed' end
    return jc_move({ { { 'LPUSH', paused, id }, { 'LPOP', paused } },
                     { { 'HSET', info, id, rec }, { 'HDEL', info, id } },
                     { { 'ZREM', src, id }, nil } })
  end)
end

-- list modes: read the window once; positions counted from the tail
-- (pause) or the head (resume)
local window
local from_tail = (mode == 'pause' or mode == 'pause_tail' or mode == 'pause_all')
if from_tail then
  window = redis.call('LRANGE', src, -(hi + 1), -(lo + 1))
else
  window = redis.call('LRANGE', src, lo, hi)
end
local at = {}
for k = 1, #window do
  local pos
  if from_tail then pos = lo + #window - k else pos = lo + k - 1 end
  if at[window[k]] == nil then at[window[k]] = pos end
end

local moving = {}
local shift, found = nil, 0
local codes, places = {}, {}
for i = 1, n do
  local id, sha, score = job(i)
  local pos = at[id]
  local code
  if pos ~= nil then
    found = found + 1
    at[id] = nil
    if score ~= '' then
      local d = tonumber(score) - pos
      if shift == nil or d > shift then shift = d end
    end
  end
  if pos == nil then
    code = 'unseen'
  elseif from_tail then
    code = jc_payload_code(KEYS[5 + nready + i], sha, false) or 'moved'
  else
    code = 'moved'
  end
  codes[i], places[i] = code, pos
end
-- resume_all, pause_all: all or nothing, so that a window holding only part of the
-- jobs never moves them out of order (the caller re-centres and retries)
local hold_back = ((mode == 'resume_all' or mode == 'pause_all') and found < n)
jc_each(out, 8, 4, n, function(i)
  local id, _, _, rec = job(i)
  local code = codes[i]
  if hold_back then code = 'unseen' end
  if code == 'moved' then
    if from_tail then
      redis.call('LSET', src, -(places[i] + 1), tomb)
    else
      redis.call('LSET', src, places[i], tomb)
    end
    moving[#moving + 1] = {id, rec}
  end
  return code
end)
out[1] = found
out[2] = shift or 0
if #moving == 0 then return out end

if from_tail then
  redis.call('LREM', src, -#moving, tomb)
  local push = 'LPUSH'
  if mode == 'pause_tail' then push = 'RPUSH' end
  for _, m in ipairs(moving) do
    redis.call(push, paused, m[1])
    redis.call('HSET', info, m[1], m[2])
  end
  return out
end

-- resume
redis.call('LREM', src, #moving, tomb)
local readies = {}
for r = 1, nready do readies[KEYS[5 + r]] = true end
for _, m in ipairs(moving) do
  local id = m[1]
  local rec = redis.call('HGET', info, id)
  local from, due = nil, nil
  if rec then
    local ok, doc = pcall(cjson.decode, rec)
    if ok and type(doc) == 'table' then
      from = doc['from']
      due = doc['score']
    end
  end
  if from == scheduled and due ~= nil and due ~= cjson.null then
    redis.call('ZADD', scheduled, due, id)
  elseif from ~= nil and readies[from] then
    redis.call('RPUSH', from, id)
  else
    redis.call('RPUSH', KEYS[5 + nready], id)
  end
  redis.call('HDEL', info, id)
end
return out
