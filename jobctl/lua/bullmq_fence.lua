-- bullmq_fence.lua: the fence of BullMQ failed jobs, for the unfiltered plan
-- of a redrive (jobctl.layouts.bullmq.lean).  Reads only.
--
-- KEYS[1..]  job hashes (at most 1000)
-- returns    per key: its fence (prelude/bullmq_fence.lua; false when it is
--            missing or not a hash), then its parentKey ("" when none); or
--            an error reply "BADARG ..."

--@prelude bullmq_fence

if #KEYS > 1000 then return redis.error_reply('BADARG at most 1000 job hashes, got ' .. #KEYS) end
local out, o = {}, 0
for i = 1, #KEYS do
  local f = redis.pcall('HMGET', KEYS[i], 'finishedOn', 'failedReason', 'parentKey', 'deid')
  if type(f) ~= 'table' or f['err'] or (not f[1] and not f[2] and redis.call('EXISTS', KEYS[i]) == 0) then
    out[o + 1], out[o + 2] = false, false
  else
    out[o + 1], out[o + 2] = jc_bull_fence(f), f[3] or ''
  end
  o = o + 2
end
return out
