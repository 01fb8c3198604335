-- sg_dead_move.lua: move planned dead-lettered jobs of a stream-group shard
-- (jobctl redrive to the stream or the scheduled zset, suppress, purge).
-- One atomic step per job; the call touches only the N jobs it is given.
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
--          payload), "changed" (payload differs from the plan)

local dead, target, info = KEYS[1], KEYS[2], KEYS[3]
local mode, kind, at = ARGV[1], ARGV[2], ARGV[3]
if mode ~= 'ready' and mode ~= 'scheduled' and mode ~= 'suppressed' and mode ~= 'purge' then
  return redis.error_reply('BADMODE ' .. tostring(mode))  -- before any write
end
local n = tonumber(ARGV[4])
local out = {}
for i = 1, n do
  local base = 5 + 5 * (i - 1)
  local id, locator, want_sha, new_payload, suppress_info =
    ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], ARGV[base + 4]
  local key = KEYS[3 + i]
  local code
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
  if not found then
    code = 'gone'
  else
    local raw = redis.call('GET', key)
    if want_sha == '' and raw then
      code = 'changed'
    elseif want_sha ~= '' and not raw then
      code = 'gone'
    elseif want_sha ~= '' and redis.sha1hex(raw) ~= want_sha then
      code = 'changed'
    else
      if kind == 'stream' then
        redis.call('XDEL', dead, locator)
      else
        redis.call('LREM', dead, -1, id)
      end
      if new_payload ~= '' and raw then
        redis.call('SET', key, new_payload, 'KEEPTTL')
      end
      if mode == 'ready' then
        if fields then
          redis.call('XADD', target, '*', unpack(fields))
        else
          redis.call('XADD', target, '*', 'jobId', id)
        end
      elseif mode == 'scheduled' then
        redis.call('ZADD', target, tonumber(at), id)
      elseif mode == 'suppressed' then
        redis.call('ZADD', target, tonumber(at), id)
        if fields then
          local ok, doc = pcall(cjson.decode, suppress_info)
          if ok and type(doc) == 'table' then
            doc['dead_fields'] = fields
            suppress_info = cjson.encode(doc)
          end
        end
        redis.call('HSET', info, id, suppress_info)
      elseif mode == 'purge' then
        redis.call('DEL', key)
      else
        return redis.error_reply('BADMODE ' .. mode)
      end
      code = 'moved'
    end
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
