"""The executor calls every target through one interface, chosen by the job's target.type;
each kind is a module of its name, for the document and for the call."""

from __future__ import annotations

import importlib
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from crondepot.base.errors import PermanentError
from crondepot.base.vocab import TARGET_KINDS
from crondepot.job.targets import KINDS, TARGETS
from crondepot.worker.targets import (
    HttpTarget,
    PythonTarget,
    Targets,
    WebhookTarget,
    _MadeOnFirstCall,
)
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


def test_the_default_kinds_are_the_vocabularys_each_made_by_its_module_on_first_call(
        ) -> None:
    made: list[int] = []
    registry = defaults(lambda: made.append(1) or WebhookTarget.__new__(WebhookTarget),
                        signing_keys=None)  # type: ignore[arg-type]
    assert tuple(registry._by_kind) == TARGET_KINDS
    assert all(target.kind == kind for kind, target in registry._by_kind.items())
    assert made == []       # the HTTP client is made for the first HTTP run, not before
    python = registry._by_kind["python"]
    assert isinstance(python, _MadeOnFirstCall)
    assert isinstance(python._make(), PythonTarget)
    http = registry._by_kind["http"]
    assert isinstance(http, _MadeOnFirstCall)
    assert isinstance(http._make(), HttpTarget)
    assert made == [1]


@pytest.mark.parametrize("kind", TARGET_KINDS)
def test_a_kind_is_a_module_of_its_name_on_each_side(kind: str) -> None:
    """What a document may say (job/targets/<kind>.py) and what a worker calls
    (worker/targets/<kind>.py): a kind named in TARGET_KINDS without either fails here."""
    document = importlib.import_module(f"crondepot.job.targets.{kind}")
    call = importlib.import_module(f"crondepot.worker.targets.{kind}")
    assert document.VARIANT.tag == kind
    assert callable(document.check) and callable(document.summary)
    assert callable(document.description) and callable(call.make)
    assert KINDS[kind] is document
    assert tuple(variant.tag for variant in TARGETS.variants) == TARGET_KINDS


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


class Closing(Echo):
    def __init__(self, fails: bool = False) -> None:
        super().__init__()
        self.closed = 0
        self.fails = fails

    def close(self) -> None:
        self.closed += 1
        if self.fails:
            raise OSError("the broker is gone already")


def test_closing_the_registry_closes_each_target_that_holds_connections() -> None:
    # At worker stop: a broker client left open keeps reconnecting while the process ends.
    broken, fine = Closing(fails=True), Closing()
    Targets({"a": broken, "b": Echo(), "c": fine}).close()
    assert (broken.closed, fine.closed) == (1, 1)   # a failing close stops no other


def test_a_target_made_on_first_call_is_closed_once_and_one_never_made_is_not_made(
        ) -> None:
    made: list[Closing] = []

    def make() -> Closing:
        made.append(Closing())
        return made[-1]

    never = _MadeOnFirstCall("echo", make)
    never.close()
    assert made == []
    used = _MadeOnFirstCall("echo", make)
    used.call(SimpleNamespace(run_id="7:1"), "bank42")  # type: ignore[arg-type]
    used.close()
    used.close()
    assert [t.closed for t in made] == [1]


def test_broker_clients_idle_at_stop_are_all_closed() -> None:
    from crondepot.worker.targets.broker import Clients

    closed: list[str] = []
    clients: Clients[str] = Clients(closed.append)
    clients.give("amqp://a", "a1")
    clients.give("amqp://a", "a2")
    clients.give("amqp://b", "b1")
    clients.close_all()
    assert sorted(closed) == ["a1", "a2", "b1"]
    assert clients.take("amqp://a", lambda: "new") == "new"
