"""Key names of one Sidekiq instance (Sidekiq's own names, optionally under
a redis-namespace prefix ``<ns>:``), plus jobctl's journal for it.

Sidekiq puts no hash tag in its names: its keys span Redis Cluster slots
(:meth:`~jobctl.layouts.base.KeyedLayout.slot_keys` lists them, so Cluster
mode notes it in ``status`` and refuses the moves)."""

from __future__ import annotations

__all__ = ["SidekiqKeys", "SETS"]

#: Sidekiq's sorted sets of job JSON (score = a time in epoch seconds, float).
SETS = ("schedule", "retry", "dead")


class SidekiqKeys:
    """The keys of the Sidekiq instance under ``namespace`` (``""``: none)."""

    def __init__(self, namespace: str = "") -> None:
        self.namespace = namespace
        self._p = f"{namespace}:" if namespace else ""

    @property
    def queues(self) -> str:
        """The SET of queue names (``SADD`` on every push)."""
        return f"{self._p}queues"

    def queue(self, name: str) -> str:
        """The LIST of a queue's job JSON (clients LPUSH, workers BRPOP)."""
        return f"{self._p}queue:{name}"

    @property
    def schedule(self) -> str:
        """ZSET job JSON -> run-at (s)."""
        return f"{self._p}schedule"

    @property
    def retry(self) -> str:
        """ZSET job JSON -> next retry at (s)."""
        return f"{self._p}retry"

    @property
    def dead(self) -> str:
        """ZSET job JSON -> died at (s); Sidekiq trims it to 9,999 entries and 180 days."""
        return f"{self._p}dead"

    @property
    def processes(self) -> str:
        """The SET of live process identities (each a HASH with ``info`` JSON)."""
        return f"{self._p}processes"

    def process(self, identity: str) -> str:
        return f"{self._p}{identity}"

    def work(self, identity: str) -> list[str]:
        """A process's HASH of in-flight jobs (display only): ``<identity>:work``
        (Sidekiq 7, 8), ``<identity>:workers`` (Sidekiq 6); one of them exists."""
        return [f"{self._p}{identity}:work", f"{self._p}{identity}:workers"]

    @property
    def journal(self) -> str:
        """jobctl's audit stream of this instance (outside Sidekiq's names)."""
        return f"jobctl:sidekiq:{self.namespace}:journal" if self.namespace else "jobctl:sidekiq:journal"
