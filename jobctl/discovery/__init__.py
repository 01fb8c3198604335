"""Find queues of every layout in a keyspace with no catalogue.

One bounded ``SCAN`` per primary (``COUNT 1000``, never ``KEYS``; each
primary its own budget) with a pipelined ``TYPE`` per page gives a map key
name -> Redis type (:mod:`.scan`).  After a partial scan the shard count of
every sharded queue is counted key by key (:mod:`.shard_probe`).  Each layout
registered in :mod:`jobctl.layouts` declares its recognizer
(:meth:`~jobctl.layouts.facts.LayoutFacts.recognizer`, in its package's
``discover`` module; the table is :func:`recognizer_table`)::

    recognize(keys: dict[str, bytes], *, client=None, rejected=None)
        -> list[tuple[QueueConfig, list[str]]]

returning catalogue entries and the evidence keys behind each (``client``
and ``rejected`` are passed only to recognizers that name them: a client for
cheap sample checks, a list for keys whose name matched but whose type did
not).  Recognizers run in registry order, those of the
layouts that declare ``recognize_last`` last; keys claimed as evidence by one are not offered
to the next, so e.g. the scheduled zset of a stream-group queue is never
taken for a reliable-list queue.  A layout without a recognizer is skipped.

:func:`catalogue_toml` writes what was found as a ``[queues]`` catalogue
that :func:`jobctl.config.load_config` reads.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..config import QueueConfig, defaulted_visibility
from .scan import NodeScan, scan_nodes
from .shard_probe import probe_shards

__all__ = ["Discovery", "discover", "discover_default", "discover_reliable_lists", "scan_types", "recognizers",
           "recognizer_table", "catalogue_toml", "DEFAULT_SCAN_LIMIT", "NodeScan"]

#: At most this many keys are examined on each primary by one discovery.
DEFAULT_SCAN_LIMIT = 200_000

@dataclass
class Discovery:
    """What a discovery found.

    ``queues`` are catalogue entries marked ``discovered=True``; ``evidence``
    maps queue name to the keys seen; ``scanned`` counts keys examined;
    ``complete`` is False when the scan of any primary stopped at its bound
    (each primary has a budget of its own: ``nodes``); ``rejected``
    lists keys whose name matched but whose type did not.
    """

    queues: list[QueueConfig] = field(default_factory=list)
    evidence: dict[str, list[str]] = field(default_factory=dict)
    scanned: int = 0
    complete: bool = True
    rejected: list[str] = field(default_factory=list)
    #: Redis Cluster only: queue name -> why its operations are refused (keys span slots).
    cluster_notes: dict[str, str] = field(default_factory=dict)
    #: What each primary's scan examined (one entry on a single server).
    nodes: list[NodeScan] = field(default_factory=list)
    #: After a partial scan: queue name -> (shards the scan found, shards
    #: counted by probing every computable shard tag).
    probed: dict[str, tuple[int, int]] = field(default_factory=dict)

    def scan_notes(self) -> list[str]:
        """One line per primary on a cluster (one line on a single server)
        saying what its scan examined and whether it reached its bound, then
        one per shard count the probe changed."""
        many = len(self.nodes) > 1
        lines = [f"{'node ' + n.node + ': ' if many else ''}scanned {n.scanned:,} keys"
                 + ("" if n.complete else " (bound reached: more keys unscanned)")
                 + (f"; {n.unreadable:,} this user may not read, skipped" if n.unreadable else "")
                 for n in self.nodes]
        lines += [f"{name}: the partial scan saw {found} shard(s); every shard tag probed: shards = {counted}"
                  for name, (found, counted) in self.probed.items() if found != counted]
        return lines

    def scan_json(self) -> dict[str, Any]:
        """The scan's part of ``discover --json``: ``nodes`` and ``probed``."""
        return {"nodes": [n.to_json() for n in self.nodes],
                "probed": {name: {"found": f, "shards": c} for name, (f, c) in self.probed.items()}}


def scan_types(client, *, limit: int = DEFAULT_SCAN_LIMIT, count: int = 1000,
               match: str | None = None) -> tuple[dict[str, bytes], int, bool]:
    """``({key: TYPE reply}, keys scanned, complete)`` of a bounded SCAN of
    every primary, each up to ``limit`` keys (:func:`.scan.scan_nodes`);
    ``complete`` False when any node stopped at its bound.
    Raises redis-py errors unchanged."""
    types, nodes = scan_nodes(client, limit=limit, count=count, match=match)
    return types, sum(n.scanned for n in nodes), all(n.complete for n in nodes)


def recognizer_table() -> dict[str, Callable[..., Any]]:
    """Layout name -> its recognizer, as each layout declares it
    (:meth:`~jobctl.layouts.facts.LayoutFacts.recognizer`; two layouts may
    share one, e.g. delay-zset and redisson-delayed-queue)."""
    from ..layouts import layout_classes

    return {cls.name: fn for cls in layout_classes() if (fn := cls.recognizer()) is not None}


