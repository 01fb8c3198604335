"""Classification rules: load, validate, and turn into Spark expressions.

A rules file is TOML (the shipped default is ``rules.toml`` beside this
module; ``jobctl analyze --default-rules`` prints it and documents every
key).  The first rule whose conditions all hold gives a job its class
(seed 000 sections 10 and 22): ``retryable``, ``permanent``,
``expired-deadline``, ``bad-input``, ``needs-idempotency``, else
``unclassified``.

:func:`load_rules` needs no Spark; :func:`rule_index_column` builds one
Spark column (built-in functions only, no Python UDF: executors need no
jobctl installed) and is the only function here that imports pyspark.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..vocabulary import TERMS, glob_regex

__all__ = ["Rule", "RuleSet", "CLASSES", "load_rules", "default_rules_text", "glob_regex", "pattern_regex",
           "rule_index_column", "UNCLASSIFIED"]

#: The classes a rule may give, in report order.
CLASSES = ("retryable", "permanent", "expired-deadline", "bad-input", "needs-idempotency", "unclassified")
UNCLASSIFIED = "unclassified"

#: Glob condition keys -> export column: every spelling of a term of the
#: shared vocabulary that has a rules key (``error_code``, ``error``,
#: ``last_error_code``...; :data:`jobctl.vocabulary.TERMS`).
_GLOB_KEYS = {s: t.column for t in TERMS if t.rule_key for s in t.spellings}
#: Export column -> the key a rule is written back with (:meth:`Rule.to_json`).
_RULE_KEY = {t.column: t.rule_key for t in TERMS if t.rule_key}
_BOOL_KEYS = ("malformed", "has_idempotency_key", "deadline_passed", "attempts_exhausted", "redriven")
_INT_KEYS = ("min_attempts",)
_META_KEYS = ("name", "class", "redrive", "description")


@dataclass(frozen=True)
class Rule:
    """One rule: ``name``, ``cls`` (its class), ``redrive`` and conditions.

    ``globs`` maps an export column to glob patterns; ``versions`` lists
    accepted job versions (empty: any); ``flags`` maps a boolean condition
    to its wanted value; ``min_attempts`` (or ``None``).
    """

    name: str
    cls: str
    redrive: bool = False
    description: str = ""
    globs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    versions: tuple[int, ...] = ()
    flags: dict[str, bool] = field(default_factory=dict)
    min_attempts: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "class": self.cls, "redrive": self.redrive,
                               "description": self.description}
        for col, pats in self.globs.items():
            out[_RULE_KEY[col]] = list(pats)
        if self.versions:
            out["job_version"] = list(self.versions)
        out.update(self.flags)
        if self.min_attempts is not None:
            out["min_attempts"] = self.min_attempts
        return out


@dataclass(frozen=True)
class RuleSet:
    """The rules in order and where they came from (``"default"`` or a path)."""

    rules: tuple[Rule, ...]
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "rules": [r.to_json() for r in self.rules]}


def default_rules_text() -> str:
    """The shipped default rules file, as text."""
    return resources.files("jobctl.analyze").joinpath("rules.toml").read_text(encoding="utf-8")


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise UsageError(f"{where}: expected a string or a non-empty list of strings")


_WORD = re.compile(r"<([A-Za-z0-9][A-Za-z0-9_.-]*)>")


def pattern_regex(patterns: tuple[str, ...]) -> str:
    """One regex (Python and Java; use it with search/``rlike``) matching a
    text when any of ``patterns`` does: a glob matches the whole text; a
    word pattern ``<WORD>`` (letters, digits, ``_ . -``) matches where WORD
    stands between non-alphanumerics or the text's ends, so ``<EXPIRED>``
    matches ``JOB_EXPIRED`` but not ``NOTEXPIRED``.

    Raises :class:`UsageError` for a malformed ``<...>`` pattern.
    """
    globs, words = [], []
    for p in patterns:
        if not p.startswith("<"):
            globs.append(p)
            continue
        m = _WORD.fullmatch(p)
        if m is None:
            raise UsageError(f"pattern {p!r}: a word pattern is <WORD> (letters, digits, _ . -)")
        words.append(m.group(1).replace(".", "\\.").replace("-", "\\-"))
    parts = [glob_regex(*globs)] if globs else []
    if words:
        parts.append("(?<![A-Za-z0-9])(?:" + "|".join(words) + ")(?![A-Za-z0-9])")
    return "|".join(parts)


def _parse_rule(doc: Any, n: int, source: str) -> Rule:
    where = f"rules {source}: rule {n}"
    if not isinstance(doc, dict):
        raise UsageError(f"{where}: expected a table ([[rule]])")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{where}: 'name' is required (a non-empty string)")
    where = f"rules {source}: rule {name!r}"
    cls = doc.get("class")
    if cls not in CLASSES:
        raise UsageError(f"{where}: 'class' must be one of {', '.join(CLASSES)} (got {cls!r})")
    redrive = doc.get("redrive", False)
    if not isinstance(redrive, bool):
        raise UsageError(f"{where}: 'redrive' must be true or false")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise UsageError(f"{where}: 'description' must be a string")
    globs, flags, versions, min_attempts = {}, {}, (), None
    for key, value in doc.items():
        if key in _META_KEYS:
            continue
        if key in _GLOB_KEYS:
            if _GLOB_KEYS[key] in globs:
                raise UsageError(f"{where}, {key}: the same condition is given twice (aliases of one field)")
            globs[_GLOB_KEYS[key]] = _strings(value, f"{where}, {key}")
            try:
                pattern_regex(globs[_GLOB_KEYS[key]])
            except UsageError as exc:
                raise UsageError(f"{where}, {key}: {exc}") from None
        elif key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise UsageError(f"{where}, {key}: expected true or false")
            flags[key] = value
        elif key == "job_version":
            vals = value if isinstance(value, list) else [value]
            if not vals or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
                raise UsageError(f"{where}, job_version: expected an integer or a list of integers")
            versions = tuple(vals)
        elif key in _INT_KEYS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise UsageError(f"{where}, {key}: expected an integer")
            min_attempts = value
        else:
            known = ", ".join((*_META_KEYS, *_RULE_KEY.values(), "job_version", *_BOOL_KEYS, *_INT_KEYS))
            raise UsageError(f"{where}: unknown key {key!r} (known: {known})")
    return Rule(name=name, cls=cls, redrive=redrive, description=description, globs=globs,
                versions=versions, flags=flags, min_attempts=min_attempts)


def load_rules(path: str | Path | None = None) -> RuleSet:
    """The rules of ``path`` (TOML), or the shipped defaults when ``None``.

    Raises :class:`UsageError` for an unreadable file, bad TOML, an unknown
    key, a bad class or value, or two rules with one name.
    """
    if path is None:
        text, source = default_rules_text(), "default"
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"rules {source}: {exc.strerror or exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"rules {source}: bad TOML: {exc}") from None
    version = doc.get("version", 1)
    if version != 1:
        raise UsageError(f"rules {source}: version {version!r} is not supported (expected 1)")
    unknown = set(doc) - {"version", "rule"}
    if unknown:
        raise UsageError(f"rules {source}: unknown top-level key {sorted(unknown)[0]!r} (expected version, [[rule]])")
    raw = doc.get("rule", [])
    if not isinstance(raw, list):
        raise UsageError(f"rules {source}: 'rule' must be an array of tables ([[rule]])")
    rules = tuple(_parse_rule(r, n, source) for n, r in enumerate(raw, 1))
    seen: set[str] = set()
    for r in rules:
        if r.name in seen:
            raise UsageError(f"rules {source}: two rules are named {r.name!r}")
        seen.add(r.name)
    return RuleSet(rules=rules, source=source)


def _condition(rule: Rule, snapshot_ms: int):
    """The Spark boolean column of ``rule`` (never null)."""
    from pyspark.sql import functions as F

    conds = []
    for col, patterns in rule.globs.items():
        conds.append(F.col(col).rlike(pattern_regex(patterns)))
    if rule.versions:
        conds.append(F.col("job_version").isin(list(rule.versions)))
    for key, wanted in rule.flags.items():
        if key == "malformed":
            expr = F.col("malformed")
        elif key == "has_idempotency_key":
            expr = F.col("idempotency_key").isNotNull() & (F.length("idempotency_key") > 0)
        elif key == "deadline_passed":
            expr = F.col("deadline").isNotNull() & (F.unix_millis(F.col("deadline")) < F.lit(snapshot_ms))
        elif key == "attempts_exhausted":
            expr = F.col("attempt") >= F.col("max_attempts")
        else:  # redriven
            expr = F.col("redrive_count") > 0
        expr = F.coalesce(expr, F.lit(False))
        conds.append(expr if wanted else ~expr)
    if rule.min_attempts is not None:
        conds.append(F.col("attempt") >= F.lit(rule.min_attempts))
    out = F.lit(True)
    for c in conds:
        out = out & F.coalesce(c, F.lit(False))
    return out


def rule_index_column(rules: RuleSet, snapshot_ms: int):
    """Spark int column: index of the first matching rule, ``-1`` for none."""
    from pyspark.sql import functions as F

    if not rules.rules:
        return F.lit(-1)
    expr = None
    for i, rule in enumerate(rules.rules):
        cond = _condition(rule, snapshot_ms)
        expr = F.when(cond, F.lit(i)) if expr is None else expr.when(cond, F.lit(i))
    return expr.otherwise(F.lit(-1))
