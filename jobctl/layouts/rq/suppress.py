"""Suppress (failed -> jobctl's suppressed zset), unsuppress and purge of
suppressed RQ jobs.

A suppressed job leaves RQ's failed registry for jobctl's
``jobctl:rq:<q>:suppressed`` zset (id -> suppressed-at ms) with a record in
``jobctl:rq:<q>:suppressed:info`` (who, when, why, plus the registry score
and the hash's remaining TTL it had); its hash is made persistent, so RQ's
cleanup neither drops nor expires it.  Unsuppress puts it back in the failed
registry with its expiry shifted by the time it spent suppressed and its
hash's TTL restored.  Every move is fenced as a redrive is: the job must
still be where the plan saw it with the same score, its hash ``failed`` with
the same ``origin``; the removal is checked before anything is written.
"""

from __future__ import annotations

from jobctl.layouts.common import suppression_record
from jobctl.layouts.moves import move_result
from jobctl.ops.spec import Operation

__all__ = ["SUPPRESS_LUA", "apply_suppress"]

#: KEYS: failed registry, suppressed zset, suppressed info hash, then per job: hash, dependents,
#: dependencies, executions, results.  ARGV: mode ("suppress" | "unsuppress" | "purge"), now (ms), N, then
#: per job: id, score at plan time (in the source), origin, extra (suppress: the record, JSON text;
#: unsuppress: the registry score to restore, then "|", then the hash TTL ms to restore, -1: none).
#: Returns {id, code, ...} as MOVE_LUA does.
SUPPRESS_LUA = r"""
local mode, now, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
if mode ~= 'suppress' and mode ~= 'unsuppress' and mode ~= 'purge' then
  return redis.error_reply('BADARG mode')
end
if not n or n < 0 or #ARGV ~= 3 + 4 * n or #KEYS ~= 3 + 5 * n then return redis.error_reply('BADARG job count') end
for _, kt in ipairs({{KEYS[1], 'zset'}, {KEYS[2], 'zset'}, {KEYS[3], 'hash'}}) do
  local t = redis.call('TYPE', kt[1])['ok']
  if t ~= 'none' and t ~= kt[2] then
    return redis.error_reply('WRONGTYPE key ' .. kt[1] .. ' holds a ' .. t .. ', expected a ' .. kt[2])
  end
end
local src = (mode == 'suppress') and KEYS[1] or KEYS[2]
local out = {}
for i = 1, n do
  local a = 4 + 4 * (i - 1)
  local id, want, origin, extra = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local base = 4 + 5 * (i - 1)
  local job = KEYS[base]
  local code = 'moved'
  local sc = redis.call('ZSCORE', src, id)
  local f = sc and redis.pcall('HMGET', job, 'status', 'origin')
  if not sc then code = 'gone'
  elseif sc ~= want and tonumber(sc) ~= tonumber(want) then code = 'changed'
  elseif f['err'] then code = 'wrongtype'
  elseif not f[1] and redis.call('EXISTS', job) == 0 then code = 'gone'
  elseif f[1] ~= 'failed' or f[2] ~= origin then code = 'changed'
  elseif redis.call('ZREM', src, id) == 0 then code = 'gone'
  elseif mode == 'suppress' then
    local ttl = redis.call('PTTL', job)
    redis.call('ZADD', KEYS[2], now, id)
    local record = string.sub(extra, 1, -2) .. ',"failed_score":"' .. sc .. '","ttl_ms":' .. ttl .. '}'
    redis.call('HSET', KEYS[3], id, record)
    redis.call('PERSIST', job)
  elseif mode == 'unsuppress' then
    local bar = string.find(extra, '|', 1, true)
    local ttl = tonumber(string.sub(extra, bar + 1))
    redis.call('HDEL', KEYS[3], id)
    redis.call('ZADD', KEYS[1], string.sub(extra, 1, bar - 1), id)
    if ttl and ttl > 0 then redis.call('PEXPIRE', job, ttl) end
  else
    redis.call('HDEL', KEYS[3], id)
    redis.call('DEL', job, KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4])
  end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
"""


def _restore(job, now: int) -> str:
    """``"<registry score>|<hash TTL ms>"`` of an unsuppress: the expiry it
    had, shifted by the time spent suppressed (``+inf`` stays), and the TTL."""
    info = getattr(job, "info", None) or {}
    try:
        score = float(info.get("failed_score", "inf"))
        at = int(info.get("at_ms", now))
        ttl = int(info.get("ttl_ms", -1))
    except (TypeError, ValueError):
        score, at, ttl = float("inf"), now, -1
    if score != float("inf"):
        score += max(0, now - at) / 1000
    return f"{'+inf' if score == float('inf') else repr(score)}|{ttl}"


def apply_suppress(layout, plan, *, batch: int, call, now: int):
    """Apply a suppress, unsuppress or purge-of-suppressed ``plan``: one
    :data:`SUPPRESS_LUA` call (``call(lua, keys, args)``) per ``batch`` jobs;
    yields one :class:`~jobctl.ops.result.BatchResult` each."""
    k, spec = layout.keys, plan.spec
    mode = {Operation.SUPPRESS: "suppress", Operation.UNSUPPRESS: "unsuppress"}.get(spec.operation, "purge")
    record = suppression_record(spec, now).decode() if mode == "suppress" else ""
    jobs = list(plan.jobs)
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        keys, args = [k.failed, k.suppressed, k.suppressed_info], [mode, now, len(chunk)]
        for job in chunk:
            keys += [k.job(job.job_id)] + k.job_side_keys(job.job_id)
            extra = _restore(job, now) if mode == "unsuppress" else record
            args += [job.job_id, job.sha1, getattr(job, "origin", k.name), extra]
        yield move_result(call(SUPPRESS_LUA, keys, args))
