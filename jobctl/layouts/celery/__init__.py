"""The ``celery`` layout: a Celery queue on kombu's Redis transport (read-mostly)."""
