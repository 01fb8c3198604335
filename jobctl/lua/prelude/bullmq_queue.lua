-- prelude/bullmq_queue.lua: the fixed keys of a BullMQ queue that a move of
-- failed jobs writes (bullmq_move.lua, bullmq_redrive.lua), and the state of
-- the queue that decides where a redriven job goes.
--
--   jc_bull_queue_types()  the first WRONGTYPE error text of KEYS[1..9]
--                          (failed, wait, prioritized, pc, marker, meta,
--                          events, active, paused), or nil
--   jc_bull_queue_state()  held, maxlen, target: held is true when the queue
--                          is paused or at its concurrency (no marker then);
--                          maxlen the events stream's opts.maxLenEvents
--                          (10000 when unset); target the legacy paused list
--                          while the queue is paused and that list exists,
--                          else wait
local function jc_bull_queue_types()
  return jc_check_types({
    { KEYS[1], 'zset' }, { KEYS[2], 'list' }, { KEYS[3], 'zset' }, { KEYS[4], 'string' }, { KEYS[5], 'zset' },
    { KEYS[6], 'hash' }, { KEYS[7], 'stream' }, { KEYS[8], 'list' }, { KEYS[9], 'list' } })
end

local function jc_bull_queue_state()
  local meta = redis.call('HMGET', KEYS[6], 'paused', 'concurrency', 'opts.maxLenEvents')
  local held = meta[1] ~= false
  if not held and meta[2] then held = redis.call('LLEN', KEYS[8]) >= tonumber(meta[2]) end
  local maxlen = tonumber(meta[3]) or 10000
  local target = (meta[1] and redis.call('EXISTS', KEYS[9]) == 1) and KEYS[9] or KEYS[2]
  return held, maxlen, target
end
