"""One filter semantics: the server-side rule-out (``list_scan.lua`` running
the program :func:`~jobctl.filter.lua_predicate.lua_program` compiles from
the same :class:`~jobctl.filter.Filter`) never rules out a job the client
filter matches.

A property test without a property library: random filters over every field
and operator the program expresses, times random envelopes that include the
odd JSON two readers may see differently (wrong types, 64-bit integers,
floats, escapes, duplicate keys, non-UTF-8 bytes, non-objects). The seeds
are fixed so a failure reproduces; each case names its filter and envelope.
"""

from __future__ import annotations

import random

import orjson
import pytest

from jobctl.filter import compile_filter
from jobctl.filter.lua_predicate import lua_program
from jobctl.scripts import script
from test_lua_predicate import K, NOW, PREFIX, _python

TEXT_FIELDS = {"id": None, "type": "jobType", "tenant": "tenantId", "error": "lastErrorCode",
               "message": "lastErrorMessage", "idempotency_key": "idempotencyKey", "trace": "traceId",
               "correlation": "correlationId"}
NUMBER_FIELDS = {"version": "jobVersion", "attempts": "attempt", "max_attempts": "maxAttempts"}
TEXTS = ["t1", "t2", "email.send", "sms.send", "HTTP_503", "boom", "k1", "x", "j001", "email/send", "t\u00e9"]
NUMBERS = [0, 1, 2, 3, 5, 2.5, -1, 2 ** 53 + 1, 2 ** 63 - 1]
ODD_VALUES = [None, True, False, "3", 2.0, 2 ** 60, -0.0, 1e300, [1], {"a": 1}, "", "t\u00e9", "a\nb", "\u0000"]


def _clause(rng: random.Random) -> str:
    if rng.random() < 0.55:
        field = rng.choice(sorted(TEXT_FIELDS))
        value = rng.choice(TEXTS)
        return f"{field} {rng.choice(['=', '!='])} '{value}'"
    if rng.random() < 0.8:
        field = rng.choice(sorted(NUMBER_FIELDS))
        return f"{field} {rng.choice(['=', '!=', '<', '<=', '>', '>='])} {rng.choice(NUMBERS)}"
    return f"created {rng.choice(['<', '>=', '=', '!='])} {rng.choice(['2026-11-18T00:00:00Z', '1970-01-01T00:00:01Z'])}"


def random_filter(rng: random.Random, depth: int = 0) -> str:
    """A filter text of 1 to about 8 clauses with and/or/not and parentheses."""
    if depth > 2 or rng.random() < 0.4:
        return _clause(rng)
    left, right = random_filter(rng, depth + 1), random_filter(rng, depth + 1)
    joined = f"{left} {rng.choice(['and', 'or'])} {right}"
    if rng.random() < 0.3:
        return f"not ({joined})"
    return f"({joined})" if rng.random() < 0.5 else joined


def random_envelope(rng: random.Random, n: int) -> bytes:
    """An envelope: mostly well-formed, some fields odd, some raw bytes no
    JSON reader agrees on."""
    doc: dict = {"jobId": f"j{n:03d}", "createdAtEpochMs": NOW - rng.randrange(10 ** 9)}
    for key in TEXT_FIELDS.values():
        if key and rng.random() < 0.7:
            doc[key] = rng.choice(TEXTS)
    for key in NUMBER_FIELDS.values():
        if rng.random() < 0.7:
            doc[key] = rng.choice([0, 1, 2, 3, 5])
    if rng.random() < 0.35:  # one field of an odd type or size
        doc[rng.choice([*filter(None, TEXT_FIELDS.values()), *NUMBER_FIELDS.values(), "createdAtEpochMs"])] = \
            rng.choice(ODD_VALUES + NUMBERS)
    raw = orjson.dumps(doc)
    roll = rng.random()
    if roll < 0.05:
        return raw[: rng.randrange(1, len(raw))]  # truncated
    if roll < 0.10:
        return raw.replace(b'"t1"', b'"\\u0074\\u0031"')  # an escape only one reader sees through
    if roll < 0.15:
        return raw[:-1] + b',"tenantId":"t2"}'  # a duplicate key
    if roll < 0.18:
        return raw.replace(b'"boom"', b'"\xff\xfe"')  # not UTF-8
    if roll < 0.20:
        return rng.choice([b"[1,2]", b'"s"', b"{}", b"null", b"1"])
    return raw


def _ruled_in(client, program: bytes, ids: list[str]) -> set[str]:
    """The ids ``list_scan`` does not rule out (candidates and malformed)."""
    reply = script(client, "list_scan")(keys=[K.job(i) for i in ids], args=[program, "1", PREFIX, 10 ** 9])
    assert int(reply[1]) == 0  # no id dangling
    return {ids[int(i) - 1] for i in reply[3:]}


@pytest.mark.parametrize("seed", range(6))
def test_the_server_never_rules_out_a_job_the_client_filter_matches(redis_client, seed):
    rng = random.Random(seed)
    ids = [f"r{seed}-{n:03d}" for n in range(100)]
    envelopes = {job_id: random_envelope(rng, n) for n, job_id in enumerate(ids)}
    for job_id, raw in envelopes.items():
        redis_client.set(K.job(job_id), raw)
    checked = ruled_out = 0
    for _ in range(40):
        text = random_filter(rng)
        flt = compile_filter(text)
        program = lua_program(flt)
        if program is None:
            continue  # the plan stays client-side: nothing to compare
        kept = set()
        for start in range(0, len(ids), 25):
            kept |= _ruled_in(redis_client, program, ids[start:start + 25])
        for job_id, raw in envelopes.items():
            if _python(flt, job_id, raw) == "match":
                assert job_id in kept, f"seed {seed}: {text!r} ruled out {raw!r}"
        checked += 1
        ruled_out += len(ids) - len(kept)
    assert checked >= 25, "most random filters compile to a program"
    assert ruled_out > 500, "the server did rule jobs out (the property is not vacuous)"
