"""The hash-job layout: its read model, plans, operations and checks
(the class is in :mod:`.layout`)."""
