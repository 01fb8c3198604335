-- ceiling_move.lua: the fastest plausible dead -> ready move, for
-- bench/redrive.py to compare jobctl's redrive with.  Benchmark only:
-- deliberately none of jobctl's guarantees (no plan, no fence, no envelope
-- update, no journal), and the filtered mode builds payload key names inside
-- the script, which Redis Cluster would not allow.
--
-- Unfiltered (ARGV[2] == ""): RPOP up to ARGV[1] ids from the dead list's
-- tail and LPUSH them onto the ready list.
-- Filtered: pop ARGV[1] ids one by one from the tail; a job whose envelope's
-- tenantId equals ARGV[2] goes to ready, any other is pushed back at the
-- dead list's head (so a caller walks the list once by calling it
-- LLEN / ARGV[1] times).
--
-- KEYS[1]  dead list    queue:{t}:dead
-- KEYS[2]  ready list   queue:{t}:ready
-- ARGV[1]  ids per call (>= 1)
-- ARGV[2]  tenantId to match, or "" for every job
-- ARGV[3]  payload key prefix job:{t}: (filtered mode only)
-- returns  { popped, moved }

local dead, ready = KEYS[1], KEYS[2]
local n = tonumber(ARGV[1])
local tenant = ARGV[2]

if tenant == '' then
  local ids = redis.call('RPOP', dead, n)
  if not ids then return { 0, 0 } end
  redis.call('LPUSH', ready, unpack(ids))
  return { #ids, #ids }
end

local prefix = ARGV[3]
local popped, moved = 0, 0
for _ = 1, n do
  local id = redis.call('RPOP', dead)
  if not id then break end
  popped = popped + 1
  local raw = redis.call('GET', prefix .. id)
  local ok, doc = pcall(cjson.decode, raw or '')
  if ok and type(doc) == 'table' and doc.tenantId == tenant then
    redis.call('LPUSH', ready, id)
    moved = moved + 1
  else
    redis.call('LPUSH', dead, id)
  end
end
return { popped, moved }
