-- prelude/rl_step.lua: one reliable-list job's step of a window call, shared
-- by rl_window.lua (per-job walk) and rl_tail.lua (tail walk), inlined by
-- jobctl/scripts.py at a line "--@prelude rl_step" (after "--@prelude window").
--
--   jc_rl_step(a, dead, target, info_hash)
--        the step(e, el, undo) of mode a.mode (run under jc_win_run_step):
--        e.key the job's payload key; with e.payload ~= "" the stored
--        payload's SHA1 must be e.sha and e.payload replaces it (SET
--        KEEPTTL), else the key must exist (purge: need not).  The target
--        is written first (ready: one LMOVE dead -> target head; stream:
--        XADD jobId <id>; scheduled: ZADD score; suppressed: ZADD score and
--        the info JSON a.info), then the id leaves the tail (RPOP; purge:
--        then UNLINK of the payload key).  Returns "moved" | "gone" |
--        "wrongtype" | "changed"; `undo` collects the writes to take back

local function jc_rl_step(a, dead, target, info_hash)
  local mode, score, info = a.mode, a.score, a.info
  local try = jc_win_try
  return function(e, el, undo)
    local old = nil
    if e.payload ~= '' then
      local t = redis.call('TYPE', e.key)
      t = type(t) == 'table' and t['ok'] or t
      if t == 'none' then return 'gone' end
      if t ~= 'string' then return 'wrongtype' end
      old = try('GET', e.key)
      if redis.sha1hex(old) ~= e.sha then return 'changed' end
    elseif mode ~= 'purge' and redis.call('EXISTS', e.key) == 0 then
      return 'gone'
    end
    if mode == 'ready' then
      -- one atomic command writes the target and takes the element off the tail
      if old then try('SET', e.key, e.payload, 'KEEPTTL'); undo[1] = { 'SET', e.key, old, 'KEEPTTL' } end
      try('LMOVE', dead, target, 'RIGHT', 'LEFT')
      return 'moved'
    elseif mode == 'stream' then
      local entry = try('XADD', target, '*', 'jobId', e.id); undo[1] = { 'XDEL', target, entry }
    elseif mode == 'scheduled' or mode == 'suppressed' then
      try('ZADD', target, score, e.id); undo[1] = { 'ZREM', target, e.id }
      if mode == 'suppressed' and info ~= '' then
        try('HSET', info_hash, e.id, info); undo[2] = { 'HDEL', info_hash, e.id }
      end
    end
    if old then try('SET', e.key, e.payload, 'KEEPTTL'); undo[4] = { 'SET', e.key, old, 'KEEPTTL' } end
    try('RPOP', dead)
    -- the job has left the dead list: a clean-up that cannot lose it
    if mode == 'purge' then redis.pcall('UNLINK', e.key) end
    return 'moved'
  end
end
