-- prelude/bullmq_fence.lua: the fence of one BullMQ failed job, read at plan
-- time (bullmq_fence.lua) and checked per job by the move (bullmq_redrive.lua).
--
--   jc_bull_fence(f)  f = HMGET of finishedOn, failedReason, parentKey, deid
--                     (false: missing, read as ""): the SHA1 (hex) of
--                     finishedOn, parentKey, deid and failedReason joined by
--                     NUL bytes (the first three hold none: a number and key
--                     names, so the joined text has one reading)
local function jc_bull_fence(f)
  return redis.sha1hex((f[1] or '') .. '\0' .. (f[3] or '') .. '\0' .. (f[4] or '') .. '\0' .. (f[2] or ''))
end
