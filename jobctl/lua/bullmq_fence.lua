-- bullmq_fence.lua: the fence of BullMQ failed jobs, for the unfiltered plan
-- of a redrive (jobctl.layouts.bullmq.lean).  Reads only.
--
-- KEYS[1..]  job hashes
-- returns    per key: its fence (prelude/bullmq_fence.lua; false when it is
--            missing or not a hash), then its parentKey ("" when none)

--@prelude bullmq_fence

local out = {}
for i = 1, #KEYS do
  local f = redis.pcall('HMGET', KEYS[i], 'finishedOn', 'failedReason', 'parentKey', 'deid')
  if type(f) ~= 'table' or f['err'] or (not f[1] and not f[2] and redis.call('EXISTS', KEYS[i]) == 0) then
    out[#out + 1] = false
    out[#out + 1] = false
  else
    out[#out + 1] = jc_bull_fence(f)
    out[#out + 1] = f[3] or ''
  end
end
return out
