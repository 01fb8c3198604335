-- sg_dead_move.lua: move planned dead-lettered jobs of a stream-group shard
-- (jobctl redrive to the stream or the scheduled zset, suppress, purge).
-- One atomic step per job; the call touches only the N jobs it is given.
-- jobctl uses it for the dead stream; a dead list (redrive, suppress,
-- purge) is walked in bounded windows by the window engine
-- (rl_window.lua, rl_tail.lua) instead.  The list kind kept here searches with
-- LPOS/LREM: O(distance from the tail) per job, bounded by MAXLEN.
--
-- Dead list (ids, newest at the head): a job is found with LPOS from the
-- tail, bounded by MAXLEN (its distance from the tail at plan time + 1:
-- producers only push at the head, so that distance never grows), and
-- removed with LREM from the tail: O(distance), never a whole-list scan.
-- Dead stream: a job is its dead entry id, removed with XDEL.
-- A job moves only if it is still there and its payload's SHA1 equals the
-- plan's (SHA1 "": the plan saw no payload key, the dead entry's fields
-- carry the job, and a payload key must still be absent).  Redrive to the
-- stream re-adds the dead entry's fields (dead stream) or just jobId.
--
-- Never a partial batch: every ARGV and the TYPE of the dead key, target
-- and info hash are checked before the first write (a WRONGTYPE error
-- reply, nothing written); a payload key of the wrong type only keeps its
-- own job dead ("wrongtype").  Each job's writes go through redis.pcall,
-- the target first, the dead key last; the first failing write undoes the
-- job's earlier ones ("error") and the jobs after it are still handled.
--
-- KEYS[1]  dead list | dead stream   queue:{t}:dead | stream:{t}:dead
-- KEYS[2]  target: stream:{t}:jobs (ready) | queue:{t}:scheduled |
--          queue:{t}:jobctl:suppressed | the dead key again (purge)
-- KEYS[3]  jobctl suppressed-info hash  queue:{t}:jobctl:suppressed:info
-- KEYS[3+i] payload key of job i  job:{t}:<id>
-- ARGV[1]  mode: "ready" | "scheduled" | "suppressed" | "purge"
-- ARGV[2]  dead kind: "list" | "stream"
-- ARGV[3]  due time (scheduled) or now (suppressed), epoch ms
-- ARGV[4]  N
-- ARGV[5+5(i-1)..9+5(i-1)] per job i: id, locator (list: MAXLEN; stream:
--          dead entry id), payload SHA1 at plan time, new payload ("" keeps
--          it), suppressed-info JSON ("" for other modes)
-- returns  { id1, code1, ... }: "moved", "gone" (not dead any more or no
--          payload), "changed" (payload differs from the plan), "wrongtype"
--          (the payload key holds another type), "error" (a write failed;
--          nothing of the job moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local dead, target, info = KEYS[1], KEYS[2], KEYS[3]
--@prelude
local mode, kind, at = ARGV[1], ARGV[2], ARGV[3]
local err
mode, err = jc_one_of(mode, 'mode', { ready = true, scheduled = true, suppressed = true, purge = true })
if not mode then return redis.error_reply(err) end
kind, err = jc_one_of(kind, 'dead kind', { list = true, stream = true })
if not kind then return redis.error_reply(err) end
if (mode == 'scheduled' or mode == 'suppressed') and not tonumber(at) then
  return redis.error_reply('BADARG score ' .. tostring(at))
end
local n
n, err = jc_int(ARGV[4], 'job count', 0)
if not n then return redis.error_reply(err) end
if #ARGV ~= 4 + 5 * n or #KEYS ~= 3 + n then
  return redis.error_reply('BADARG argument count')
end
for i = 1, n do
  local locator = ARGV[5 + 5 * (i - 1) + 1]
  if (kind == 'list' and not jc_int(locator, 'maxlen', 1)) or (kind == 'stream' and not string.match(locator, '^%d+%-%d+$')) then
    return redis.error_reply('BADARG locator of job ' .. i)
  end
end
local specs = { { dead, kind }, { info, 'hash' } }
if mode == 'ready' then
  specs[3] = { target, 'stream' }
elseif mode ~= 'purge' then
  specs[3] = { target, 'zset' }
end
local bad = jc_check_types(specs)
if bad then return redis.error_reply(bad) end

return jc_each({}, 5, 5, n, function(i, b)
  local id, locator, want_sha, new_payload, suppress_info =
    ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local key = KEYS[3 + i]
  local found = false
  local fields = nil
  if kind == 'stream' then
    local e = redis.call('XRANGE', dead, locator, locator)
    if #e > 0 then
      fields = e[1][2]
      for j = 1, #fields, 2 do
        if fields[j] == 'jobId' and fields[j + 1] == id then
          found = true
        end
      end
    end
  else
    found = redis.call('LPOS', dead, id, 'RANK', -1, 'MAXLEN', tonumber(locator)) ~= false
  end
  if not found then return 'gone' end
  local code, raw = jc_payload_code(key, want_sha, true)
  if code then return code end
  local writes = {}
  if mode == 'ready' then
    local add = fields and { 'XADD', target, '*', unpack(fields) } or { 'XADD', target, '*', 'jobId', id }
    writes[#writes + 1] = { add, function(r) return { 'XDEL', target, r } end }
  elseif mode == 'scheduled' then
    writes[#writes + 1] = { { 'ZADD', target, tonumber(at), id }, { 'ZREM', target, id } }
  elseif mode == 'suppressed' then
    if fields then
      local ok, doc = pcall(cjson.decode, suppress_info)
      if ok and type(doc) == 'table' then
        doc['dead_fields'] = fields
        suppress_info = cjson.encode(doc)
      end
    end
    writes[#writes + 1] = { { 'ZADD', target, tonumber(at), id }, { 'ZREM', target, id } }
    writes[#writes + 1] = { { 'HSET', info, id, suppress_info }, { 'HDEL', info, id } }
  end
  if new_payload ~= '' and raw and mode ~= 'purge' then
    writes[#writes + 1] = { { 'SET', key, new_payload, 'KEEPTTL' }, { 'SET', key, raw, 'KEEPTTL' } }
  end
  if kind == 'stream' then
    writes[#writes + 1] = { { 'XDEL', dead, locator }, nil }
  else
    writes[#writes + 1] = { { 'LREM', dead, -1, id }, nil }
  end
  if mode == 'purge' and raw then
    writes[#writes + 1] = { { 'DEL', key }, nil }
  end
  return jc_move(writes)
end)
