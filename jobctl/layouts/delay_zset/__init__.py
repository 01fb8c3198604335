"""The delay-zset layout: its read model, plans, operations and checks
(the class is in :mod:`.layout`)."""
