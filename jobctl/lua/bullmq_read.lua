-- bullmq_read.lua: the fields of BullMQ job hashes, for the unfiltered plan
-- of a redrive or purge of failed jobs (jobctl.layouts.bullmq.lean).  Reads
-- only.
--
-- KEYS[1..]  job hashes
-- ARGV[1..]  the fields to read (at least one)
-- returns    per key, its fields (false: missing), then 1 when it is a hash
--            (0: missing or another type); or an error reply "BADARG ..."

if #ARGV == 0 then return redis.error_reply('BADARG no fields') end
local out, nf = {}, #ARGV
for i = 1, #KEYS do
  local v = redis.pcall('HMGET', KEYS[i], unpack(ARGV))
  local ok = type(v) == 'table' and v['err'] == nil
  for f = 1, nf do out[#out + 1] = ok and v[f] or false end
  out[#out + 1] = ok and 1 or 0
end
return out
