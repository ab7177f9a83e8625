"""``@crondepot.periodic``: a declaration is a checked job document of its module."""

from __future__ import annotations

import subprocess
import sys

import pytest

import crondepot
from crondepot.base.errors import InvalidJob
from crondepot.worker.periodic import declared, module_scope


def test_declarations_are_documents_of_their_module() -> None:
    @crondepot.periodic("0 9 * * *", tz="Asia/Kolkata", key="unit.periodic.a",
                        payload={"template": "digest"})
    @crondepot.periodic("0 21 * * *", key="unit.periodic.b")
    @crondepot.handler("unit.periodic.digest")
    def digest(run: crondepot.RunContext) -> None:
        pass

    @crondepot.periodic("*/30 * * * *", handler="unit.periodic.poll")
    def poll(run: crondepot.RunContext) -> None:
        pass

    mine = {doc["key"]: doc for _, _, doc in declared(__name__)}
    assert set(mine) >= {"unit.periodic.a", "unit.periodic.b", "unit.periodic.poll"}
    assert mine["unit.periodic.a"] == {
        "key": "unit.periodic.a", "cron": "0 9 * * *", "tz": "Asia/Kolkata",
        "target": {"type": "python", "handler": "unit.periodic.digest"},
        "payload": {"template": "digest"}}
    assert mine["unit.periodic.b"]["tz"] == "UTC"
    from crondepot.worker.handlers import lookup

    assert lookup("unit.periodic.poll") is poll      # handler= registers it
    assert declared("tests.unit") and not declared("tests.unitx")
    assert module_scope("app.tasks").text == "crondepot.module=app.tasks"


def test_a_bad_declaration_fails_at_import() -> None:
    with pytest.raises(InvalidJob, match="tz"):
        crondepot.periodic("0 9 * * *", tz="Mars/Base", handler="unit.periodic.bad")(
            lambda run: None)
    with pytest.raises(ValueError, match=r"above @crondepot\.handler"):
        crondepot.periodic("0 9 * * *")(lambda run: None)
    with pytest.raises(ValueError, match="set by the decorator"):
        crondepot.periodic("0 9 * * *", handler="unit.periodic.t",
                           target={"type": "python", "handler": "x"})(lambda run: None)


def test_one_key_two_declarations_is_refused() -> None:
    @crondepot.periodic("0 9 * * *", key="unit.periodic.same")
    @crondepot.handler("unit.periodic.one")
    def one(run: crondepot.RunContext) -> None:
        pass

    def two(run: crondepot.RunContext) -> None:
        pass

    with pytest.raises(ValueError, match=r"declared by .*one too"):
        crondepot.periodic("0 9 * * *", key="unit.periodic.same",
                           handler="unit.periodic.two")(two)


def test_sync_schedules_needs_a_tenant_and_a_module() -> None:
    done = subprocess.run([sys.executable, "-m", "crondepot", "worker", "--sync-schedules"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", **_pythonpath()})
    assert done.returncode == 2
    assert "--sync-schedules needs --tenant" in done.stderr


def _pythonpath() -> dict[str, str]:
    import os

    return {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
