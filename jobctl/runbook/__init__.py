"""Executable incident runbooks.

A runbook is a markdown file (``runbooks/<name>.md``) whose fenced
``jobctl`` blocks are steps: commands run in order, with guard conditions on
the queue's status, dry runs for unconfirmed mutating steps, expectations
that verify the outcome, and a journal entry per step.

- :mod:`.condition`: the guard/expect condition language;
- :mod:`.model`: :class:`Runbook`, :class:`Step`, :class:`Command`;
- :mod:`.parse`: the markdown format, :func:`parse_runbook`;
- :mod:`.library`: where runbooks are found (:class:`Library`);
- :mod:`.runner`: :class:`Runner`, which runs them.
"""

from .condition import Condition, ConditionError, compile_condition
from .library import Library
from .model import Command, Runbook, Step
from .parse import RunbookError, parse_runbook
from .runner import Runner, RunReport, StepOutcome

__all__ = ["Condition", "ConditionError", "compile_condition", "Library", "Command", "Runbook", "Step",
           "RunbookError", "parse_runbook", "Runner", "RunReport", "StepOutcome"]
