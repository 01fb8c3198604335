-- prelude/checks.lua: checks shared by jobctl's scripts, prepended by
-- jobctl/scripts.py to every script whose text has a line "--@prelude".
-- Defines local functions only; the checks write nothing, the move steps
-- below write only what their caller passes them.
--
--   jc_type_error(key, ...)   nil when KEYS entry `key` is missing or of one
--                             of the Redis types named (e.g. 'list', 'zset');
--                             else the error text "WRONGTYPE key <key> holds
--                             a <type>, expected <types>"
--   jc_check_types(specs)     specs = { {key, type1, type2...}, ... }: the
--                             first jc_type_error, or nil
--   jc_int(value, name, min)  tonumber(value) when it is an integer >= min,
--                             else nil and the error text "BADARG <name> ..."
--   jc_one_of(value, name, set) value when set[value], else nil and an error
--   jc_number(value, name)    tonumber(value) when it is a finite number,
--                             else nil and the error text "BADARG <name> ..."
--   jc_nonempty(value, name)  value when it is a non-empty string, else nil
--                             and the error text "BADARG <name> ..."
--   jc_budget(value)          a search budget: tonumber(value) when it is an
--                             integer >= 1, else nil and "BADARG budget <value>"
--   jc_job_count(at, per, keys0)
--                             the job count n = ARGV[at] when it is an integer
--                             >= 0, #ARGV is at + per * n and (unless keys0
--                             is nil) #KEYS is keys0 + n; else nil and
--                             "BADARG job count <ARGV[at]>"
--   jc_job_numbers(at, per, field, name, blank_ok)
--                             (after jc_job_count) nil when each job i's
--                             field-th argument ARGV[at + field + per * (i - 1)]
--                             is a number (or "", when blank_ok); else the
--                             error text "BADARG <name> of job <i>"

local function jc_type_error(key, ...)
  local t = redis.call('TYPE', key)
  t = type(t) == 'table' and t['ok'] or t
  if t == 'none' then return nil end
  local wanted = {...}
  for i = 1, #wanted do
    if t == wanted[i] then return nil end
  end
  return 'WRONGTYPE key ' .. key .. ' holds a ' .. t .. ', expected a ' .. table.concat(wanted, ' or ')
end

local function jc_check_types(specs)
  for i = 1, #specs do
    local spec = specs[i]
    local err = jc_type_error(spec[1], unpack(spec, 2))
    if err then return err end
  end
  return nil
end

local function jc_int(value, name, min)
  local n = tonumber(value)
  if n == nil or n ~= math.floor(n) or n < min then
    return nil, 'BADARG ' .. name .. ' must be an integer >= ' .. min .. ', got ' .. tostring(value)
  end
  return n
end

local function jc_one_of(value, name, set)
  if set[value] then return value end
  return nil, 'BADARG ' .. name .. ' ' .. tostring(value)
end

local function jc_number(value, name)
  local n = tonumber(value)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then
    return nil, 'BADARG ' .. name .. ' must be a number, got ' .. tostring(value)
  end
  return n
end

local function jc_nonempty(value, name)
  if type(value) ~= 'string' or value == '' then return nil, 'BADARG ' .. name .. ' is empty' end
  return value
end

local function jc_budget(value)
  local n = tonumber(value)
  if not n or n < 1 or n ~= math.floor(n) then return nil, 'BADARG budget ' .. tostring(value) end
  return n
end

local function jc_job_count(at, per, keys0)
  local n = tonumber(ARGV[at])
  if not n or n < 0 or n ~= math.floor(n) or #ARGV ~= at + per * n or (keys0 and #KEYS ~= keys0 + n) then
    return nil, 'BADARG job count ' .. tostring(ARGV[at])
  end
  return n
end

local function jc_job_numbers(at, per, field, name, blank_ok)
  for i = 1, tonumber(ARGV[at]) do
    local v = ARGV[at + field + per * (i - 1)]
    if not tonumber(v) and not (blank_ok and v == '') then
      return 'BADARG ' .. name .. ' of job ' .. i
    end
  end
  return nil
end

-- Shared steps of the move scripts (see the header above for the checks):
--   jc_failed(r)              true when a redis.pcall reply r is an error
--   jc_find_tail(st, list, member)
--                             bounded LPOS from the tail of `list`; st is
--                             { len = LLEN at start minus moves so far,
--                               left = LPOS budget still unspent, budget = the
--                               per-call search bound }; returns the position
--                             (charging st.left), or nil and the code
--                             'deferred' | 'unreached' | 'gone'
--   jc_push_then_lrem(push, dest, src, member, undo)
--                             redis.pcall(push, dest, member) then LREM src -1
--                             member; on an LREM error runs undo on dest;
--                             true when both steps succeeded
--   jc_reply(out, id, code)   appends the pair id, code to the reply table out

local function jc_failed(r)
  return type(r) == 'table' and r['err'] ~= nil
end

local function jc_find_tail(st, list, member)
  local reach = math.min(st.len, st.budget)
  local search = math.min(reach, st.left)
  local pos = search > 0 and redis.call('LPOS', list, member, 'RANK', -1, 'MAXLEN', search) or false
  if not pos and search < reach then
    st.left = 0
    return nil, 'deferred'
  elseif not pos then
    st.left = st.left - reach
    return nil, (st.len > st.budget) and 'unreached' or 'gone'
  end
  st.left = st.left - (st.len - pos)
  return pos
end

local function jc_push_then_lrem(push, dest, src, member, undo)
  if jc_failed(redis.pcall(push, dest, member)) then return false end
  if jc_failed(redis.pcall('LREM', src, -1, member)) then
    redis.pcall(undo, dest)
    return false
  end
  return true
end

local function jc_reply(out, id, code)
  out[#out + 1] = id
  out[#out + 1] = code
end

--   jc_apply_writes(writes)   runs one job's writes in order, each
--                             {command, undo}: command a redis.pcall argument
--                             list, undo nil, such a list, or a function of
--                             the command's reply returning one (or returning
--                             a function that undoes it); the first
--                             write that fails undoes the ones done, newest
--                             first; true when all succeeded
local function jc_apply_writes(writes)
  local undo = {}
  for i = 1, #writes do
    local r = redis.pcall(unpack(writes[i][1]))
    if jc_failed(r) then
      for j = #undo, 1, -1 do
        if type(undo[j]) == 'function' then undo[j]() else redis.pcall(unpack(undo[j])) end
      end
      return false
    end
    local back = writes[i][2]
    if type(back) == 'function' then back = back(r) end
    if back then undo[#undo + 1] = back end
  end
  return true
end

--   jc_job_args(at, per, keys0)
--                             checks a move script's per-job arguments: ARGV[at]
--                             the job count n (an integer >= 0), #ARGV equal to
--                             at + per * n, #KEYS equal to keys0 + n (unless
--                             keys0 is nil), and each job's second argument
--                             (ARGV[at + 2 + per * (i - 1)], its score) a
--                             number; nil, or the error text
--                             "BADARG job count ..." / "BADARG score of job i"
local function jc_job_args(at, per, keys0)
  local _, err = jc_job_count(at, per, keys0)
  return err or jc_job_numbers(at, per, 2, 'score', false)
end
