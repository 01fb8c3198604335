"""Exceptions raised by the jobctl core.

Every exception carries the :class:`~jobctl.exitcodes.ExitCode` the CLI exits
with and a one-line, secret-free message.  Front ends catch
:class:`JobctlError` and print ``str(err)``; they never show a traceback.
"""

from __future__ import annotations

from .exitcodes import ExitCode


class JobctlError(Exception):
    """Base class: a one-line message and an exit code."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, *, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(JobctlError):
    """Bad input: option, URL, config file or filter expression."""

    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """The TOML config file is unreadable or malformed."""


class ConnectionFailed(JobctlError):
    """The server could not be reached, or the connection dropped."""

    exit_code = ExitCode.UNREACHABLE


class AuthFailed(JobctlError):
    """Authentication failed, or an ACL denied a command."""

    exit_code = ExitCode.AUTH


class AccessDenied(AuthFailed):
    """The ACL refused a command or a key (``NOPERM``; exit 4).

    ``what`` names what the user lacks, as in the message: ``run XADD``,
    ``read queue:{t}:ready``, ``write queue:{t}:jobctl:journal``; ``None``
    when Redis did not say (a key refusal of a command whose key is not
    known here).  The roles and their key patterns: ``docs/acl.md``.
    """

    def __init__(self, message: str, *, what: str | None = None) -> None:
        super().__init__(message)
        self.what = what


class NotFound(JobctlError):
    """Unknown queue, job id or profile."""

    exit_code = ExitCode.NOT_FOUND


class DataError(JobctlError):
    """A queue key holds the wrong Redis type (WRONGTYPE) or unreadable data."""

    exit_code = ExitCode.DATA


class ReadOnlyRefused(JobctlError):
    """A mutating command was refused because of ``--read-only``."""

    exit_code = ExitCode.READ_ONLY


class Busy(JobctlError):
    """Another jobctl operation holds the lease of the queue's source
    (``queue:{t}:jobctl:lease``); nothing was changed."""

    exit_code = ExitCode.BUSY
