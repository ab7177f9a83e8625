"""The dead letter: listing with filters, replay with the same run id, dry runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from crondepot.queue import claim_runs, record_final_failure
from crondepot.runs.deadletter import DeadFilter, list_dead, replay
from tests.support.jobs import add_job, queued_runs, tenant


def _kill(conn: psycopg.Connection[Any], count: int, error_class: str) -> list[str]:
    ids = []
    for run in claim_runs(conn, owner="w", shares={"normal": count}):
        record_final_failure(conn, run.run_id, run.lease_token, status="dead",
                             error=f"{error_class} happened", error_class=error_class)
        ids.append(run.run_id)
    return ids


def test_list_filters_by_error_job_and_time(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 5)
    timeouts = _kill(conn, 3, "OutcomeUnknown")
    gone = _kill(conn, 2, "TemporaryError")
    assert {r.run_id for r in list_dead(conn, DeadFilter())} == set(timeouts + gone)
    assert {r.run_id for r in list_dead(conn, DeadFilter(error="OutcomeUnknown"))} == set(
        timeouts)
    assert {r.run_id for r in list_dead(conn, DeadFilter(error="temporaryerror happ"))} == set(
        gone)
    job_id = int(timeouts[0].split(":")[0])
    assert [r.run_id for r in list_dead(conn, DeadFilter(job_id=job_id))] == [timeouts[0]]
    newest = max(r.finished_at for r in list_dead(conn, DeadFilter()))
    assert list_dead(conn, DeadFilter(since=newest + timedelta(seconds=1))) == []
    assert list_dead(conn, DeadFilter(tenant="nobody")) == []


def test_replay_keeps_the_run_id_and_resets_the_attempt_budget(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 3)
    dead = _kill(conn, 3, "TemporaryError")
    preview = replay(conn, DeadFilter(run_ids=dead[:2]), dry_run=True).replayed
    assert {r.run_id for r in preview} == set(dead[:2])
    assert len(list_dead(conn, DeadFilter())) == 3              # a dry run changes nothing
    done = replay(conn, DeadFilter(run_ids=dead[:2])).replayed
    assert {r.run_id for r in done} == set(dead[:2])
    rows = conn.execute("SELECT run_id, status, attempt, last_error FROM runs "
                        "WHERE run_id = ANY(%s) ORDER BY run_id", (dead[:2],)).fetchall()
    assert [(s, a, e) for _, s, a, e in rows] == [("queued", 0, None)] * 2
    again = claim_runs(conn, owner="w", shares={"normal": 5})
    assert {r.run_id for r in again} == set(dead[:2]) and {r.attempt for r in again} == {1}
    assert replay(conn, DeadFilter(run_ids=dead[:2])).replayed == []     # no longer dead: nothing


# A dead letter with runs of three jobs of one tenant and one of another, dead at known
# instants, so every filter's exact result can be written down.
DIED = {
    "a1": ("A", "2026-01-01T00:00:00+00:00", "OutcomeUnknown"),
    "a2": ("A", "2026-01-02T00:00:00+00:00", "TemporaryError"),
    "a3": ("A", "2026-01-03T00:00:00+00:00", "LeaseExpired"),
    "b1": ("B", "2026-01-02T00:00:00+00:00", "OutcomeUnknown"),
    "b2": ("B", "2026-01-04T00:00:00+00:00", "TemporaryError"),
    "c1": ("C", "2026-01-03T12:00:00+00:00", "TemporaryError"),
    "d1": ("D", "2026-01-02T00:00:00+00:00", "TemporaryError"),    # tenant acme
}
FAILED_NOT_DEAD = ("C", "2026-01-02T00:00:00+00:00", "PermanentError")


def seed_dead_letter(conn: psycopg.Connection[Any]) -> tuple[dict[str, str], dict[str, int]]:
    """The runs of ``DIED`` (label → run id) through claim and ``record_final_failure``,
    their death moved to its instant; plus one ``failed`` run, never in the dead letter.
    Returns the run ids and the job ids (job label → id)."""
    bank, acme = tenant(conn, "bank42"), tenant(conn, "acme")
    jobs = {label: add_job(conn, acme if label == "D" else bank, cron="0 9 * * *",
                           key=f"job-{label}") for label in "ABCD"}
    ids: dict[str, str] = {}
    for n, (label, (job, died, error_class)) in enumerate(
            [*DIED.items(), ("failed", FAILED_NOT_DEAD)]):
        ids[label] = _one_run_ends(
            conn, jobs[job], acme if job == "D" else bank, nominal=1791171000 + 3600 * n,
            died=datetime.fromisoformat(died), error_class=error_class,
            status="failed" if label == "failed" else "dead")
    return ids, jobs


def _one_run_ends(conn: psycopg.Connection[Any], job_id: int, tenant_id: int, *, nominal: int,
                  died: datetime, error_class: str, status: str) -> str:
    run_id = f"{job_id}:{nominal}"
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at) VALUES (%(id)s, %(job)s, %(tenant)s, 'normal', "
                 "to_timestamp(%(nominal)s), to_timestamp(%(nominal)s), now())",
                 {"id": run_id, "job": job_id, "tenant": tenant_id, "nominal": nominal})
    (run,) = claim_runs(conn, owner="w", shares={"normal": 5})
    assert run.run_id == run_id
    record_final_failure(conn, run_id, run.lease_token, status=status,
                         error=f"{error_class} happened", error_class=error_class)
    conn.execute("UPDATE runs SET finished_at = %s WHERE run_id = %s", (died, run_id))
    return run_id


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_list_time_job_error_and_tenant_filters_return_exactly_their_runs(
        conn: psycopg.Connection[Any]) -> None:
    ids, jobs = seed_dead_letter(conn)

    def listed(**where: Any) -> set[str]:
        found = {r.run_id for r in list_dead(conn, DeadFilter(**where))}
        return {label for label, run_id in ids.items() if run_id in found}

    assert listed() == set(DIED)                                  # never the failed run
    # since is inclusive, until exclusive: a run dead at the boundary is in one, not both.
    assert listed(since=_at("2026-01-02T00:00")) == {"a2", "a3", "b1", "b2", "c1", "d1"}
    assert listed(since=_at("2026-01-02T00:00:01")) == {"a3", "b2", "c1"}
    assert listed(until=_at("2026-01-03T00:00")) == {"a1", "a2", "b1", "d1"}
    assert listed(until=_at("2026-01-01T00:00")) == set()
    assert listed(since=_at("2026-01-02T00:00"), until=_at("2026-01-03T12:00")) == {
        "a2", "a3", "b1", "d1"}
    assert listed(since=_at("2026-01-03T00:00"), until=_at("2026-01-03T00:00")) == set()
    # An instant in another offset is the same instant.
    assert listed(since=datetime.fromisoformat("2026-01-03T17:30:00+05:30")) == {"b2", "c1"}
    assert listed(job_id=jobs["A"]) == {"a1", "a2", "a3"}
    assert listed(job_id=jobs["C"]) == {"c1"}
    assert listed(job_id=jobs["A"], since=_at("2026-01-02T00:00")) == {"a2", "a3"}
    assert listed(error="OutcomeUnknown") == {"a1", "b1"}
    assert listed(error="LeaseExpired") == {"a3"}
    assert listed(error="PermanentError") == set()                # failed is not dead
    assert listed(error="TemporaryError", until=_at("2026-01-03T00:00")) == {"a2", "d1"}
    assert listed(error="TemporaryError", job_id=jobs["B"]) == {"b2"}
    assert listed(tenant="acme") == {"d1"}
    assert listed(tenant="bank42", since=_at("2026-01-02T00:00"),
                  until=_at("2026-01-03T00:00")) == {"a2", "b1"}
    # Newest first (ties by run id), and the limit keeps the newest.
    order = [r.run_id for r in list_dead(conn, DeadFilter())]
    assert order == sorted(order, key=lambda run_id: (
        -_died(ids, run_id).timestamp(), run_id))
    assert [r.run_id for r in list_dead(conn, DeadFilter(limit=2))] == [ids["b2"], ids["c1"]]


def _died(ids: dict[str, str], run_id: str) -> datetime:
    (label,) = [label for label, i in ids.items() if i == run_id]
    return datetime.fromisoformat(DIED[label][1])


def _snapshot(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT run_id, status, attempt, finished_at, available_at, "
                        "last_error, error_class, lease_used, updated_at FROM runs "
                        "ORDER BY run_id").fetchall()


def _states(conn: psycopg.Connection[Any], ids: dict[str, str]) -> dict[str, tuple[Any, ...]]:
    rows = {run_id: (status, attempt, unfinished) for run_id, status, attempt, unfinished
            in conn.execute("SELECT run_id, status, attempt, finished_at IS NULL FROM runs")}
    return {label: rows[run_id] for label, run_id in ids.items()}


def test_replay_by_job_and_by_time_range_and_dry_runs_change_nothing(
        conn: psycopg.Connection[Any]) -> None:
    ids, jobs = seed_dead_letter(conn)
    by_label = {run_id: label for label, run_id in ids.items()}

    def labels(runs: list[Any]) -> set[str]:
        return {by_label[r.run_id] for r in runs}

    before = _snapshot(conn)
    assert labels(replay(conn, DeadFilter(job_id=jobs["A"]), dry_run=True).replayed) == {
        "a1", "a2", "a3"}
    window = DeadFilter(since=_at("2026-01-02T00:00"), until=_at("2026-01-04T00:00"))
    assert labels(replay(conn, window, dry_run=True).replayed) == {"a2", "a3", "b1", "c1", "d1"}
    assert _snapshot(conn) == before                              # dry runs wrote nothing

    assert labels(replay(conn, DeadFilter(job_id=jobs["A"])).replayed) == {"a1", "a2", "a3"}
    dead_again, queued = ("dead", 1, False), ("queued", 0, True)
    assert _states(conn, ids) == {
        "a1": queued, "a2": queued, "a3": queued, "b1": dead_again, "b2": dead_again,
        "c1": dead_again, "d1": dead_again, "failed": ("failed", 1, False)}

    # The same window again: a2 and a3 are no longer dead, so only the others go.
    assert labels(replay(conn, window, dry_run=True).replayed) == {"b1", "c1", "d1"}
    assert labels(replay(conn, window).replayed) == {"b1", "c1", "d1"}
    assert {by_label[r.run_id] for r in list_dead(conn, DeadFilter())} == {"b2"}
    assert _states(conn, ids)["failed"] == ("failed", 1, False)   # a failed run is never replayed
    assert replay(conn, window).replayed == []
    claimed = claim_runs(conn, owner="w", shares={"normal": 10})
    assert labels(claimed) == {"a1", "a2", "a3", "b1", "c1", "d1"}
    assert {r.attempt for r in claimed} == {1}                    # a fresh attempt budget
