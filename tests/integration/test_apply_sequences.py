"""A hypothesis test of random sequences of applies (adds, edits, removes, scopes, prunes)
against real PostgreSQL: after each apply the stored jobs are what the model says (the last
file of each scope, jobs outside a scope untouched, refusals changing nothing), the plan's
counts say the same, a second apply of the same file is a no-op, and verify is clean; and
two applies run at once end as one of them after the other, never a mix."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crondepot.db import connect
from crondepot.job.apply import ApplyRefused, Scope, apply_set, read_documents
from crondepot.scheduler.ledger import verify
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant

KEYS = [f"k{i}" for i in range(6)]
SCOPES = ["a", "b"]
VARIANTS = [("0 9 * * *", "UTC"), ("30 2 * * *", "America/New_York"),
            ("0 9 L * *", "Asia/Kolkata"), ("*/20 * * * *", "Europe/London")]
_names = itertools.count()

files = st.dictionaries(st.sampled_from(KEYS), st.integers(0, len(VARIANTS) - 1), max_size=5)
applies = st.lists(st.tuples(st.sampled_from(SCOPES), files, st.booleans()), min_size=1,
                   max_size=6)


def document(key: str, variant: int) -> dict[str, Any]:
    cron, tz = VARIANTS[variant]
    return {"key": key, "cron": cron, "tz": tz, "payload": {"v": variant},
            "target": {"type": "python", "handler": "sms.send"}}


def stored(conn: psycopg.Connection[Any], tenant: int) -> dict[str, tuple[str, int, bool]]:
    rows = conn.execute("SELECT key, labels->>'deploy', (payload->>'v')::int, active "
                        "FROM jobs WHERE tenant_id = %s", (tenant,)).fetchall()
    return {key: (scope, variant, active) for key, scope, variant, active in rows}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=applies)
def test_random_applies_leave_the_last_file_of_each_scope(
        conn: psycopg.Connection[Any], steps: list[tuple[str, dict[str, int], bool]]) -> None:
    tenant = create_tenant(conn, f"seq{next(_names)}").id
    grant(conn, tenant, handlers=["sms.send"])
    start = datetime(2026, 11, 1, 12, tzinfo=UTC)
    model: dict[str, tuple[str, int, bool]] = {}       # key -> (scope, variant, active)
    for step, (scope_name, file, prune) in enumerate(steps):
        now = start + timedelta(hours=5 * step)
        scope = Scope("deploy", scope_name)
        declared = read_documents(((f"[{i}]", "", document(k, v))
                                   for i, (k, v) in enumerate(sorted(file.items()))), scope)
        refused = any(key in model and (model[key][0] != scope_name or not model[key][2])
                      for key in file)
        if refused:
            before = stored(conn, tenant)
            try:
                apply_set(conn, tenant, declared, scope=scope, prune=prune, now=now)
            except ApplyRefused:
                pass
            else:
                raise AssertionError("an apply naming another scope's or a cancelled key "
                                     "went through")
            assert stored(conn, tenant) == before
            continue
        expected = dict(model)
        for key, variant in file.items():
            expected[key] = (scope_name, variant, True)
        if prune:
            for key, (owner, variant, active) in model.items():
                if owner == scope_name and active and key not in file:
                    expected[key] = (owner, variant, False)
        plan = apply_set(conn, tenant, declared, scope=scope, prune=prune, now=now)
        counts = plan.counts
        assert counts["created"] == sum(1 for k in file if k not in model)
        assert counts["updated"] == sum(1 for k, v in file.items()
                                        if k in model and model[k][1] != v)
        assert counts["unchanged"] == sum(1 for k, v in file.items()
                                          if k in model and model[k][1] == v)
        assert counts["cancelled"] == sum(1 for k in expected
                                          if k in model and model[k][2] and not expected[k][2])
        model = expected
        assert stored(conn, tenant) == model
        again = apply_set(conn, tenant, declared, scope=scope, prune=prune, now=now)
        assert again.counts["changes"] == 0
    end = start + timedelta(hours=5 * len(steps))
    assert verify(conn, tenant_id=tenant, since=start - timedelta(hours=1), now=end).clean


Model = dict[str, tuple[str, int, bool]]


def modelled(model: Model, scope: str, file: dict[str, int], prune: bool) -> Model:
    """The jobs after applying ``file`` (the model above); the same model if refused."""
    if any(key in model and (model[key][0] != scope or not model[key][2]) for key in file):
        return model
    after = dict(model)
    after.update({key: (scope, variant, True) for key, variant in file.items()})
    if prune:
        after.update({key: (owner, variant, False) for key, (owner, variant, active)
                      in model.items() if owner == scope and active and key not in file})
    return after


def declared_of(file: dict[str, int], scope: Scope) -> list[Any]:
    return read_documents(((f"[{i}]", "", document(k, v))
                           for i, (k, v) in enumerate(sorted(file.items()))), scope)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(base=files, first=files, second=files, prunes=st.tuples(st.booleans(), st.booleans()))
def test_concurrent_applies_are_one_after_the_other(
        db_url: str, conn: psycopg.Connection[Any], base: dict[str, int],
        first: dict[str, int], second: dict[str, int], prunes: tuple[bool, bool]) -> None:
    tenant = create_tenant(conn, f"par{next(_names)}").id
    grant(conn, tenant, handlers=["sms.send"])
    scope = Scope("deploy", "a")
    apply_set(conn, tenant, declared_of(base, scope), scope=scope)
    model = modelled({}, "a", base, False)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def one(file: dict[str, int], prune: bool) -> None:
        try:
            with connect(db_url) as own:
                barrier.wait()
                apply_set(own, tenant, declared_of(file, scope), scope=scope, prune=prune)
        except ApplyRefused:
            pass                      # a conflict: the model's refusal says the same
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(first, prunes[0])),
               threading.Thread(target=one, args=(second, prunes[1]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    one_then_two = modelled(modelled(model, "a", first, prunes[0]), "a", second, prunes[1])
    two_then_one = modelled(modelled(model, "a", second, prunes[1]), "a", first, prunes[0])
    assert stored(conn, tenant) in (one_then_two, two_then_one)
