-- de_move.lua: move planned delayed events (layouts.md s.5; seed 003):
-- promote and redrive set the zset score (next attempt time) and, for a
-- redrive, the envelope (attempt reset); suppress moves the member out of
-- the zset and the events hash into jobctl's suppressed zset + info hash;
-- unsuppress puts both back; purge removes the member and the hash field
-- together.  One atomic step per event; the call touches only its N events.
--
-- The library's dispatcher reads an envelope, then rewrites it in a MULTI:
-- while it holds its lock (delayed_events_lock) a dispatch may be half done,
-- so nothing moves and every event is returned as "locked" (the caller
-- retries shortly).
--
-- An event moves only if its score is the one the plan saw and the SHA1 of
-- its stored envelope (events hash; jobctl's info JSON for a suppressed
-- event) equals the plan's.
--
-- Never a partial batch: every ARGV (mode, score, count, each suppress
-- record's JSON) and the TYPE of every key are checked before the first
-- write; a key of the wrong type stops the call with a WRONGTYPE error
-- reply and nothing written.  Each event's writes go through redis.pcall,
-- the destination first, then the removal from the source; the first
-- failing write undoes the event's earlier ones ("error") and the events
-- after it are still handled.
--
-- KEYS[1]  zset                  delayed_events
-- KEYS[2]  envelopes hash        events
-- KEYS[3]  dispatcher lock       delayed_events_lock
-- KEYS[4]  jobctl suppressed zset   delayed_events:jobctl:suppressed
-- KEYS[5]  jobctl suppressed info   delayed_events:jobctl:suppressed:info
-- ARGV[1]  mode: "score" | "suppress" | "unsuppress" | "purge" | "purge_suppressed"
-- ARGV[2]  new score (score), or now (suppress), epoch ms
-- ARGV[3]  N
-- ARGV[4+5(i-1)..8+5(i-1)] per event i: member, score at plan time, SHA1 at
--          plan time, new envelope ("" keeps it), info JSON (suppress: the
--          {by, at_ms, reason, operation} record; "" otherwise)
-- returns  { member1, code1, ... }: "moved", "gone", "changed", "locked",
--          "exists" (unsuppress: the member was enqueued again meanwhile),
--          "error" (a write failed; nothing of the event moved)
--          or an error reply "BADARG ..." / "WRONGTYPE ..." (nothing written)

local zset, events, lock, supp, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local mode, at = ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
if mode ~= 'score' and mode ~= 'suppress' and mode ~= 'unsuppress' and mode ~= 'purge'
    and mode ~= 'purge_suppressed' then
  return redis.error_reply('BADARG mode ' .. tostring(mode))
end
if (mode == 'score' or mode == 'suppress') and not tonumber(at) then
  return redis.error_reply('BADARG score ' .. tostring(at))
end
if not n or n < 0 or n ~= math.floor(n) or #ARGV ~= 3 + 5 * n then
  return redis.error_reply('BADARG event count ' .. tostring(ARGV[3]))
end
local docs = {}
for i = 1, n do
  local base = 4 + 5 * (i - 1)
  if not tonumber(ARGV[base + 1]) then
    return redis.error_reply('BADARG score of event ' .. i)
  end
  if mode == 'suppress' then
    local ok, doc = pcall(cjson.decode, ARGV[base + 4])
    if not ok or type(doc) ~= 'table' then
      return redis.error_reply('BADARG info of event ' .. i)
    end
    docs[i] = doc
  end
end

--@prelude
local bad = jc_check_types({ { zset, 'zset' }, { events, 'hash' }, { supp, 'zset' }, { info, 'hash' } })
if bad then return redis.error_reply(bad) end


local out = {}
local locked = redis.call('EXISTS', lock) == 1
for i = 1, n do
  local base = 4 + 5 * (i - 1)
  local member, want_score, want_sha, new_env =
    ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]
  local code
  local from_suppressed = (mode == 'unsuppress' or mode == 'purge_suppressed')
  local src, store = zset, events
  if from_suppressed then
    src, store = supp, info
  end
  local sc = redis.call('ZSCORE', src, member)
  local raw = redis.call('HGET', store, member)
  local writes = nil
  if locked and not from_suppressed then
    code = 'locked'
  elseif not sc or not raw then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want_score) or redis.sha1hex(raw) ~= want_sha then
    code = 'changed'
  elseif mode == 'score' then
    writes = { { { 'ZADD', zset, 'XX', tonumber(at), member }, { 'ZADD', zset, 'XX', sc, member } } }
    if new_env ~= '' then
      writes[2] = { { 'HSET', events, member, new_env }, nil }
    end
  elseif mode == 'suppress' then
    local doc = docs[i]
    doc['score'] = sc
    doc['envelope'] = raw
    writes = {
      { { 'ZADD', supp, tonumber(at), member }, { 'ZREM', supp, member } },
      { { 'HSET', info, member, cjson.encode(doc) }, { 'HDEL', info, member } },
      { { 'ZREM', zset, member }, { 'ZADD', zset, sc, member } },
      { { 'HDEL', events, member }, nil },
    }
  elseif mode == 'unsuppress' then
    local ok, doc = pcall(cjson.decode, raw)
    if not ok or type(doc) ~= 'table' or type(doc['envelope']) ~= 'string' or not tonumber(doc['score']) then
      code = 'changed'
    elseif locked then
      code = 'locked'
    elseif redis.call('ZSCORE', zset, member) or redis.call('HEXISTS', events, member) == 1 then
      code = 'exists'
    else
      writes = {
        { { 'ZADD', zset, tonumber(doc['score']), member }, { 'ZREM', zset, member } },
        { { 'HSET', events, member, doc['envelope'] }, { 'HDEL', events, member } },
        { { 'ZREM', supp, member }, { 'ZADD', supp, sc, member } },
        { { 'HDEL', info, member }, nil },
      }
    end
  elseif mode == 'purge' then
    writes = { { { 'ZREM', zset, member }, { 'ZADD', zset, sc, member } }, { { 'HDEL', events, member }, nil } }
  else -- purge_suppressed
    writes = { { { 'ZREM', supp, member }, { 'ZADD', supp, sc, member } }, { { 'HDEL', info, member }, nil } }
  end
  if writes then
    code = jc_apply_writes(writes) and 'moved' or 'error'
  end
  jc_reply(out, member, code)
end
return out
