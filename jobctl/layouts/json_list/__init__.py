"""The json-list layout: its read model, plans, operations and checks
(the class is in :mod:`.layout`)."""
