-- prelude/predicate.lua: a filter compiled by jobctl/filter/lua_predicate.py,
-- evaluated server-side over reliable-list envelopes to rule jobs out
-- (inlined by jobctl/scripts.py at a line "--@prelude predicate").  Reads only.
--
--   jc_pred_load(text)  the program built (a closure) from its text: cjson
--       of a list in postfix order of {"c", field, op, value} (a clause:
--       field "" is the job id, else an envelope key; op = != < <= > >=;
--       value a string or a number), {"and"}, {"or"}, {"not"}
--       returns the program, its quick rule-out (jc_pred_quick),
--       whether that rule-out reads every clause (text = and != only) and
--       whether the program reads the job id (else any id may be passed)
--   jc_pred_verdict(prog, id, raw, skip_bad, needs_doc, quick, exact)
--       0 the job cannot match: its payload key is missing, the quick
--         rule-out proves it without decoding, or cjson reads a clean
--         envelope the filter rejects;
--       3 malformed (skip_bad): a non-object, a field of the wrong type
--         or a required field missing: it never matches;
--       1 cjson reads a clean envelope the filter matches, 2 undecided
--         (cjson refused it, an integer beyond 2^53, a numeric jobId):
--         both are candidates the client confirms with jobctl's own reader
--         (orjson and Filter.matches), so every match is decided by the
--         Python filter and the server only rules jobs out.
--
-- The quick rule-out, before any decoding: a JSON string equal to x
-- (printable ASCII, no quote, no backslash) is written '"x"' unless one of
-- its characters is escaped, and the only escapes that can stand for such a
-- character are \uXXXX and \/ (\n, \t... stand for control bytes); so in
-- an envelope with neither, a text field can equal x only if '"x"' occurs
-- in it (one plain string.find, a memchr-driven C loop).  Other escapes
-- (an error message's \n or \") do not matter.
-- Each clause is then false, true or unknown (nil), combined in Kleene
-- logic; a program that comes out false cannot match and the envelope is
-- not decoded (so a malformed one it rules out is not listed as malformed:
-- it is never planned either way).  When every clause is such a text clause
-- (or the id), any other envelope is a candidate without decoding (verdict
-- 2: the client decides it); otherwise it goes on to cjson.
--
-- Sound because a document orjson reads is read alike by cjson (strings,
-- integers below 2^53, null, nesting), and one orjson refuses is malformed
-- for jobctl, which never matches when skip_bad.

local JC_INT_FIELDS = { 'jobVersion', 'createdAtEpochMs', 'notBeforeEpochMs', 'deadlineEpochMs', 'attempt',
                        'maxAttempts', 'lastAttemptAtEpochMs', 'nextAttemptAtEpochMs' }
local JC_STR_FIELDS = { 'jobId', 'jobType', 'tenantId', 'idempotencyKey', 'traceId', 'correlationId',
                        'payloadRef', 'lastErrorCode', 'lastErrorMessage' }
local JC_REQUIRED = { 'jobId', 'jobType', 'createdAtEpochMs' }
local JC_EXACT = 9007199254740992  -- 2^53

-- 'clean', 'malformed' or 'undecided' for a decoded document
local function jc_pred_clean(doc)
  if type(doc) ~= 'table' then return 'malformed' end
  for j = 1, #JC_INT_FIELDS do
    local v = doc[JC_INT_FIELDS[j]]
    if v ~= nil and v ~= cjson.null then
      if type(v) ~= 'number' or v ~= math.floor(v) then return 'malformed' end
      if v >= JC_EXACT or v <= -JC_EXACT then return 'undecided' end
    end
  end
  for j = 1, #JC_STR_FIELDS do
    local v = doc[JC_STR_FIELDS[j]]
    if v ~= nil and v ~= cjson.null and type(v) ~= 'string' then
      if JC_STR_FIELDS[j] == 'jobId' and type(v) == 'number' then return 'undecided' end
      return 'malformed'
    end
  end
  for j = 1, #JC_REQUIRED do
    local v = doc[JC_REQUIRED[j]]
    if v == nil or v == cjson.null then return 'malformed' end
  end
  return 'clean'
end

-- the closure of a postfix program: logic.AND(a, b), logic.OR(a, b),
-- logic.NOT(a) combine closures, clause(t) makes one for a clause
local function jc_pred_fold(prog, logic, clause)
  local st, sp = {}, 0
  for j = 1, #prog do
    local t = prog[j]
    local k = t[1]
    if k == 'and' or k == 'or' then
      local b = st[sp]; sp = sp - 1
      st[sp] = (k == 'and' and logic.AND or logic.OR)(st[sp], b)
    elseif k == 'not' then
      st[sp] = logic.NOT(st[sp])
    else
      sp = sp + 1
      st[sp] = clause(t)
    end
  end
  return st[1]
end

-- two-valued logic over a clean document
local JC_BOOL = {
  AND = function(a, b) return function(id, d) return a(id, d) and b(id, d) end end,
  OR = function(a, b) return function(id, d) return a(id, d) or b(id, d) end end,
  NOT = function(a) return function(id, d) return not a(id, d) end end,
}

-- Kleene logic: true, false or nil (unknown)
local JC_KLEENE = {
  AND = function(a, b)
    return function(id, r)
      local x = a(id, r)
      if x == false then return false end
      local y = b(id, r)
      if y == false then return false end
      if x and y then return true end
      return nil
    end
  end,
  OR = function(a, b)
    return function(id, r)
      local x = a(id, r)
      if x then return true end
      local y = b(id, r)
      if y then return true end
      if x == false and y == false then return false end
      return nil
    end
  end,
  NOT = function(a) return function(id, r) local x = a(id, r); if x == nil then return nil end; return not x end end,
}

-- one clause's value on a clean document
local function jc_pred_clause(t)
  local key, op, x = t[2], t[3], t[4]
  local get
  if key == '' then get = function(id, d) return id end else get = function(id, d) return d[key] end end
  local tx = type(x)
  -- a missing (or null) value, or one of another type, matches only !=
  if op == '=' then return function(id, d) return get(id, d) == x end
  elseif op == '!=' then return function(id, d) return get(id, d) ~= x end
  elseif op == '<' then return function(id, d) local v = get(id, d); return type(v) == tx and v < x end
  elseif op == '<=' then return function(id, d) local v = get(id, d); return type(v) == tx and v <= x end
  elseif op == '>' then return function(id, d) local v = get(id, d); return type(v) == tx and v > x end
  end
  return function(id, d) local v = get(id, d); return type(v) == tx and v >= x end
end

-- the program as one closure eval(id, doc), built once per call (no
-- table per job): the filter's value on a clean document
local function jc_pred_build(prog)
  return jc_pred_fold(prog, JC_BOOL, jc_pred_clause)
end

-- the quick rule-out as one closure q(id, raw) -> true, false or nil
-- (unknown), for a raw envelope without \u or \/ escapes; also whether
-- every clause is a needle or on the id (cjson could only rule out more),
-- and whether a clause reads the id
local function jc_pred_quick(prog)
  local exact, by_id = true, false
  local q = jc_pred_fold(prog, JC_KLEENE, function(t)
    local op, x = t[3], t[4]
    if t[2] == '' then
      by_id = true
      local full = jc_pred_clause(t)
      return function(id, r) return full(id, nil) end
    end
    if type(x) == 'string' and (op == '=' or op == '!=') and string.find(x, '^[ -~]*$')
        and not string.find(x, '["\\]') then
      local needle = '"' .. x .. '"'
      local absent = op == '!='  -- the clause's value when the needle is absent
      return function(id, r)
        if string.find(r, needle, 1, true) then return nil end
        return absent
      end
    end
    exact = false
    return function(id, r) return nil end
  end)
  return q, exact, by_id
end

local function jc_pred_load(text)
  local prog = cjson.decode(text)
  local quick, exact, by_id = jc_pred_quick(prog)
  return jc_pred_build(prog), quick, exact, by_id
end

local function jc_pred_verdict(prog, id, raw, skip_bad, needs_doc, quick, exact)
  if not raw then return 0 end  -- a dangling id: never planned
  if not needs_doc then
    return prog(id, nil) and 1 or 0
  end
  if string.byte(raw) ~= 123 and not string.find(raw, '^%s*{') then return skip_bad and 3 or 2 end  -- 123: '{'
  if quick and skip_bad and not string.find(raw, '\\u', 1, true) and not string.find(raw, '\\/', 1, true) then
    local q = quick(id, raw)
    if q == false then return 0 end
    -- a text-only program the needles leave open: a candidate as it is (the
    -- client decides it, and lists it if malformed), no cjson decode
    if exact then return 2 end
  end
  -- bytes orjson may refuse and cjson takes (invalid UTF-8, raw control
  -- bytes): undecided; one anchored scan (a C loop in the pattern matcher)
  if not string.find(raw, '^[ -~]*$') then return 2 end
  local ok, doc = pcall(cjson.decode, raw)
  if not ok then return 2 end
  local c = jc_pred_clean(doc)
  if c == 'undecided' then return 2 end
  if c == 'malformed' then return skip_bad and 3 or 2 end
  return prog(id, doc) and 1 or 0
end
