-- prelude/checks.lua: checks shared by jobctl's scripts, prepended by
-- jobctl/scripts.py to every script whose text has a line "--@prelude".
-- Defines local functions only; writes nothing.
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
