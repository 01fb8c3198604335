-- sg_replay.lua: jobctl replay on the stream-group layout: re-add
-- acknowledged history entries as new entries (XADD *) with the same fields
-- plus replayOf = the original entry id.  One atomic step per entry.
--
-- Once per original entry, whatever the runs: the replay record KEYS[2]
-- holds one member per original this script re-added, and the script checks
-- it and writes it in the same atomic step as the XADD, so two replays of
-- the same window, one after the other or at the same time, re-add each
-- original once in total.  An entry that carries replayOf is itself a
-- replay and is never replayed.  The set KEYS[3] of earlier versions
-- (original ids) is still read, never written.
--
-- The record: a zset, every score 0, member "<ms>-<seq> <replay id>" where
-- <ms>-<seq> is the original id with each part zero-padded to 20 digits, so
-- that lexical order is id order.  Bounded by the stream's retention: an
-- original older than the stream's first entry can never be replayed again,
-- so each call first removes at most TRIM + 2N (256 + 2N) such members: a
-- call adds at most N members and removes up to 2N + 256 stale ones, so the
-- record holds about one member per replayed original the stream still
-- holds (plus stale ones the next calls remove).  No TTL: a TTL would let a
-- late rerun replay an original still in the stream a second time.
--
-- Checks first (nothing is written when one fails): KEYS and ARGV counts,
-- every id, the type of every key.
--
-- KEYS[1]  stream           stream:{t}:jobs (a stream, or missing)
-- KEYS[2]  replay record    queue:{t}:jobctl:replay-record (a zset, or missing)
-- KEYS[3]  earlier record   queue:{t}:jobctl:replayed (a set, or missing; read only)
-- ARGV[1]  N, then N original entry ids "<ms>-<seq>" (each part 0..2^64-1)
-- returns  { id1, code1, ... } per original id: "moved" (replayed),
--          "replayed" (by an earlier or concurrent run), "is-replay" (the
--          entry carries replayOf), "gone" (no longer in the stream),
--          "error" (the XADD or the record's write failed; undone)
-- errors   "BADARG keys ...", "BADARG job count ...", "BADARG entry id of
--          job <i> ...", "WRONGTYPE key <key> holds a <type>, expected ..."

local stream, record, earlier = KEYS[1], KEYS[2], KEYS[3]
local TRIM = 256
local MAX_PART = '18446744073709551615'
--@prelude

local function padded(part)
  part = string.gsub(part, '^0+', '')
  if #part > 20 then return nil end
  part = string.rep('0', 20 - #part) .. part
  if part > MAX_PART then return nil end
  return part
end

-- the record's sortable form of an entry id, or nil when it is no entry id
local function sortable(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  ms, seq = ms and padded(ms), seq and padded(seq)
  if not (ms and seq) then return nil end
  return ms .. '-' .. seq
end

local function check_args()
  if #KEYS ~= 3 then return nil, 'BADARG keys: 3 expected, got ' .. #KEYS end
  local n, err = jc_job_count(1, 1, nil)
  if err then return nil, err end
  local sorted = {}
  for i = 1, n do
    sorted[i] = sortable(ARGV[1 + i])
    if not sorted[i] then return nil, 'BADARG entry id of job ' .. i .. ': ' .. ARGV[1 + i] end
  end
  return sorted, jc_check_types({ { stream, 'stream' }, { record, 'zset' }, { earlier, 'set' } })
end

local function trim_record(n)
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
  local below = first[1] and ('(' .. sortable(first[1][1])) or '+'
  local old = redis.call('ZRANGEBYLEX', record, '-', below, 'LIMIT', 0, TRIM + 2 * n)
  if #old > 0 then redis.call('ZREM', record, unpack(old)) end
end

local function replay_one(id, key)
  if #redis.call('ZRANGEBYLEX', record, '[' .. key .. ' ', '(' .. key .. '!', 'LIMIT', 0, 1) > 0
    or redis.call('SISMEMBER', earlier, id) == 1 then
    return 'replayed'
  end
  local e = redis.call('XRANGE', stream, id, id, 'COUNT', 1)
  if #e == 0 then return 'gone' end
  local fields = e[1][2]
  for k = 1, #fields, 2 do
    if fields[k] == 'replayOf' then return 'is-replay' end
  end
  fields[#fields + 1] = 'replayOf'
  fields[#fields + 1] = e[1][1]
  local replay = redis.pcall('XADD', stream, '*', unpack(fields))
  if jc_failed(replay) then return 'error' end
  if jc_failed(redis.pcall('ZADD', record, 0, key .. ' ' .. replay)) then
    redis.pcall('XDEL', stream, replay)
    return 'error'
  end
  return 'moved'
end

local sorted, err = check_args()
if err then return redis.error_reply(err) end
trim_record(#sorted)
return jc_each({}, 2, 1, #sorted, function(i, b)
  return replay_one(ARGV[b], sorted[i])
end)
