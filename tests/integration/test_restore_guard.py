"""A restored database is noticed before anything is sent from it (crondepot.db.restore).

A real point-in-time restore is the drill's (bench/restore_drill.py, whose figures are in
docs/operations.md); here the restored state is made by hand on a real database: the mark a
restore brings back is one of another timeline (or cluster), older than the gap a failover
leaves, and the jobs' next fires are as far behind as the restore point.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from crondepot.cli import main as cli_main
from crondepot.db.restore import ClusterWatch, RestoredDatabase, inspect, refuse_if_restored
from crondepot.job.store import pause_job
from crondepot.runs import restored
from crondepot.scheduler.ledger import verify
from crondepot_testkit.processes import Proc
from tests.support.jobs import add_job

NOT_DEDUPING = {"type": "python", "handler": "test.noop"}
DEDUPING = {"type": "python", "handler": "test.noop", "dedupes": True}


def _identity(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    inspect(conn)
    row = conn.execute("SELECT system_identifier, timeline_id FROM crondepot_cluster_marks"
                       ).fetchone()
    assert row is not None
    return row[0], row[1]


def _restored_from(conn: psycopg.Connection[Any], *, ago: str, timeline_offset: int = 1,
                   other_cluster: bool = False) -> None:
    """Leave the marks a restore would: only a mark of the timeline before this one (or of
    another cluster), last refreshed ``ago``."""
    system_identifier, timeline = _identity(conn)
    conn.execute("DELETE FROM crondepot_cluster_marks")
    conn.execute("INSERT INTO crondepot_cluster_marks (system_identifier, timeline_id, "
                 "first_seen_at, last_seen_at) VALUES (%s, %s, now() - interval '1 day', "
                 "now() - %s::interval)",
                 (system_identifier + (1 if other_cluster else 0),
                  timeline - (0 if other_cluster else timeline_offset), ago))


def test_the_same_cluster_and_timeline_is_marked_and_let_through(
        conn: psycopg.Connection[Any]) -> None:
    assert inspect(conn) is None
    assert inspect(conn) is None
    rows = conn.execute("SELECT count(*), max(last_seen_at) > now() - interval '1 minute' "
                        "FROM crondepot_cluster_marks").fetchone()
    assert rows == (1, True)
    refuse_if_restored(conn)        # nothing to refuse


def test_a_failover_leaves_a_recent_mark_and_is_not_taken_for_a_restore(
        conn: psycopg.Connection[Any]) -> None:
    _restored_from(conn, ago="40 seconds")          # a promoted standby, seconds behind
    assert inspect(conn) is None
    assert conn.execute("SELECT count(*) FROM crondepot_cluster_marks").fetchone() == (2,)
    assert conn.execute("SELECT count(*) FROM crondepot_restores").fetchone() == (0,)


@pytest.mark.parametrize("other_cluster", [False, True], ids=["pitr", "dump"])
def test_an_old_mark_of_another_timeline_or_cluster_is_a_restore_until_resolved(
        conn: psycopg.Connection[Any], other_cluster: bool) -> None:
    _restored_from(conn, ago="10 minutes", other_cluster=other_cluster)
    found = inspect(conn)
    assert found is not None
    (gap,) = conn.execute("SELECT now() - %s", (found.last_seen_at,)).fetchone()  # type: ignore[misc]
    assert timedelta(minutes=9) < gap < timedelta(minutes=11)
    with pytest.raises(RestoredDatabase, match=r"looks restored.*db restored --skip-repeats"):
        refuse_if_restored(conn)
    assert inspect(conn) == found               # one row, however many processes ask
    assert conn.execute("SELECT count(*) FROM crondepot_restores").fetchone() == (1,)
    restored.resend(conn, found, "cli:test")
    assert inspect(conn) is None
    refuse_if_restored(conn)


def test_skip_repeats_skips_only_what_a_target_could_act_on_twice(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    plain = add_job(conn, tenant_id, key="plain", cron="* * * * *", target=NOT_DEDUPING)
    safe = add_job(conn, tenant_id, key="safe", cron="* * * * *", target=DEDUPING)
    paused = add_job(conn, tenant_id, key="paused", cron="* * * * *", target=NOT_DEDUPING)
    pause_job(conn, tenant_id, paused)
    once = add_job(conn, tenant_id, key="once", at="2026-01-01T09:00:00Z",
                   target=NOT_DEDUPING)
    # The restored state: every job's next fire 5 minutes back; a run of each job queued
    # (the lost timeline sent them after the restore point), the one-shot job's ended once
    # its run was written, as end_job does.
    conn.execute("UPDATE jobs SET next_nominal_at = date_trunc('minute', now()) - "
                 "interval '5 minutes', next_run_at = date_trunc('minute', now()) - "
                 "interval '5 minutes'")
    conn.execute("UPDATE jobs SET active = false, ended_reason = 'completed', "
                 "ended_at = now() - interval '6 minutes', next_run_at = NULL, "
                 "next_nominal_at = NULL WHERE id = %s", (once,))
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at, status) SELECT id || ':1', id, tenant_id, 'normal', "
                 "date_trunc('minute', now()) - interval '6 minutes', "
                 "date_trunc('minute', now()) - interval '6 minutes', "
                 "date_trunc('minute', now()) - interval '6 minutes', 'queued' "
                 "FROM jobs")
    _restored_from(conn, ago="6 minutes")
    found = inspect(conn)
    assert found is not None

    done = restored.skip_repeats(conn, found, "cli:test")

    assert (done.jobs, done.runs_skipped) == (3, 3)     # plain, paused, once
    by_job = {row[0]: row[1:] for row in conn.execute(
        "SELECT job_id, count(*) FILTER (WHERE skip_reason = 'restored'), "
        "count(*) FILTER (WHERE status = 'queued') FROM runs GROUP BY job_id")}
    assert by_job[plain] == (done.fires_skipped + 1, 0)
    assert 5 <= done.fires_skipped <= 6         # 5 minutes back, through now
    assert by_job[safe] == (0, 1)               # it catches up: a repeat has no effect there
    assert by_job[paused] == (1, 0)             # its queued run; its resume writes the rest
    assert by_job[once] == (1, 0)               # an ended job's queued run is not sent again
    moved = conn.execute("SELECT next_run_at > now(), next_nominal_at > now() - interval "
                         "'1 minute' FROM jobs WHERE id = %s", (plain,)).fetchone()
    assert moved == (True, True)
    still_behind = conn.execute("SELECT next_run_at < now() FROM jobs WHERE id = %s",
                                (safe,)).fetchone()
    assert still_behind == (True,)
    resolution = conn.execute("SELECT resolution, runs_skipped, resolved_by FROM "
                              "crondepot_restores").fetchone()
    assert resolution == ("skip_repeats", done.fires_skipped + 3, "cli:test")
    assert inspect(conn) is None
    # Every skipped fire keeps its row: the plain job's window checks clean.
    (now,) = conn.execute("SELECT now()").fetchone()  # type: ignore[misc]
    report = verify(conn, since=now - timedelta(minutes=5), until=now)
    plain_problems = [f for f in report.unaccounted + report.duplicated if f.job_id == plain]
    assert plain_problems == []


def test_the_leader_takes_a_long_failover_for_one_and_a_lost_mark_for_a_restore(
        conn: psycopg.Connection[Any]) -> None:
    watch = ClusterWatch()
    assert watch.check(conn) is None and watch.last_written is not None
    # A promotion that took 10 minutes: the newest mark is the leader's own last one.
    _restored_from(conn, ago="10 minutes")
    (newest,) = conn.execute("SELECT last_seen_at FROM crondepot_cluster_marks"
                             ).fetchone()  # type: ignore[misc]
    watch.last_written = newest
    assert watch.check(conn) is None
    assert conn.execute("SELECT count(*) FROM crondepot_restores").fetchone() == (0,)
    # A restore under a running leader: its own newer marks are gone.
    _restored_from(conn, ago="10 minutes")
    assert watch.last_written is not None
    found = watch.check(conn)
    assert found is not None
    restored.resend(conn, found, "cli:test")
    assert watch.check(conn) is None


def test_a_second_restore_to_a_timeline_opens_its_decision_again(
        conn: psycopg.Connection[Any]) -> None:
    _restored_from(conn, ago="1 hour")
    first = inspect(conn)
    assert first is not None
    restored.resend(conn, first, "cli:test")
    _restored_from(conn, ago="2 hours")
    again = inspect(conn)
    assert again is not None and again.id == first.id
    assert again.last_seen_at < first.last_seen_at
    with pytest.raises(RestoredDatabase):
        refuse_if_restored(conn)


def test_processes_refuse_to_start_and_the_cli_resolves(
        conn: psycopg.Connection[Any], db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _restored_from(conn, ago="1 hour")
    scheduler = Proc("scheduler", "--db", db_url)
    assert scheduler.popen.wait(timeout=60) == 2
    assert "looks restored" in scheduler.output()
    assert conn.execute("SELECT count(*) FROM crondepot_restores").fetchone() == (1,)

    capsys.readouterr()
    assert cli_main(["db", "restored", "--db", db_url]) == 1
    assert "run again with --skip-repeats or --resend" in capsys.readouterr().out
    assert cli_main(["db", "restored", "--db", db_url, "--skip-repeats", "--json"]) == 0
    assert '"resolution": "skip_repeats"' in capsys.readouterr().out
    assert cli_main(["db", "restored", "--db", db_url, "--resend"]) == 2
    assert "no restore waits" in capsys.readouterr().err
    assert cli_main(["db", "restored", "--db", db_url]) == 0
    audited = conn.execute("SELECT resolved_by LIKE 'cli:%' FROM crondepot_restores"
                           ).fetchone()
    assert audited == (True,)
