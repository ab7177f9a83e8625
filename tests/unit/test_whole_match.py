"""Names and times are matched whole: ``re.match(...$)`` let a trailing newline through
(``$`` also matches before a final ``\\n``), so "crondepot.log\\n" was stored as a handler."""

from __future__ import annotations

from typing import Any

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.db.roles import role_name
from crondepot.job.spec import JobSpec
from crondepot.limits.buckets import InvalidLimit, _check_bucket
from crondepot.tenancy.grants import InvalidGrant, _names
from crondepot.tenancy.tenants import InvalidTenant, create_tenant

GOOD: dict[str, Any] = {"cron": "0 9 * * *", "tz": "UTC",
                        "target": {"type": "python", "handler": "sms.send"}}


@pytest.mark.parametrize(("changes", "field"), [
    ({"target": {"type": "python", "handler": "crondepot.log\n"}}, "target.handler"),
    ({"rate_limit": "abc\n"}, "rate_limit"),
    ({"misfire": {"policy": "skip_after_local_time", "until": "23:59\n"}}, "misfire.until"),
])
def test_a_trailing_newline_is_refused_in_the_job_document(changes: dict[str, Any],
                                                            field: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        JobSpec.from_document({**GOOD, **changes})
    assert refused.value.field == field


def test_the_same_names_without_the_newline_are_accepted() -> None:
    spec = JobSpec.from_document({**GOOD, "rate_limit": "abc", "target": {
        "type": "python", "handler": "crondepot.log"}, "misfire": {
        "policy": "skip_after_local_time", "until": "23:59"}})
    assert (spec.rate_limit, spec.target["handler"]) == ("abc", "crondepot.log")


def test_grants_limits_and_roles_refuse_a_trailing_newline() -> None:
    with pytest.raises(InvalidGrant):
        _names(["sms.send\n"], [], [])
    with pytest.raises(InvalidGrant):
        _names([], ["sms-gateway\n"], [])
    with pytest.raises(InvalidLimit):
        _check_bucket("sms-gateway\n", 1)
    with pytest.raises(ValueError, match="role name"):
        role_name("crondepot_runtime\n")
    with pytest.raises(InvalidTenant):     # refused before the connection is used
        create_tenant(None, "bank42\n")  # type: ignore[arg-type]
