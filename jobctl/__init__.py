"""jobctl: operations console and runbook toolkit for Redis-backed job queues.

This is the headless core.  It never imports Textual or the TUI package.
"""

__version__ = "0.1.0"
