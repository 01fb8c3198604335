"""The conformance suite (:mod:`test_conformance`) on a 3-primary Redis
Cluster, for every layout whose keys share one slot per queue or shard
(reliable-list, stream-group, delay-zset): the same scenarios, written by the
layouts' own producers and workers through a ``redis.RedisCluster`` client,
the same assertions on status, ls, inspect, check and every operation.

The other layouts' seed keys carry no hash tag: their own workers cannot run
on a cluster, and jobctl refuses their operations there
(``test_cluster.py::test_untagged_layout_on_a_cluster_reads_and_refuses_operations``).
"""

from __future__ import annotations

import pytest

import test_conformance as base
from jobctl.cluster import layout_keys, one_slot
from jobctl.layouts import layout_for
from jobctl_fixtures.layouts import ADAPTERS

ON_A_CLUSTER = tuple(name for name, adapter in ADAPTERS.items()
                     if one_slot(layout_keys(layout_for(None, adapter.queue_config(base.QUEUE)))))


@pytest.fixture
def conf(request, cc, cluster_url, tmp_path, capsys) -> base.Conformance:
    return base.Conformance(ADAPTERS[request.param], cc, cluster_url, tmp_path, capsys)


def _on_cluster(cases):
    return [c for c in cases if c.values[0] in ON_A_CLUSTER]


def test_the_tagged_layouts_run_here():
    assert {"reliable-list", "stream-group"} <= set(ON_A_CLUSTER)


@pytest.mark.parametrize("conf,scenario", _on_cluster(base.READ_CASES), indirect=["conf"])
def test_read_side_on_a_cluster(conf, scenario):
    base.test_read_side(conf, scenario)


@pytest.mark.parametrize("conf,op", _on_cluster(base.OP_CASES), indirect=["conf"])
def test_operation_on_a_cluster(conf, op):
    base.test_operation(conf, op)


@pytest.mark.parametrize("conf", _on_cluster(base.STALE_CASES), indirect=True)
def test_requeued_jobs_old_claimant_is_refused_on_a_cluster(conf):
    base.test_requeued_jobs_old_claimant_is_refused(conf)
