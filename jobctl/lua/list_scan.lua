-- list_scan.lua: one bounded window of the plan of a filtered dead-list
-- operation whose filter compiles to a server-side program
-- (jobctl.layouts.reliable_list.predicate_plan): the program rules jobs out on each
-- envelope server-side (prelude/predicate.lua); only the candidates' indexes
-- come back, for the client to confirm with jobctl's own filter.  Reads only.
--
-- Bounded per call (the limits: jobctl.filter.lua_predicate, measured in
-- docs/performance.md): at most SCAN_WINDOW keys, a program of at most
-- SCAN_MAX_CLAUSES clauses and SCAN_MAX_PROGRAM_BYTES bytes, and at most
-- ARGV[4] bytes of envelopes read into Lua: each envelope's size is asked
-- first (STRLEN, O(1)); one that would take the call past ARGV[4] is not
-- read nor parsed here but handed back as a candidate (the client reads it
-- and decides it with its own reader and filter).
--
-- KEYS[i]  payload key of the window's i-th job (job:{t}:<id>), tail first
-- ARGV[1]  the program (jobctl.filter.lua_predicate.lua_program)
-- ARGV[2]  "1": malformed envelopes never match; "0": the filter reads only
--          the id and envelopes are not looked at
-- ARGV[3]  the payload-key prefix (the job id is KEYS[i] without it)
-- ARGV[4]  the most envelope bytes the call reads (an integer >= 0:
--          jobctl.filter.lua_predicate.scan_call_bytes)
-- returns  { 0, D, M, d1..dD, m1..mM, c1, c2, ... }: d the indexes of
--          dangling ids (no payload key), m of malformed envelopes, c of the
--          candidates (verdict 1 or 2, or not read: over the byte budget),
--          each list in increasing order

--@prelude predicate

local budget = tonumber(ARGV[4] or '')
if not budget or budget < 0 or budget ~= math.floor(budget) then return redis.error_reply('BADARG byte budget') end
local ok, prog, quick, exact, by_id = pcall(jc_pred_load, ARGV[1])
if not ok or type(prog) ~= 'function' then return redis.error_reply('BADARG program') end
local skip_bad = ARGV[2] == '1'
local plen = #ARGV[3]
if #KEYS == 0 then return { 0, 0, 0 } end
-- each key's size first (STRLEN, O(1)); a key of another type is read as
-- missing (a dangling id, as MGET reads it); an empty or missing one is
-- read (0 bytes) to tell them apart; with "0" an existing envelope is not
-- read at all; with "1" one is read while the call's bytes stay within the
-- budget, else it is a candidate the client decides
local size, reads, at, used = {}, {}, {}, 0
for i = 1, #KEYS do
  local n = redis.pcall('STRLEN', KEYS[i])
  if type(n) ~= 'number' then n = -1 end
  size[i] = n
  if n == 0 or (n > 0 and skip_bad and used + n <= budget) then
    used = used + n
    reads[#reads + 1] = KEYS[i]
    at[i] = #reads
  end
end
local raws = #reads > 0 and redis.call('MGET', unpack(reads)) or {}
local dangling, malformed, cand = {}, {}, {}
for i = 1, #KEYS do
  local raw
  if at[i] then raw = raws[at[i]] elseif size[i] > 0 and not skip_bad then raw = true end
  if size[i] < 0 or (at[i] and not raw) then
    dangling[#dangling + 1] = i
  elseif not raw then
    cand[#cand + 1] = i  -- over the byte budget: not read here, the client decides it
  else
    local id = by_id and string.sub(KEYS[i], plen + 1) or ''
    local v = jc_pred_verdict(prog, id, raw, skip_bad, skip_bad, quick, exact)
    if v == 1 or v == 2 then cand[#cand + 1] = i
    elseif v == 3 then malformed[#malformed + 1] = i end
  end
end
local out = { 0, #dangling, #malformed }
for _, list in ipairs({ dangling, malformed, cand }) do
  for j = 1, #list do out[#out + 1] = list[j] end
end
return out
