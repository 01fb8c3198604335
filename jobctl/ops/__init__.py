"""Operations: plan (read-only), then apply in bounded, fenced, atomic batches.

:mod:`.spec` says what is asked, :mod:`.plan` what will be touched,
:mod:`.engine` runs it (through :mod:`.window`, the window engine, for the
sources a layout hands over: dead lists today), :mod:`.journal` records it.
The other per-layout moves live with each layout.
"""
