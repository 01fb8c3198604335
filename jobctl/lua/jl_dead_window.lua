-- jl_dead_window.lua: move planned job strings out of a json-list dead list,
-- walking a bounded window from its oldest end (jobctl: redrive, suppress,
-- purge; seed 002).
--
-- The dead list is walked from the left (workers RPUSH new dead strings at
-- the right, so left positions do not shift).  Each left element is popped
-- exactly once:
--   * its SHA1 is a planned one not yet met (and, for suppress, the id is
--     not suppressed already) -> removed and moved, byte for byte;
--   * anything else -> rotated to the tail unchanged (LMOVE dead dead LEFT
--     RIGHT), so it stays dead; the caller restores the order afterwards
--     with jl_dead_restore.lua.
-- Moves:  redrive   LPUSH pending <bytes>; HDEL attempts <id> if ARGV[4] is "1"
--         suppress  ZADD suppressed now <id>; HSET raw <id> <bytes>; HSET info <id> ARGV[5]
--         purge     HDEL attempts <id>; HDEL errors <id>
-- The call pops at most ARGV[1] elements: its cost does not depend on the
-- list's length.
--
-- KEYS[1]  dead list               <p>:dead
-- KEYS[2]  target: pending list | suppressed zset | (purge) the dead list again
-- KEYS[3]  jobctl raw hash         <p>:jobctl:suppressed:raw
-- KEYS[4]  jobctl info hash        <p>:jobctl:suppressed:info
-- KEYS[5]  attempts hash           <p>:attempts
-- KEYS[6]  errors hash             <p>:errors
-- ARGV[1]  max elements to pop from the left (>= 1)
-- ARGV[2]  mode: "redrive" | "suppress" | "purge"
-- ARGV[3]  now (epoch ms): the suppressed score
-- ARGV[4]  "1": redrive resets attempts (deletes the attempts entry)
-- ARGV[5]  suppress: info JSON {by, at_ms, reason, operation}
-- ARGV[6]  N, planned strings passed
-- ARGV[7+2(i-1)..8+2(i-1)] per planned string i: job id, SHA1 (hex) of its bytes
-- returns  { popped, met_count, i1, code1, ..., sha_rotated_1, ... }: per
--          planned string met, its index i (1-based, in ARGV order) and code
--          ("moved", or "duplicate": already suppressed, left dead); then the
--          SHA1s of the strings rotated to the tail, in rotation order

local dead, target, raw_hash, info_hash, attempts, errors = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local max_pop = tonumber(ARGV[1])
local mode, now, reset, info = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local n = tonumber(ARGV[6])
if mode ~= 'redrive' and mode ~= 'suppress' and mode ~= 'purge' then
  return redis.error_reply('BADMODE ' .. mode)
end

local ids, planned = {}, {}
for i = 1, n do
  local id, sha = ARGV[7 + 2 * (i - 1)], ARGV[8 + 2 * (i - 1)]
  ids[i] = id
  planned[sha] = planned[sha] or {}
  table.insert(planned[sha], i)
end

local met, rotated = {}, {}
local popped = 0
for _ = 1, max_pop do
  local el = redis.call('LINDEX', dead, 0)
  if not el then break end
  popped = popped + 1
  local sha = redis.sha1hex(el)
  local queue = planned[sha]
  local take = nil
  if queue and #queue > 0 then
    take = table.remove(queue, 1)
    if mode == 'suppress' and redis.call('ZSCORE', target, ids[take]) then
      met[#met + 1] = take
      met[#met + 1] = 'duplicate'
      take = nil
    end
  end
  if take then
    local id = ids[take]
    redis.call('LPOP', dead)
    if mode == 'redrive' then
      redis.call('LPUSH', target, el)
      if reset == '1' then redis.call('HDEL', attempts, id) end
    elseif mode == 'suppress' then
      redis.call('ZADD', target, now, id)
      redis.call('HSET', raw_hash, id, el)
      redis.call('HSET', info_hash, id, info)
    else
      redis.call('HDEL', attempts, id)
      redis.call('HDEL', errors, id)
    end
    met[#met + 1] = take
    met[#met + 1] = 'moved'
  else
    redis.call('LMOVE', dead, dead, 'LEFT', 'RIGHT')
    rotated[#rotated + 1] = sha
  end
end

local out = { popped, #met / 2 }
for i = 1, #met do out[#out + 1] = met[i] end
for i = 1, #rotated do out[#out + 1] = rotated[i] end
return out
