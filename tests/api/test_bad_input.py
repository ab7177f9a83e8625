"""The bad-input corpus: every case answers 4xx with a problem naming the field, and changes
nothing in jobs or runs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot

GOOD: dict[str, Any] = {"key": "fresh", "cron": "0 9 * * *", "tz": "UTC",
                        "target": {"type": "python", "handler": "sms.send"}}


def doc(**changes: Any) -> dict[str, Any]:
    """GOOD with top-level changes; a value of ... removes the field."""
    out = {**GOOD, **changes}
    return {k: v for k, v in out.items() if v is not ...}


@dataclass(frozen=True)
class Case:
    id: str
    status: int
    names: str                         # the field in errors[], or a word of the detail
    json: Any = None
    content: str | bytes | None = None
    method: str = "POST"
    path: str = "/v1/jobs"
    auth: str = "admin"                # admin | reader | foreign | none | raw Authorization
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)


def create(case_id: str, body: dict[str, Any], name: str, status: int = 422) -> Case:
    return Case(case_id, status, name, json=body)


JSON = {"Content-Type": "application/json"}


def escaped(case_id: str, text: str, name: str, *, method: str = "POST",
            path: str = "/v1/jobs") -> Case:
    """A body given as JSON text, for what only JSON's escapes can spell: a lone surrogate
    ("\\ud800") or a NUL ("\\u0000"), which PostgreSQL text and jsonb cannot store."""
    headers = {**JSON, "If-Match": "1"} if method == "PATCH" else JSON
    return Case(case_id, 422, name, content=text, method=method, path=path, headers=headers)


def good_with(field_text: str) -> str:
    """GOOD as JSON text with ``field_text`` (raw JSON, e.g. '"key": "a\\u0000"') replacing
    or adding a member."""
    name = field_text.split('"')[1]
    rest = json.dumps({k: v for k, v in GOOD.items() if k != name})
    return "{" + field_text + ", " + rest[1:]


def nested(levels: int, opener: str = "[", closer: str = "]", inner: str = "1") -> str:
    return opener * levels + inner + closer * levels


CASES = [
    # cron, one bad field at a time, and schedules that cannot fire
    create("cron-minute-61", doc(cron="61 * * * *"), "cron"),
    create("cron-hour-24", doc(cron="* 24 * * *"), "cron"),
    create("cron-dom-32", doc(cron="* * 32 * *"), "cron"),
    create("cron-month-13", doc(cron="* * * 13 *"), "cron"),
    create("cron-dow-8", doc(cron="* * * * 8"), "cron"),
    create("cron-feb-30", doc(cron="0 0 30 2 *"), "cron"),
    create("cron-dom-32w", doc(cron="0 9 32W * *"), "cron"),
    create("cron-dom-l-40", doc(cron="0 9 L-40 * *"), "cron"),
    create("cron-dow-8l", doc(cron="0 9 * * 8L"), "cron"),
    create("cron-dow-w", doc(cron="0 9 * * 5W"), "cron"),
    create("cron-31w-in-30-day-months", doc(cron="0 9 31W 4,6,9,11 *"), "cron"),
    create("cron-three-fields", doc(cron="* * *"), "cron"),
    create("cron-unknown-alias", doc(cron="@never"), "cron"),
    create("cron-step-0", doc(cron="*/0 * * * *"), "cron"),
    create("cron-number", doc(cron=5), "cron"),
    create("cron-missing", doc(cron=...), "cron"),
    # zones
    create("tz-unknown", doc(tz="Mars/Olympus_Mons"), "tz"),
    create("tz-offset", doc(tz="UTC+5"), "tz"),
    create("tz-missing", doc(tz=...), "tz"),
    create("tz-number", doc(tz=330), "tz"),
    # priority, misfire
    create("priority-high", doc(priority="high"), "priority"),
    create("priority-number", doc(priority=1), "priority"),
    create("misfire-until-25h", doc(misfire={"policy": "skip_after_local_time",
                                             "until": "25:00"}), "misfire.until"),
    create("misfire-until-9am", doc(misfire={"policy": "skip_after_local_time",
                                             "until": "9am"}), "misfire.until"),
    create("misfire-policy", doc(misfire={"policy": "sometimes"}), "misfire.policy"),
    create("misfire-seconds-missing", doc(misfire={"policy": "skip_after"}), "misfire.seconds"),
    create("misfire-seconds-negative", doc(misfire={"policy": "skip_after", "seconds": -5}),
           "misfire.seconds"),
    # targets
    create("url-ftp", doc(target={"type": "http", "url": "ftp://example.com/x"}), "target.url"),
    create("url-file", doc(target={"type": "http", "url": "file:///etc/passwd"}), "target.url"),
    create("url-javascript", doc(target={"type": "http", "url": "javascript:alert(1)"}),
           "target.url"),
    create("url-credentials", doc(target={"type": "http", "url": "https://u:p@example.com"}),
           "target.url"),
    create("url-no-host", doc(target={"type": "http", "url": "http://"}), "target.url"),
    create("target-type", doc(target={"type": "email", "to": "a@b.c"}), "target.type"),
    create("target-missing", doc(target=...), "target"),
    create("target-handler", doc(target={"type": "python", "handler": "1 bad"}),
           "target.handler"),
    create("timeout-zero", doc(target={"type": "http", "url": "https://a.b", "timeout_s": 0}),
           "target.timeout_s"),
    create("timeout-huge", doc(target={"type": "http", "url": "https://a.b", "timeout_s": 1e9}),
           "target.timeout_s"),
    create("target-unknown-field", doc(target={"type": "http", "url": "https://a.b",
                                               "method": "PUT"}), "target.method"),
    # numbers
    create("max-attempts-negative", doc(max_attempts=-1), "max_attempts"),
    create("max-attempts-huge", doc(max_attempts=10**30), "max_attempts"),
    create("max-attempts-string", doc(max_attempts="6"), "max_attempts"),
    create("max-attempts-bool", doc(max_attempts=True), "max_attempts"),
    # the retry curve: one number under one name, a cap no lower than the base
    create("retry-attempts-twice", doc(max_attempts=6, retry={"max_attempts": 6}),
           "max_attempts"),
    create("retry-null-with-max-attempts", doc(max_attempts=6, retry=None), "max_attempts"),
    create("retry-cap-below-base", doc(retry={"base_s": 60, "cap_s": 1}), "retry.cap_s"),
    create("retry-base-zero", doc(retry={"base_s": 0}), "retry.base_s"),
    create("retry-cap-huge", doc(retry={"cap_s": 1e9}), "retry.cap_s"),
    create("retry-attempts-zero", doc(retry={"max_attempts": 0}), "retry.max_attempts"),
    create("window-hour-25", doc(delivery_window={"from": "25:00", "to": "21:00"}),
           "delivery_window.from"),
    create("window-from-equals-to", doc(delivery_window={"from": "09:00", "to": "09:00"}),
           "delivery_window.to"),
    create("window-funday", doc(delivery_window={"from": "09:00", "to": "21:00",
                                                 "days": "funday"}), "delivery_window.days"),
    create("window-outside-later", doc(delivery_window={"from": "09:00", "to": "21:00",
                                                        "outside": "later"}),
           "delivery_window.outside"),
    create("window-always", doc(delivery_window="always"), "delivery_window"),
    create("retry-unknown-field", doc(retry={"factor": 2}), "retry.factor"),
    create("retry-not-object", doc(retry=30), "retry"),
    create("lease-too-short", doc(lease_seconds=2), "lease_seconds"),
    create("max-catchup-zero", doc(max_catchup=0), "max_catchup"),
    create("spread-too-long", doc(spread={"seconds": 86_401}), "spread.seconds"),
    create("spread-negative", doc(spread={"seconds": -1}), "spread.seconds"),
    # unknown fields, payload, key, other fields
    create("unknown-field", doc(colour="blue"), "colour"),
    create("unknown-spread-field", doc(spread={"seconds": 5, "jitter": 1}), "spread.jitter"),
    create("payload-17k", doc(payload={"text": "x" * 17_000}), "payload"),
    create("payload-array", doc(payload=[1, 2]), "payload"),
    create("key-empty", doc(key=""), "key"),
    create("key-too-long", doc(key="k" * 201), "key"),
    create("key-number", doc(key=5), "key"),
    create("rate-limit-name", doc(rate_limit="SMS Gateway"), "rate_limit"),
    create("active-string", doc(active="yes"), "active"),
    create("catchup-some", doc(catchup="some"), "catchup"),
    # the body itself
    Case("json-malformed", 422, "body", content="{", headers={"Content-Type":
                                                             "application/json"}),
    Case("json-trailing-comma", 422, "body", content='{"cron": "* * * * *",}',
         headers={"Content-Type": "application/json"}),
    Case("json-nan", 422, "body", content='{"max_attempts": NaN}',
         headers={"Content-Type": "application/json"}),
    Case("json-empty", 422, "body", content="", headers={"Content-Type": "application/json"}),
    Case("json-array", 422, "body", json=[GOOD]),
    Case("json-not-utf8", 422, "body", content=b'{"key": "\xff"}',
         headers={"Content-Type": "application/json"}),
    Case("text-plain", 415, "Content-Type", content=json.dumps(GOOD),
         headers={"Content-Type": "text/plain"}),
    Case("body-over-64k", 413, "body", json=doc(payload={"t": "x" * 70_000})),
    # tokens and roles
    Case("token-missing", 401, "Authorization", json=GOOD, auth="none"),
    Case("token-garbage", 401, "token", json=GOOD, auth="Bearer not-a-token"),
    Case("token-basic", 401, "Bearer", json=GOOD, auth="Basic dXNlcjpwdw=="),
    Case("token-read-only", 403, "admin", json=GOOD, auth="reader"),
    Case("token-foreign-patch", 404, "job", method="PATCH", path="/v1/jobs/{job}",
         json={"cron": "0 1 * * *"}, auth="foreign", headers={"If-Match": "1"}),
    Case("token-foreign-trigger", 404, "job", path="/v1/jobs/{job}/trigger", auth="foreign"),
    Case("token-foreign-cancel", 404, "job", method="DELETE", path="/v1/jobs/{job}",
         auth="foreign"),
    # patch
    Case("patch-key", 422, "key", method="PATCH", path="/v1/jobs/{job}", json={"key": "new"},
         headers={"If-Match": "1"}),
    Case("patch-active", 422, "active", method="PATCH", path="/v1/jobs/{job}",
         json={"active": False}, headers={"If-Match": "1"}),
    Case("patch-no-if-match", 428, "If-Match", method="PATCH", path="/v1/jobs/{job}",
         json={"cron": "0 1 * * *"}),
    Case("patch-if-match-garbage", 422, "If-Match", method="PATCH", path="/v1/jobs/{job}",
         json={"cron": "0 1 * * *"}, headers={"If-Match": "latest"}),
    Case("patch-stale", 412, "version", method="PATCH", path="/v1/jobs/{job}",
         json={"cron": "0 1 * * *"}, headers={"If-Match": "9"}),
    Case("patch-bad-zone", 422, "tz", method="PATCH", path="/v1/jobs/{job}",
         json={"tz": "Asia/Atlantis"}, headers={"If-Match": "1"}),
    Case("patch-array", 422, "body", method="PATCH", path="/v1/jobs/{job}", json=[1],
         headers={"If-Match": "1"}),
    Case("job-id-garbage", 422, "job_id", method="GET", path="/v1/jobs/abc"),
    # queries
    Case("list-limit-zero", 422, "limit", method="GET", params={"limit": 0}),
    Case("list-limit-word", 422, "limit", method="GET", params={"limit": "many"}),
    Case("list-priority", 422, "priority", method="GET", params={"priority": "high"}),
    Case("list-cursor", 422, "cursor", method="GET", params={"cursor": "abc"}),
    Case("list-paused", 422, "paused", method="GET", params={"paused": "perhaps"}),
    Case("runs-cursor", 422, "cursor", method="GET", path="/v1/jobs/{job}/runs",
         params={"cursor": "!!!"}),
    # dead-letter replay
    Case("replay-no-filter", 422, "run_ids", path="/v1/dead-letter/replay", json={}),
    Case("replay-job-id-word", 422, "job_id", path="/v1/dead-letter/replay",
         json={"job_id": "seven"}),
    Case("replay-unknown-field", 422, "colour", path="/v1/dead-letter/replay",
         json={"colour": "red"}),
    Case("replay-since-word", 422, "since", path="/v1/dead-letter/replay",
         json={"since": "yesterday"}),
    Case("replay-malformed", 422, "body", path="/v1/dead-letter/replay", content="{",
         headers={"Content-Type": "application/json"}),
    Case("dead-letter-since-word", 422, "since", method="GET", path="/v1/dead-letter",
         params={"since": "yesterday"}),
    # text PostgreSQL cannot store, in every string field and in payload keys and values
    escaped("payload-lone-surrogate", good_with('"payload": {"to": "\\ud800"}'), "payload.to"),
    escaped("payload-low-surrogate", good_with('"payload": {"to": ["x", "a\\udfff"]}'),
            "payload.to.1"),
    escaped("payload-nul", good_with('"payload": {"to": "a\\u0000b"}'), "payload.to"),
    escaped("payload-key-nul", good_with('"payload": {"a\\u0000": 1}'), "payload.a\\u0000"),
    escaped("payload-key-surrogate", good_with('"payload": {"\\ud800": 1}'),
            "payload.\\ud800"),
    escaped("key-surrogate", good_with('"key": "k\\udc00"'), "key"),
    escaped("key-nul", good_with('"key": "k\\u0000"'), "key"),
    escaped("cron-nul", good_with('"cron": "0 9 * * *\\u0000"'), "cron"),
    escaped("tz-surrogate", good_with('"tz": "\\ud800"'), "tz"),
    escaped("tz-nul", good_with('"tz": "UTC\\u0000"'), "tz"),
    escaped("url-nul", good_with('"target": {"type": "http", "url": "https://a.b/\\u0000"}'),
            "target.url"),
    escaped("url-surrogate", good_with('"target": {"type": "http", '
                                       '"url": "https://a.b/\\ud800"}'), "target.url"),
    escaped("handler-nul", good_with('"target": {"type": "python", "handler": "a\\u0000"}'),
            "target.handler"),
    escaped("spread-key-nul", good_with('"spread": {"seconds": 5, "key": "\\u0000"}'),
            "spread.key"),
    escaped("spread-key-surrogate", good_with('"spread": {"seconds": 5, "key": "\\ud800"}'),
            "spread.key"),
    escaped("rate-limit-nul", good_with('"rate_limit": "sms\\u0000"'), "rate_limit"),
    escaped("misfire-until-nul", good_with('"misfire": {"policy": "skip_after_local_time", '
                                           '"until": "20:00\\u0000"}'), "misfire.until"),
    escaped("unknown-field-nul", good_with('"col\\u0000our": 1'), "col\\u0000our"),
    escaped("patch-payload-surrogate", '{"payload": {"to": "\\ud800"}}', "payload.to",
            method="PATCH", path="/v1/jobs/{job}"),
    escaped("patch-payload-nul", '{"payload": {"to": "\\u0000"}}', "payload.to",
            method="PATCH", path="/v1/jobs/{job}"),
    escaped("patch-cron-nul", '{"cron": "0 1 * * *\\u0000"}', "cron", method="PATCH",
            path="/v1/jobs/{job}"),
    # nesting: at most MAX_PAYLOAD_DEPTH (32) levels, the payload object the first; deeper
    # than the parsers read (about 1,000) is named by its top-level member
    create("payload-33-levels", doc(payload=json.loads(nested(32, '{"a":', "}", "{}"))),
           "payload" + ".a" * 32),
    create("payload-33-arrays", doc(payload={"x": json.loads(nested(32))}),
           "payload.x" + ".0" * 31),
    create("deep-other-field", doc(priority=json.loads(nested(40))), "priority" + ".0" * 32),
    escaped("payload-20000-arrays", good_with('"payload": {"x": ' + nested(20_000) + "}"),
            "payload"),
    escaped("payload-10000-objects", good_with('"payload": ' + nested(10_000, '{"a":', "}")),
            "payload"),
    Case("body-20000-arrays", 422, "body", content=nested(20_000), headers=JSON),
    escaped("patch-payload-20000-objects", '{"payload": ' + nested(10_000, '{"a":', "}") + "}",
            "payload", method="PATCH", path="/v1/jobs/{job}"),
    escaped("patch-payload-40-levels", '{"payload": ' + nested(40, '{"a":', "}") + "}",
            "payload" + ".a" * 32, method="PATCH", path="/v1/jobs/{job}"),
    # NUL in query and path parameters, and in the replay filter (text columns)
    Case("list-key-prefix-nul", 422, "key_prefix", method="GET",
         params={"key_prefix": "a\x00"}),
    Case("run-id-nul", 422, "run_id", method="GET", path="/v1/runs/1:2%00"),
    Case("dead-letter-error-nul", 422, "error", method="GET", path="/v1/dead-letter",
         params={"error": "Timeout\x00"}),
    Case("replay-error-surrogate", 422, "error", path="/v1/dead-letter/replay",
         content='{"error": "\\ud800"}', headers=JSON),
    Case("replay-run-ids-nul", 422, "run_ids.0", path="/v1/dead-letter/replay",
         content='{"run_ids": ["1:2\\u0000"]}', headers=JSON),
    # import
    Case("import-json-type", 415, "Content-Type", path="/v1/import",
         content=json.dumps(GOOD), headers={"Content-Type": "application/json"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_answers_a_problem_naming_the_field_and_changes_nothing(
        case: Case, client: TestClient, job: dict[str, Any], h: dict[str, str],
        reader: dict[str, str], other: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    headers = {"admin": h, "reader": reader, "foreign": other, "none": {}}.get(
        case.auth, {"Authorization": case.auth})
    before = snapshot(conn)
    response = client.request(case.method, case.path.format(job=job["id"]), json=case.json,
                              content=case.content, params=case.params,
                              headers={**headers, **case.headers})
    assert response.status_code == case.status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == case.status
    assert problem["type"].startswith("https://crondepot.dev/problems/")
    assert problem["title"] and problem["detail"]
    if case.status == 422:
        assert case.names in [e["field"] for e in problem["errors"]], problem
    else:
        assert case.names.lower() in problem["detail"].lower(), problem
    assert snapshot(conn) == before


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40


def test_validation_messages_say_what_was_expected_and_got(client: TestClient,
                                                           h: dict[str, str]) -> None:
    problem = client.post("/v1/jobs", json=doc(max_attempts=-1), headers=h).json()
    assert problem["type"] == "https://crondepot.dev/problems/validation"
    assert problem["errors"] == [{"field": "max_attempts", "message": problem["detail"]}]
    assert "-1" in problem["detail"] and "1 to 100" in problem["detail"]


def test_revoked_token_is_refused(client: TestClient, h: dict[str, str],
                                  conn: psycopg.Connection[Any]) -> None:
    conn.execute("UPDATE api_tokens SET revoked_at = now()")
    assert client.get("/v1/jobs", headers=h).status_code == 401


def test_emi_reminder_is_valid() -> None:
    assert EMI["cron"] == "0 9 5 * *"


@pytest.mark.parametrize("field", ["start_at", "end_at", "at"])
@pytest.mark.parametrize("value", ["9999-12-31T23:59:59Z", "9000-01-01T00:00:00Z"])
def test_an_instant_near_the_end_of_time_is_a_422_not_a_500(
        client: TestClient, h: dict[str, str], field: str, value: str) -> None:
    body: dict[str, Any] = {"tz": "UTC", "target": {"type": "python", "handler": "crondepot.log"},
                            field: value}
    body.update({} if field == "at" else {"cron": "0 0 1 1 *"})
    response = client.post("/v1/jobs", json=body, headers=h)
    assert response.status_code == 422, response.text
    assert field in response.text and "out of range" in response.text


def test_every_problem_of_a_document_is_reported_at_once(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    """A client fixes a document in one round: each broken field is in ``errors``, once,
    the first one also in ``detail``; a near-miss field name says which one was meant."""
    body = doc(cron="61 * * * *", tz="Mars/Olympus", priority="hot", labelz={"a": "b"},
               misfire={"policy": "late"}, max_runs=0, spread={"seconds": -5})
    before = snapshot(conn)
    problem = client.post("/v1/jobs", json=body, headers=h).json()
    fields = [e["field"] for e in problem["errors"]]
    assert sorted(fields) == sorted(["labelz", "priority", "spread.seconds",
                                     "misfire.policy", "max_runs", "tz", "cron"]), problem
    assert len(set(fields)) == len(fields)                  # each said once
    assert problem["errors"][0]["message"] == problem["detail"]
    assert "did you mean 'labels'?" in problem["detail"]
    messages = {e["field"]: e["message"] for e in problem["errors"]}
    assert "61 is out of range" in messages["cron"] and "Mars/Olympus" in messages["tz"]
    assert snapshot(conn) == before
    # one problem: the list holds it alone, as before
    single = client.post("/v1/jobs", json=doc(priority="hot"), headers=h).json()
    assert [e["field"] for e in single["errors"]] == ["priority"]