def recognizers(layouts: tuple[str, ...] | None = None) -> list[tuple[str, Callable[..., Any]]]:
    """``(layout, recognize)`` in the order discovery calls them: registry
    order, the layouts that declare ``recognize_last`` last, each recognizer
    once; ``layouts`` restricts them to the recognizers of those names."""
    from ..layouts import layout_classes

    classes = layout_classes()
    ordered = [c for c in classes if not c.recognize_last] + [c for c in classes if c.recognize_last]
    out: list[tuple[str, Callable[..., Any]]] = []
    for cls in ordered:
        if layouts is not None and cls.name not in layouts:
            continue
        fn = cls.recognizer()
        if fn is not None and all(fn is not f for _, f in out):
            out.append((cls.name, fn))
    return out


def discover(client, *, limit: int = DEFAULT_SCAN_LIMIT, count: int = 1000,
             layouts: tuple[str, ...] | None = None, match: str | None = None) -> Discovery:
    """Scan the keyspace and run every recognizer (see the module docstring).

    Queue names are unique in the result: a name already taken gets
    ``-<layout>`` appended.  Raises redis-py errors unchanged.
    """
    keys, nodes = scan_nodes(client, limit=limit, count=count, match=match)
    out = Discovery(scanned=sum(n.scanned for n in nodes), complete=all(n.complete for n in nodes), nodes=nodes)
    remaining = dict(keys)
    for _, fn in recognizers(layouts):
        params = inspect.signature(fn).parameters
        kwargs: dict[str, Any] = {}
        if "client" in params:
            kwargs["client"] = client
        if "rejected" in params:
            kwargs["rejected"] = out.rejected
        for cfg, evidence in fn(remaining, **kwargs):
            name = cfg.name
            if name in out.evidence:
                name = f"{cfg.name}-{cfg.layout}"
            out.queues.append(replace(cfg, name=name, discovered=True))
            out.evidence[name] = list(evidence)
            for key in evidence:
                remaining.pop(key, None)
    if not out.complete:  # a shard tag on an unscanned part may be missing: count the shards key by key
        out.queues, out.probed = probe_shards(client, out.queues)
    _note_cross_slot(client, out)
    return out


def _note_cross_slot(client, out: Discovery) -> None:
    """On a cluster, note each queue whose keys span several slots."""
    from ..cluster import cross_slot_note, is_cluster
    from ..layouts import layout_for

    if not is_cluster(client):
        return
    for q in out.queues:
        try:
            note = cross_slot_note(layout_for(client, q))
        except Exception:  # noqa: BLE001 - a queue whose layout cannot be built says nothing here
            continue
        if note:
            out.cluster_notes[q.name] = note


def discover_default(client, *, limit: int = DEFAULT_SCAN_LIMIT, count: int = 1000) -> Discovery:
    """Queues of the default layout only (:data:`~jobctl.layouts.DEFAULT_LAYOUT`),
    with its declared ``scan_pattern`` and recognizer: the catalogue of a
    session without a config."""
    from ..layouts import DEFAULT_LAYOUT, layout_class

    return discover(client, limit=limit, count=count, layouts=(DEFAULT_LAYOUT,),
                    match=layout_class(DEFAULT_LAYOUT).scan_pattern)


#: The default layout is the reliable-list one: the name callers know.
discover_reliable_lists = discover_default


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def catalogue_toml(queues: list[QueueConfig], *, header: str = "") -> str:
    """A ``[queues.<name>]`` table per queue (layout, tag, shards,
    priorities, visibility_timeout_ms, options), loadable by
    :func:`jobctl.config.load_config`."""
    lines = [f"# {line}" for line in header.splitlines()]
    for q in queues:
        lines += ["", f"[queues.{json.dumps(q.name, ensure_ascii=False)}]", f"layout = {_toml_value(q.layout)}"]
        for key in ("tag", "shards", "priorities", "visibility_timeout_ms"):
            value = getattr(q, key)
            if value is not None:
                lines.append(f"{key} = {_toml_value(value)}")
        default = defaulted_visibility(q)
        if default is not None:  # nothing in Redis tells it: the operator must
            lines += ["# visibility_timeout_ms MUST be set to the workers' visibility timeout (ms): Redis does",
                      f"# not hold it.  Until it is, jobctl uses {default:,} ms, says so on stderr, and",
                      "# `requeue --stuck` refuses (unless --visibility-timeout is given).",
                      f"# visibility_timeout_ms = {default}"]
        for key, value in q.options.items():
            lines.append(f"{json.dumps(key)} = {_toml_value(value)}")
    return "\n".join(lines).lstrip("\n") + "\n"
