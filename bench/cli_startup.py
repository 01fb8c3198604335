"""How long does ``jobctl --help`` take, and what does start-up import?

* wall time of the ``jobctl --help`` process (the installed console script),
  median of ``--runs`` runs after two unmeasured ones, next to the floor of
  the same interpreter doing nothing (``python3 -c pass``) and importing
  only click;
* which heavy modules a ``--help`` leaves in ``sys.modules`` (a child runs
  ``jobctl.cli.main.main(["--help"])`` and lists them): textual, pyspark and
  the TUI must not be there (the bench fails if they are);
* the slowest top-level imports from ``python -X importtime``;
* with ``--server redis|valkey``: the whole ``jobctl redrive Q --yes
  --json`` and ``jobctl purge Q --state dead --no-export --yes --json``
  processes on an empty queue of a throwaway server, the fixed cost inside
  every bulk figure (interpreter, imports, connection, plan of
  nothing, output).

Bytecode is cached in a private directory (``PYTHONPYCACHEPREFIX``), as
after a ``pip install``; where ``PYTHONDONTWRITEBYTECODE`` is set (as on the
project's machines, with an editable install) a row also shows ``--help``
without a cache for jobctl's own modules.  Writes
``bench/results/cli_startup-*.json``.  No server is needed without
``--server``.

    python3 bench/cli_startup.py [--quick] [--runs N] [--server redis|valkey]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import orjson

from harness import Workdir, jobctl_argv, start_server
from measure import ratio, run_process, summary
from report import environment, note, table, write_results

#: Must never be imported by ``jobctl --help`` (or by any non-TUI command's start-up).
FORBIDDEN = ("textual", "pyspark", "jobctl_tui")
#: Reported when present, to see what start-up pays for.
WATCHED = FORBIDDEN + ("rich", "redis", "lark", "pyarrow", "orjson", "prometheus_client", "platformdirs",
                       "click", "jobctl.layouts", "jobctl.filter", "jobctl.ops.engine")

_MODULES_PROBE = f"""
import contextlib, io, json, sys
from jobctl.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["--help"])
watched = {WATCHED!r}
print(json.dumps({{"code": code, "present": [m for m in watched if m in sys.modules],
                   "modules": len(sys.modules)}}))
"""

_IMPORTTIME_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def importtime(env: dict[str, str]) -> tuple[list[tuple[str, float, float]], float]:
    """The imports ``main(["--help"])`` pays for, as (module, self ms,
    cumulative ms), slowest first: what the script imports directly and what
    ``jobctl.cli.main`` imports directly; plus the total of the script's
    direct imports in ms (``python -X importtime``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "from jobctl.cli.main import main; main(['--help'])"],
                          capture_output=True, text=True, timeout=120, env=env)
    top: list[tuple[str, float, float]] = []
    pending: list[tuple[str, float, float]] = []  # depth-2 imports awaiting their parent
    for line in proc.stderr.splitlines():
        m = _IMPORTTIME_RE.match(line)
        if not m:
            continue
        depth = len(m.group(3))  # one space per level: children are printed before parents
        entry = (m.group(4), int(m.group(1)) / 1000, int(m.group(2)) / 1000)
        if depth == 3:
            pending.append(entry)
        elif depth == 1:
            top.append(entry)
            if entry[0] == "jobctl.cli.main":
                top += [(f"  {name}", s, c) for name, s, c in pending]
            pending = []
    total = sum(c for name, _, c in top if not name.startswith(" "))
    top.sort(key=lambda t: -t[2])
    return top, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 runs instead of 20.")
    ap.add_argument("--runs", type=int, help="Measured runs per command (default 20; --quick 5).")
    ap.add_argument("--server", choices=["redis", "valkey"],
                    help="Also time an empty redrive and purge against a throwaway server of this kind.")
    args = ap.parse_args()
    with Workdir() as work:
        if not args.server:
            return _measure(args, work)
        srv = start_server(args.server)
        try:
            return _measure(args, work, srv.url)
        finally:
            srv.stop()


