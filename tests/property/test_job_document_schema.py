"""The published JSON Schema of the job document and the validator agree.

Documents are drawn from the schema itself (a small generator below reads every keyword the
schema uses and refuses any other, so a new keyword cannot be ignored silently) and must be
accepted by ``JobSpec.from_document``; the bad-input corpus, refused by the validator, must
be refused by the schema wherever JSON Schema can say why. Three values are drawn from
their own strategies because their rules are beyond JSON Schema (a cron that parses, a zone
that exists, a URL whose host a worker may call): they are named in ``BEYOND_SCHEMA``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from crondepot.base.errors import InvalidJob
from crondepot.job import fields as F
from crondepot.job.json_schema import document_schema, patch_schema, stored_schema
from crondepot.job.spec import JobSpec
from crondepot.job.store import job_document, merged_document
from tests.api.test_bad_input import CASES

jsonschema_rs = pytest.importorskip("jsonschema_rs")

# 100 documents a run: drawing one from the whole schema is slow, and the suite's time is
# shared. Each run draws other documents (not derandomized), so the runs add up.
PROPERTY = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
JsonSchema = dict[str, Any]

# Text PostgreSQL can store (no NUL, no lone surrogate): the document-wide rule, described
# in the schema but not spelled by it.
TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")

_CRONS = st.sampled_from(["0 9 * * *", "*/5 * * * *", "H H * * *", "30 2 1-7 * mon",
                          "@daily", "0 0 1 jan,jul *", "15 */6 * * 1-5", "0 9 L * *",
                          "0 9 * * 1#1", "0 9 LW * *", "0 9 L-3 * *", "0 9 15W * *",
                          "0 17 * * 5L"])
BEYOND_SCHEMA: dict[str, st.SearchStrategy[Any]] = {
    # one expression, or a list of them (several schedules)
    "cron": _CRONS | st.lists(_CRONS, min_size=1, max_size=F.MAX_CRONS),
    # an interval's bound (3650d) is beyond its pattern
    "every": st.sampled_from(["1s", "90s", "15m", "4h", "1d", "3650d", "59s", "7200s"]),
    "anchor": st.none() | st.sampled_from(["2020-01-01T00:00:00Z",
                                           "2031-06-01T09:30:00.25+05:30"]),
    # RFC 3339 instants (format: date-time); drawn so that start_at < at < end_at always
    # holds (the validator's cross-field rules, beyond JSON Schema).
    "at": st.builds(lambda day, offset: f"2031-01-{day:02d}T09:00:00{offset}",
                    st.integers(1, 28), st.sampled_from(["Z", "+05:30", "-08:00"])),
    "start_at": st.none() | st.sampled_from(["2030-01-01T00:00:00Z",
                                             "2030-06-01T00:00:00.5+01:00"]),
    "end_at": st.none() | st.sampled_from(["2032-01-01T00:00:00Z", "2040-12-31t23:59:59z"]),
    "tz": st.sampled_from(["UTC", "Asia/Kolkata", "Europe/Berlin", "America/New_York"]),
    "target.url": st.builds(
        lambda scheme, host, port, path: f"{scheme}://{host}.example{port}/{path}",
        st.sampled_from(["http", "https", "HTTPS"]),
        st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True),
        st.sampled_from(["", ":1", ":8443", ":65535"]),
        st.from_regex(r"[A-Za-z0-9._~%/-]{0,30}", fullmatch=True)),
    # retry.cap_s is at least retry.base_s (a rule across two fields): drawn apart
    "retry.base_s": st.floats(0.001, 60) | st.integers(1, 60),
    "retry.cap_s": st.floats(60, 86_400) | st.integers(60, 86_400),
    # a delivery window's to differs from its from (a rule across two fields): drawn apart
    "delivery_window.from": st.from_regex(r"(0[0-9]|1[01]):[0-5][0-9]", fullmatch=True),
    "delivery_window.to": st.from_regex(r"(1[2-9]|2[0-3]):[0-5][0-9]", fullmatch=True),
}

_ANNOTATIONS = {"title", "description", "default", "examples", "deprecated"}
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6)
                     | st.text(TEXT, max_size=10),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(TEXT, max_size=5), inner, max_size=3),
                     max_leaves=8)


def from_schema(schema: JsonSchema, path: str = "") -> st.SearchStrategy[Any]:
    if path in BEYOND_SCHEMA:
        return BEYOND_SCHEMA[path]
    keywords = set(schema) - _ANNOTATIONS
    if ("anyOf" in schema or "oneOf" in schema) and "type" not in schema:
        assert keywords in ({"anyOf"}, {"oneOf"}), keywords
        return st.one_of([from_schema(s, path) for s in schema.get("anyOf", schema.get(
            "oneOf"))])
    if "const" in schema:
        assert keywords == {"const"}, keywords
        return st.just(schema["const"])
    kind = schema["type"]
    if kind == "object":
        return _object(schema, keywords, path)
    if kind == "string":
        return _string(schema, keywords)
    if kind in ("integer", "number"):
        assert keywords <= {"type", "minimum", "maximum", "exclusiveMinimum"}, keywords
        low, high = schema.get("minimum", schema.get("exclusiveMinimum")), schema["maximum"]
        integers = st.integers(int(low), int(high)).filter(
            lambda n: n > schema.get("exclusiveMinimum", low - 1))
        if kind == "integer":
            return integers
        return integers | st.floats(low, high, allow_nan=False,
                                    exclude_min="exclusiveMinimum" in schema)
    assert keywords == {"type"}, keywords
    return {"boolean": st.booleans(), "null": st.none()}[kind]


def _object(schema: JsonSchema, keywords: set[str], path: str) -> st.SearchStrategy[Any]:
    if "propertyNames" in schema:            # labels: a map of names to strings
        assert keywords == {"type", "maxProperties", "propertyNames",
                            "additionalProperties"}, keywords
        return st.dictionaries(_string({"type": "string", **schema["propertyNames"]},
                                       {"type", *schema["propertyNames"]}),
                               from_schema(schema["additionalProperties"], f"{path}.*"),
                               max_size=schema["maxProperties"])
    assert keywords <= {"type", "properties", "required", "additionalProperties",
                        "oneOf", "not", "dependentRequired"}, keywords
    if "dependentRequired" in schema:       # anchor only with every
        needs = schema["dependentRequired"]
        rest = {k: v for k, v in schema.items() if k != "dependentRequired"}
        return _object(rest, keywords - {"dependentRequired"}, path).filter(
            lambda d: all(name not in d or all(n in d for n in needed)
                          for name, needed in needs.items()))
    if "properties" not in schema:          # payload: any JSON object
        return st.dictionaries(st.text(TEXT, max_size=8), _JSON, max_size=4)
    assert schema["additionalProperties"] is False
    if "not" in schema:                     # not a member under both of its names
        refused = schema["not"]
        assert set(refused) == {"required", "properties"}, refused
        alias, parent = refused["required"]
        ((inner, member),) = ((k, v["required"][0]) for k, v in refused["properties"].items())
        assert inner == parent
        rest = {k: v for k, v in schema.items() if k != "not"}
        return _object(rest, keywords - {"not"}, path).filter(
            lambda d: not (alias in d and parent in d and (
                not isinstance(d[parent], dict) or member in d[parent])))
    if "oneOf" in schema:                   # exactly one of these members (cron, at)
        alternatives = []
        for variant in schema["oneOf"]:
            assert set(variant) == {"required"}, variant
            alternatives.append(variant["required"])
        return st.sampled_from(alternatives).flatmap(
            lambda chosen: _members(schema, path, set(chosen), {
                name for other in alternatives for name in other if name not in chosen}))
    return _members(schema, path, set(), set())


def _members(schema: JsonSchema, path: str, chosen: set[str],
             left_out: set[str]) -> st.SearchStrategy[Any]:
    required = set(schema.get("required", ())) | chosen
    members = {name: from_schema(sub, f"{path}.{name}".lstrip("."))
               for name, sub in schema["properties"].items() if name not in left_out}
    return st.fixed_dictionaries(
        {n: s for n, s in members.items() if n in required},
        optional={n: s for n, s in members.items() if n not in required})


def _string(schema: JsonSchema, keywords: set[str]) -> st.SearchStrategy[str]:
    assert keywords <= {"type", "enum", "pattern", "minLength", "maxLength"}, keywords
    # (format: date-time strings come from BEYOND_SCHEMA)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    low, high = schema.get("minLength", 0), schema.get("maxLength", 300)
    pattern = schema.get("pattern")
    if pattern is None:
        text = st.text(TEXT, min_size=low, max_size=high)
    elif pattern.startswith("^") and pattern.endswith("$"):
        # anchored as JSON Schema means it: the whole value (Python's $ would also end
        # before a final newline)
        text = st.from_regex(re.compile(pattern[1:-1]), fullmatch=True, alphabet=TEXT)
    else:
        text = st.from_regex(re.compile(pattern), alphabet=TEXT)
    return text.filter(lambda s: low <= len(s) <= high)


DOCUMENT = document_schema()
PATCH = patch_schema()
STORED = stored_schema({})


def valid(schema: JsonSchema, value: Any) -> bool:
    return bool(jsonschema_rs.Draft202012Validator(schema).is_valid(value))


@PROPERTY
@given(doc=from_schema(DOCUMENT))
def test_documents_the_schema_allows_are_accepted_and_stored_as_it_describes(
        doc: dict[str, Any]) -> None:
    assert valid(DOCUMENT, doc)                 # the generator keeps to the schema
    spec = JobSpec.from_document(doc)
    assert valid(STORED, job_document(spec))    # what the API answers (Job) fits its schema


@PROPERTY
@given(doc=from_schema(DOCUMENT), patch=from_schema(PATCH))
def test_patches_the_schema_allows_are_accepted(doc: dict[str, Any],
                                                patch: dict[str, Any]) -> None:
    assert valid(PATCH, patch)
    stored = job_document(JobSpec.from_document(doc))
    merged = merged_document(stored, patch)     # as store.update_job merges them
    # Exactly one of cron and at after the merge: a rule between the patch and the stored
    # document, which the patch's schema alone cannot say.
    assume(sum(merged.get(name) is not None for name in F.ONE_OF) == 1)
    # and an anchor only with every (a patch may give one to a stored cron)
    assume(merged.get("anchor") is None or merged.get("every") is not None)
    JobSpec.from_document(merged)


# Corpus cases whose reason JSON Schema cannot spell: a cron or zone that does not parse or
# exist, the payload's stored size and nesting depth.
INEXPRESSIBLE = {
    "cron-minute-61", "cron-hour-24", "cron-dom-32", "cron-month-13", "cron-dow-8",
    "cron-feb-30", "cron-three-fields", "cron-unknown-alias", "cron-step-0",
    "cron-dom-32w", "cron-dom-l-40", "cron-dow-8l", "cron-dow-w", "cron-31w-in-30-day-months",
    "tz-unknown",
    "tz-offset", "payload-17k", "payload-33-levels", "payload-33-arrays",
    "retry-cap-below-base", "window-from-equals-to",
}


def _corpus() -> list[Any]:
    return [c for c in CASES if c.path == "/v1/jobs" and c.method == "POST"
            and c.status == 422 and isinstance(c.json, dict)]


@pytest.mark.parametrize("case", _corpus(), ids=lambda c: c.id)
def test_the_corpus_refused_by_the_validator_is_refused_by_the_schema(case: Any) -> None:
    with pytest.raises(InvalidJob):
        JobSpec.from_document(case.json)
    assert valid(DOCUMENT, case.json) == (case.id in INEXPRESSIBLE), case.id


def _nul_corpus() -> list[Any]:
    # (not the payload's: any JSON object, its strings' rule stated in its description)
    return [c for c in CASES if c.path == "/v1/jobs" and c.method == "POST"
            and isinstance(c.content, str) and "\\u0000" in c.content
            and not c.id.startswith("payload-")]


@pytest.mark.parametrize("case", _nul_corpus(), ids=lambda c: c.id)
def test_a_nul_the_validator_refuses_is_refused_by_the_schema(case: Any) -> None:
    """A NUL in any string of the document: the validator refuses it and the schema says so
    (a lone surrogate is refused by the validator alone: no portable pattern spells it)."""
    doc = json.loads(case.content)
    with pytest.raises(InvalidJob):
        JobSpec.from_document(doc)
    assert not valid(DOCUMENT, doc), case.id


def test_the_nul_corpus_covers_every_free_text_field() -> None:
    ids = {c.id for c in _nul_corpus()}
    assert {"key-nul", "cron-nul", "tz-nul", "spread-key-nul", "url-nul", "handler-nul",
            "rate-limit-nul", "misfire-until-nul"} <= ids


@pytest.mark.parametrize(("changes", "field"), [
    ({"target": {"type": "python", "handler": "crondepot.log\n"}}, "target.handler"),
    ({"rate_limit": "abc\n"}, "rate_limit"),
    ({"misfire": {"policy": "skip_after_local_time", "until": "23:59\n"}}, "misfire.until"),
    ({"misfire": {"policy": "skip_after_local_time", "until": "1\u0663:00"}}, "misfire.until"),
    ({"key": " \u3000\u0085 "}, "key"),
    ({"cron": "\u2028"}, "cron"),
    ({"tz": "x" * 65}, "tz"),
    ({"target": {"type": "http", "url": "http://ex ample.com/"}}, "target.url"),
    ({"target": {"type": "http", "url": "http://a.b/\r\nX-Injected: 1"}}, "target.url"),
    ({"target": {"type": "http", "url": "https://@a.b/"}}, "target.url"),
    ({"target": {"type": "http", "url": "https://a.b/\u00ad"}}, "target.url"),
    ({"target": {"type": "http", "url": "https://a.b/", "dedupes": 1}}, "target.dedupes"),
    ({"spread": {"key": ""}}, "spread.key"),
    ({"misfire": {"policy": "skip_after", "seconds": 31 * 86400 + 1}}, "misfire.seconds"),
    ({"retry": {"base_s": 0}}, "retry.base_s"),
    ({"retry": {"cap_s": 86_401}}, "retry.cap_s"),
    ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
    ({"retry": {"tries": 3}}, "retry.tries"),
    ({"max_attempts": 3, "retry": {"max_attempts": 3}}, "max_attempts"),
    ({"max_attempts": 3, "retry": None}, "max_attempts"),
])
def test_what_the_schema_says_the_validator_enforces(changes: dict[str, Any],
                                                     field: str) -> None:
    doc = {"cron": "0 9 * * *", "tz": "UTC", "target": {"type": "python",
                                                       "handler": "sms.send"}, **changes}
    with pytest.raises(InvalidJob) as refused:
        JobSpec.from_document(doc)
    assert refused.value.field == field
    assert not valid(DOCUMENT, doc)


def test_the_non_blank_class_is_exactly_what_strip_removes() -> None:
    import sys
    spaces = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert spaces == {chr(c) for c in range(0x3001) if chr(c).isspace()}
    for char in map(chr, range(0x3100)):
        assert bool(F.NON_BLANK.fullmatch(char)) == bool(char.strip())


def test_the_openapi_document_publishes_the_generated_schemas() -> None:
    from crondepot.api.app import create_app

    schemas = create_app("postgresql://127.0.0.1:1/unused").openapi()["components"]["schemas"]
    assert schemas["JobDocument"]["properties"] == DOCUMENT["properties"]
    assert schemas["JobPatch"]["properties"] == PATCH["properties"]
    # one number, one name: the published schemas refuse max_attempts with retry.max_attempts
    assert schemas["JobDocument"]["not"] == DOCUMENT["not"] == schemas["JobPatch"]["not"]
    assert not valid(DOCUMENT, {"cron": "0 9 * * *", "tz": "UTC", "max_attempts": 3,
                                "retry": {"max_attempts": 3},
                                "target": {"type": "python", "handler": "sms.send"}})
    job = schemas["Job"]
    shown = {k: v for k, v in DOCUMENT["properties"].items() if not v.get("deprecated")}
    assert {k: v for k, v in job["properties"].items() if k in DOCUMENT["properties"]} == shown
    assert "max_attempts" not in job["properties"]     # the deprecated spelling, never written
    assert {"id", "version", "next_run_at"} <= set(job["required"])
