-- rq_suppress.lua: suppress (failed registry -> jobctl's suppressed zset),
-- unsuppress (back) and purge of suppressed jobs of an RQ queue
-- (jobctl.layouts.rq.suppress).  One call per batch, each job atomic and
-- fenced as rq_move.lua's: the id must still be in the source zset with the
-- score the plan saw, its hash "failed" with the same origin; the ZREM is
-- checked before anything else of the job is written.
--
--   suppress:   ZADD suppressed <now>, the record (ARGV extra plus the
--               registry score and the hash's PTTL it had) in the info hash,
--               the hash made persistent;
--   unsuppress: the record dropped, ZADD failed <restored score>, the hash's
--               TTL restored (when it had one);
--   purge:      the record dropped, DEL of the hash and its side keys
--               (whatever their type).
--
-- Never a partial batch: every ARGV (each job's extra too) and the TYPE of
-- the fixed keys are checked before the first write (a WRONGTYPE / BADARG
-- error reply, nothing written).  A job whose hash holds another type is
-- answered "wrongtype" before anything of it is written.
--
-- KEYS[1]  failed registry (zset)       rq:failed:<q>
-- KEYS[2]  suppressed zset              jobctl:rq:<q>:suppressed
-- KEYS[3]  suppressed info hash         jobctl:rq:<q>:suppressed:info
-- then per job i: hash, dependents, dependencies, executions, results
-- ARGV[1]  mode: "suppress" | "unsuppress" | "purge"
-- ARGV[2]  now (epoch ms, an integer)
-- ARGV[3]  N
-- ARGV[4+4(i-1)..7+4(i-1)] per job i: id, score at plan time in the source
--          zset (a number), origin, extra: suppress: the record (a JSON
--          object's text); unsuppress: "<registry score>|<hash TTL ms, -1:
--          none>"; purge: anything
-- returns  { id1, code1, ... } as rq_move.lua
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

--@prelude checks

local mode, err = jc_one_of(ARGV[1], 'mode', { suppress = true, unsuppress = true, purge = true })
if err then return redis.error_reply(err) end
local now = ARGV[2]  -- ZADD's score as sent (a Lua number would print as 1.7e+12)
err = select(2, jc_int(now, 'now', 0))
if err then return redis.error_reply(err) end
local n
n, err = jc_job_count(3, 4, nil)
if err then return redis.error_reply(err) end
if #KEYS ~= 3 + 5 * n then return redis.error_reply('BADARG job count ' .. tostring(ARGV[3])) end
err = jc_job_numbers(3, 4, 2, 'score', false)
if err then return redis.error_reply(err) end
for i = 1, n do
  local extra = ARGV[7 + 4 * (i - 1)]
  if mode == 'suppress' and (string.sub(extra, 1, 1) ~= '{' or string.sub(extra, -1) ~= '}') then
    return redis.error_reply('BADARG record of job ' .. i)
  elseif mode == 'unsuppress' then
    local score, ttl = string.match(extra, '^([^|]+)|(-?%d+)$')
    local s = tonumber(score)
    if not s or s ~= s or not ttl then return redis.error_reply('BADARG restore of job ' .. i) end
  end
end
err = jc_check_types({ { KEYS[1], 'zset' }, { KEYS[2], 'zset' }, { KEYS[3], 'hash' } })
if err then return redis.error_reply(err) end

local src = (mode == 'suppress') and KEYS[1] or KEYS[2]
local out = {}
for i = 1, n do
  local a = 4 + 4 * (i - 1)
  local id, want, origin, extra = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local base = 4 + 5 * (i - 1)
  local job = KEYS[base]
  local code = 'moved'
  local sc = redis.call('ZSCORE', src, id)
  local f = sc and redis.pcall('HMGET', job, 'status', 'origin')
  if not sc then code = 'gone'
  elseif sc ~= want and tonumber(sc) ~= tonumber(want) then code = 'changed'
  elseif f['err'] then code = 'wrongtype'
  elseif not f[1] and redis.call('EXISTS', job) == 0 then code = 'gone'
  elseif f[1] ~= 'failed' or f[2] ~= origin then code = 'changed'
  elseif redis.call('ZREM', src, id) == 0 then code = 'gone'
  elseif mode == 'suppress' then
    local ttl = redis.call('PTTL', job)
    redis.call('ZADD', KEYS[2], now, id)
    local record = string.sub(extra, 1, -2) .. ',"failed_score":"' .. sc .. '","ttl_ms":' .. ttl .. '}'
    redis.call('HSET', KEYS[3], id, record)
    redis.call('PERSIST', job)
  elseif mode == 'unsuppress' then
    local bar = string.find(extra, '|', 1, true)
    local ttl = tonumber(string.sub(extra, bar + 1))
    redis.call('HDEL', KEYS[3], id)
    redis.call('ZADD', KEYS[1], string.sub(extra, 1, bar - 1), id)
    if ttl and ttl > 0 then redis.call('PEXPIRE', job, ttl) end
  else
    redis.call('HDEL', KEYS[3], id)
    redis.call('DEL', job, KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4])
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
