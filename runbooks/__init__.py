"""The shipped runbooks (``*.md``) and example alert rules (``alerts.yml``).

Installed as the data-only package ``jobctl_runbooks`` (see pyproject.toml);
read them through :class:`jobctl.runbook.library.Library`.
"""
