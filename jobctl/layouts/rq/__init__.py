"""The ``rq`` layout: queues of RQ 2.x (python-rq), read from RQ's own keys
(``docs/layouts.md``, "rq"); redrive and purge of the failed registry."""
