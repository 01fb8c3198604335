-- list_scan.lua: one bounded window of the plan of a filtered dead-list
-- operation whose filter compiles to a server-side program
-- (jobctl.layouts.predicate_plan): the program rules jobs out on each
-- envelope server-side (prelude/predicate.lua); only the candidates' indexes
-- come back, for the client to confirm with jobctl's own filter.  Reads only.
--
-- KEYS[i]  payload key of the window's i-th job (job:{t}:<id>), tail first
-- ARGV[1]  the program (jobctl.filter.lua_predicate.lua_program)
-- ARGV[2]  "1": malformed envelopes never match; "0": the filter reads only
--          the id and envelopes are not looked at
-- ARGV[3]  the payload-key prefix (the job id is KEYS[i] without it)
-- returns  { 0, D, M, d1..dD, m1..mM, c1, c2, ... }: d the indexes of
--          dangling ids (no payload key), m of malformed envelopes, c of the
--          candidates (verdict 1 or 2)

--@prelude predicate

local ok, prog, quick, exact, by_id = pcall(jc_pred_load, ARGV[1])
if not ok or type(prog) ~= 'function' then return redis.error_reply('BADARG program') end
local skip_bad = ARGV[2] == '1'
local plen = #ARGV[3]
if #KEYS == 0 then return { 0, 0, 0 } end
local dangling, malformed, cand = {}, {}, {}
local raws = redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  local raw = raws[i]
  if not raw then
    dangling[#dangling + 1] = i
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
