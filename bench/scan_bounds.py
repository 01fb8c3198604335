"""The per-call bounds of a filtered plan's server-side scan (``list_scan.lua``).

Starts a throwaway server and measures, in server time (``INFO commandstats``
of one ``EVALSHA`` at a time, the median of ``--repeat`` calls):

1. the worst-case costs :mod:`jobctl.filter.lua_predicate` prices a call
   with (``COST_*``): cjson decoding a byte of an envelope of small integers,
   one text clause's search over a byte of quote-dense text, one clause of
   one job, and the fixed cost of one job;
2. calls at the limits: windows of :data:`SCAN_WINDOW` adversarial
   envelopes (small integers, quote-dense, quote-dense with ``\\u`` escapes,
   so that both the text search and cjson run) twice as big as the call's
   byte budget, under the cheapest and the most expensive programs the limits
   allow, each against :data:`SCAN_CALL_BUDGET_US`;
3. for scale, what the same windows cost with no byte budget (every
   envelope read into Lua, as before the bounds), and a program far over the
   clause limit.

    python3 bench/scan_bounds.py [--repeat 7] [--server valkey]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import orjson
import redis

from harness import add_common_args, start_server
from report import environment, note, table, write_results


def _env(job_id: str, kind: str, size: int) -> bytes:
    head = {"jobId": job_id, "jobType": "email.send", "tenantId": "t1", "attempt": 1, "createdAtEpochMs": 1}
    raw = orjson.dumps(head)[:-1]
    room = max(0, size - len(raw) - 16)
    if kind == "ints":  # a table entry for cjson every two bytes
        body = b'"p":[' + b"1," * (room // 2) + b"1]"
    elif kind == "quotes":  # a quote every 6 bytes: each text clause's search stops at each
        body = b'"p":[' + b'"t1x",' * (room // 6) + b'"x"]'
    else:  # quotes and a \u escape: the quick rule-out cannot settle it, cjson decodes it too
        body = b'"u":"\\u0041","p":[' + b'"t1x",' * (room // 6) + b'"x"]'
    return raw + b"," + body + b"}"


class Bench:
    """One server, one window of keys, the call timed in server µs."""

    def __init__(self, client: redis.Redis, repeat: int) -> None:
        from jobctl.keys import ReliableListKeys
        from jobctl.scripts import source

        self.client, self.repeat = client, repeat
        self.keys = ReliableListKeys("bench")
        self.sha = client.script_load(source("list_scan"))

    def fill(self, kind: str, size: int, count: int) -> list[str]:
        names = [self.keys.job(f"b{i}") for i in range(count)]
        self.client.delete(*[self.keys.job(f"b{i}") for i in range(200)])
        for k in names:
            self.client.set(k, _env(k, kind, size))
        return names

    def call_us(self, keys: list[str], program: bytes, budget: int) -> float:
        """Median server µs of one ``list_scan`` call."""
        times = []
        for _ in range(self.repeat):
            self.client.config_resetstat()
            self.client.evalsha(self.sha, len(keys), *keys, program, "1", self.keys.job(""), budget)
            times.append(int(self.client.info("commandstats")["cmdstat_evalsha"]["usec"]))
        return statistics.median(times)


def _programs():
    from jobctl.filter import compile_filter
    from jobctl.filter.lua_predicate import SCAN_MAX_CLAUSES, SCAN_MAX_PROGRAM_BYTES, lua_program

    n = SCAN_MAX_CLAUSES
    width = (SCAN_MAX_PROGRAM_BYTES - 40 * n) // n
    texts = {
        "1 text clause": "tenant = x",
        "1 number clause": "attempts = 7",
        f"{n} text clauses (and)": " and ".join(f"tenant != x{k}" for k in range(n)),
        f"{n} number clauses (and)": " and ".join(f"attempts != {k + 2}" for k in range(n)),
        f"{n} text clauses of {width} chars": " and ".join(f"tenant != {'v' * width}{k:02d}" for k in range(n)),
    }
    return {name: lua_program(compile_filter(text)) for name, text in texts.items()}


def measure_costs(b: Bench) -> list[list]:
    """Section 1: the per-unit costs, worst shapes."""
    from jobctl.filter import compile_filter
    from jobctl.filter.lua_predicate import SCAN_WINDOW, lua_program

    big = 10 ** 9
    one_num = lua_program(compile_filter("attempts = 7"))
    one_txt = lua_program(compile_filter("tenant != x0"))
    many_txt = lua_program(compile_filter(" and ".join(f"tenant != x{k}" for k in range(32))))
    many_num = lua_program(compile_filter(" and ".join(f"attempts != {k + 2}" for k in range(32))))
    size = 256 * 1024
    k1 = b.fill("ints", size, 1)
    decode = (b.call_us(k1, one_num, big) - b.call_us([], one_num, big)) * 1000 / size
    k1 = b.fill("quotes", size, 1)
    find = (b.call_us(k1, many_txt, big) - b.call_us(k1, one_txt, big)) * 1000 / (31 * size)
    kw = b.fill("ints", 40, SCAN_WINDOW)
    clause = (b.call_us(kw, many_num, big) - b.call_us(kw, one_num, big)) * 1000 / (31 * SCAN_WINDOW)
    job = b.call_us(kw, one_num, big) * 1000 / SCAN_WINDOW
    return [["decode, ns a byte (small integers)", decode], ["text clause search, ns a byte (quotes)", find],
            ["clause, ns a job", clause], ["job, ns (STRLEN, MGET slot, verdict)", job]]


def measure_limits(b: Bench) -> list[list]:
    """Sections 2 and 3: calls at the limits, and without a byte budget."""
    from jobctl.filter.lua_predicate import SCAN_CALL_BUDGET_US, SCAN_WINDOW, scan_call_bytes

    rows = []
    for name, program in _programs().items():
        budget = scan_call_bytes(program)
        for kind in ("ints", "quotes", "quotes+\\u"):
            keys = b.fill(kind, max(64, 2 * budget // SCAN_WINDOW), SCAN_WINDOW)
            bounded = b.call_us(keys, program, budget)
            unbounded = b.call_us(keys, program, 10 ** 12)
            rows.append([name, kind, budget, bounded, bounded <= SCAN_CALL_BUDGET_US, unbounded])
    return rows


def measure_scale(b: Bench) -> list[list]:
    """Section 3: the cases the bounds were made for, with and without them."""
    import orjson as _orjson

    from jobctl.filter.lua_predicate import SCAN_WINDOW, scan_call_bytes

    over = "[" + ",".join(_orjson.dumps(["c", "tenantId", "=", f"x{k}"]).decode() + (",[\"or\"]" if k else "")
                          for k in range(7_000)) + "]"
    keys = b.fill("quotes", 500, SCAN_WINDOW)
    rows = [["7,000 text clauses (over the limit: client-side now)", "120 x 500 B", "-",
             b.call_us(keys, over.encode(), 10 ** 12)]]
    from jobctl.filter import compile_filter
    from jobctl.filter.lua_predicate import lua_program

    program = lua_program(compile_filter("tenant = 'ü'"))
    big = b.keys.job("big")
    b.client.set(big, _env("big", "ints", 50_000_000).replace(b'"t1"', b'"\\u00fc"', 1))
    rows.append(["tenant = 'ü'", "one 50 MB envelope", scan_call_bytes(program),
                 b.call_us([big], program, scan_call_bytes(program))])
    rows.append(["tenant = 'ü' (no byte budget)", "one 50 MB envelope", "-", b.call_us([big], program, 10 ** 12)])
    b.client.delete(big)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--repeat", type=int, default=7, help="Calls timed per figure (the median is kept).")
    add_common_args(ap)
    args = ap.parse_args()
    if args.quick:
        args.repeat = min(args.repeat, 3)
    from jobctl.filter.lua_predicate import SCAN_CALL_BUDGET_US

    server = start_server(args.server)
    try:
        # The unbounded calls of section 3 take seconds under load: past redis-py's 5 s default.
        b = Bench(redis.Redis.from_url(server.url, socket_timeout=120), args.repeat)
        note("per-unit costs")
        costs = measure_costs(b)
        table("worst-case costs (server time)", ["cost", "measured"], costs)
        note("calls at the limits")
        limits = measure_limits(b)
        table(f"one list_scan call, server µs (budget {SCAN_CALL_BUDGET_US:,} µs); windows twice the byte budget",
              ["program", "envelopes", "byte budget", "µs", "within", "µs unbounded"], limits)
        note("the cases the bounds were made for")
        scale = measure_scale(b)
        table("one list_scan call, server µs", ["program", "envelopes", "byte budget", "µs"], scale)
        write_results("scan_bounds", vars(args), environment(server),
                      {"costs": {r[0]: r[1] for r in costs}, "limits": limits, "scale": scale})
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
