"""schemathesis over every operation, every check, stateful links included, as an admin
token and as a read-only one, against a real ``crondepot api`` on a seeded database.

The run is bounded (a fixed seed, a fixed number of examples per operation and of stateful
steps: about a minute for each token) and the same command as bench/schemathesis_run.py, which
runs it for ten minutes. Settings and hooks: tests/support/schemathesis.toml and
schemathesis_hooks.py; the seeded data: tests/support/fuzzing.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import fuzzing
from tests.support.processes import free_port

SEED = 16
BOUNDS = ("--max-examples", "25", "--workers", "1",
          "--max-failures", "200")

ALL_CHECKS = {"not_a_server_error", "status_code_conformance", "content_type_conformance",
              "response_headers_conformance", "response_schema_conformance",
              "negative_data_rejection", "positive_data_acceptance", "missing_required_header",
              "unsupported_method", "allow_header_conformance", "use_after_free",
              "ensure_resource_availability", "ignored_auth", "refusal_has_a_named_reason"}

# Failures in parts of issue 16 that other engineers own, open on this branch: each one found
# is shown (the test is an xfail that lists it), never hidden; any failure not matched here
# fails the test. Matched on (operation, check, a part of the failure's message).
KNOWN: dict[tuple[str, str, str], str] = {
    ("GET /v1/audit", "not_a_server_error", ""): "item 1: before_id beyond bigint is a 500",
    ("GET /v1/audit", "status_code_conformance", "Received: 500"): "item 1 (the same 500)",
    ("GET /v1/dead-letter", "not_a_server_error", ""): "item 1: job_id beyond bigint is a 500",
    ("GET /v1/dead-letter", "status_code_conformance", "Received: 500"): "item 1 (the same)",
    ("POST /v1/dead-letter/replay", "not_a_server_error", ""):
        "item 1: a job_id beyond bigint in the body is a 500",
    ("POST /v1/dead-letter/replay", "status_code_conformance", "Received: 500"): "item 1",
    ("GET /v1/dead-letter", "negative_data_rejection", "until"):
        "item 1: until=0.5 is read as a Unix time, not refused as a date-time",
    ("GET /v1/verify", "negative_data_rejection", "until"): "item 1: until=0.5 (the same)",
    ("GET /v1/verify", "negative_data_rejection", "since"): "item 1: since=0.5 (the same)",
    ("GET /v1/dead-letter", "negative_data_rejection", "since"): "item 1: since=0.5",
    ("GET /v1/jobs", "not_a_server_error", ""): "item 1: a cursor beyond bigint is a 500",
    ("GET /v1/jobs", "status_code_conformance", "Received: 500"): "item 1 (the same)",
    ("GET /v1/jobs/{job_id}/runs", "not_a_server_error", ""):
        "item 1: a NUL or lone surrogate inside a decoded cursor is a 500",
    ("GET /v1/jobs/{job_id}/runs", "status_code_conformance", "Received: 500"): "item 1",
    ("POST /v1/jobs", "negative_data_rejection", ""):
        "item 2: the validator accepts what the JobDocument schema forbids",
    ("POST /v1/import", "refusal_has_a_named_reason", "without a reported failure"):
        "item 2: the validator accepts what the JobDocument schema forbids",
    ("POST /v1/jobs", "refusal_has_a_named_reason", "'validation'"):
        "item 2: the JobDocument schema does not carry the validator's rules",
    ("PATCH /v1/jobs/{job_id}", "refusal_has_a_named_reason", "'validation'"):
        "item 2: the JobPatch schema does not carry the validator's rules",
}


def _known(failure: dict[str, str]) -> str | None:
    for (operation, check, part), reason in KNOWN.items():
        if failure["operation"] == operation and failure["check"] == check \
                and part in failure["message"]:
            return reason
    return None


@pytest.mark.slow
@pytest.mark.parametrize("role", ["admin", "read"])
def test_schemathesis_finds_no_failure(db_url: str, role: str, tmp_path: Path) -> None:
    seeded = fuzzing.seed(db_url)
    token = seeded.admin if role == "admin" else seeded.read
    with fuzzing.api_process(db_url, free_port(), log=tmp_path / "api.log") as base:
        outcome = fuzzing.run(base, token, seed=SEED, keep=seeded.token_ids, extra=BOUNDS,
                              workdir=tmp_path)
    assert outcome.checks >= ALL_CHECKS, ALL_CHECKS - outcome.checks
    unknown = [f for f in outcome.failures if _known(f) is None]
    report = "\n".join(f"{f['operation']}: {f['check']}: {f['message'][:300]}"
                       for f in unknown)
    assert not unknown, f"{' '.join(outcome.command)}\n{report}\n{outcome.output[-6000:]}"
    assert outcome.exit_code in (0, 1), outcome.output[-6000:]
    assert "Operations:" in outcome.output, outcome.output[-6000:]
    # (a read token's 403s are expected; a 401 would mean the run lost its token)
    for trouble in ("\nErrors:\n", "401 Unauthorized (", "Unresolvable reference",
                    "Unsupported regex"):
        assert trouble not in outcome.output, outcome.output[-6000:]
    if outcome.failures:
        pytest.xfail("known, owned elsewhere in issue 16: " + "; ".join(sorted(
            {f"{f['operation']} {f['check']} ({_known(f)})" for f in outcome.failures})))
    assert outcome.exit_code == 0, outcome.output[-6000:]
