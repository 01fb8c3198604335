"""``jobctl replay`` with a live consumer (``jobctl/lua/sg_replay.lua``,
``jobctl/layouts/stream_group/replay.py``): whatever the replays of the same
window, run one after the other or at the same time, each original entry
reaches the consumers exactly once more, and an entry that is itself a
replay (it carries ``replayOf``) is never replayed."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
import redis

from helpers import cli_runner, queues_toml, write_config
from jobctl.keys import StreamGroupKeys
from robustness_support import spawn_cli

K = StreamGroupKeys("ev")
GROUP = "workers"


class Consumer:
    """A worker thread of the consumer group: XREADGROUP, count the delivery
    under its original entry id (``replayOf``, else its own id), XACK."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.deliveries: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True)

    def __enter__(self) -> "Consumer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()

    def _work(self) -> None:
        while not self._stop.is_set():
            got = self.client.xreadgroup(GROUP, "c1", {K.stream: ">"}, count=50, block=20)
            for _stream, entries in got or []:
                for eid, fields in entries:
                    self.deliveries[(fields.get(b"replayOf") or eid).decode()] += 1
                    self.client.xack(K.stream, GROUP, eid)

    def caught_up(self, timeout: float = 30.0) -> None:
        """Wait until every entry of the stream is delivered and acknowledged."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            info = self.client.xinfo_stream(K.stream)
            group = next(g for g in self.client.xinfo_groups(K.stream) if g["name"] == GROUP.encode())
            if group["pending"] == 0 and group["last-delivered-id"] == info["last-generated-id"]:
                return
            time.sleep(0.02)
        raise AssertionError("the consumer did not catch up")


def produce(client, n: int) -> list[str]:
    """``n`` entries carrying their job, in a fresh consumer group."""
    client.xgroup_create(K.stream, GROUP, id="0", mkstream=True)
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(K.stream, {"jobId": f"j{i:05d}", "jobType": "report.render", "tenantId": "t1",
                             "payload": orjson.dumps({"n": i}).decode()})
    return [eid.decode() for eid in pipe.execute()]


def concurrent_replays(url: str, config: str) -> list[int]:
    """Two ``jobctl replay ev --from 0`` child processes at once; both exit
    0 (or 8, some entries skipped) without a traceback; returns how many
    each replayed."""
    argv = ("replay", "ev", "--from", "0", "--yes", "--batch", "8", "--rate", "400", "--json")  # ~2 s each: they overlap
    procs = [spawn_cli(url, config, *argv) for _ in range(2)]
    moved = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 8) and b"Traceback" not in err, err.decode()
        moved.append(json.loads(out)["moved"])
    return moved


@pytest.fixture
def config(tmp_path: Path) -> str:
    return write_config(tmp_path, queues_toml(ev={"layout": "stream-group", "tag": "ev"}))


def test_replay_run_twice_delivers_each_original_once_more(redis_client, redis_url, config, capsys):
    run = cli_runner(capsys, redis_url, config)
    originals = produce(redis_client, 300)
    with Consumer(redis_url) as consumer:
        consumer.caught_up()
        for _ in range(2):
            code, out, err = run("replay", "ev", "--from", "0", "--yes", "--batch", "16")
            assert code in (0, 8), err
            consumer.caught_up()  # the replays are acknowledged: history from now on
        code, out, err = run("replay", "ev", "--from", "0", "--to", "99999999999999", "--yes")  # a third time
        assert code in (0, 8), err
        consumer.caught_up()
    assert consumer.deliveries == Counter({eid: 2 for eid in originals})
    assert redis_client.xlen(K.stream) == 2 * len(originals)


def test_two_concurrent_replays_deliver_each_original_once_more(redis_client, redis_url, config):
    originals = produce(redis_client, 800)
    with Consumer(redis_url) as consumer:
        consumer.caught_up()
        moved = concurrent_replays(redis_url, config)
        consumer.caught_up()
        assert sum(moved) == len(originals), moved
        # again, now that the first replays are acknowledged history
        assert concurrent_replays(redis_url, config) == [0, 0]
        consumer.caught_up()
    assert consumer.deliveries == Counter({eid: 2 for eid in originals})
    assert redis_client.xlen(K.stream) == 2 * len(originals)
