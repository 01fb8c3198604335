-- hj_list_move.lua: move planned hash-job jobs out of the processing or the
-- failed list (jobctl: requeue, redrive, suppress, purge; seed 001).
-- One atomic step per job; a job moves only if its hash still exists and
-- its fence (SHA1 of the fields workers change) equals the plan's, and it
-- is still in the source list.
--
-- Per mode, after LREM <source> 1 <id> (the id is searched from the tail
-- for processing, where the oldest claims are, from the head for failed):
--   requeue   LPUSH pending; HSET status pending, reclaimed_at_ms now,
--             claim_token "", claimed_at_ms 0 (the seed's reclaimer)
--   redrive   LPUSH pending; HSET status pending, claim_token "",
--             claimed_at_ms 0, redriven_at_ms now, redrive_operation op;
--             HINCRBY redrive_count 1; attempts 0 if asked; PERSIST
--   suppress  ZADD suppressed now id; HSET info id (info + "ttl_ms": the
--             hash's remaining TTL, -1 for none); PERSIST
--   purge     DEL the job hash; HDEL info id
--
-- KEYS[1]  source list          queue:<n>:processing | queue:<n>:failed
-- KEYS[2]  pending list         queue:<n>:pending
-- KEYS[3]  suppressed zset      queue:<n>:jobctl:suppressed
-- KEYS[4]  suppressed info hash queue:<n>:jobctl:suppressed:info
-- KEYS[4+i] job hash of job i   queue:<n>:job:<id>
-- ARGV[1]  mode: "requeue" | "redrive" | "suppress" | "purge"
-- ARGV[2]  now (epoch ms)
-- ARGV[3]  operation id (redrive_operation)
-- ARGV[4]  "1": redrive resets attempts to 0
-- ARGV[5]  suppress: JSON object {by, at_ms, reason, operation}
-- ARGV[6]  N
-- ARGV[7+2(i-1)..8+2(i-1)] per job i: id, fence (hex SHA1) at plan time
-- returns  { id1, code1, ... }: "moved", "gone" (no hash, or not in the
--          source list), "changed" (fence differs), "wrongtype" (the job's
--          key is not a hash: left alone); or an error reply, before any
--          write, for a bad argument ("BADMODE", "BADARG") or a list, zset or
--          hash key of the wrong type ("WRONGTYPE key ...")

local source, pending, suppressed, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mode, now, op, reset, record = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if mode ~= 'requeue' and mode ~= 'redrive' and mode ~= 'suppress' and mode ~= 'purge' then
  return redis.error_reply('BADMODE ' .. mode)
end
--@prelude
local n, bad = jc_int(ARGV[6], 'job count', 0)
if not n then return redis.error_reply(bad) end
if #ARGV ~= 6 + 2 * n or #KEYS ~= 4 + n then return redis.error_reply('BADARG expected ' .. n .. ' jobs') end
bad = jc_check_types({ { source, 'list' }, { pending, 'list' }, { suppressed, 'zset' }, { info, 'hash' } })
if bad then return redis.error_reply(bad) end
local fence_fields = { 'status', 'attempts', 'claim_token', 'claimed_at_ms', 'last_error_at_ms', 'payload' }
local direction = (mode == 'requeue') and -1 or 1

local out = {}
for i = 1, n do
  local id, want = ARGV[7 + 2 * (i - 1)], ARGV[8 + 2 * (i - 1)]
  local key = KEYS[4 + i]
  local code
  if redis.call('EXISTS', key) == 0 then
    code = 'gone'
  elseif jc_type_error(key, 'hash') then
    code = 'wrongtype'
  else
    local vals = redis.call('HMGET', key, unpack(fence_fields))
    for j = 1, #vals do
      if not vals[j] then vals[j] = '' end
    end
    if redis.sha1hex(table.concat(vals, '\31')) ~= want then
      code = 'changed'
    elseif redis.call('LREM', source, direction, id) == 0 then
      code = 'gone'
    else
      if mode == 'requeue' then
        redis.call('LPUSH', pending, id)
        redis.call('HSET', key, 'status', 'pending', 'reclaimed_at_ms', now, 'claim_token', '',
                   'claimed_at_ms', 0)
      elseif mode == 'redrive' then
        redis.call('LPUSH', pending, id)
        redis.call('HSET', key, 'status', 'pending', 'claim_token', '', 'claimed_at_ms', 0,
                   'redriven_at_ms', now, 'redrive_operation', op)
        redis.call('HINCRBY', key, 'redrive_count', 1)
        if reset == '1' then redis.call('HSET', key, 'attempts', 0) end
        redis.call('PERSIST', key)
      elseif mode == 'suppress' then
        local ttl = redis.call('PTTL', key)
        redis.call('ZADD', suppressed, now, id)
        redis.call('HSET', info, id, string.sub(record, 1, -2) .. ',"ttl_ms":' .. ttl .. '}')
        redis.call('PERSIST', key)
      else
        redis.call('DEL', key)
        redis.call('HDEL', info, id)
      end
      code = 'moved'
    end
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
