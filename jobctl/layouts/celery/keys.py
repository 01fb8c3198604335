"""Key names of one Celery queue on kombu's Redis transport (kombu 5.x).

The ready queue is a LIST named by the queue (producers ``LPUSH``, workers
``BRPOP``: the right end is the oldest); priorities 3, 6 and 9 use sibling
lists ``<queue>\\x06\\x16<priority>`` (priority 0 is the bare name).  The
in-flight store is global, shared by every queue of the broker: the
``unacked`` HASH (delivery tag -> JSON ``[message, exchange, routing_key]``),
the ``unacked_index`` ZSET (delivery tag -> delivery time, epoch seconds)
and kombu's ``unacked_mutex`` (held while a worker restores overdue
messages).  Bindings: ``_kombu.binding.<exchange>`` SETs of
``routing_key\\x06\\x16pattern\\x06\\x16queue``.  ``key_prefix`` is kombu's
``global_keyprefix`` transport option (default none).

Celery's Redis result backend (read only with the ``replay_results``
option) keeps one STRING ``celery-task-meta-<task id>`` per task result;
jobctl reads them on the queue's own connection (the backend must be the
broker's database) and records its replays in its own HASH
``jobctl:celery:<queue>:replayed`` (original task id -> new task id).

None of these names carries a hash tag: a queue's keys span Redis Cluster
slots, so Cluster mode refuses the moves."""

from __future__ import annotations

__all__ = ["CeleryKeys", "SEP", "PRIORITY_STEPS", "BINDING_PREFIX", "RESULT_PREFIX"]

#: kombu's separator in priority list names and binding members.
SEP = "\x06\x16"
#: kombu's default priority steps (``PRIORITY_STEPS``): 0 is served first.
PRIORITY_STEPS = (0, 3, 6, 9)
#: The prefix of kombu's binding sets (one per exchange).
BINDING_PREFIX = "_kombu.binding."
#: The prefix of Celery's Redis result backend records (``celery-task-meta-<task id>``).
RESULT_PREFIX = "celery-task-meta-"


class CeleryKeys:
    """The keys of the Celery queue ``name`` (kombu's names, with ``prefix``)."""

    def __init__(self, name: str, prefix: str = "") -> None:
        self.name = name
        self.prefix = prefix

    @property
    def queue(self) -> str:
        """The ready LIST of priority 0 (the queue's own name)."""
        return f"{self.prefix}{self.name}"

    def priority_list(self, step: int) -> str:
        """The ready LIST of the priority step ``step`` (0, 3, 6 or 9)."""
        return self.queue if not step else f"{self.prefix}{self.name}{SEP}{step}"

    def ready_lists(self) -> list[tuple[int, str]]:
        """``(priority step, list key)`` in the order kombu's BRPOP serves them."""
        return [(step, self.priority_list(step)) for step in PRIORITY_STEPS]

    @property
    def unacked(self) -> str:
        """HASH delivery tag -> JSON ``[message, exchange, routing_key]`` (global)."""
        return f"{self.prefix}unacked"

    @property
    def unacked_index(self) -> str:
        """ZSET delivery tag -> delivery time (epoch seconds, global)."""
        return f"{self.prefix}unacked_index"

    @property
    def unacked_mutex(self) -> str:
        """kombu's lock of its own restore of overdue messages (a string, 300 s expiry)."""
        return f"{self.prefix}unacked_mutex"

    def binding(self, exchange: str) -> str:
        """The SET of ``exchange``'s bindings."""
        return f"{self.prefix}{BINDING_PREFIX}{exchange}"

    @property
    def journal(self) -> str:
        """jobctl's audit stream of this queue."""
        return f"jobctl:celery:{self.name}:journal"

    @property
    def result_pattern(self) -> str:
        """The SCAN pattern of Celery's result records (every queue's: a record names its queue inside)."""
        return f"{RESULT_PREFIX}*"

    @staticmethod
    def result_record(task_id: str) -> str:
        """The STRING of task ``task_id``'s result record."""
        return f"{RESULT_PREFIX}{task_id}"

    @property
    def replayed(self) -> str:
        """jobctl's HASH of this queue's replayed result records: original task id -> new task id."""
        return f"jobctl:celery:{self.name}:replayed"
