-- lease.lua: the lease that lets one jobctl operation at a time work on a
-- queue shard's sources (jobctl.ops.window), and the start of its walk.
--
-- KEYS[1]  lease string (jobctl)   queue:{t}:jobctl:lease
-- KEYS[2]  walk hash (jobctl)      queue:{t}:jobctl:walk
-- ARGV[1]  action: "acquire" | "release" | "begin"
-- ARGV[2]  lease value "<op id> <host> <pid>"
-- ARGV[3]  acquire: TTL (ms); "steal": the value to replace (a lease whose
--          holder is known dead), "" for none.  begin: the operation id
-- ARGV[4]  acquire: the value it may replace ("" for none); begin: total
--          tail positions of the walk
-- ARGV[5]  begin only: the TTL (ms) each window call of the walk that
--          writes jobctl's redrive record sets on it
--          (jobctl.ops.redrive_record.EXPIRE_AFTER_MS)
-- returns  acquire: { 1 } when taken, { 0, holder } when held by another;
--          release: { 1 } when it was ours and is gone, { 0 } otherwise;
--          begin: { 1 }, or { 0, op } when another operation's walk is
--          still recorded (its hold must be finished first)

--@prelude

local lease, walk = KEYS[1], KEYS[2]
local action, err = jc_one_of(ARGV[1], 'action', { acquire = true, release = true, begin = true })
if not action then return redis.error_reply(err) end
err = jc_check_types({ { lease, 'string' }, { walk, 'hash' } })
if err then return redis.error_reply(err) end
local value = ARGV[2]
local current = redis.call('GET', lease)

if action == 'acquire' then
  local ttl
  ttl, err = jc_int(ARGV[3], 'ttl', 1)
  if not ttl then return redis.error_reply(err) end
  if current and current ~= value and current ~= ARGV[4] then return { 0, current } end
  redis.call('SET', lease, value, 'PX', ttl)
  return { 1 }
elseif action == 'release' then
  if current == value then redis.call('DEL', lease); return { 1 } end
  return { 0 }
end
-- begin
if current ~= value then return redis.error_reply('LEASE operation does not hold the lease ' .. lease) end
local total, record_ttl
total, err = jc_int(ARGV[4], 'total', 0)
if not total then return redis.error_reply(err) end
record_ttl, err = jc_int(ARGV[5], 'record ttl', 1)
if not record_ttl then return redis.error_reply(err) end
local owner = redis.call('HGET', walk, 'op')
if owner and owner ~= ARGV[3] then return { 0, owner } end
redis.call('HSET', walk, 'op', ARGV[3], 'total', total, 'popped', 0, 'record_ttl', record_ttl)
return { 1 }
