-- rl_dead_window.lua: move planned jobs out of a reliable-list dead list,
-- walking a bounded window from its tail (jobctl: redrive, suppress, purge).
--
-- The dead list is walked from the tail (its oldest end; workers LPUSH new
-- dead jobs at the head).  Each tail element is popped exactly once:
--   * planned (in ARGV) and its payload's SHA1 still equals the plan's ->
--     removed from the dead list and moved to the target (or purged);
--   * anything else (not planned, changed, payload gone) -> rotated to the
--     head unchanged (LMOVE dead dead RIGHT LEFT), so it stays dead.
-- Every element is handled by one atomic step; the call pops at most
-- ARGV[1] elements, so its cost is bounded whatever the list's length.
--
-- KEYS[1]  dead list                          queue:{t}:dead
-- KEYS[2]  target: ready list | scheduled zset | suppressed zset | (purge) the dead list again
-- KEYS[3]  jobctl suppressed-info hash       queue:{t}:jobctl:suppressed:info
-- KEYS[4..3+N] payload key of planned job i   job:{t}:<id>
-- ARGV[1]  max elements to pop from the tail (window size, >= 1)
-- ARGV[2]  mode: "ready" | "scheduled" | "suppressed" | "purge"
-- ARGV[3]  score for a zset target (due or suppressed-at, epoch ms)
-- ARGV[4]  N, the number of planned jobs passed
-- ARGV[5+4(i-1)..8+4(i-1)] per planned job i: id, payload SHA1 (hex) at plan
--          time, new payload ("" keeps the stored one), info JSON for the
--          suppressed-info hash ("" for none)
-- returns  { popped, moved_count, id1, code1, id2, code2, ... } with one
--          pair per planned job met in the window; code is "moved",
--          "changed" (payload differs from the plan) or "gone" (payload
--          key missing).  Planned jobs not met are not listed.

local dead = KEYS[1]
local target = KEYS[2]
local max_pop = tonumber(ARGV[1])
local mode = ARGV[2]
local score = ARGV[3]
local n = tonumber(ARGV[4])

local planned = {}
for i = 1, n do
  local base = 5 + 4 * (i - 1)
  planned[ARGV[base]] = { key = KEYS[3 + i], sha = ARGV[base + 1],
                          payload = ARGV[base + 2], info = ARGV[base + 3] }
end

local out = { 0, 0 }
local popped, moved = 0, 0
for _ = 1, max_pop do
  local id = redis.call('LINDEX', dead, -1)
  if not id then break end
  popped = popped + 1
  local job = planned[id]
  local code = nil
  if job then
    planned[id] = nil
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
    elseif mode == 'purge' then
      redis.call('DEL', job.key)
    else
      return redis.error_reply('BADMODE ' .. mode)
    end
    moved = moved + 1
  else
    redis.call('LMOVE', dead, dead, 'RIGHT', 'LEFT')
  end
  if code then
    out[#out + 1] = id
    out[#out + 1] = code
  end
end
out[1] = popped
out[2] = moved
return out
