"""Errors of the filter language: :class:`FilterError` with a one-line
message naming the column."""

from __future__ import annotations

from ..errors import UsageError

__all__ = ["FilterError", "error_at", "show_text"]


class FilterError(UsageError):
    """A filter that does not parse or does not type-check.

    ``str(err)`` is one line, e.g.
    ``filter: unexpected token 'and' at column 14 (expected a value)``.

    Attributes:
        column: 1-based column of the offending character (within its line).
        line: 1-based line (filters from runbooks may span lines).
        pos: 0-based character offset into the filter text.
    """

    def __init__(self, message: str, *, column: int = 1, line: int = 1, pos: int = 0) -> None:
        super().__init__(message)
        self.column = column
        self.line = line
        self.pos = pos


def error_at(text: str, pos: int, what: str, hint: str | None = None) -> FilterError:
    """Build a :class:`FilterError` for ``what`` at 0-based offset ``pos``."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    where = f"line {line}, column {column}" if "\n" in text else f"column {column}"
    message = f"filter: {what} at {where}"
    if hint:
        message += f" ({hint})"
    return FilterError(message, column=column, line=line, pos=pos)


def show_text(value: str) -> str:
    """Quote a piece of filter text for an error message (one line, short)."""
    value = value.replace("\n", "\\n")
    if len(value) > 40:
        value = value[:37] + "..."
    return f"'{value}'"

