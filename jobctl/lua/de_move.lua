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
--          "exists" (unsuppress: the member was enqueued again meanwhile)

local zset, events, lock, supp, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local mode, at = ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
local out = {}
local locked = redis.call('EXISTS', lock) == 1
for i = 1, n do
  local base = 4 + 5 * (i - 1)
  local member, want_score, want_sha, new_env, new_info =
    ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], ARGV[base + 4]
  local code
  local from_suppressed = (mode == 'unsuppress' or mode == 'purge_suppressed')
  local src, store = zset, events
  if from_suppressed then
    src, store = supp, info
  end
  local sc = redis.call('ZSCORE', src, member)
  local raw = redis.call('HGET', store, member)
  if locked and not from_suppressed then
    code = 'locked'
  elseif not sc or not raw then
    code = 'gone'
  elseif tonumber(sc) ~= tonumber(want_score) or redis.sha1hex(raw) ~= want_sha then
    code = 'changed'
  elseif mode == 'score' then
    redis.call('ZADD', zset, 'XX', tonumber(at), member)
    if new_env ~= '' then
      redis.call('HSET', events, member, new_env)
    end
    code = 'moved'
  elseif mode == 'suppress' then
    local ok, doc = pcall(cjson.decode, new_info)
    if not ok or type(doc) ~= 'table' then
      return redis.error_reply('BADINFO ' .. member)
    end
    doc['score'] = sc
    doc['envelope'] = raw
    redis.call('ZREM', zset, member)
    redis.call('HDEL', events, member)
    redis.call('ZADD', supp, tonumber(at), member)
    redis.call('HSET', info, member, cjson.encode(doc))
    code = 'moved'
  elseif mode == 'unsuppress' then
    local ok, doc = pcall(cjson.decode, raw)
    if not ok or type(doc) ~= 'table' or type(doc['envelope']) ~= 'string' or not tonumber(doc['score']) then
      code = 'changed'
    elseif locked then
      code = 'locked'
    elseif redis.call('ZSCORE', zset, member) or redis.call('HEXISTS', events, member) == 1 then
      code = 'exists'
    else
      redis.call('ZADD', zset, tonumber(doc['score']), member)
      redis.call('HSET', events, member, doc['envelope'])
      redis.call('ZREM', supp, member)
      redis.call('HDEL', info, member)
      code = 'moved'
    end
  elseif mode == 'purge' then
    redis.call('ZREM', zset, member)
    redis.call('HDEL', events, member)
    code = 'moved'
  elseif mode == 'purge_suppressed' then
    redis.call('ZREM', supp, member)
    redis.call('HDEL', info, member)
    code = 'moved'
  else
    return redis.error_reply('BADMODE ' .. mode)
  end
  out[#out + 1] = member
  out[#out + 1] = code
end
return out
