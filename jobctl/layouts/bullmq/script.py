"""The Lua script of a BullMQ redrive or purge of failed jobs
(:data:`MOVE_LUA`): one call per batch, each job atomic and fenced.

Redrive (failed -> wait/prioritized) or purge of BullMQ failed jobs, each atomic and fenced.
KEYS: 1 failed, 2 wait, 3 prioritized, 4 pc, 5 marker, 6 meta, 7 events, 8 active, 9 paused (the legacy
  list: the target instead of wait while the queue is paused and the list exists), then per job
  redrive: hash, parent hash, parent:unsuccessful, parent:failed, parent:dependencies (the hash 5
  times when no parent); purge: hash, :logs, :dependencies, :processed, :failed, :unsuccessful,
  dedup key (the hash again when none).
ARGV: mode ("redrive" | "purge"), reset ("1": drop atm/ats), N, then per job: id, failed score at
  plan time, finishedOn, sha1 of failedReason, push ("LPUSH" | "RPUSH"), parentKey or "", deid or "".
Returns {id, code, ...}: "moved", "gone" (not in failed, or no hash), "changed" (score or fenced
  field differs), "wrongtype" (the job's hash is not a hash); or an error reply "WRONGTYPE ..." /
  "BADARG ..." before any write.  data and opts are never read or rewritten.
"""

__all__ = ["MOVE_LUA"]

MOVE_LUA = r"""
local mode, reset, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
if mode ~= 'redrive' and mode ~= 'purge' then return redis.error_reply('BADARG mode') end
local per = (mode == 'redrive') and 5 or 7
if not n or n < 0 or n > 1000 or #ARGV ~= 3 + 7 * n or #KEYS ~= 9 + per * n then
  return redis.error_reply('BADARG job count')
end
for i = 1, n do
  local push = ARGV[4 + 7 * (i - 1) + 4]
  if push ~= 'LPUSH' and push ~= 'RPUSH' then return redis.error_reply('BADARG push') end
end
local want = {'zset', 'list', 'zset', 'string', 'zset', 'hash', 'stream', 'list', 'list'}
for i = 1, 9 do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= want[i] then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[i] .. ' holds a ' .. t .. ', expected a ' .. want[i])
  end
end
local meta = redis.call('HMGET', KEYS[6], 'paused', 'concurrency', 'opts.maxLenEvents')
local held = meta[1] ~= false
if not held and meta[2] then held = redis.call('LLEN', KEYS[8]) >= tonumber(meta[2]) end
local maxlen = tonumber(meta[3]) or 10000
local target = (meta[1] and redis.call('EXISTS', KEYS[9]) == 1) and KEYS[9] or KEYS[2]
local out, woke = {}, false
for i = 1, n do
  local a, base = 4 + 7 * (i - 1), 10 + per * (i - 1)
  local id, score, fin, why, push, parent, deid = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
    ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
  local job = KEYS[base]
  local code = 'moved'
  local sc = redis.call('ZSCORE', KEYS[1], id)
  local f = sc and redis.pcall('HMGET', job, 'finishedOn', 'failedReason', 'priority', 'parentKey', 'deid')
  if not sc then code = 'gone'
  elseif sc ~= score and tonumber(sc) ~= tonumber(score) then code = 'changed'
  elseif f['err'] then code = 'wrongtype'
  elseif not f[1] and redis.call('EXISTS', job) == 0 then code = 'gone'
  elseif (f[1] or '') ~= fin or redis.sha1hex(f[2] or '') ~= why or (f[4] or '') ~= parent
    or (f[5] or '') ~= deid then code = 'changed'
  elseif redis.call('ZREM', KEYS[1], id) == 0 then code = 'gone'
  elseif mode == 'purge' then
    redis.call('DEL', job, KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5])
    if deid ~= '' and redis.pcall('GET', KEYS[base + 6]) == id then redis.call('DEL', KEYS[base + 6]) end
  else
    redis.call('HDEL', job, 'finishedOn', 'failedReason', 'stacktrace', 'returnvalue', 'processedOn')
    if reset == '1' then redis.call('HDEL', job, 'atm', 'ats', 'attemptsMade') end
    local prio = tonumber(f[3]) or 0
    if prio > 0 then
      local c = redis.call('INCR', KEYS[4])
      redis.call('ZADD', KEYS[3], prio * 0x100000000 + c % 0x100000000, id)
    else
      redis.call(push, target, id)
    end
    if parent ~= '' and redis.call('EXISTS', KEYS[base + 1]) == 1 then
      local z, h = redis.pcall('ZREM', KEYS[base + 2], job), 0
      if z ~= 1 then h = redis.pcall('HDEL', KEYS[base + 3], job) end
      if z == 1 or h == 1 then redis.pcall('SADD', KEYS[base + 4], job) end
    end
    redis.call('XADD', KEYS[7], 'MAXLEN', '~', maxlen, '*', 'event', 'waiting', 'jobId', id, 'prev', 'failed')
    woke = true
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
if woke and not held then redis.call('ZADD', KEYS[5], 0, '0') end
return out
"""
