"""A toy queue layout, added the way docs/architecture.md says a layout is
added: this one package plus one registry line
(``jobctl.layouts.register("toy-list", "toy_layout.layout:ToyList")``, done
by ``tests/test_toy_layout.py``)."""
