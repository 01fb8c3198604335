-- bullmq_read.lua: the fields of BullMQ job hashes, for the plans of a
-- redrive or purge of failed jobs (jobctl.layouts.bullmq.lean, .filtered).
-- Reads only.
--
-- KEYS[1..]  job hashes
-- ARGV[1..]  the fields to read (at least one)
-- returns    per key, its fields (false: missing), then 1 when it is a hash
--            (0: missing or another type); or an error reply "BADARG ..."

if #ARGV == 0 then return redis.error_reply('BADARG no fields') end
local out, nf, o = {}, #ARGV, 0
for i = 1, #KEYS do
  local v = redis.pcall('HMGET', KEYS[i], unpack(ARGV))
  local ok, any = type(v) == 'table' and v['err'] == nil, false
  for f = 1, nf do
    local x = ok and v[f] or false
    out[o + f] = x
    any = any or x
  end
  -- a hash none of whose fields were asked for is still a hash
  if ok and not any then ok = redis.call('EXISTS', KEYS[i]) == 1 end
  out[o + nf + 1] = ok and 1 or 0
  o = o + nf + 1
end
return out
