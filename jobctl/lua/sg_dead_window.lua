-- sg_dead_window.lua: move planned jobs out of a stream-group dead list
-- (ids, newest at the head; seed 000 s.11), walking a bounded window from
-- its tail (jobctl: redrive to the stream or the scheduled zset, suppress,
-- purge).  The dead-stream kind needs no window: sg_dead_move.lua removes
-- an entry by its id.
--
-- Each tail element is popped exactly once:
--   * planned (in ARGV) and its payload's SHA1 still equals the plan's ->
--     moved to the target (or purged), then removed from the dead list;
--   * anything else (not planned, changed, payload gone or of the wrong
--     type, a failed write) -> rotated to the head unchanged (LMOVE dead
--     dead RIGHT LEFT), so it stays dead.  The caller puts the rotated ids
--     back at the tail afterwards with sg_dead_restore.lua, so that the
--     jobs that stay dead keep their order.
-- The call pops at most ARGV[1] elements, so its cost is bounded whatever
-- the list's length (no LPOS or LREM).  After ARGV[2] pops it stops as soon
-- as every planned job it was given has been met.  It never pops an
-- element it (or an earlier call of the same operation, named in ARGV[5..])
-- rotated: meeting one means the walk went all the way round the list.
--
-- Never a partial batch: every ARGV and the TYPE of the dead list, target
-- and info hash are checked before the first write (a WRONGTYPE error
-- reply, nothing written); a payload key of the wrong type only keeps its
-- own job dead ("wrongtype").  Each job's writes go through redis.pcall,
-- the target first, the dead list last; the first failing write undoes the
-- job's earlier ones ("error", the job stays dead) and the walk goes on.
--
-- KEYS[1]  dead list                         queue:{t}:dead
-- KEYS[2]  target: stream:{t}:jobs (ready) | queue:{t}:scheduled |
--          queue:{t}:jobctl:suppressed | (purge) the dead list again
-- KEYS[3]  jobctl suppressed-info hash       queue:{t}:jobctl:suppressed:info
-- KEYS[4..3+N] payload key of planned job i   job:{t}:<id>
-- ARGV[1]  max elements to pop from the tail (>= 1)
-- ARGV[2]  min elements to pop before stopping early (0..ARGV[1])
-- ARGV[3]  mode: "ready" | "scheduled" | "suppressed" | "purge"
-- ARGV[4]  score for a zset target (due or suppressed-at, epoch ms)
-- ARGV[5]  S, then ARGV[6..5+S]: ids earlier calls rotated first (S may be 0)
-- ARGV[6+S] N, the number of planned jobs passed
-- ARGV[7+S+4(i-1)..10+S+4(i-1)] per planned job i: id, payload SHA1 (hex)
--          at plan time, new payload ("" keeps the stored one), info JSON
--          for the suppressed-info hash ("" for none)
-- returns  { popped, moved_count, met_count, ended, id1, code1, ...,
--          idM, codeM, rotated_1, ..., rotated_R }: ended is 0 (stopped by
--          the limits), 1 (the list is empty) or 2 (met an element this
--          operation rotated); one (id, code) pair per planned job met
--          ("moved", "changed", "gone": payload key missing, "wrongtype",
--          "error"), then the ids rotated to the head, in rotation order
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local dead, target, info = KEYS[1], KEYS[2], KEYS[3]
--@prelude
local max_pop, err = jc_int(ARGV[1], 'max_pop', 1)
if not max_pop then return redis.error_reply(err) end
local min_pop
min_pop, err = jc_int(ARGV[2], 'min_pop', 0)
if not min_pop then return redis.error_reply(err) end
local mode
mode, err = jc_one_of(ARGV[3], 'mode', { ready = true, scheduled = true, suppressed = true, purge = true })
if not mode then return redis.error_reply(err) end
local score = ARGV[4]
if (mode == 'scheduled' or mode == 'suppressed') and not tonumber(score) then
  return redis.error_reply('BADARG score ' .. tostring(score))
