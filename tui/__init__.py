"""jobctl's Textual dashboard (installed as ``jobctl_tui``).

A placeholder until the TUI issue: the dashboard will be built on the headless
``jobctl`` core, which never imports this package.
"""
