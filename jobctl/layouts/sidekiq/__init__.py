"""The ``sidekiq`` layout: a Sidekiq 6.x-8.x instance, read from Sidekiq's own
keys (``docs/layouts.md``, "sidekiq"); fenced redrive and purge of the
``dead``, ``retry`` and ``schedule`` sets."""
