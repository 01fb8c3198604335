"""The anchored walk of a list that changes while it is read
(:func:`jobctl.layouts.reliable_list.live_walk.walk_live_list`), driven step by step: a
pop at the tail, an ``LREM`` of the anchor in the middle, pushes at either
end, and an id listed twice."""

from __future__ import annotations

from jobctl.layouts.reliable_list.live_walk import walk_live_list

KEY = "queue:{live}:ready"


def _walk(client, batch, between):
    """Every element the walk yields; ``between(n)`` runs after window n."""
    out = []
    for n, (_, chunk) in enumerate(walk_live_list(client, KEY, batch=batch)):
        out += chunk
        between(n, chunk)
    return out


def _fill(client, n: int) -> list[bytes]:
    ids = [f"e{i:03d}".encode() for i in range(n)]
    client.lpush(KEY, *ids)  # e000 at the tail
    return ids


def test_pops_at_the_tail_skip_nothing_that_stays(redis_client):
    ids = _fill(redis_client, 30)
    got = _walk(redis_client, 5, lambda n, chunk: redis_client.rpop(KEY, 3))
    assert got == ids  # each read once, in order; what stayed was read


def test_the_anchor_removed_from_the_middle_is_replaced_by_an_older_one(redis_client):
    ids = _fill(redis_client, 30)
    got = _walk(redis_client, 5, lambda n, chunk: redis_client.lrem(KEY, 1, chunk[-1]))
    assert got == ids  # nothing twice, nothing skipped


def test_the_whole_last_window_removed_in_the_middle(redis_client):
    ids = _fill(redis_client, 30)

    def remove(n, chunk):
        if n == 1:
            for e in chunk:
                redis_client.lrem(KEY, 1, e)

    got = _walk(redis_client, 5, remove)
    assert got == ids  # an older window's element serves as the anchor


def test_pushes_at_both_ends_are_never_read_twice(redis_client):
    ids = _fill(redis_client, 30)

    def push(n, chunk):
        redis_client.rpush(KEY, f"r{n}".encode())  # a retry at the served end
        redis_client.lpush(KEY, f"l{n}".encode())

    got = _walk(redis_client, 5, push)
    assert len(got) == len(set(got))
    assert [e for e in got if e.startswith(b"e")] == ids


def test_an_id_listed_twice_does_not_loop(redis_client):
    redis_client.lpush(KEY, b"A", b"B", b"C", b"D", b"X", b"Y", b"C", b"D", b"X", b"Z")
    got = _walk(redis_client, 3, lambda n, chunk: None)
    assert len(got) == 10
