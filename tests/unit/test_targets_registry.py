"""The executor calls every target through one interface, chosen by the job's target.type."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from crondepot.errors import PermanentError
from crondepot.worker.targets import HttpTarget, PythonTarget, Targets, WebhookTarget
from crondepot.worker.targets import default_targets as defaults


class Echo:
    kind = "echo"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def call(self, run: Any, tenant: str) -> dict[str, Any] | None:
        self.calls.append((run.run_id, tenant))
        return {"echoed": run.run_id}


def test_a_new_kind_is_one_registration() -> None:
    echo = Echo()
    targets = Targets({"echo": echo})
    run = SimpleNamespace(run_id="7:1791171000", target={"type": "echo"})
    assert targets.call(run, "bank42") == {"echoed": "7:1791171000"}  # type: ignore[arg-type]
    assert echo.calls == [("7:1791171000", "bank42")]


@pytest.mark.parametrize("target", [{"type": "ftp"}, {}, {"type": 1}])
def test_an_unknown_kind_is_a_permanent_failure_naming_it(target: dict[str, Any]) -> None:
    run = SimpleNamespace(run_id="7:1", target=target)
    with pytest.raises(PermanentError, match=r"no target of type .*known: echo"):
        Targets({"echo": Echo()}).call(run, "bank42")  # type: ignore[arg-type]


def test_the_default_kinds_are_the_job_documents_kinds() -> None:
    from crondepot.job.fields import TARGETS

    webhooks = WebhookTarget.__new__(WebhookTarget)   # never called here
    registry = defaults(webhooks, signing_keys=None)  # type: ignore[arg-type]
    kinds = set(registry._by_kind)
    assert kinds == {"http", "python"}
    assert isinstance(registry._by_kind["http"], HttpTarget)
    assert isinstance(registry._by_kind["python"], PythonTarget)
    assert {variant.tag for variant in TARGETS.variants} == kinds
