-- cel_purge.lua: purge of planned ready messages of one Celery priority
-- list, one window of it per call (jobctl.layouts.celery.purge).
--
-- The window is the elements at distances lo .. hi-1 from the list's tail
-- (its oldest end, where the workers' BRPOP takes them).  Workers only pop
-- the tail and producers push the head, so a message only ever gets closer
-- to the tail: the caller walks windows from the deepest planned distance
-- toward the tail and meets every planned message still queued.
--
-- Per call: LRANGE of the window; each element whose exact bytes are a
-- planned message's is overwritten (LSET) with the tombstone, then one
-- LREM from the tail removes the tombstones (all inside this call: nobody
-- ever sees one).  Only byte-identical messages are removed (kombu gives
-- every message a unique delivery tag); the other elements keep their order.
-- Cost: O(window) plus the LREM's cheap comparisons of the elements between
-- the window and the list's nearer end.
--
-- Every ARGV and the TYPE of the list are checked before the first write
-- (a WRONGTYPE / BADARG error reply, nothing written).
--
-- KEYS[1]  the ready list (list)
-- ARGV[1]  lo: the window's first distance from the tail (integer >= 0)
-- ARGV[2]  hi: one past its last (integer > lo)
-- ARGV[3]  tombstone (not empty, not a message)
-- ARGV[4]  N
-- ARGV[4+i] message i's exact bytes (not empty)
-- returns  { i1, i2, ... }: the numbers of the messages found in the window
--          and removed (the others: not in it), or an error reply

--@prelude checks

local lo, err = jc_int(ARGV[1], 'lo', 0)
if err then return redis.error_reply(err) end
local hi
hi, err = jc_int(ARGV[2], 'hi', lo + 1)
if err then return redis.error_reply(err) end
local stone
stone, err = jc_nonempty(ARGV[3], 'tombstone')
if err then return redis.error_reply(err) end
local n
n, err = jc_job_count(4, 1, nil)
if err then return redis.error_reply(err) end
if #KEYS ~= 1 then return redis.error_reply('BADARG one list per call, got ' .. #KEYS .. ' keys') end
local want = {}
for i = 1, n do
  local raw = ARGV[4 + i]
  if raw == '' or raw == stone then return redis.error_reply('BADARG message bytes of job ' .. i) end
  want[raw] = i
end
err = jc_check_types({ { KEYS[1], 'list' } })
if err then return redis.error_reply(err) end

local elems = redis.call('LRANGE', KEYS[1], -hi, -(lo + 1))
local m, out = #elems, {}
for j = 1, m do
  local i = want[elems[j]]
  if i then
    redis.call('LSET', KEYS[1], -(lo + (m - j) + 1), stone)
    want[elems[j]] = nil
    out[#out + 1] = i
  end
end
if #out > 0 then  -- LREM from the nearer end: it scans at most that many elements before the window
  local len = redis.call('LLEN', KEYS[1])
  redis.call('LREM', KEYS[1], (lo <= len - hi) and -#out or #out, stone)
end
return out
