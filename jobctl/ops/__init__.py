"""Operations: plan (read-only), then apply in bounded, fenced, atomic batches.

:mod:`.spec` says what is asked, :mod:`.plan` what will be touched,
:mod:`.engine` runs it, :mod:`.journal` records it, :mod:`.check` audits the
invariants.  The per-layout moves live with each layout.
"""
