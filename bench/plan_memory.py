"""Peak RSS and wall time of the ``jobctl`` operations whose plans keep
per-job or per-window state (issue 11: "peak RSS must not grow with the DLQ"):
a hash-job redrive and purge of the failed list (the plan's
:class:`~jobctl.ops.plan.JobColumns`), and a filtered reliable-list redrive
(``--filter 'tenant = t1'``, 5 tenants: 20 % match; the plan's
:class:`~jobctl.ops.plan.PredicateRange`), each as a whole child process
under GNU ``time`` (:func:`bulk_runs.jobctl_op`) on a freshly loaded DLQ, on
its own ``redis-server`` (or ``--server valkey``).

    python3 bench/plan_memory.py --sizes 1000000,2000000 --ops hj-redrive,hj-purge
    python3 bench/plan_memory.py --sizes 1000000,5000000 --ops rl-filtered
    python3 bench/plan_memory.py ... --pythonpath /tmp/old-checkout   # another jobctl checkout
    python3 bench/plan_memory.py --sizes 1000000 --runs 3 --compare /tmp/old-checkout  # A/B, interleaved

Prints one line per run (op, N, wall s, peak RSS MiB, the child's CPU s (user +
sys), plan s, apply s, 1-min load average, checkout) and the same as JSON lines
with ``--json``.  ``git archive HEAD | tar -x -C DIR`` makes an old checkout.
Server memory: ~4 GB for 5M reliable-list jobs, ~3.5 GB for 2M hash-job jobs.
"""

from __future__ import annotations

import argparse
import os
import sys

import orjson
import redis

from bulk_runs import jobctl_op, write_catalogue
from harness import bench_session, jobctl_argv
from measure import run_process

#: op name -> (layout, queue, bulk_runs operation)
OPS = {"hj-redrive": ("hash-job", "hj", "redrive"), "hj-purge": ("hash-job", "hj", "purge"),
       "rl-filtered": ("reliable-list", "rl", "redrive-filtered")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--runs", type=int, default=1, help="runs of each (op, size)")
    ap.add_argument("--server", choices=["redis", "valkey"], default="redis")
    ap.add_argument("--pythonpath", help="put this jobctl checkout first on the child's PYTHONPATH")
    ap.add_argument("--compare", metavar="DIR", help="also run the jobctl checkout DIR, each run right after ours")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [int(x.replace("_", "")) for x in args.sizes.split(",") if x.strip()]
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad:
        ap.error(f"--ops: unknown {bad}; known {sorted(OPS)}")
    trees = [args.pythonpath] + ([os.path.abspath(args.compare)] if args.compare else [])
    with bench_session(args.server) as (srv, work):
        admin = redis.Redis.from_url(srv.url)
        write_catalogue(work, {"hj": "hash-job", "rl": "reliable-list"})
        env = work.env

        def use(tree: str | None) -> None:  # the child's jobctl: this checkout, or ``tree`` first on its path
            work.env = (lambda **kw: env(PYTHONPATH=os.path.abspath(tree), **kw)) if tree else env  # type: ignore

        for tree in trees:
            use(tree)
            run_process(jobctl_argv() + ["--url", srv.url, "status", "hj"], env=work.env())  # the bytecode cache
        for n in sizes:
            for op in ops:
                layout, queue, what = OPS[op]
                for _ in range(args.runs):
                    for tree in trees:  # A/B runs interleaved: the same load on the machine for both
                        use(tree)
                        r = jobctl_op(srv.url, admin, work, what, queue, layout, n)
                        js = r["jobctl_json"]
                        label = tree or "."
                        print(f"{op:12} N={n:>9,}  wall {r['seconds']:7.2f} s  peak RSS {r['rss_mib']:7.1f} MiB  "
                              f"cpu {r['cpu_s']:6.2f} s  plan {js.get('plan_s', float('nan')):6.2f} s  "
                              f"apply {js.get('apply_s', float('nan')):6.2f} s  load {r['loadavg']:.1f}  {label}",
                              flush=True)
                        if args.json:
                            print(orjson.dumps({"op": op, "n": n, "tree": label, "seconds": r["seconds"],
                                                "rss_mib": r["rss_mib"], "cpu_s": r["cpu_s"], "plan_s": js.get("plan_s"),
                                                "apply_s": js.get("apply_s"), "loadavg": r["loadavg"]}).decode())
                admin.flushall(asynchronous=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
