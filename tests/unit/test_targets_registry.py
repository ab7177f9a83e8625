"""The executor calls every target through one interface, chosen by the job's target.type."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from crondepot.base.errors import PermanentError
from crondepot.worker.targets import PythonTarget, Targets, WebhookTarget, _MadeOnFirstCall
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

    made: list[int] = []
    registry = defaults(lambda: made.append(1) or WebhookTarget.__new__(WebhookTarget),
                        signing_keys=None)  # type: ignore[arg-type]
    kinds = set(registry._by_kind)
    assert kinds == {"http", "python"}
    assert registry._by_kind["http"].kind == "http"
    assert isinstance(registry._by_kind["python"], PythonTarget)
    assert {variant.tag for variant in TARGETS.variants} == kinds
    assert made == []       # the HTTP client is made for the first HTTP run, not before


def test_a_target_made_on_first_call_is_made_once_whichever_slots_call_first() -> None:
    made: list[Echo] = []
    gate = threading.Event()

    def make() -> Echo:
        gate.wait(5)            # every slot is waiting before the first one finishes
        made.append(Echo())
        return made[-1]

    target = _MadeOnFirstCall("echo", make)
    runs = [SimpleNamespace(run_id=f"7:{i}", target={"type": "echo"}) for i in range(20)]
    threads = [threading.Thread(target=target.call, args=(run, "bank42")) for run in runs]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join(5)
    assert len(made) == 1
    assert sorted(made[0].calls) == sorted((run.run_id, "bank42") for run in runs)
