"""The error-message normaliser, table-driven (no Spark: the Spark column is
checked against the same table in ``test_analyze.py``), and the rules'
word patterns (``<WORD>``) compiled to the regex Spark evaluates."""

from __future__ import annotations

import re

import pytest

from jobctl.analyze.fingerprint import fingerprint_id, normalise
from jobctl.analyze.rules import load_rules, pattern_regex
from jobctl.errors import UsageError

#: (message, its fingerprint text)
TABLE = [
    ("timed out after 250ms", "timed out after <duration>"),
    ("timed out after 1500ms", "timed out after <duration>"),
    ("took 2.5s", "took <duration>"),
    ("retry in 3 min, then 2h", "retry in <duration>, then <duration>"),
    ("upstream unavailable after 3012 ms", "upstream unavailable after <duration>"),
    ("waited 40µs", "waited <duration>"),
    ("cannot allocate 2048MiB", "cannot allocate <size>"),
    ("body over 10KB", "body over <size>"),
    ("short read: 512 bytes", "short read: <size>"),
    ("disk 1.5 GB free", "disk <size> free"),
    ("order 123e4567-e89b-12d3-a456-426614174000 failed", "order <uuid> failed"),
    ("ptr 0xDEADbeef", "ptr <hex>"),
    ("trace 0af7651916cd43dd", "trace <hex>"),
    ("job 01JZ4SZ3MXWZK7WQR0STV9Q3WZ lost", "job <id> lost"),
    ("job abc123 lost", "job <id> lost"),
    ("after 3 tries, code 42", "after <n> tries, code <n>"),
    ("invoice_987 not found", "invoice_<n> not found"),
    ("from 10.0.0.1 to bob@example.com", "from <ip> to <email>"),
    ("HTTP_503 from endpoint_8", "HTTP_<n> from endpoint_<n>"),
    ("  spaced\t\tout  ", "spaced out"),
]


@pytest.mark.parametrize(("message", "expected"), TABLE)
def test_normalise(message, expected):
    assert normalise(message) == expected


def test_one_error_one_fingerprint():
    short, long_ = normalise("timed out after 250ms"), normalise("timed out after 1500ms")
    assert fingerprint_id(short) == fingerprint_id(long_)
    assert "<id>" not in normalise("cannot allocate 2048MiB")


@pytest.mark.parametrize(("patterns", "yes", "no"), [
    (("<EXPIRED>",), ["EXPIRED", "JOB_EXPIRED", "EXPIRED_AT_SOURCE", "a.EXPIRED-b"], ["NOTEXPIRED", "EXPIREDX"]),
    (("<TIMED_OUT>", "HTTP_5*"), ["READ_TIMED_OUT", "HTTP_503"], ["TIMED_OUTX", "HTTP_429"]),
    (("TOKEN_EXPIRED",), ["TOKEN_EXPIRED"], ["AUTH_TOKEN_EXPIRED"]),
])
def test_word_patterns(patterns, yes, no):
    rx = re.compile(pattern_regex(patterns))
    assert [t for t in yes if rx.search(t)] == yes
    assert [t for t in no if rx.search(t)] == []


def test_default_rules_file_codes_by_word():
    rules = {r.name: r for r in load_rules().rules}

    def first_rule(code: str) -> str | None:
        for r in load_rules().rules:
            pats = r.globs.get("last_error_code")
            if pats and re.search(pattern_regex(pats), code):
                return r.name
        return None

    assert "deadline-exceeded" in rules
    assert first_rule("TOKEN_EXPIRED") == "permission-denied"
    assert first_rule("DEADLINE_EXCEEDED") == first_rule("JOB_EXPIRED") == "deadline-exceeded"
    assert first_rule("GATEWAY_TIMEOUT") == "transient-without-idempotency-key"
    with pytest.raises(UsageError, match="<WORD>"):
        pattern_regex(("<A*B>",))