end
local s
s, err = jc_int(ARGV[5], 'start count', 0)
if not s then return redis.error_reply(err) end
local n
n, err = jc_int(ARGV[6 + s], 'job count', 0)
if not n then return redis.error_reply(err) end
if #ARGV ~= 6 + s + 4 * n or #KEYS ~= 3 + n then
  return redis.error_reply('BADARG argument count')
end
local specs = { { dead, 'list' }, { info, 'hash' } }
if mode == 'ready' then
  specs[3] = { target, 'stream' }
elseif mode ~= 'purge' then
  specs[3] = { target, 'zset' }
end
local bad = jc_check_types(specs)
if bad then return redis.error_reply(bad) end

local start = {}
for i = 1, s do start[ARGV[5 + i]] = true end
local planned = {}
for i = 1, n do
  local base = 7 + s + 4 * (i - 1)
  planned[ARGV[base]] = { key = KEYS[3 + i], sha = ARGV[base + 1], payload = ARGV[base + 2], info = ARGV[base + 3] }
end
local unmet = n

local function failed(r)
  return type(r) == 'table' and r['err'] ~= nil
end

-- Move job `id` (at the dead list's tail, payload `raw`); true when done,
-- false when a write failed and the job's earlier writes were undone.
local function move(id, job, raw)
  local undo = {}
  local function run(cmd, back)
    local r = redis.pcall(unpack(cmd))
    if failed(r) then
      for j = #undo, 1, -1 do redis.pcall(unpack(undo[j])) end
      return false
    end
    if type(back) == 'function' then back = back(r) end
    if back then undo[#undo + 1] = back end
    return true
  end
  if mode == 'purge' then
    return run({ 'RPOP', dead }, { 'RPUSH', dead, id }) and run({ 'DEL', job.key })
  end
  local ok
  if mode == 'ready' then
    ok = run({ 'XADD', target, '*', 'jobId', id }, function(r) return { 'XDEL', target, r } end)
  else
    ok = run({ 'ZADD', target, score, id }, { 'ZREM', target, id })
  end
  if ok and mode == 'suppressed' and job.info ~= '' then
    ok = run({ 'HSET', info, id, job.info }, { 'HDEL', info, id })
  end
  if ok and job.payload ~= '' then
    ok = run({ 'SET', job.key, job.payload, 'KEEPTTL' }, { 'SET', job.key, raw, 'KEEPTTL' })
  end
  return ok and run({ 'RPOP', dead })
end

local met = {}
local rotated = {}
local popped, moved, ended = 0, 0, 0
while popped < max_pop and not (popped >= min_pop and unmet == 0) do
  local id = redis.call('LINDEX', dead, -1)
  if not id then ended = 1; break end
  if start[id] then ended = 2; break end
  popped = popped + 1
  local job = planned[id]
  local code = nil
  if job then
    planned[id] = nil
    unmet = unmet - 1
    if jc_type_error(job.key, 'string') then
      code = 'wrongtype'
    else
      local raw = redis.call('GET', job.key)
      if not raw then
        code = 'gone'
      elseif redis.sha1hex(raw) ~= job.sha then
        code = 'changed'
      elseif move(id, job, raw) then
        code = 'moved'
        moved = moved + 1
      else
        code = 'error'
      end
    end
  end
  if code ~= 'moved' then
    redis.call('LMOVE', dead, dead, 'RIGHT', 'LEFT')
    rotated[#rotated + 1] = id
    if s == 0 and #rotated == 1 then start[id] = true; s = -1 end
  end
  if code then
    met[#met + 1] = id
    met[#met + 1] = code
  end
end

local out = { popped, moved, #met / 2, ended }
for i = 1, #met do out[#out + 1] = met[i] end
for i = 1, #rotated do out[#out + 1] = rotated[i] end
return out
