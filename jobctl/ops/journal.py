"""The audit journal: every applied operation, in Redis and on local disk.

Each entry goes to a capped stream per queue (``XADD <journal key> MAXLEN ~
10000 * entry <json>``; the key comes from the layout, e.g.
``queue:{email}:jobctl:journal``) and to a local JSONL file:
``$JOBCTL_JOURNAL``, else ``<user state dir>/jobctl/journal.jsonl``
(platformdirs).  The command line is stored with ``--url`` values redacted
and the connection's password scrubbed.

Entry fields: ``id`` (operation id), ``operation``, ``queue``, ``operator``,
``host``, ``command``, ``server``, ``filter``, ``planned``, ``moved``,
``skipped``, ``failed``, ``interrupted``, ``error``, ``started_ms``,
``ended_ms`` (epoch ms), plus operation details.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
from pathlib import Path
from typing import Any

import orjson

from ..connection import Target, redact_url, scrub
from ..keys import JOURNAL_STREAM_MAXLEN

__all__ = ["journal_path", "moved_ids_path", "MovedIds", "command_line", "write_entry", "read_entries",
           "repair_entry", "require_journal"]


def journal_path() -> Path:
    """The local JSONL journal file (created on first write)."""
    if os.environ.get("JOBCTL_JOURNAL"):
        return Path(os.environ["JOBCTL_JOURNAL"])
    from platformdirs import user_state_dir

    return Path(user_state_dir("jobctl")) / "journal.jsonl"


#: ``scheme://user:password@`` as typed, password unquoted (``urlsplit``
#: cannot parse a password holding ``/`` or ``#``): everything up to the
#: last ``@`` of the word is the password.
_NEEDS_QUOTES = re.compile(r"[\s'\"]")
_USERINFO_RE = re.compile(r"(://[^:/?#@\s]*:)\S*@")


def moved_ids_path(op_id: str) -> Path:
    """``<journal dir>/moved-ids/<operation id>.txt``: the ids an operation
    moved, one per line, exactly as stored (bytes)."""
    return journal_path().parent / "moved-ids" / f"{op_id}.txt"


class MovedIds:
    """The ids an applied operation moved, written as it goes to
    :func:`moved_ids_path` (so the journal entry can name every job an
    operation touched, at constant memory), plus the first ``sample``."""

    def __init__(self, op_id: str, sample: int = 20) -> None:
        self.path = moved_ids_path(op_id)
        self.sample: list[str] = []
        self.count = 0
        self.problem: str | None = None
        self._room = sample
        self._fh = None

    def add(self, ids: list) -> None:
        """Record ``ids`` (str, surrogate-escaped for undecodable bytes, or bytes)."""
        if not ids:
            return
        try:  # the common case, every id a str: one join and one encode
            blob = "\n".join(ids).encode("utf-8", "surrogateescape")
        except TypeError:
            raw = [i if isinstance(i, bytes) else str(i).encode("utf-8", "surrogateescape") for i in ids]
            blob = b"\n".join(raw)
        if len(self.sample) < self._room:
            head = ids[:self._room - len(self.sample)]
            self.sample += [i.decode("utf-8", "surrogateescape") if isinstance(i, bytes) else str(i) for i in head]
        self.count += len(ids)
        if self._fh is None and self.problem is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = self.path.open("ab")
            except OSError as exc:
                self.problem = f"moved ids file {self.path}: {exc.strerror or exc}"
        if self._fh is not None:
            self._fh.write(blob + b"\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _redact(text: str) -> str:
    return _USERINFO_RE.sub(r"\1***@", redact_url(text))


def command_line(argv: list[str] | None = None, target: Target | None = None) -> str:
    """``argv`` (default ``sys.argv``) as one string with URL values redacted
    and the target's password removed."""
    argv = list(sys.argv if argv is None else argv)
    out: list[str] = []
    redact_next = False
    for arg in argv:
        if redact_next:
            out.append(_redact(arg))
            redact_next = False
        elif arg == "--url":
            out.append(arg)
            redact_next = True
        elif arg.startswith("--url="):
            out.append("--url=" + _redact(arg[6:]))
        elif "://" in arg:
            out.append(_redact(arg))
        else:
            out.append(arg)
    if out:
        out[0] = os.path.basename(out[0])
    # words with blanks or quotes are shell-quoted, so the line can be pasted back
    return scrub(" ".join(shlex.quote(a) if _NEEDS_QUOTES.search(a) or not a else a for a in out), target)


