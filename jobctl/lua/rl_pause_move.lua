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
--          it), "unheld" (the hold record is gone); found: how many given
--          jobs the window held; shift: the largest (planned position -
--          found position) among them (0 when none)

local src, paused, info, holds, scheduled = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
--@prelude
local mode, lo, hi, tomb, hold = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local nready = tonumber(ARGV[6])
local n = tonumber(ARGV[7])
local out = {0, 0}

local function job(i)
  local b = 8 + 4 * (i - 1)
  return ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
end

if hold ~= '' and redis.call('HEXISTS', holds, hold) == 0 then
  return jc_each(out, 8, 4, n, function() return 'unheld' end)
end

if mode == 'pause_zset' then
  return jc_each(out, 8, 4, n, function(i)
    local id, sha, score, rec = job(i)
    local sc = redis.call('ZSCORE', src, id)
    local raw = redis.call('GET', KEYS[5 + nready + i])
    if not sc then return 'unseen' end
    if not raw then return 'gone' end
    if redis.sha1hex(raw) ~= sha or tonumber(sc) ~= tonumber(score) then return 'changed' end
    redis.call('ZREM', src, id)
    redis.call('LPUSH', paused, id)
    redis.call('HSET', info, id, rec)
    return 'moved'
  end)
end

-- list modes: read the window once (bounded: at most MAX_WINDOW elements);
-- positions counted from the tail (pause) or the head (resume)
local MAX_WINDOW = 4096
if hi < lo or hi - lo + 1 > MAX_WINDOW then
  return redis.error_reply('ERR rl_pause_move: window ' .. lo .. '..' .. hi .. ' wider than ' .. MAX_WINDOW)
end
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
    local raw = redis.call('GET', KEYS[5 + nready + i])
    if not raw then
      code = 'gone'
    elseif redis.sha1hex(raw) ~= sha then
      code = 'changed'
    else
      code = 'moved'
    end
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
