-- bullmq_redrive.lua: the unfiltered redrive (failed -> wait / prioritized)
-- of BullMQ failed jobs that are no flow child (jobctl.layouts.bullmq.ops;
-- a child goes through bullmq_move.lua with its parent's keys).  One call
-- per batch, each job atomic and fenced; the writes of bullmq_move.lua's
-- redrive: BullMQ's own score rule for prioritized, LPUSH (RPUSH when
-- opts.lifo), the marker unless the queue is paused or at its concurrency,
-- the "waiting" event with prev=failed.  data and opts are never rewritten
-- (opts is decoded only to read lifo).
--
-- Per job: the id must still be in failed with the score the plan saw and
-- its fence (prelude/bullmq_fence.lua: finishedOn, failedReason, parentKey,
-- deid) must be the plan's, else it is skipped ("gone" / "changed"); then
-- ZREM, and only when that removed it the redrive.  The scores come from one
-- ZMSCORE, the jobs that pass leave failed in one ZREM (its count checked
-- before any other write) and the pushes go in one variadic LPUSH / RPUSH /
-- ZADD, in job order (the same lists and order as one push per job; the
-- script is atomic, so no reader sees the difference).  An id given twice
-- is "gone" the second time.
--
-- Never a partial batch: every ARGV and the TYPE of the fixed keys are
-- checked before the first write (a WRONGTYPE / BADARG error reply, nothing
-- written).  A job whose hash holds another type is answered "wrongtype".
--
-- KEYS[1] failed, 2 wait, 3 prioritized, 4 pc, 5 marker, 6 meta, 7 events,
--   8 active, 9 paused (the legacy list: the target instead of wait while
--   the queue is paused and the list exists); then each job's hash
-- ARGV[1]  reset: "1" drops atm / ats / attemptsMade, "0" keeps them
-- ARGV[2]  N (at most 1000)
-- ARGV[3+3(i-1)..5+3(i-1)] per job i: id, failed score at plan time (a
--          number), its fence at plan time
-- returns  { i1, code1, ... } for the jobs not moved only (i: the job's
--          1-based place in ARGV; every other job was moved): "gone" (not in
--          failed, or no hash), "changed" (score or fence differs),
--          "wrongtype"; or an error reply "BADARG ..." / "WRONGTYPE ..."
--          (nothing written).  A short reply: a call of 200 jobs answers in
--          a few bytes when all of them moved.

--@prelude checks
--@prelude bullmq_queue
--@prelude bullmq_fence

local reset, err = jc_one_of(ARGV[1], 'reset', { ['0'] = true, ['1'] = true })
if err then return redis.error_reply(err) end
local n
n, err = jc_job_count(2, 3, 9)
if err then return redis.error_reply(err) end
if n > 1000 then return redis.error_reply('BADARG job count ' .. tostring(ARGV[2])) end
err = jc_job_numbers(2, 3, 2, 'score', false) or jc_bull_queue_types()
if err then return redis.error_reply(err) end

local held, maxlen, target = jc_bull_queue_state()
maxlen = tostring(maxlen)  -- once: a number argument is formatted again by every XADD

-- opts.lifo as the client-side plan read it (a truthy JSON value); opts is
-- decoded only when it names lifo at all
local function lifo(opts)
  if not opts or not string.find(opts, 'lifo', 1, true) then return false end
  local ok, o = pcall(cjson.decode, opts)
  if not ok or type(o) ~= 'table' then return false end
  local v = o['lifo']
  return v ~= nil and v ~= false and v ~= cjson.null and v ~= 0 and v ~= ''
end

if n == 0 then return {} end
local ids = {}
for i = 1, n do ids[i] = ARGV[3 * i] end
local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local cleared = { 'finishedOn', 'failedReason', 'stacktrace', 'returnvalue', 'processedOn' }
if reset == '1' then
  for _, f in ipairs({ 'atm', 'ats', 'attemptsMade' }) do cleared[#cleared + 1] = f end
end
-- first the checks (reads only), then the writes of the jobs that passed
-- the jobs that pass in parallel arrays (no table per job): ids, hashes, HMGET replies
local out, seen, gone, pjob, pf, np = {}, {}, {}, {}, {}, 0
for i = 1, n do
  local a = 3 * i
  local id, score, fence, job = ARGV[a], ARGV[a + 1], ARGV[a + 2], KEYS[9 + i]
  local code
  local sc = scores[i]
  local f = sc and not seen[id] and redis.pcall('HMGET', job, 'finishedOn', 'failedReason', 'parentKey', 'deid',
    'priority', 'opts')
  if not sc or seen[id] then code = 'gone'
  elseif sc ~= score and tonumber(sc) ~= tonumber(score) then code = 'changed'
  elseif f['err'] then code = 'wrongtype'
  elseif not f[1] and not f[2] and redis.call('EXISTS', job) == 0 then code = 'gone'
  elseif jc_bull_fence(f) ~= fence then code = 'changed'
  else np = np + 1; gone[np], pjob[np], pf[np] = id, job, f end
  seen[id] = true
  if code then
    out[#out + 1] = i
    out[#out + 1] = code
  end
end
if np == 0 then return out end

-- the passed ids are in failed (ZMSCORE above, nothing ran since): one ZREM
-- removes exactly them, checked before anything else is written
if redis.call('ZREM', KEYS[1], unpack(gone)) ~= np then
  return redis.error_reply('BADSTATE failed lost a checked job: only the ZREM ran')
end
-- the pushes in job order: one variadic command each (the same lists and order
-- as one push per job)
local left, right, prio = {}, {}, {}
for j = 1, np do
  local id, job, f = gone[j], pjob[j], pf[j]
  redis.call('HDEL', job, unpack(cleared))
  local p = tonumber(f[5]) or 0
  if p > 0 then prio[#prio + 1] = { p, id }
  elseif lifo(f[6]) then right[#right + 1] = id
  else left[#left + 1] = id end
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', maxlen, '*', 'event', 'waiting', 'jobId', id, 'prev', 'failed')
end
if #left > 0 then redis.call('LPUSH', target, unpack(left)) end
if #right > 0 then redis.call('RPUSH', target, unpack(right)) end
if #prio > 0 then
  -- BullMQ's rule, one INCR of pc per job in order: priority * 2^32 + (pc mod 2^32)
  local c, args = redis.call('INCRBY', KEYS[4], #prio) - #prio, {}
  for j = 1, #prio do
    args[#args + 1] = prio[j][1] * 0x100000000 + (c + j) % 0x100000000
    args[#args + 1] = prio[j][2]
  end
  redis.call('ZADD', KEYS[3], unpack(args))
end
if not held then redis.call('ZADD', KEYS[5], 0, '0') end
return out
