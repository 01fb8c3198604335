"""Process exit codes of the ``jobctl`` CLI (listed in ``jobctl --help``)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented exit codes.  Scripts and runbooks may rely on them."""

    OK = 0                 #: success
    FAILURE = 1            #: unexpected internal error (one line on stderr)
    USAGE = 2              #: bad command line, option, filter or config
    UNREACHABLE = 3        #: server unreachable, connection dropped, timeout
    AUTH = 4               #: authentication failed or ACL denied a command
    NOT_FOUND = 5          #: unknown queue, job or profile
    DATA = 6               #: keys of the wrong type or unreadable data
    INVARIANT = 7          #: `jobctl check` found a broken invariant
    PARTIAL = 8            #: an operation failed jobs, or skipped some other than the expected race
    READ_ONLY = 9          #: a mutating command refused by --read-only
    ABORTED = 10           #: the operator declined the confirmation
    BUSY = 11              #: another operation holds the queue's lease
    INTERRUPTED = 130      #: stopped by Ctrl-C (SIGINT)

    @classmethod
    def help_table(cls) -> str:
        """One line per code, for ``--help``."""
        return "\n".join(f"{c.value:>4}  {c.name.lower().replace('_', '-')}: {c.doc}" for c in cls)

    @property
    def doc(self) -> str:
        return _DOCS[self]


_DOCS = {
    ExitCode.OK: "success",
    ExitCode.FAILURE: "unexpected internal error",
    ExitCode.USAGE: "bad command line, option, filter or config",
    ExitCode.UNREACHABLE: "server unreachable, connection dropped or timed out",
    ExitCode.AUTH: "authentication failed or ACL denied a command",
    ExitCode.NOT_FOUND: "unknown queue, job or profile",
    ExitCode.DATA: "a key of the wrong type or unreadable data",
    ExitCode.INVARIANT: "`jobctl check` found a broken invariant",
    ExitCode.PARTIAL: "an operation failed some jobs, or skipped some that no worker took",
    ExitCode.READ_ONLY: "a mutating command refused by --read-only",
    ExitCode.ABORTED: "the operator declined the confirmation",
    ExitCode.BUSY: "another jobctl operation is running on the same queue",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
