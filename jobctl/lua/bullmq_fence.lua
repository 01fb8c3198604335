-- bullmq_fence.lua: one window of BullMQ's failed set with the fence of each
-- job, for the unfiltered plan of a redrive (jobctl.layouts.bullmq.lean).
-- Reads only.
--
-- KEYS[1]  failed (zset)
-- ARGV[1]  first rank (0-based), ARGV[2] how many (1..1000), ARGV[3] the
--          prefix of the job hashes (e.g. "bull:q:"): each job's hash is
--          prefix .. id, in failed's slot (BullMQ's {prefix} under Cluster)
-- returns  per member of ZRANGE failed first first+n-1 WITHSCORES, in rank
--          order: id, score (as ZRANGE gives it), fence
--          (prelude/bullmq_fence.lua; false when the hash is missing or not
--          a hash), parentKey ("" when none); or an error reply "BADARG ..."

--@prelude bullmq_fence

local first, n = tonumber(ARGV[1]), tonumber(ARGV[2])
if not first or first < 0 or first % 1 ~= 0 then return redis.error_reply('BADARG first rank ' .. tostring(ARGV[1])) end
if not n or n < 1 or n > 1000 or n % 1 ~= 0 then return redis.error_reply('BADARG count ' .. tostring(ARGV[2])) end
local prefix = ARGV[3] or ''
local window = redis.call('ZRANGE', KEYS[1], first, first + n - 1, 'WITHSCORES')
local out, o = {}, 0
for i = 1, #window, 2 do
  local id, job = window[i], prefix .. window[i]
  local f = redis.pcall('HMGET', job, 'finishedOn', 'failedReason', 'parentKey', 'deid')
  out[o + 1], out[o + 2] = id, window[i + 1]
  if type(f) ~= 'table' or f['err'] or (not f[1] and not f[2] and redis.call('EXISTS', job) == 0) then
    out[o + 3], out[o + 4] = false, false
  else
    out[o + 3], out[o + 4] = jc_bull_fence(f), f[3] or ''
  end
  o = o + 4
end
return out
