-- rl_dead_window.lua: move planned jobs out of a reliable-list dead list,
-- walking a bounded window from its tail (jobctl: redrive, suppress, purge).
--
-- The dead list is walked from the tail (its oldest end; workers LPUSH new
-- dead jobs at the head).  Each tail element is popped exactly once:
--   * planned (in ARGV) and its payload's SHA1 still equals the plan's ->
--     removed from the dead list and moved to the target (or purged);
--   * anything else (not planned, changed, payload gone) -> rotated to the
--     head unchanged (LMOVE dead dead RIGHT LEFT), so it stays dead.  The
--     caller puts the rotated elements back at the tail afterwards with
--     rl_dead_restore.lua, so that the jobs that stay keep their order.
-- Every element is handled by one atomic step; the call pops at most
-- ARGV[1] elements, so its cost is bounded whatever the list's length.
-- After ARGV[2] pops it stops as soon as every planned job it was given has
-- been met.  It never pops an element it (or an earlier call of the same
-- operation, named in ARGV[5..]) rotated: meeting one means the walk went
-- all the way round the list.
--
-- KEYS[1]  dead list                          queue:{t}:dead
-- KEYS[2]  target: ready list | scheduled zset | suppressed zset | (purge) the dead list again
-- KEYS[3]  jobctl suppressed-info hash       queue:{t}:jobctl:suppressed:info
-- KEYS[4..3+N] payload key of planned job i   job:{t}:<id>
-- ARGV[1]  max elements to pop from the tail (>= 1)
-- ARGV[2]  min elements to pop before stopping early (0..ARGV[1])
-- ARGV[3]  mode: "ready" | "scheduled" | "suppressed" | "purge"
-- ARGV[4]  score for a zset target (due or suppressed-at, epoch ms)
-- ARGV[5]  S, then ARGV[6..5+S]: ids earlier calls rotated first (the walk's
--          start; S may be 0)
-- ARGV[6+S] N, the number of planned jobs passed
-- ARGV[7+S+4(i-1)..10+S+4(i-1)] per planned job i: id, payload SHA1 (hex)
--          at plan time, new payload ("" keeps the stored one), info JSON
--          for the suppressed-info hash ("" for none)
-- returns  { popped, moved_count, met_count, ended, id1, code1, ...,
--          idM, codeM, rotated_1, ..., rotated_R }: ended is 0 (stopped by
--          the limits), 1 (the list is empty) or 2 (met an element this
--          operation rotated: walked all the way round); one (id, code) pair
--          per planned job met (code "moved", "changed": payload differs
--          from the plan, or "gone": payload key missing), then the ids
--          rotated to the head, in the order they were rotated.  Planned
--          jobs not met are not listed.

local dead = KEYS[1]
local target = KEYS[2]
local max_pop = tonumber(ARGV[1])
local min_pop = tonumber(ARGV[2])
local mode = ARGV[3]
local score = ARGV[4]
local s = tonumber(ARGV[5])
local n = tonumber(ARGV[6 + s])

if mode ~= 'ready' and mode ~= 'scheduled' and mode ~= 'suppressed' and mode ~= 'purge' then
  return redis.error_reply('BADMODE ' .. mode)
end

local start = {}
for i = 1, s do start[ARGV[5 + i]] = true end

local planned = {}
for i = 1, n do
  local base = 7 + s + 4 * (i - 1)
  planned[ARGV[base]] = { key = KEYS[3 + i], sha = ARGV[base + 1],
                          payload = ARGV[base + 2], info = ARGV[base + 3] }
end
local unmet = n

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
    local raw = redis.call('GET', job.key)
    if not raw then
      code = 'gone'
    elseif redis.sha1hex(raw) ~= job.sha then
      code = 'changed'
    else
      code = 'moved'
    end
  end
  if code == 'moved' then
    redis.call('RPOP', dead)
    if job.payload ~= '' then
      redis.call('SET', job.key, job.payload, 'KEEPTTL')
    end
    if mode == 'ready' then
      redis.call('LPUSH', target, id)
    elseif mode == 'scheduled' then
      redis.call('ZADD', target, score, id)
    elseif mode == 'suppressed' then
      redis.call('ZADD', target, score, id)
      if job.info ~= '' then redis.call('HSET', KEYS[3], id, job.info) end
    else -- purge
      redis.call('DEL', job.key)
    end
    moved = moved + 1
  else
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
