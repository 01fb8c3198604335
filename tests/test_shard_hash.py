"""The shard rule ``java-hashcode-floormod`` equals Java's
``Math.floorMod(jobId.hashCode(), shards)``, where ``String.hashCode`` runs
over UTF-16 code units: a character outside the Basic Multilingual Plane
counts as its two surrogates.  The expected values below are Java's (by the
definition ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in signed
32-bit arithmetic), and a reshard puts such ids on the shard a Java producer
would have used."""

from __future__ import annotations

import random

import pytest

from jobctl.cli.main import main
from jobctl.keys import ReliableListKeys
from jobctl.layouts.sharding import java_hashcode_floormod
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.protocol import Producer
from helpers import wall_ms
from test_pause import partition

# text -> Java's String.hashCode() (signed 32-bit int)
JAVA_HASHES = {
    "": 0,
    "a": 97,
    "hello": 99162322,
    "Aa": 2112,
    "BB": 2112,
    "polygenelubricants": -2147483648,
    "job_01JZ4SZ3MXWZK7WQR0STV9Q3WZ": -192938938,
    "é": 233,
    "日本語": 25921943,
    "\uffff": 65535,
    "😀": 1772899,  # U+1F600 = D83D DE00: 0xD83D * 31 + 0xDE00
    "𝄞": 1772394,  # U+1D11E = D834 DD1E
    "job_😀_0": 85145494,
}


def utf16_hash(text: str) -> int:
    """Reference: Java's String.hashCode by its definition, over UTF-16 code units."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize("text,java", sorted(JAVA_HASHES.items()))
def test_reference_matches_java(text, java):
    assert utf16_hash(text) == java


@pytest.mark.parametrize("text,java", sorted(JAVA_HASHES.items()))
@pytest.mark.parametrize("shards", [1, 2, 3, 4, 7, 16, 64, 1024])
def test_shard_rule_is_java_floormod(text, java, shards):
    assert java_hashcode_floormod(text, shards) == java % shards  # Python's % is floorMod


def test_emoji_id_goes_to_javas_shard():
    assert java_hashcode_floormod("job_😀_0", 16) == 6


def test_many_ids_outside_the_bmp():
    rng = random.Random(7)
    for i in range(2000):
        text = "".join(chr(rng.choice([rng.randrange(32, 0xD800), rng.randrange(0x10000, 0x110000)]))
                       for _ in range(rng.randrange(0, 12))) + f"_{i}"
        for n in (2, 16, 1000):
            assert java_hashcode_floormod(text, n) == utf16_hash(text) % n, text


RESHARD_TOML = """
[queues.emo]
layout = "reliable-list"
shards = 2
shard_rule = "java-hashcode-floormod"
"""


def test_reshard_puts_ids_outside_the_bmp_on_javas_shard(redis_client, redis_url, tmp_path, capsys):
    cfg = tmp_path / "emo.toml"
    cfg.write_text(RESHARD_TOML)
    rng = random.Random(5)
    ids = [f"job_{emoji}_{i}" for i, emoji in enumerate(["😀", "🚀", "𝄞", "🎉"] * 25)]
    producers = [Producer(redis_client, f"emo:{s:02d}") for s in range(2)]
    for i, job_id in enumerate(ids):
        producers[utf16_hash(job_id) % 2].enqueue(new_envelope(job_id, "webhook.deliver", "t1", wall_ms() + i, rng))
    code = main(["--url", redis_url, "--config", str(cfg), "reshard", "emo", "--shards", "16", "--yes", "--json"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    tags = [f"emo:{s:02d}" for s in range(16)]
    where = partition(redis_client, tags)
    assert set(where) == set(ids)
    wrong = [(job_id, key) for job_id, (key,) in where.items()
             if not key.startswith(f"queue:{{emo:{utf16_hash(job_id) % 16:02d}}}:")]
    assert not wrong, f"{len(wrong)} of {len(ids)} ids on the wrong shard, e.g. {wrong[:2]}"
    assert all(redis_client.exists(ReliableListKeys(f"emo:{utf16_hash(j) % 16:02d}").job(j)) for j in ids)


def test_the_fixture_producers_use_the_same_rule():
    from jobctl_fixtures.ids import java_string_hash

    for text, java in JAVA_HASHES.items():
        assert java_string_hash(text) == java, text
