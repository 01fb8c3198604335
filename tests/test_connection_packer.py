"""jobctl's command packer (:func:`jobctl.redis_client.packer`): hiredis's C
packer for plain arguments, redis-py's with ``surrogateescape`` for the rest;
the bytes on the wire are the same either way.  Real test server.
"""

from __future__ import annotations

import pytest
from redis.connection import Encoder, PythonRespSerializer

from jobctl.config import Config
from jobctl.redis_client import packer
from jobctl.connection import connect, resolve_target

REFERENCE = PythonRespSerializer(6000, Encoder("utf-8", "surrogateescape", False).encode)


@pytest.mark.parametrize("args", [
    ("MGET", b"queue:{q}:job:a", "queue:{q}:job:\u00e9", b"k" * 7000),
    ("ZADD", "k", 1.5, b"m", 0.1, "n", 1e20, "o", -(2 ** 70), "p"),
    ("CONFIG GET", "maxmemory"),
    (b"CLIENT SETNAME", b"jobctl"),
    ("SET", "bad\udcff", b"x"),                  # a surrogate-escaped id: redis-py's encoder
    ("SET", "k", memoryview(b"value")),          # not a plain type: redis-py's packer
], ids=["mget", "zadd-numbers", "str-command-words", "bytes-command-words", "surrogates", "memoryview"])
def test_packer_packs_as_redis_py(args):
    assert b"".join(packer().pack(*args)) == b"".join(REFERENCE.pack(*args))


def test_packer_refuses_bools_as_redis_py_does():
    from redis.exceptions import DataError

    with pytest.raises(DataError):
        packer().pack("SET", "k", True)


def test_undecodable_key_round_trips(redis_url, redis_client):
    client = connect(resolve_target(Config(), url=redis_url))
    client.set("job:bad\udcff", b"v")
    client.mset({"job:\u00e9": b"w", "job:plain": b"x"})
    assert redis_client.get(b"job:bad\xff") == b"v"
    assert client.mget(["job:bad\udcff", "job:\u00e9", b"job:plain"]) == [b"v", b"w", b"x"]
