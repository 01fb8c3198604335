-- sg_replay.lua: jobctl replay on the stream-group layout: re-add
-- acknowledged history entries as new entries (XADD *) with the same fields
-- plus replayOf = the original entry id, each once.  One atomic step per
-- entry.
--
-- An entry already replayed (its id in jobctl's set KEYS[2]) is not
-- replayed again, so running the same replay twice replays once.  The
-- original entry is read with a one-entry XRANGE.
--
-- KEYS[1]  stream           stream:{t}:jobs
-- KEYS[2]  replayed set     queue:{t}:jobctl:replayed
-- ARGV[1]  N, then N original entry ids
-- returns  { id1, code1, ... } per original id: "moved" (replayed), "replayed"
--          (by an earlier run), "gone" (trimmed from the stream since the plan)

local stream, replayed = KEYS[1], KEYS[2]
--@prelude
return jc_each({}, 2, 1, tonumber(ARGV[1]), function(i, b)
  local id = ARGV[b]
  if redis.call('SISMEMBER', replayed, id) == 1 then return 'replayed' end
  local e = redis.call('XRANGE', stream, id, id, 'COUNT', 1)
  if #e == 0 then return 'gone' end
  local fields = {}
  for k = 1, #e[1][2], 2 do
    if e[1][2][k] ~= 'replayOf' then
      fields[#fields + 1] = e[1][2][k]
      fields[#fields + 1] = e[1][2][k + 1]
    end
  end
  fields[#fields + 1] = 'replayOf'
  fields[#fields + 1] = id
  redis.call('XADD', stream, '*', unpack(fields))
  redis.call('SADD', replayed, id)
  return 'moved'
end)
