"""Envelope transformations: ``jobctl migrate QUEUE --transform FILE``
(seed 000 section 23: "payload version unsupported: dead-letter or
migrate").

A transformation is a small TOML file, reviewable in a change request::

    # every listed path is a dotted path into the envelope (seed 000 s.5)
    bump_version = true          # jobVersion + 1 (or: [set] jobVersion = 3)

    [set]                        # add or replace fields
    "payload.currency" = "EUR"

    [rename]                     # move a field (skipped when the old one is missing)
    "payload.amt" = "payload.amount"

    delete = ["payload.legacyFlag"]   # remove fields (missing ones are ignored)

Applied in that order: rename, set, delete, then the version bump.  The
result keeps every other field and its order.  Raises
:class:`~jobctl.errors.UsageError` for a file that does not parse or holds
an unknown key.
"""

from __future__ import annotations

import copy
import difflib
import json
import tomllib
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import UsageError

__all__ = ["Transform", "Rollback", "load_transform", "load_exact", "diff_lines"]

_KEYS = {"set", "rename", "delete", "bump_version"}


@dataclass(frozen=True)
class Transform:
    """A parsed transformation (see the module docstring); ``source``: the file."""

    set: dict[str, Any] = field(default_factory=dict)
    rename: dict[str, str] = field(default_factory=dict)
    delete: tuple[str, ...] = ()
    bump_version: bool = False
    source: str = ""

    def apply(self, doc: dict[str, Any]) -> dict[str, Any]:
        """The transformed copy of the envelope ``doc``."""
        return self.apply_in_place(copy.deepcopy(doc))

    def apply_in_place(self, out: dict[str, Any]) -> dict[str, Any]:
        """Transform the envelope ``out`` itself; returns it."""
        for old, new in self.rename.items():
            found, value = _pop(out, old)
            if found:
                _put(out, new, value)
        for path, value in self.set.items():
            _put(out, path, value)
        for path in self.delete:
            _pop(out, path)
        if self.bump_version:
            v = out.get("jobVersion")
            out["jobVersion"] = (v if isinstance(v, int) and not isinstance(v, bool) else 0) + 1
        return out

    def apply_raw(self, raw: bytes) -> bytes | None:
        """The transformed envelope bytes (compact JSON); ``None`` when
        ``raw`` cannot be rewritten exactly: not a JSON object, a key twice
        in one object, text that is not UTF-8 or a lone surrogate.  Numbers
        the transformation does not set keep their text as stored (no
        rounding through a double, whatever their size)."""
        doc = load_exact(raw)
        if not isinstance(doc, dict):
            return None
        out = self.apply_in_place(doc)  # a fresh parse: nothing shared
        try:
            return orjson.dumps(out)
        except orjson.JSONEncodeError:  # a lone surrogate in a string
            return None

    def describe(self) -> str:
        parts = [f"rename {len(self.rename)}", f"set {len(self.set)}", f"delete {len(self.delete)}"]
        if self.bump_version:
            parts.append("jobVersion + 1")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.source, "set": self.set, "rename": self.rename, "delete": list(self.delete),
                "bump_version": self.bump_version}


@dataclass(frozen=True)
class Rollback:
    """Undo the transformation operation ``operation`` (its id in the
    journal): each envelope it replaced goes back, while the job still holds
    what that operation wrote.  Transformations stack per job, so rollbacks
    go newest first (an older one under a live newer one is refused)."""

    operation: str

    def describe(self) -> str:
        return f"roll back {self.operation}"

    def to_json(self) -> dict[str, Any]:
        return {"rollback": self.operation}


class _NotExact(ValueError):
    """An envelope that cannot be rewritten exactly."""


def load_exact(raw: bytes) -> Any:
    """``raw`` parsed as JSON with every number that an ``int`` cannot hold
    exactly in 64 bits (a fraction, an exponent, a big integer, ``-0``) kept
    as its text (an :class:`orjson.Fragment` that ``orjson.dumps`` writes as
    it was); ``None`` when ``raw`` is not JSON, not UTF-8, holds NaN or
    Infinity, or an object with a key twice."""
    try:
        return json.loads(raw, parse_float=orjson.Fragment, parse_int=_exact_int,
                          parse_constant=_not_exact, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, _NotExact
        return None


def _exact_int(literal: str) -> int | orjson.Fragment:
    n = int(literal)
    return n if -2**63 <= n < 2**64 and str(n) == literal else orjson.Fragment(literal)


def _not_exact(literal: str) -> Any:
    raise _NotExact(literal)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        raise _NotExact("a key twice in one object")
    return doc


def _walk(doc: dict[str, Any], path: str, create: bool) -> tuple[dict[str, Any] | None, str]:
    parts = path.split(".")
    node: Any = doc
    for part in parts[:-1]:
        nxt = node.get(part) if isinstance(node, dict) else None
        if not isinstance(nxt, dict):
            if not create or not isinstance(node, dict):
                return None, parts[-1]
            nxt = node[part] = {}
        node = nxt
    return (node if isinstance(node, dict) else None), parts[-1]


def _pop(doc: dict[str, Any], path: str) -> tuple[bool, Any]:
    node, last = _walk(doc, path, create=False)
    if node is None or last not in node:
        return False, None
    return True, node.pop(last)


def _put(doc: dict[str, Any], path: str, value: Any) -> None:
    node, last = _walk(doc, path, create=True)
    if node is not None:
        node[last] = value


def load_transform(path: str) -> Transform:
    """Parse the TOML transformation file ``path``."""
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise UsageError(f"--transform {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--transform {path}: {exc}") from None
    unknown = set(doc) - _KEYS
    if unknown:
        raise UsageError(f"--transform {path}: unknown key(s) {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(_KEYS))})")
    sets, renames, deletes = doc.get("set", {}), doc.get("rename", {}), doc.get("delete", [])
    if not isinstance(sets, dict) or not isinstance(renames, dict) or not isinstance(deletes, list) \
            or not all(isinstance(v, str) for v in renames.values()) \
            or not all(isinstance(v, str) for v in deletes) or not isinstance(doc.get("bump_version", False), bool):
        raise UsageError(f"--transform {path}: [set] and [rename] are tables (rename values: paths), "
                         "delete a list of paths, bump_version true or false")
    t = Transform(set=_flatten(sets), rename=dict(renames), delete=tuple(deletes),
                  bump_version=doc.get("bump_version", False), source=path)
    if not (t.set or t.rename or t.delete or t.bump_version):
        raise UsageError(f"--transform {path}: the transformation changes nothing")
    return t


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``[set] payload.x = 1`` parses as nested tables in TOML; dotted paths back."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, path + "."))
        else:
            out[path] = v
    return out


def diff_lines(job_id: str, before: bytes, after: bytes) -> list[str]:
    """A unified diff of one envelope, pretty-printed JSON before and after."""
    def pretty(raw: bytes) -> list[str]:
        try:
            return orjson.dumps(orjson.loads(raw), option=orjson.OPT_INDENT_2).decode().splitlines()
        except orjson.JSONDecodeError:
            return [raw.decode("utf-8", "replace")]
    return list(difflib.unified_diff(pretty(before), pretty(after), f"{job_id} (before)", f"{job_id} (after)",
                                     lineterm=""))
