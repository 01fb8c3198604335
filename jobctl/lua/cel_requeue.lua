-- cel_requeue.lua: requeue of a Celery queue's unacked messages past their
-- visibility timeout (jobctl.layouts.celery.ops): kombu's restore_visible,
-- fenced and bounded.  One call per batch, each message atomic and fenced.
--
-- Per message: its delivery tag must still be in unacked_index with the
-- score the plan saw, its unacked value must have the SHA1 the plan saw, and
-- by the server's clock (TIME) score + visibility timeout must have passed,
-- else it is skipped ("gone" / "changed" / "not_overdue"); then HDEL of the
-- value and ZREM of the index entry, and only when the HDEL removed it,
-- RPUSH of the message's stored bytes (the value's substring the plan named,
-- never re-encoded) to its priority list: where kombu's own restore puts it
-- (BRPOP serves that end first).
--
-- Never a partial batch: every ARGV and the TYPE of the fixed keys are
-- checked before the first write (a WRONGTYPE / BADARG error reply, nothing
-- written).  A message whose target list holds another type is answered
-- "wrongtype" before anything of it is written.
--
-- KEYS[1]  unacked (hash)          delivery tag -> [message, exchange, routing_key]
-- KEYS[2]  unacked_index (zset)    delivery tag -> delivery time (s)
-- KEYS[2+i] message i's ready list (list)
-- ARGV[1]  visibility timeout (seconds, a number >= 0)
-- ARGV[2]  N
-- ARGV[3+6(i-1)..8+6(i-1)] per message i: id (reply name), delivery tag,
--          index score at plan time (a number), SHA1 of the unacked value,
--          first and last byte (1-based) of the message inside the value
-- returns  { id1, code1, ... }: "moved", "gone" (no index entry or no
--          value), "changed" (score or value differ), "not_overdue",
--          "wrongtype", or an error reply "BADARG ..." / "WRONGTYPE ..."

--@prelude checks

local vt = tonumber(ARGV[1])
if not vt or vt < 0 then return redis.error_reply('BADARG visibility timeout ' .. tostring(ARGV[1])) end
local n, err = jc_job_count(2, 6, 2)
if err then return redis.error_reply(err) end
err = jc_job_numbers(2, 6, 3, 'score', false) or jc_job_numbers(2, 6, 5, 'first byte', false)
  or jc_job_numbers(2, 6, 6, 'last byte', false)
  or jc_check_types({ { KEYS[1], 'hash' }, { KEYS[2], 'zset' } })
if err then return redis.error_reply(err) end
for i = 1, n do
  local first, last = tonumber(ARGV[7 + 6 * (i - 1)]), tonumber(ARGV[8 + 6 * (i - 1)])
  if first < 1 or last < first then return redis.error_reply('BADARG byte range of job ' .. i) end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out, ltype = {}, {}
for i = 1, n do
  local at = 3 + 6 * (i - 1)
  local id, tag, want, sha = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local first, last = tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5])
  local target = KEYS[2 + i]
  if ltype[target] == nil then ltype[target] = redis.call('TYPE', target)['ok'] end
  local code = 'moved'
  local sc = redis.call('ZSCORE', KEYS[2], tag)
  local v = sc and redis.call('HGET', KEYS[1], tag)
  if not sc or not v then code = 'gone'
  elseif sc ~= want and tonumber(sc) ~= tonumber(want) then code = 'changed'
  elseif redis.sha1hex(v) ~= sha or last > #v then code = 'changed'
  elseif tonumber(sc) + vt > now then code = 'not_overdue'
  elseif ltype[target] ~= 'none' and ltype[target] ~= 'list' then code = 'wrongtype'
  elseif redis.call('HDEL', KEYS[1], tag) == 0 then code = 'gone'
  else
    redis.call('ZREM', KEYS[2], tag)
    redis.call('RPUSH', target, string.sub(v, first, last))
    ltype[target] = 'list'
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
