"""Schedules beyond cron from the command line: ``next`` previews L, D#n and a window; ``jobs
add`` takes an at job and a bounded EMI; ``jobs show`` says how many fires and how it ended;
a bad schedule exits 2 naming the field and adds nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from crondepot.db import connect
from crondepot.scheduler.tick import tick
from tests.acceptance.test_cli_jobs import Cli, _count, _tenant, cli, crondepot

__all__ = ["cli"]   # the fixture, imported for these tests

TARGET = {"type": "python", "handler": "test.noop"}


def test_next_shows_month_ends_and_first_mondays_inside_a_window() -> None:
    result = crondepot("next", "0 9 L * *", "--tz", "Asia/Kolkata", "--after",
                       "2026-01-01T00:00:00Z", "-n", "3", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["2026-01-31T03:30:00Z", "2026-02-28T03:30:00Z",
                                         "2026-03-31T03:30:00Z"]
    result = crondepot("next", "0 9 * * 1#1", "--tz", "UTC", "--after", "2026-01-01T00:00:00Z",
                       "--start-at", "2026-02-01T00:00:00Z", "--end-at",
                       "2026-04-30T00:00:00Z", "-n", "10")
    assert result.returncode == 0, result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()] == [
        "2026-02-02T09:00:00Z", "2026-03-02T09:00:00Z", "2026-04-06T09:00:00Z"]


def test_next_previews_the_quartz_day_items() -> None:
    cases = {
        "0 9 LW * *": ["2026-01-30T03:30:00Z", "2026-02-27T03:30:00Z", "2026-03-31T03:30:00Z"],
        "0 9 L-3 * *": ["2026-01-28T03:30:00Z", "2026-02-25T03:30:00Z", "2026-03-28T03:30:00Z"],
        "0 9 1W * *": ["2026-01-01T03:30:00Z", "2026-02-02T03:30:00Z", "2026-03-02T03:30:00Z"],
        "0 9 * * 5L": ["2026-01-30T03:30:00Z", "2026-02-27T03:30:00Z", "2026-03-27T03:30:00Z"],
    }
    for cron, expected in cases.items():
        result = crondepot("next", cron, "--tz", "Asia/Kolkata", "--after",
                           "2026-01-01T00:00:00Z", "-n", "3", "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == expected, cron


@pytest.mark.parametrize(("args", "message"), [
    (("0 9 * * 1#6",), "day-of-week field: '1#6': n in D#n must be 1 to 5"),
    (("0 9 L-40 * *",), "day-of-month field: L-40 is out of range"),
    (("0 9 32W * *",), "day-of-month field: 32W is out of range 1–31"),
    (("0 9 * * 8L",), "day-of-week field: 8L is out of range 0–7"),
    (("0 9 * * 1", "--start-at", "2026-03-01T00:00:00Z", "--end-at", "2026-02-01T00:00:00Z"),
     "--end-at must be after --start-at"),
    (("0 9 * * 1", "--end-at", "2026-02-01"), "has no UTC offset"),
])
def test_next_refuses_bad_input_with_exit_2(args: tuple[str, ...], message: str) -> None:
    result = crondepot("next", *args)
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_an_at_job_added_shown_and_ended(cli: Cli) -> None:
    _tenant(cli, "bank42")
    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    doc = {"key": "bill:77120", "at": at.isoformat(), "tz": "Asia/Kolkata", "target": TARGET}
    added = cli("jobs", "add", "--tenant", "bank42", json.dumps(doc), "--json")
    assert added.code == 0, added.err
    job_id = str(added.json()["id"])
    shown = cli("jobs", "show", "--tenant", "bank42", job_id)
    assert f"schedule    at {at.isoformat()}  on Asia/Kolkata" in shown.out
    with connect(cli.db_url) as conn:
        tick(conn, batch=10, now=at + timedelta(seconds=1))
    body = cli("jobs", "show", "--tenant", "bank42", job_id, "--json").json()
    assert body["state"] == "ended (completed)" and body["ended_reason"] == "completed"
    assert body["fire_count"] == 1 and body["next_fires"] == []
    plain = cli("jobs", "show", "--tenant", "bank42", job_id).out
    assert "ended       completed, last fire" in plain and "fires       1" in plain
    listed = cli("jobs", "list", "--tenant", "bank42").out
    assert "ended (completed)" in listed


def test_a_bounded_emi_shows_its_bounds(cli: Cli) -> None:
    _tenant(cli, "bank42")
    doc = {"key": "emi:48214", "cron": "0 9 L * *", "tz": "Asia/Kolkata", "max_runs": 12,
           "start_at": "2027-04-01T00:00:00+05:30", "target": TARGET}
    added = cli("jobs", "add", "--tenant", "bank42", json.dumps(doc), "--json")
    assert added.code == 0, added.err
    shown = cli("jobs", "show", "--tenant", "bank42", str(added.json()["id"]), "--json").json()
    assert shown["max_runs"] == 12 and shown["fire_count"] == 0
    assert [f["local"] for f in shown["next_fires"][:2]] == ["2027-04-30T09:00:00+05:30",
                                                            "2027-05-31T09:00:00+05:30"]
    plain = cli("jobs", "show", "--tenant", "bank42", str(added.json()["id"])).out
    assert "0 9 L * *, from 2027-03-31T18:30:00+00:00, at most 12 fires" in plain
    assert "fires       0 of 12" in plain


@pytest.mark.parametrize(("document", "field"), [
    ({"cron": "0 9 * * *", "at": "2030-01-01T00:00:00Z"}, "at"),
    ({}, "cron"),
    ({"at": "2030-01-01T09:00"}, "at"),
    ({"at": "2020-01-01T00:00:00Z"}, "at"),
    ({"cron": "0 9 * * *", "max_runs": -1}, "max_runs"),
    ({"cron": "0 9 * * *", "start_at": "2030-01-01T00:00:00Z",
      "end_at": "2029-01-01T00:00:00Z"}, "end_at"),
])
def test_a_bad_schedule_exits_2_naming_the_field_and_adds_nothing(
        cli: Cli, document: dict[str, object], field: str) -> None:
    _tenant(cli, "bank42")
    text = json.dumps({"tz": "UTC", "target": TARGET, **document})
    result = cli("jobs", "add", "--tenant", "bank42", text)
    # refused by the document's rules, or (an at already passed) by the database's clock
    assert result.code == 2, result.err
    assert (f"invalid job document: {field}: " in result.err
            or f"crondepot: error: {field}: no fire is left after now" in result.err), result.err
    assert "Traceback" not in result.err
    assert _count(cli.db_url, "SELECT count(*) FROM jobs") == 0


@pytest.mark.slow
def test_two_scheduler_processes_fire_an_at_job_once_and_end_a_max_runs_job(
        cli: Cli) -> None:
    import signal

    from crondepot_testkit.processes import Proc, wait_until

    _tenant(cli, "bank42")
    at = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
    once = cli("jobs", "add", "--tenant", "bank42", json.dumps(
        {"key": "once", "at": at.isoformat(), "tz": "UTC", "target": TARGET}), "--json")
    twice = cli("jobs", "add", "--tenant", "bank42", json.dumps(
        {"key": "twice", "cron": "* * * * *", "tz": "UTC", "max_runs": 2, "target": TARGET}),
        "--json")
    assert once.code == 0 and twice.code == 0, (once.err, twice.err)
    ids = (once.json()["id"], twice.json()["id"])
    copies = [Proc("scheduler", "--db", cli.db_url, "--name", f"copy{i}") for i in range(2)]
    try:
        wait_until(lambda: _count(cli.db_url, "SELECT count(*) FROM jobs WHERE NOT active") == 2,
                   timeout=150, message="both jobs ended")
    finally:
        for proc in copies:
            proc.kill(signal.SIGTERM)
        for proc in copies:
            proc.stop()
    with connect(cli.db_url) as conn:
        rows = conn.execute("SELECT job_id, count(*), count(DISTINCT nominal_at) FROM runs "
                            "GROUP BY job_id ORDER BY job_id").fetchall()
        ended = conn.execute("SELECT id, ended_reason, fire_count FROM jobs ORDER BY id")
        assert [tuple(r) for r in ended] == [(ids[0], "completed", 1), (ids[1], "max_runs", 2)]
    assert [tuple(r) for r in rows] == [(ids[0], 1, 1), (ids[1], 2, 2)]
