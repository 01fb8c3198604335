"""The filter language (jobctl.filter) and durations (jobctl.durations).

Pure logic: no Redis.  Records are built from JSON envelopes with
``parse_envelope``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest

from jobctl.durations import DurationError, format_duration, parse_duration
from jobctl.errors import UsageError
from jobctl.exitcodes import ExitCode
from jobctl.filter import (
    FIELDS,
    MATCH_ALL,
    FieldKind,
    Filter,
    FilterError,
    compile_filter,
    field_getter,
)
from jobctl.model import JobRecord, State, parse_envelope

NOW = 1_800_000_000_000  # epoch ms
SEC, MIN, HOUR, DAY = 1_000, 60_000, 3_600_000, 86_400_000


def make(state: State = State.DEAD, meta: dict[str, Any] | None = None,
         job_id: str = "j1", **fields: Any) -> JobRecord:
    """A record whose envelope is the given camelCase fields (None = absent)."""
    doc: dict[str, Any] = {"jobId": job_id, "jobType": "invoice.email.send",
                           "createdAtEpochMs": NOW - 2 * HOUR}
    doc.update(fields)
    doc = {k: v for k, v in doc.items() if v is not None}
    raw = orjson.dumps(doc)
    return JobRecord(queue="q", layout="test", shard="0", job_id=job_id, state=state,
                     envelope=parse_envelope(raw), raw=raw, meta=meta or {})


REC = make(
    tenantId="t1", jobVersion=2, attempt=3, maxAttempts=5,
    lastErrorCode="HTTP_503", lastErrorMessage="upstream said: 503 Service Unavailable",
    lastAttemptAtEpochMs=NOW - 30 * MIN, idempotencyKey="idem-42", traceId="tr-1",
    correlationId="corr-9",
    payload={"customer": {"id": "c-7", "tier": "gold"}, "amount": 12.5, "count": 3,
             "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
             "tags": ["urgent", "eu"], "ids": [1, 2, 3], "flag": True,
             "note": None, "dueAtEpochMs": NOW + HOUR, "it's": "quoted key",
             "a.b": "dotted key"},
)
BARE = make(tenantId=None, jobType=None, createdAtEpochMs=None, state=State.READY)


def m(text: str, rec: JobRecord = REC, now: int = NOW) -> bool:
    return compile_filter(text).matches(rec, now)


def err(text: str) -> FilterError:
    with pytest.raises(FilterError) as info:
        compile_filter(text)
    return info.value


# --------------------------------------------------------------------- basics


def test_the_documented_example() -> None:
    f = compile_filter('error ~ "HTTP_5*" and tenant = t1 and attempts >= 3')
    assert f.matches(REC, NOW)
    assert not f.matches(make(tenantId="t2", lastErrorCode="HTTP_503", attempt=3), NOW)
    assert not f.matches(make(tenantId="t1", lastErrorCode="HTTP_429", attempt=3), NOW)
    assert not f.matches(make(tenantId="t1", lastErrorCode="HTTP_500", attempt=2), NOW)
    assert f.fields == {"error", "tenant", "attempts"}
    assert f.text == 'error ~ "HTTP_5*" and tenant = t1 and attempts >= 3'
    assert f.needs_payload


@pytest.mark.parametrize("text, expected", [
    ("attempts = 3", True), ("attempts = 4", False),
    ("attempts != 3", False), ("attempts != 4", True),
    ("attempts < 3", False), ("attempts < 4", True),
    ("attempts <= 3", True), ("attempts <= 2", False),
    ("attempts > 2", True), ("attempts > 3", False),
    ("attempts >= 3", True), ("attempts >= 4", False),
    ("attempts = 3.0", True), ("attempts < 3.5", True), ("attempts > -1", True),
    ("version = 2", True), ("max_attempts > attempts_x", None),
])
def test_number_operators(text: str, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(FilterError):
            compile_filter(text)
    else:
        assert m(text) is expected


@pytest.mark.parametrize("text, expected", [
    ("tenant = t1", True), ("tenant = t2", False), ("tenant != t2", True),
    ("tenant < t2", True), ("tenant <= t1", True), ("tenant > t0", True), ("tenant >= t2", False),
    ("type = invoice.email.send", True), ("error = HTTP_503", True),
    ("id = j1", True), ("idempotency_key = idem-42", True), ("trace = tr-1", True),
    ("correlation = corr-9", True), ("message contains 503", True),
    ('message contains "Service Unavailable"', True), ("message contains service", False),
])
def test_text_operators(text: str, expected: bool) -> None:
    assert m(text) is expected


@pytest.mark.parametrize("text, expected", [
    ('error ~ "HTTP_5*"', True), ("error ~ HTTP_5*", True), ("error ~ HTTP_4*", False),
    ("error ~ HTTP_50?", True), ("error ~ HTTP_5?", False), ("error ~ HTTP_[45]03", True),
    ("error ~ HTTP_[!5]03", None), ('error ~ "HTTP_[!5]03"', False),
    ("error ~ http_5*", False),  # case-sensitive
    ("type ~ invoice.*", True), ("type ~ *.send", True), ("type ~ invoice", False),
    ("message ~ *503*", True), ("state ~ d*", True), ("state ~ r*", False),
])
def test_glob(text: str, expected: bool | None) -> None:
    if expected is None:  # '!' needs quoting
        with pytest.raises(FilterError):
            compile_filter(text)
    else:
        assert m(text) is expected


def test_state() -> None:
    assert m("state = dead")
    assert m("state = DEAD")  # state names are case-insensitive
    assert m("state != ready")
    assert not m("state = ready")
    assert m("state = ready", BARE)
    orphan = make(state=None)  # type: ignore[arg-type]  # an orphan payload
    assert not m("state = dead", orphan) and not m("state ~ *", orphan)
    assert not m("state ~ N*", orphan)
    assert m("state != dead", orphan)
    assert not m("dead_for >= 0s", orphan)
    f = compile_filter("state = dead or id = j1")
    assert f.fields == {"state", "id"}
    assert not f.needs_payload


# ----------------------------------------------------------------- structure


def test_precedence_not_and_or() -> None:
    # and binds tighter than or: true or (false and false) = true
    assert m("tenant = t1 or tenant = t2 and attempts = 99")
    # parentheses change it: (true or false) and false = false
    assert not m("(tenant = t1 or tenant = t2) and attempts = 99")
    # not binds tighter than and: (not false) and true
    assert m("not tenant = t2 and attempts = 3")
    # not binds tighter than or: (not true) or true
    assert m("not tenant = t1 or attempts = 3")
    assert not m("not (tenant = t1 or attempts = 99)")
    assert m("not not tenant = t1")
    assert m("((tenant = t1))")
    assert m("tenant = x or tenant = y or tenant = t1")
    assert not m("tenant = t1 and attempts = 3 and version = 9")


@pytest.mark.parametrize("text", [
    "tenant = t1 AND attempts = 3", "tenant = t1 And attempts = 3",
    "tenant = x OR tenant = t1", "NOT tenant = x", "Not(tenant = x)",
    "message CONTAINS 503", "message Contains 503",
])
def test_keywords_are_case_insensitive(text: str) -> None:
    assert m(text)


def test_whitespace_is_optional_around_operators_and_parens() -> None:
    assert m("tenant=t1")
    assert m("attempts>=3 and(age>1h)")
    assert m("not(tenant=x)")
    assert m("  tenant =\tt1\n and attempts = 3  ")


def test_keywords_are_reserved_as_bare_values_but_not_in_words() -> None:
    e = err("tenant = and")
    assert str(e) == "filter: unexpected token 'and' at column 10 (expected a value)"
    assert m('tenant = "and"', make(tenantId="and"))
    assert m("tenant = android", make(tenantId="android"))
    assert m("tenant ~ or*", make(tenantId="orca"))
    assert m("tenant = not-yet", make(tenantId="not-yet"))


def test_long_chains_do_not_recurse() -> None:
    text = " or ".join(f"tenant = x{i}" for i in range(3000)) + " or tenant = t1"
    assert m(text)


# ------------------------------------------------------------------ literals


@pytest.mark.parametrize("text, value", [
    ('tenant = "a b"', "a b"),
    ("tenant = 'a b'", "a b"),
    (r'tenant = "say \"hi\""', 'say "hi"'),
    (r"tenant = 'it\'s'", "it's"),
    (r'tenant = "back\\slash"', "back\\slash"),
    (r'tenant = "tab\there"', "tab\there"),
    (r'tenant = "line\nbreak"', "line\nbreak"),
    (r'tenant = "\u00e9t\u00e9"', "été"),
    ("tenant = \"it's\"", "it's"),
    ("tenant = 'say \"hi\"'", 'say "hi"'),
    ('tenant = "and or not (x) = y"', "and or not (x) = y"),
    ('tenant = ""', ""),
])
def test_quoting_and_escapes(text: str, value: str) -> None:
    assert m(text, make(tenantId=value))
    assert not m(text, make(tenantId=value + "x"))


def test_any_literal_is_text_for_text_fields() -> None:
    assert m("tenant = 42", make(tenantId="42"))
    assert m("tenant = 007", make(tenantId="007"))  # as typed, not the number 7
    assert m("tenant = 5m", make(tenantId="5m"))
    assert m("tenant = 2026-11-21", make(tenantId="2026-11-21"))
    assert m("tenant = 30sec", make(tenantId="30sec"))
    assert m("id = a:b/c@d,e", make(job_id="a:b/c@d,e"))


def test_quoted_strings_for_typed_fields_are_parsed_as_that_kind() -> None:
    assert m('attempts = "3"')
    assert m('age > "1h"')
    assert m('created < "2030-01-01 10:00"')


# ----------------------------------------------------------------- durations


@pytest.mark.parametrize("text, expected", [
    ("age > 1h", True), ("age > 2h", False), ("age >= 2h", True), ("age = 2h", True),
    ("age < 121m", True), ("age > 1h59m", True), ("age > 1h59m59s999ms", True),
    ("age > 7200001ms", False), ("age < 1d", True), ("age > 0.5h", True), ("age < 1w", True),
    ("age > 119m59s", True), ("age != 2h", False),
])
def test_age(text: str, expected: bool) -> None:
    assert m(text) is expected


def test_dead_for_uses_meta_then_last_attempt() -> None:
    assert m("dead_for > 29m and dead_for < 31m")  # lastAttemptAtEpochMs, 30m ago
    meta = make(meta={"dead_since_ms": NOW - 3 * DAY}, lastAttemptAtEpochMs=NOW - MIN)
    assert m("dead_for > 2d", meta)
    # no dead time known: missing (matches only !=)
    unknown = make()
    assert not m("dead_for > 0s", unknown) and not m("dead_for < 1000d", unknown)
    assert m("dead_for != 1s", unknown)
    # a ready job that merely has a last attempt is not dead
    ready = make(state=State.READY, lastAttemptAtEpochMs=NOW - MIN)
    assert not m("dead_for >= 0s", ready)


def test_age_is_missing_without_created() -> None:
    assert not m("age > 0s", BARE)
    assert not m("age < 1000d", BARE)
    assert m("age != 1h", BARE)


# ---------------------------------------------------------------- timestamps


def test_timestamps() -> None:
    rec = make(createdAtEpochMs=1_795_255_200_000)  # 2026-11-21T10:00:00Z
    assert m("created = 2026-11-21T10:00:00Z", rec)
    assert m("created = 2026-11-21T10:00:00", rec)  # naive = UTC
    assert m("created = 2026-11-21T10:00Z", rec)
    assert m("created = 2026-11-21T10:00:00.000Z", rec)
    assert m("created = 2026-11-21T11:00:00+01:00", rec)
    assert m("created = 2026-11-21t10:00:00z", rec)
    assert m("created = 2026-11-21T10:00:00,000Z", rec)
    assert m("created > 2026-11-21", rec)  # date-only = midnight UTC
    assert m("created < 2026-11-22", rec)
    assert m("created >= 2026-11-21 and created < 2026-11-22", rec)
    assert not m("created > 2026-11-21T10:00:00Z", rec)
    assert m("created <= 2026-11-21T10:00:00Z", rec)
    assert m("created != 2026-11-21", rec)
    assert not m("created > 2000-01-01", BARE)


# ------------------------------------------------------------ payload paths


@pytest.mark.parametrize("text, expected", [
    ("payload.customer.id = c-7", True),
    ("payload.customer.tier ~ g*", True),
    ("payload.items[0].sku = A-1", True),
    ("payload.items[1].sku = A-1", False),
    ("payload.items[-1].sku = B-2", True),
    ("payload.items[5].sku = A-1", False),
    ("payload.items[0].qty > 1", True),
    ("payload.items[0].qty = 2.0", True),
    ("payload.amount > 12", True), ("payload.amount = 12.5", True), ("payload.amount < 12", False),
    ("payload.count = 3", True), ('payload.count = "3"', False), ("payload.count ~ 3", True),
    ("payload.flag = true", True), ("payload.flag != false", True), ("payload.flag = false", False),
    ('payload.flag = "true"', False), ("payload.flag ~ tr*", True),
    ("payload.tags contains urgent", True), ("payload.tags contains urg", False),
    ("payload.ids contains 2", True), ("payload.ids contains 9", False),
    ("payload.customer contains tier", True), ("payload contains customer", True),
    ("payload.customer.tier contains ol", True),
    ("payload.dueAtEpochMs > 2020-01-01", True),  # timestamp literal = epoch ms
    ("payload.dueAtEpochMs < 2020-01-01", False),
    ("payload.count < 1s", True),  # duration literal = ms
    ('payload["it\'s"] = "quoted key"', True),
    ('payload["a.b"] = "dotted key"', True),
    ("payload.a.b = x", False),
    ("payload.customer.id.deeper = x", False),
    ("payload.tags = urgent", False),  # a list is never equal to a scalar
    ("payload.tags != urgent", True),
    ("payload.customer.tier > f", True),
])
def test_payload_paths(text: str, expected: bool) -> None:
    assert m(text) is expected


def test_payload_strings_compare_with_the_value_as_typed() -> None:
    rec = make(payload={"code": "42", "ver": "007"})
    assert m("payload.code = 42", rec)
    assert m("payload.ver = 007", rec)
    assert not m("payload.ver = 7", rec)
    assert m("payload.x != 1", make(payloadRef="s3://bucket/key"))


def test_payload_null_and_missing_match_only_not_equal() -> None:
    for path in ("payload.note", "payload.nope", "payload.items[9]", "payload.customer.id[0]"):
        assert not m(f"{path} = x")
        assert not m(f"{path} < 5")
        assert not m(f"{path} ~ *")
        assert not m(f"{path} contains x")
        assert m(f"{path} != x")
    no_payload = make()
    assert not m("payload.x = 1", no_payload)
    assert m("payload.x != 1", no_payload)


# ----------------------------------------------------------- missing values


@pytest.mark.parametrize("text", [
    "tenant = x", "tenant < zzz", "tenant > a", "tenant <= zzz", "tenant >= a",
    "tenant ~ *", "tenant contains x", "type ~ *", "created < 2100-01-01", "age >= 0s",
])
def test_missing_values_match_nothing_but_not_equal(text: str) -> None:
    assert not m(text, BARE)


def test_missing_values_match_not_equal_and_negation() -> None:
    assert m("tenant != x", BARE)
    assert m("attempts != 3", BARE)
    assert m("not tenant = x", BARE)  # not (false)


# ------------------------------------------------------------------- errors


@pytest.mark.parametrize("text, message", [
    ("tenant = and", "filter: unexpected token 'and' at column 10 (expected a value)"),
    ("attempts >= and tenant = t1",
     "filter: unexpected token 'and' at column 13 (expected a value)"),
    ("tenant = t1 and", "filter: unexpected end of filter at column 16 "
                        "(expected a field, 'not' or '(')"),
    ("tenant =", "filter: unexpected end of filter at column 9 (expected a value)"),
    ("tenant t1", "filter: unexpected token 't1' at column 8 "
                  "(expected an operator: = != < <= > >= ~ or contains)"),
    ("(tenant = t1", "filter: unexpected end of filter at column 13 (expected 'and', 'or' or ')')"),
    ("tenant = t1 )", "filter: unexpected token ')' at column 13 "
                      "(expected 'and', 'or' or end of filter)"),
    ("a = 1 b = 2", "filter: unexpected token 'b' at column 7 "
                    "(expected 'and', 'or' or end of filter)"),
    ("tennant = t1", "filter: unknown field 'tennant' at column 1 (did you mean 'tenant'?)"),
    ("id = 1 and atempts > 2", "filter: unknown field 'atempts' at column 12 "
                              "(did you mean 'attempts'?)"),
    ('tenant = "abc', 'filter: unterminated string at column 10 (close it with "; '
                      'a newline needs \\n)'),
    ("tenant == t1", "filter: unexpected token '=' at column 9 (expected a value)"),
    ("", "filter: empty filter at column 1 (leave --filter out to match everything)"),
])
def test_error_messages(text: str, message: str) -> None:
    e = err(text)
    assert str(e) == message


@pytest.mark.parametrize("text, column, fragment", [
    ("age > 2026-01-01", 7, "field age takes a duration"),
    ("dead_for < 5", 12, "field dead_for takes a duration, not a number"),
    ("age > x", 7, "field age takes a duration, not a word"),
    ("created < 2h", 11, "field created takes a timestamp, not a duration"),
    ("created < 5", 11, "field created takes a timestamp"),
    ("attempts > 5m", 12, "field attempts takes a number, not a duration"),
    ("attempts > t1", 12, "field attempts takes a number, not a word"),
    ("version = 2026-11-21", 11, "takes a number"),
    ("attempts ~ 3", 10, "operator ~ does not apply to attempts"),
    ("age contains 5m", 5, "operator contains does not apply to age"),
    ("state < dead", 7, "operator < does not apply to state"),
    ("state = deadd", 9, "unknown state 'deadd'"),
    ("tenant.x = 1", 7, "field tenant has no sub-fields"),
    ("payload. x = 1", 9, "space inside a field path"),
    ("payload.x[", 11, "expected a list index or quoted key"),
    ("age > 30m1h", 7, "invalid duration '30m1h'"),
    ("created > 2026-13-45", 11, "invalid timestamp '2026-13-45'"),
    (r"tenant = 'a\qb'", 12, r"unknown escape '\q'"),
    ("tenant = !x", 10, "unexpected character '!'"),
    ("tenant = t1 # x", 13, "unexpected token '#'"),
    ("tenant = ~", 10, "unexpected token '~'"),
    ('attempts > "abc"', 12, "invalid number 'abc'"),
    ('age > "90"', 7, "duration '90' needs a unit"),
    ("not", 4, "unexpected end of filter"),
    ("()", 2, "unexpected token ')'"),
    ("tenant = t1 andx", 13, "unexpected token 'andx'"),
])
def test_errors_point_at_the_column(text: str, column: int, fragment: str) -> None:
    e = err(text)
    assert e.column == column
    assert fragment in str(e)
    assert f"at column {column}" in str(e)


def test_errors_are_one_line_usage_errors_without_lark_leaking() -> None:
    bad = ["tenant = and", "tenant", "tennant = t1", "age > 2026-01-01", 'x = "',
           "tenant = t1 )", "((((", "tenant = !", "payload.x[0 = 1", "\n\n", "tenant = t1\n and"]
    for text in bad:
        e = err(text)
        assert isinstance(e, UsageError)
        assert e.exit_code == ExitCode.USAGE
        assert "\n" not in str(e)
        assert str(e).startswith("filter: ")
        assert e.__cause__ is None and e.__context__ is None
        assert e.column >= 1
        assert "lark" not in type(e).__module__
        for arg in e.args:
            assert isinstance(arg, str)


def test_multiline_filters_report_line_and_column() -> None:
    e = err("tenant = t1\n  and age > x")
    assert e.line == 2 and e.column == 13
    assert "at line 2, column 13" in str(e)


def test_unknown_field_without_close_match_lists_fields() -> None:
    e = err("zzz = 1")
    assert "unknown field 'zzz'" in str(e) and "payload.<path>" in str(e)


def test_state_suggestion() -> None:
    assert "did you mean 'dead'?" in str(err("state = deadd"))


def test_created_with_duration_suggests_age() -> None:
    assert "use age" in str(err("created < 2h"))


# --------------------------------------------------------------- API shapes


def test_match_all() -> None:
    assert MATCH_ALL.matches(REC, NOW) and MATCH_ALL.matches(BARE, NOW)
    assert MATCH_ALL.text == ""
    assert MATCH_ALL.fields == frozenset()
    assert not MATCH_ALL.needs_payload
    assert MATCH_ALL.is_match_all
    assert not compile_filter("id = x").is_match_all
    assert isinstance(MATCH_ALL, Filter)


@pytest.mark.parametrize("text, fields, needs", [
    ("id = j1", {"id"}, False),
    ("state = dead", {"state"}, False),
    ("id ~ j* and not state = ready", {"id", "state"}, False),
    ("id = j1 and tenant = t1", {"id", "tenant"}, True),
    ("payload.a.b[0] = 1 or age > 1h", {"payload", "age"}, True),
])
def test_fields_and_needs_payload(text: str, fields: set[str], needs: bool) -> None:
    f = compile_filter(text)
    assert f.fields == fields
    assert f.needs_payload is needs


def test_field_map_lists_every_field() -> None:
    assert list(FIELDS) == ["id", "type", "version", "tenant", "error", "message",
                            "attempts", "max_attempts", "age", "dead_for", "overdue_for", "created",
                            "state", "idempotency_key", "trace", "correlation", "payload"]
    assert FIELDS["age"].kind is FieldKind.DURATION
    assert FIELDS["created"].kind is FieldKind.TIMESTAMP
    assert FIELDS["tenant"].get(REC, NOW) == "t1"
    assert FIELDS["age"].get(REC, NOW) == 2 * HOUR
    assert FIELDS["state"].get(REC, NOW) == "dead"
    for spec in FIELDS.values():
        assert spec.help


def test_field_getter() -> None:
    assert field_getter("tenant")(REC, NOW) == "t1"
    assert field_getter("payload.items[1].sku")(REC, NOW) == "B-2"
    assert field_getter("payload")(REC, NOW)["count"] == 3
    assert field_getter("payload.missing")(REC, NOW) is None
    with pytest.raises(FilterError, match="did you mean 'tenant'"):
        field_getter("tenat")
    with pytest.raises(FilterError):
        field_getter("tenant = t1")


def test_lark_is_imported_lazily() -> None:
    code = ("import sys, jobctl.filter, jobctl.durations; "
            "assert 'lark' not in sys.modules, 'lark imported at module import'; "
            "jobctl.filter.compile_filter('id = x'); "
            "assert 'lark' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parser_is_cached() -> None:
    from jobctl import filter as filter_mod
    compile_filter("id = x")
    assert filter_mod.lark_parser() is filter_mod.lark_parser()
    assert filter_mod.lark_parser().options.parser == "lalr"


def test_now_is_a_parameter() -> None:
    f = compile_filter("age > 3h")
    assert not f.matches(REC, NOW)
    assert f.matches(REC, NOW + 2 * HOUR)


# ---------------------------------------------------------------- durations


@pytest.mark.parametrize("text, ms", [
    ("30s", 30_000), ("5m", 300_000), ("2h", 7_200_000), ("7d", 604_800_000),
    ("2w", 1_209_600_000), ("500ms", 500), ("1h30m", 5_400_000), ("1d12h", 129_600_000),
    ("2m30s500ms", 150_500), ("1.5h", 5_400_000), ("0.5s", 500), ("0s", 0),
    ("30", 30_000), ("0.25", 250), (" 5m ", 300_000),
])
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "5x", "30m1h", "1h 30m", "5M", "-5s", "1hh", "ms",
                                  "h", "1h30", "5 m", "1e3s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_duration(text)
    assert isinstance(info.value, DurationError)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == ExitCode.USAGE


def test_parse_duration_plain_number_can_be_refused() -> None:
    with pytest.raises(DurationError, match="needs a unit"):
        parse_duration("30", bare_seconds=False)
    assert parse_duration("30s", bare_seconds=False) == 30_000


@pytest.mark.parametrize("ms, text", [
    (0, "0s"), (1, "1ms"), (999, "999ms"), (1_500, "1s500ms"), (30_000, "30s"),
    (192_000, "3m12s"), (192_999, "3m12s"), (7_200_000, "2h"), (7_260_000, "2h1m"),
    (7_201_000, "2h"), (4 * DAY + 3 * HOUR + 5 * MIN, "4d3h"), (400 * DAY, "400d"),
    (-5 * MIN, "-5m"),
])
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration(ms) == text


@pytest.mark.parametrize("ms", [0, 1, 999, 1_000, 61_000, 3_600_000, 90_061_001, 400 * DAY])
def test_format_duration_output_parses(ms: int) -> None:
    assert parse_duration(format_duration(ms)) <= ms


def test_the_grammar_is_cached_in_the_users_cache_dir_and_a_bad_cache_file_is_rebuilt(tmp_path, monkeypatch):
    """The analysed grammar goes to ``<user cache dir>/jobctl`` (not the
    shared temporary directory); a corrupt or foreign file there is rebuilt."""
    from jobctl.filter import grammar

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    grammar.lark_parser.cache_clear()
    try:
        assert compile_filter("tenant = t1").matches is not None
        cached = tmp_path / "jobctl" / "filter-filter.lark"
        assert cached.is_file() and cached.stat().st_size > 0
        cached.write_bytes(b"not a lark cache\n")
        grammar.lark_parser.cache_clear()
        assert compile_filter("tenant = t2 and attempts >= 3").matches is not None
        assert cached.read_bytes() != b"not a lark cache\n"  # rebuilt and saved again
    finally:
        grammar.lark_parser.cache_clear()
