"""Operations: plan (read-only), then apply in bounded, fenced, atomic batches.

The operation model: :mod:`.spec` says what is asked (:class:`OpSpec`),
:mod:`.request` what an operator asked before any policy ran
(:class:`OpRequest`), :mod:`.catalog` the facts about each operation
(transitions, TUI keys, confirmation thresholds, the grouping key),
:mod:`.plan` what will be touched, :mod:`.result` what one script call did
(:class:`BatchResult`) and :mod:`.journal` how it is recorded.  The runners:
:mod:`.core` plans, confirms and applies a request with every policy (every
front end calls it), :mod:`.engine` applies a plan in batches (through :mod:`.window`, the window
engine, for the sources a layout hands over: dead lists today; a second
Ctrl-C while it applies is deferred to a stop through :mod:`.interrupt`).  The
per-layout moves live with each layout; invariant checks with each layout's
``*_check`` module.
"""