def _measure(args, work: Workdir, url: str | None = None) -> int:
    runs = args.runs or (5 if args.quick else 20)
    env = environment()
    cached, inherited = work.env(), work.env(bytecode_cache=False)
    nocache = "jobctl --help, no bytecode cache" if inherited.get("PYTHONDONTWRITEBYTECODE") else None
    commands = {
        "jobctl --help": (jobctl_argv() + ["--help"], cached),
        "python3 -c pass": ([sys.executable, "-c", "pass"], cached),
        "python3 -c 'import click'": ([sys.executable, "-c", "import click"], cached),
    }
    if nocache:  # this machine's setting: jobctl's modules compiled at every start
        commands[nocache] = (jobctl_argv() + ["--help"], inherited)
    if url:  # an operation's fixed cost: an empty reliable-list queue
        work.write_catalogue({"empty": "empty"})
        op = jobctl_argv() + ["--url", url]
        commands["jobctl redrive (empty queue)"] = (op + ["redrive", "empty", "--yes", "--json"], cached)
        commands["jobctl purge --no-export (empty queue)"] = (
            op + ["purge", "empty", "--state", "dead", "--no-export", "--yes", "--json"], cached)
    times: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, int] = {}
    for name, (argv, env_) in commands.items():  # untimed: page cache, bytecode cache; peak RSS
        run_process(argv, capture=False, env=env_)
        rss[name] = run_process(argv, capture=False, rss=True, env=env_).max_rss_kib
    note(f"{runs} runs of each of {len(commands)} commands, interleaved")
    for _ in range(runs):
        for name, (argv, env_) in commands.items():
            run = run_process(argv, capture=False, env=env_)
            if run.returncode != 0:
                print(f"cli_startup: {name} exited {run.returncode}: {run.stderr.strip()}", file=sys.stderr)
                return 1
            times[name].append(run.wall_s)

    probe = subprocess.run([sys.executable, "-c", _MODULES_PROBE], capture_output=True, text=True, timeout=120,
                           env=cached)
    if probe.returncode != 0:
        print(f"cli_startup: module probe failed: {probe.stderr.strip()[-500:]}", file=sys.stderr)
        return 1
    mods = orjson.loads(probe.stdout.strip().splitlines()[-1])
    forbidden = [m for m in mods["present"] if m in FORBIDDEN]
    top, total = importtime(cached)

    results = {"runs": runs, "commands": {}, "modules_after_help": mods, "forbidden_imported": forbidden,
               "importtime_total_ms": total, "importtime_top": top[:15]}
    rows = []
    for name in commands:
        s = summary(times[name], 1000.0)
        results["commands"][name] = {"wall_ms": s, "max_rss_kib": rss[name]}
        rows.append([name, s["median"], s["min"], s["max"], rss[name] // 1024])
    table(f"start-up, {runs} runs each, interleaved; times in ms (bytecode cached unless said)",
          ["command", "median", "min", "max", "peak RSS MiB"], rows)
    base = results["commands"]["python3 -c pass"]["wall_ms"]["median"]
    jc = results["commands"]["jobctl --help"]["wall_ms"]["median"]
    results["jobctl_minus_interpreter_ms"] = jc - base
    results["jobctl_over_interpreter"] = ratio(jc, base)
    print(f"\njobctl --help costs {jc - base:.0f} ms over the bare interpreter "
          f"({ratio(jc, base):.1f}x); {mods['modules']} modules loaded")
    print(f"heavy modules loaded by --help: {', '.join(mods['present']) or 'none'}")
    print(f"textual / pyspark / jobctl_tui imported: {', '.join(forbidden) if forbidden else 'no'}")
    table(f"slowest top-level imports (python -X importtime; all top-level imports: {total:.0f} ms)",
          ["module (indented: imported by jobctl.cli.main)", "self ms", "cumulative ms"],
          [list(t) for t in top[:12]])
    write_results("cli_startup", vars(args) | {"runs": runs}, env, results)
    if forbidden:
        print(f"cli_startup: FAIL: --help imported {', '.join(forbidden)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
