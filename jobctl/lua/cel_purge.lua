-- cel_purge.lua: purge of planned ready messages of one Celery priority
-- list (jobctl.layouts.celery.purge).  One call per batch, each message
-- atomic and fenced by its exact bytes.
--
-- Per message: LREM list -1 <bytes> (from the tail, the oldest end, where
-- the workers' BRPOP takes them): "moved" when it removed the message,
-- "gone" when no element has those bytes any more (a worker took it, or
-- it was purged already).  kombu's messages carry a unique delivery tag,
-- so the bytes name one message.  Nothing else is written.
--
-- Never a partial batch: every ARGV and the TYPE of the list are checked
-- before the first write (a WRONGTYPE / BADARG error reply, nothing
-- written).
--
-- KEYS[1]  the ready list (list)
-- ARGV[1]  N
-- ARGV[2+2(i-1)..3+2(i-1)] per message i: id (reply name), its exact bytes (not empty)
-- returns  { id1, code1, ... }: "moved" or "gone", or an error reply

--@prelude checks

local n, err = jc_job_count(1, 2, nil)
if err then return redis.error_reply(err) end
if #KEYS ~= 1 then return redis.error_reply('BADARG one list per call, got ' .. #KEYS .. ' keys') end
for i = 1, n do
  if ARGV[3 + 2 * (i - 1)] == '' then return redis.error_reply('BADARG message bytes of job ' .. i .. ' are empty') end
end
err = jc_check_types({ { KEYS[1], 'list' } })
if err then return redis.error_reply(err) end

local out = {}
for i = 1, n do
  local id, raw = ARGV[2 + 2 * (i - 1)], ARGV[3 + 2 * (i - 1)]
  out[#out + 1] = id
  out[#out + 1] = (redis.call('LREM', KEYS[1], -1, raw) == 1) and 'moved' or 'gone'
end
return out
