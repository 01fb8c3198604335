"""kill -9 of a primary mid-redrive, then reruns: every job exactly once.

Per round: a 3+3 cluster (``tests/cluster_servers.py``), ``N`` dead jobs over
8 shard tags, ``jobctl redrive`` (odd rounds filtered, about half) run as a
command; once a tenth has moved, the primary of one shard is killed
(SIGKILL); after the failover the command is run again until it exits 0;
then every job id is counted over the shards' ready, dead and hold lists.

    python3 bench/cluster_kill9.py N [ROUNDS]
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE)); sys.path.insert(0, str(HERE.parent / "tests"))
import cluster_servers as cs
from bulkload import load_dead
from jobctl.connection import Target, make_client
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.server import resolve_binary

#: the jobctl command, as a user runs it
JOBCTL = [sys.executable, "-c", "import sys; from jobctl.cli.main import main; sys.exit(main(sys.argv[1:]))"]
N, SHARDS = int(sys.argv[1]), 8
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
binary = resolve_binary(kind="redis")
cfg = Path(tempfile.mkdtemp()) / "jobctl.toml"
cfg.write_text(f'[queues.bench]\nlayout = "reliable-list"\ntag = "bench"\nshards = {SHARDS}\n')
env = dict(os.environ, JOBCTL_JOURNAL=str(Path(tempfile.mkdtemp()) / "j.jsonl"))
for rnd in range(rounds):
    topo = cs.start_cluster(binary, masters=3, replicas=1)
    try:
        c = make_client(Target(topo.url, "k9"))
        now = int(time.time() * 1000)
        tags = shard_tags("bench", SHARDS)
        for n, tag in enumerate(tags):
            load_dead(c, tag, N // SHARDS, now_ms=now, seed=n)
        every = Counter()
        for t in tags:
            every.update(x for x in c.lrange(ReliableListKeys(t).dead, 0, -1))
        assert all(v == 1 for v in every.values())
        flt = ["--filter", "id ~ '*[02468ACEGJMPRTVXZ]'"] if rnd % 2 else []
        def argv(url):
            return [*JOBCTL, "--url", url, "--config", str(cfg), "redrive", "bench", "--yes", *flt]
        p = subprocess.Popen(argv(topo.url), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        victim_port = c.get_node_from_key("{" + tags[rnd % SHARDS] + "}").port
        def ready():
            return sum(c.llen(ReliableListKeys(t).ready) for t in tags)
        t0 = time.time()
        while ready() < N // 10 and p.poll() is None and time.time() - t0 < 120:
            time.sleep(0.05)
        victim = next(n for n in topo.nodes if n.port == victim_port)
        os.kill(victim.proc.pid, signal.SIGKILL)
        out, err = p.communicate(timeout=300)
        first = p.returncode
        c.close()
        live = [n for n in topo.nodes if n.port != victim_port]
        cs.wait_until(lambda: all(n.client().execute_command("CLUSTER INFO").get("cluster_state") == "ok" for n in live),
                      timeout_s=60, what="failover")
        url = "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in live)
        codes = []
        for _ in range(5):
            r = subprocess.run(argv(url), env=env, capture_output=True, text=True, timeout=600)
            codes.append((r.returncode, r.stderr.strip()[:200]))
            if r.returncode == 0:
                break
            time.sleep(3)
        c = make_client(Target(url, "k9"))
        seen = Counter()
        for t in tags:
            k = ReliableListKeys(t)
            for key in (k.ready, k.dead, k.hold):
                seen.update(c.lrange(key, 0, -1))
        lost = set(every) - set(seen)
        dup = [i for i, v in seen.items() if v > 1]
        extra = set(seen) - set(every)
        print(f"round {rnd} {'filtered' if flt else 'unfiltered'}: first exit {first} ({err.decode().strip()[:160]}); "
              f"reruns {codes}; jobs {len(every)}, seen {sum(seen.values())}, lost {len(lost)}, duplicated {len(dup)}, extra {len(extra)}")
        c.close()
    finally:
        topo.stop()
