"""A drain or migrate the ACL refuses on the destination leaves no job out
of service: the permission is checked before the first write, the error
names the key and the missing permission (exit 4), and every job is still
ready in its source queue, in order."""

from __future__ import annotations

import pytest

from helpers import config_fixtures
from test_drain_migrate import QUEUES_TOML, SRC, DST
from test_operations import snapshot
from test_pause import enqueue, tail_first

USER, PASSWORD = "jobctl-queue-email-only", "only-email"
cfg, run = config_fixtures(QUEUES_TOML.replace("shards = 2\n", 'shards = 2\nshard_rule = "java-hashcode-floormod"\n'))


@pytest.fixture
def email_only_url(redis_client, redis_url):
    """A URL of a user allowed every command on queue email's keys only
    (``~queue:{email}:*`` and ``~job:{email}:*``)."""
    redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], reset=True, commands=["+@all"],
                             keys=["queue:{email}:*", "job:{email}:*"], channels=["*"])
    yield redis_url.replace("redis://", f"redis://{USER}:{PASSWORD}@", 1)
    redis_client.acl_deluser(USER)


@pytest.mark.parametrize("argv", [["drain", "email", "--to", "email-v2"], ["migrate", "email", "email-v2"]],
                         ids=lambda a: a[0])
def test_a_refused_destination_changes_nothing(redis_client, cfg, capsys, email_only_url, argv):
    from helpers import cli

    ids = enqueue(redis_client, "email", 50)
    before = snapshot(redis_client)
    code, out, err = cli(capsys, "--url", email_only_url, "--config", cfg, *argv, "--yes")
    assert code == 4, (out, err)
    assert len(err.strip().splitlines()) == 1 and "email-v2" in err, err
    assert redis_client.llen(SRC.migrating) == 0, "no job left out of the workers' reach"
    assert tail_first(redis_client, SRC.ready) == ids
    assert snapshot(redis_client) == before


@pytest.fixture
def ready_read_only_url(redis_client, redis_url):
    """A URL of a user who may write everything but the destination's ready
    list, which it may only read (the checks before the first write pass)."""
    redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], reset=True, commands=["+@all"],
                             keys=["queue:{email}:*", "job:{email}:*", "queue:{email-v2}:jobctl:*",
                                   "queue:{email-v2}:scheduled", "job:{email-v2}:*", "%R~queue:{email-v2}:ready"],
                             channels=["*"])
    yield redis_url.replace("redis://", f"redis://{USER}:{PASSWORD}@", 1)
    redis_client.acl_deluser(USER)


def test_a_write_refused_before_the_move_changes_nothing(redis_client, cfg, capsys, ready_read_only_url):
    from helpers import cli

    ids = enqueue(redis_client, "email", 50)
    before = snapshot(redis_client)
    code, out, err = cli(capsys, "--url", ready_read_only_url, "--config", cfg, "drain", "email", "--to", "email-v2",
                         "--yes")
    assert code == 4, (out, err)
    assert len(err.strip().splitlines()) == 1 and DST.ready in err, err
    assert snapshot(redis_client) == before
    assert tail_first(redis_client, SRC.ready) == ids


def _migrate_with_acl_changed_after_the_first_batch(redis_client, redis_url, cfg, dst: str, keys: list[str]):
    """``migrate email DST`` as a user allowed everything, whose key patterns
    become ``keys`` after the first result; returns the error raised."""
    from jobctl.errors import AuthFailed
    from jobctl.ops.core import OperationCore
    from jobctl.ops.request import OpRequest
    from jobctl.ops.spec import Operation
    from jobctl.session import Session

    redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], reset=True, commands=["+@all"],
                             keys=["*"], channels=["*"])
    session = Session(url=redis_url.replace("redis://", f"redis://{USER}:{PASSWORD}@", 1), config_file=cfg)
    changed: list[bool] = []

    def progress(done, total):
        if not changed:
            changed.append(True)
            redis_client.acl_setuser(USER, enabled=True, keys=keys, reset_keys=True)

    try:
        core = OperationCore(session)
        prepared = core.prepare(OpRequest(Operation.MIGRATE, "email", destination=dst))
        with pytest.raises(AuthFailed, match="given back") as err:
            core.apply(prepared, batch=10, progress=progress)
        return err.value
    finally:
        session.close()
        redis_client.acl_deluser(USER)


def test_an_acl_changed_mid_move_gives_the_batch_back(redis_client, redis_url, cfg):
    """The ACL changes after the first take-out: the batch taken out goes
    back to the source, exit 4, and no job is out of service."""
    ids = enqueue(redis_client, "email", 50)
    _migrate_with_acl_changed_after_the_first_batch(redis_client, redis_url, cfg, "email-v2",
                                                    ["queue:{email}:*", "job:{email}:*"])
    assert redis_client.llen(SRC.migrating) == 0, "no job left out of the workers' reach"
    assert sorted(tail_first(redis_client, SRC.ready)) == ids and redis_client.llen(DST.ready) == 0


def test_a_refusal_of_one_destination_shard_finishes_the_jobs_copied_to_another(redis_client, redis_url, cfg):
    """A sharded destination whose second shard the ACL refuses mid-batch:
    the jobs copied to the first shard finish their move (never in both
    queues), the others go back; every job is in exactly one queue."""
    from jobctl.keys import shard_tags

    ids = enqueue(redis_client, "email", 50)
    err = _migrate_with_acl_changed_after_the_first_batch(
        redis_client, redis_url, cfg, "shq", ["queue:{email}:*", "job:{email}:*", "queue:{shq:00}:*", "job:{shq:00}:*"])
    assert "given back" in str(err)
    assert redis_client.llen(SRC.migrating) == 0
    at_src = set(tail_first(redis_client, SRC.ready))
    at_dst = set()
    for tag in shard_tags("shq", 2):
        at_dst |= {x.decode() for x in redis_client.lrange(f"queue:{{{tag}}}:ready", 0, -1)}
    assert at_src.isdisjoint(at_dst), "no job in both queues"
    assert at_src | at_dst == set(ids)
    assert at_dst and all(redis_client.exists(f"job:{{shq:00}}:{i}") for i in at_dst)
    assert not any(redis_client.exists(SRC.job(i)) for i in at_dst)
