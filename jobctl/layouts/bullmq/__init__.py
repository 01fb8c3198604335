"""The ``bullmq`` layout: a BullMQ 5.x/6.x queue read and repaired through its own keys."""