def repair_entry(op_id: str, queue: str, layout: str, *, confirmed: list, repaired: list, remaining: int,
                 started_ms: int, ended_ms: int, argv: list[str] | None = None,
                 target: Target | None = None) -> dict[str, Any]:
    """The journal entry of a ``check --repair`` of ``queue``: the fields
    of every operation's entry (``planned``: the findings the operator
    confirmed, ``moved``: those repaired, ``skipped``: confirmed ones that
    no longer held or changed since, so were left alone) plus ``repairs``
    (the first 200 repaired findings, ``Problem.to_json()``) and
    ``remaining`` (findings left).  ``confirmed`` and ``repaired``: lists of
    :class:`~jobctl.layouts.reliable_list.check.Problem`."""
    from .spec import operator_name

    return {"id": op_id, "operation": "check --repair", "queue": queue, "layout": layout,
            "operator": operator_name(), "command": command_line(argv, target),
            "server": target.display if target else None, "planned": len(confirmed), "moved": len(repaired),
            "skipped": len(confirmed) - len(repaired), "failed": 0, "remaining": remaining,
            "repairs": [p.to_json() for p in repaired[:200]], "started_ms": started_ms, "ended_ms": ended_ms}


def require_journal(client, stream_key: str, target: Target | None = None) -> None:
    """Check, before an operation's first write, that ``client``'s user may
    write the journal stream ``stream_key``: ``XTRIM <key> MAXLEN ~ <cap>``,
    the trim every ``XADD`` of :func:`write_entry` does anyway (so it changes
    nothing; on an absent key it creates none), refused by the ACL exactly
    where that ``XADD`` would be (the key's write permission, a stream write
    command).  ``ACL DRYRUN`` would say the same without a command but needs
    admin rights, which an operator's user should not have.

    Raises:
        AccessDenied: (exit 4) naming the key or the command refused.
    """
    from ..redis_errors import is_refusal, refusal

    try:
        client.xtrim(stream_key, maxlen=JOURNAL_STREAM_MAXLEN, approximate=True)
    except Exception as exc:
        if is_refusal(exc):
            raise refusal(exc, target, key=stream_key, access="write") from None
        raise


def write_entry(client, stream_key: str | None, entry: dict[str, Any], target: Target | None = None) -> list[str]:
    """Append ``entry`` to the local file and, if ``client``, to the stream.

    Returns the problems met (e.g. the server is gone); never raises for a
    journal failure but a refusal: an operation's outcome is always reported.

    Raises:
        AccessDenied: (exit 4) the ACL refused the stream's ``XADD``; the
            entry is in the local file only, as the message says.
    """
    from ..escape import json_safe
    from ..redis_errors import is_refusal, refusal

    entry.setdefault("host", socket.gethostname())
    data = scrub(orjson.dumps(json_safe(entry)).decode("utf-8"), target)
    problems: list[str] = []
    path = journal_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(data + "\n")
    except OSError as exc:
        problems.append(f"local journal {path}: {exc.strerror or exc}")
    if client is not None and stream_key:
        try:
            client.xadd(stream_key, {"entry": data}, maxlen=JOURNAL_STREAM_MAXLEN, approximate=True)
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            if is_refusal(exc):
                raise _refused_entry(refusal(exc, target, key=stream_key, access="write"), entry,
                                     path if not problems else None) from None
            problems.append(f"journal stream {stream_key}: {exc.__class__.__name__}")
    return problems


def _refused_entry(err, entry: dict[str, Any], path: Path | None):
    """``err`` (an :class:`~jobctl.errors.AccessDenied`) saying what became
    of the refused entry: what the operation did, and where it is kept."""
    did = f"{entry.get('operation')} moved {entry['moved']:,}; " if "moved" in entry else ""
    kept = f"the entry is only in the local journal {path}" if path else "the entry was not journaled"
    err.args = (f"{err.args[0]}; {did}{kept}",)
    return err


def read_entries(client, stream_keys: list[str], limit: int = 50,
                 target: Target | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` entries of the given streams, newest first.

    Raises:
        AccessDenied: (exit 4) the ACL refused reading one of the streams, named.
    """
    from ..redis_errors import is_refusal, refusal

    entries: list[dict[str, Any]] = []
    for key in stream_keys:
        try:
            replies = client.xrevrange(key, count=limit)
        except Exception as exc:
            if is_refusal(exc):
                raise refusal(exc, target, key=key, access="read") from None
            raise
        for stream_id, fields in replies:
            raw = fields.get(b"entry") or fields.get("entry")
            try:
                doc = orjson.loads(raw)
            except (orjson.JSONDecodeError, TypeError):
                continue
            doc["stream_id"] = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
            entries.append(doc)
    entries.sort(key=lambda e: e.get("ended_ms") or 0, reverse=True)
    return entries[:limit]


def read_local(limit: int = 50) -> list[dict[str, Any]]:
    """The newest ``limit`` entries of the local file, newest first."""
    path = journal_path()
    if not path.is_file():
        return []
    lines = path.read_bytes().splitlines()[-limit:]
    out = []
    for line in reversed(lines):
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return out
