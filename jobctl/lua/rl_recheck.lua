-- rl_recheck.lua: where one job id is, read atomically, so that `jobctl
-- check` reports a finding only if it still holds (reliable-list).  The
-- check's windows read a live queue over time: a job claimed, acked or
-- dead-lettered between two reads looks like a broken invariant
-- (issue 12, item 10); this snapshot tells the two apart.  Read-only.
--
-- KEYS[1]  the job's payload key             job:{t}:<id>
-- KEYS[2]  the processing deadline zset      queue:{t}:processing:deadline
-- KEYS[3]  the scheduled zset                queue:{t}:scheduled
-- KEYS[4]  the suppressed zset               queue:{t}:jobctl:suppressed
-- KEYS[5..] the shard's lists: ready lists (p0..pN, plain), processing, dead
-- ARGV[1]  job id
-- ARGV[2]  maxlen: how many entries of each list LPOS examines, from each
--          end (bounded cost; jobs in transit sit near the ends)
-- returns  {payload_exists, deadline_score|false, scheduled_score|false,
--           suppressed_score|false, then per list: copies seen, list length}
--          A list longer than 2 x maxlen whose copies are 0 may still hold
--          the id deeper: the caller treats that as unknown.
-- Cost: O(1) per zset, LPOS over at most 2 x maxlen entries per list.

local id, maxlen = ARGV[1], tonumber(ARGV[2])
local out = {redis.call('EXISTS', KEYS[1]),
             redis.call('ZSCORE', KEYS[2], id), redis.call('ZSCORE', KEYS[3], id),
             redis.call('ZSCORE', KEYS[4], id)}
for i = 5, #KEYS do
  local len = redis.call('LLEN', KEYS[i])
  local copies
  if len <= 2 * maxlen then
    copies = #redis.call('LPOS', KEYS[i], id, 'COUNT', 0)
  else
    local head = redis.call('LPOS', KEYS[i], id, 'COUNT', 0, 'MAXLEN', maxlen)
    local tail = redis.call('LPOS', KEYS[i], id, 'RANK', -1, 'COUNT', 0, 'MAXLEN', maxlen)
    copies = #head + #tail
  end
  out[#out + 1] = copies
  out[#out + 1] = len
end
return out
