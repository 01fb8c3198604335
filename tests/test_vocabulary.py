"""One field vocabulary and one glob semantics for the filter, the export
columns and the analyze rules (jobctl.vocabulary)."""

from __future__ import annotations

import fnmatch
import re

import orjson
import pytest

from jobctl.analyze.rules import load_rules
from jobctl.export.schema import NAMES
from jobctl.filter import FIELDS, compile_filter
from jobctl.model import ENVELOPE_FIELDS, JobRecord, State, parse_envelope
from jobctl.vocabulary import ALIASES, TERMS, canonical, glob_matcher, glob_regex

REC = JobRecord(queue="q", layout="test", shard="0", job_id="j1", state=State.DEAD,
                envelope=parse_envelope(orjson.dumps({"jobId": "j1", "jobType": "invoice.send", "tenantId": "t1",
                                                      "lastErrorCode": "HTTP_503", "attempt": 3})),
                raw=b"{}")


def test_every_term_names_a_real_field_column_and_envelope_key():
    for t in TERMS:
        assert t.name in FIELDS
        assert t.column in NAMES
        assert t.envelope is None or t.envelope in ENVELOPE_FIELDS
    assert canonical("error_code") == canonical("last_error_code") == "error"
    assert canonical("tenant_id") == "tenant" and canonical("tenant") == "tenant"


@pytest.mark.parametrize("alias, field", sorted(ALIASES.items()))
def test_the_filter_accepts_every_alias(alias, field):
    value = {"error": "HTTP_503", "tenant": "t1", "type": "invoice.send", "id": "j1"}.get(field)
    if value is None:
        literal = {"number": "1", "timestamp": "2020-01-01", "duration": "1m", "state": "dead"}.get(
            FIELDS[field].kind.value, '"zzz"')
        assert compile_filter(f"{alias} != {literal}").fields == compile_filter(f"{field} != {literal}").fields
        return
    assert compile_filter(f'{alias} = "{value}"').matches(REC, 0)
    assert compile_filter(f'{alias} = "{value}"').fields == compile_filter(f'{field} = "{value}"').fields


def test_rules_accept_the_same_spellings(tmp_path):
    rules = tmp_path / "r.toml"
    for key in ("error", "error_code", "last_error_code"):
        rules.write_text(f'[[rule]]\nname = "x"\nclass = "permanent"\n{key} = "HTTP_4*"\ntenant_id = "t1"\n')
        r = load_rules(rules).rules[0]
        assert r.globs == {"last_error_code": ("HTTP_4*",), "tenant_id": ("t1",)}
        assert r.to_json()["error_code"] == ["HTTP_4*"] and r.to_json()["tenant"] == ["t1"]
    rules.write_text('[[rule]]\nname = "x"\nclass = "permanent"\nerror = "A"\nerror_code = "B"\n')
    with pytest.raises(Exception, match="given twice"):
        load_rules(rules)


PATTERNS = ["HTTP_5*", "a?b.c", "[abc]x", "[!a]*", "[a-c]*z", "x[", "[]]", "[!]]y", "*.*", "a\\b", "[^x]",
            "a&&b", "[a&&b]", "??", "*"]
TEXTS = ["HTTP_503", "a.b.c", "axb.c", "ax", "bx", "zz", "x[", "]", "!y", "ay", "a\\b", "^", "a&&b", "&", "ab",
         "\n", "a\nb", "HTTP_5\n0", ""]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_one_glob_semantics_for_filter_and_rules(pattern):
    """The filter's ``~`` (Python) and the rules' regex (Spark's rlike, read
    here by Python's engine: the syntax is common) agree with fnmatch."""
    rx = re.compile(glob_regex(pattern))
    match = glob_matcher(pattern)
    for text in TEXTS:
        want = re.compile(fnmatch.translate(pattern), re.S).match(text) is not None
        assert match(text) is want, text
        assert (rx.search(text) is not None) is want, text


def test_runbook_conditions_and_filters_share_one_parser():
    """One grammar (conditions also spell `=` as `==`); a condition's syntax
    error is the filter's, with its column."""
    from jobctl.runbook.condition import ConditionError, compile_condition

    assert compile_condition("dead == 0 and not (stuck > 0)").evaluate({"dead": 0, "stuck": 0})
    assert compile_filter('error = "HTTP_503"').matches(REC, 0)
    with pytest.raises(ConditionError, match=r"unexpected end of condition at column 8 \(expected a value\)"):
        compile_condition("stuck >")
