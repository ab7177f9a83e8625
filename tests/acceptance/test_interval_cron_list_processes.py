"""Intervals and lists of crons from the command line and through real scheduler processes.

``next`` previews several crons as one list and an interval; ``jobs add`` takes both in a
document and ``jobs show`` prints them; ``jobs update`` moves a job between them; bad input
exits 2 naming the field. Then two scheduler processes, with a 30 s tick so that only the
wake on ``next_run_at`` can keep a 2 s interval on time, write exactly the fires of an
``every: "2s"`` job and of a two-cron job whose expressions meet every other minute, and
``crondepot verify`` finds every fire with exactly one row.
"""

from __future__ import annotations

import json
import signal
from datetime import datetime, timedelta
from itertools import pairwise

import pytest

from crondepot.db import connect
from tests.acceptance.test_cli_jobs import Cli, _count, _tenant, cli, crondepot

__all__ = ["cli"]   # the fixture, imported for these tests

TARGET = {"type": "python", "handler": "test.noop"}


def test_next_previews_several_crons_as_one_list_and_an_interval() -> None:
    result = crondepot("next", "0 9 * * 1-5", "0 10 * * 6", "0 9 * * 1", "--tz",
                       "Asia/Kolkata", "--after", "2026-12-06T00:00:00Z", "-n", "6", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [   # Monday 09:00 named twice, one fire
        "2026-12-07T03:30:00Z", "2026-12-08T03:30:00Z", "2026-12-09T03:30:00Z",
        "2026-12-10T03:30:00Z", "2026-12-11T03:30:00Z", "2026-12-12T04:30:00Z"]
    # an interval across London's spring change: absolute time, no fire moved
    result = crondepot("next", "--every", "90m", "--anchor", "2026-03-28T23:00:00Z", "--tz",
                       "Europe/London", "--after", "2026-03-28T23:00:00Z", "-n", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# every 90m from 2026-03-28T23:00:00Z")
    assert [line.split()[1] for line in lines[1:]] == [
        "2026-03-29T00:30:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:30:00Z"]
    assert [line.split()[0] for line in lines[1:]] == [
        "2026-03-29T00:30:00+00:00", "2026-03-29T03:00:00+01:00", "2026-03-29T04:30:00+01:00"]


@pytest.mark.parametrize(("args", "message"), [
    (("--every", "0s"), "at least 1 s"),
    (("--every", "1.5m"), "got '1.5m'"),
    (("0 9 * * *", "--every", "1h"), "give CRON or --every, not both"),
    (("--anchor", "2026-01-01T00:00:00Z", "0 9 * * *"), "--anchor goes with --every"),
    ((), "give a CRON expression (or several), or --every"),
    (("0 9 * * *", "0 9 32 * *"), "day-of-month field"),
])
def test_next_refuses_bad_intervals_and_lists_with_exit_2(args: tuple[str, ...],
                                                          message: str) -> None:
    result = crondepot("next", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_jobs_add_show_and_update_intervals_and_lists(cli: Cli) -> None:
    _tenant(cli, "bank42")
    doc = {"key": "recheck:99117", "every": "4h", "anchor": "2027-03-05T10:00:00+05:30",
           "tz": "Asia/Kolkata", "target": TARGET}
    added = cli("jobs", "add", "--tenant", "bank42", json.dumps(doc), "--json")
    assert added.code == 0, added.err
    body = added.json()
    assert body["every"] == "4h" and body["anchor"] == "2027-03-05T04:30:00+00:00"
    job_id = str(body["id"])
    plain = cli("jobs", "show", "--tenant", "bank42", job_id).out
    assert "every 4h from 2027-03-05T04:30:00+00:00  on Asia/Kolkata" in plain
    listed = {"key": "card:5521", "cron": ["0 9 * * 1-5", "0 10 * * 6"], "tz": "Asia/Kolkata",
              "target": TARGET}
    added = cli("jobs", "add", "--tenant", "bank42", json.dumps(listed), "--json")
    assert added.code == 0, added.err
    assert added.json()["cron"] == ["0 9 * * 1-5", "0 10 * * 6"]
    shown = cli("jobs", "show", "--tenant", "bank42", str(added.json()["id"]), "--fires", "7",
                "--json").json()
    locals_ = [f["local"][11:16] for f in shown["next_fires"]]      # a week: six fires
    assert set(locals_) <= {"09:00", "10:00"} and "10:00" in locals_
    # update: the interval becomes two crons, and back to an interval with a new anchor
    changed = cli("jobs", "update", "--tenant", "bank42", job_id, "--cron", "0 9 * * *",
                  "--cron", "0 18 * * *", "--json")
    assert changed.code == 0, changed.err
    assert changed.json()["cron"] == ["0 9 * * *", "0 18 * * *"]
    assert "every" not in changed.json()
    changed = cli("jobs", "update", "--tenant", "bank42", job_id, "--every", "90s", "--anchor",
                  "2026-01-01T00:00:00Z", "--json")
    assert changed.code == 0, changed.err
    assert changed.json()["every"] == "90s" and "cron" not in changed.json()
    assert changed.json()["anchor"] == "2026-01-01T00:00:00+00:00"


@pytest.mark.parametrize(("document", "field"), [
    ({"every": "0s"}, "every"),
    ({"every": "90x"}, "every"),
    ({"every": "90s", "cron": "0 9 * * *"}, "every"),
    ({"cron": []}, "cron"),
    ({"cron": ["0 9 * * *", "61 9 * * *"]}, "cron.1"),
])
def test_a_bad_interval_or_list_exits_2_naming_the_field_and_adds_nothing(
        cli: Cli, document: dict[str, object], field: str) -> None:
    _tenant(cli, "bank42")
    result = cli("jobs", "add", "--tenant", "bank42",
                 json.dumps({"tz": "UTC", "target": TARGET, **document}))
    assert result.code == 2, result.err
    assert f"invalid job document: {field}: " in result.err, result.err
    assert _count(cli.db_url, "SELECT count(*) FROM jobs") == 0


@pytest.mark.slow
def test_scheduler_processes_write_exactly_the_fires_of_an_interval_and_a_cron_list(
        cli: Cli) -> None:
    from crondepot_testkit.processes import Proc, wait_until

    _tenant(cli, "bank42")
    every = cli("jobs", "add", "--tenant", "bank42", json.dumps(
        {"key": "every-2s", "every": "2s", "tz": "Europe/London", "max_runs": 5,
         "target": TARGET}), "--json")
    # every minute, and every second minute too: the even minutes are one fire each, so
    # max_runs 3 is three consecutive minutes (a doubled fire would count twice and end
    # the job a minute early with a row fewer)
    crons = cli("jobs", "add", "--tenant", "bank42", json.dumps(
        {"key": "two-crons", "cron": ["* * * * *", "*/2 * * * *"], "tz": "Asia/Kolkata",
         "max_runs": 3, "target": TARGET}), "--json")
    assert every.code == 0 and crons.code == 0, (every.err, crons.err)
    ids = (every.json()["id"], crons.json()["id"])
    anchor = datetime.fromisoformat(every.json()["anchor"])
    copies = [Proc("scheduler", "--db", cli.db_url, "--name", f"copy{i}", "--tick", "30s")
              for i in range(2)]
    try:
        wait_until(lambda: _count(cli.db_url, "SELECT count(*) FROM jobs WHERE NOT active") == 2,
                   timeout=240, message="both jobs ended by max_runs")
    finally:
        for proc in copies:
            proc.kill(signal.SIGTERM)
        for proc in copies:
            proc.stop()
    with connect(cli.db_url) as conn:
        rows = {job_id: conn.execute(
            "SELECT nominal_at, created_at, run_id FROM runs WHERE job_id = %s "
            "ORDER BY nominal_at", (job_id,)).fetchall() for job_id in ids}
        ended = conn.execute("SELECT id, ended_reason, fire_count FROM jobs ORDER BY id")
        assert [tuple(r) for r in ended] == [(ids[0], "max_runs", 5), (ids[1], "max_runs", 3)]
    interval = [r[0] for r in rows[ids[0]]]
    assert len(interval) == 5
    first = (interval[0] - anchor) // timedelta(seconds=2)
    assert interval == [anchor + timedelta(seconds=2 * (first + k)) for k in range(5)]
    assert [r[2] for r in rows[ids[0]]] == [
        f"{ids[0]}:{int(at.timestamp())}" for at in interval]
    # on time with a 30 s tick: the loop woke for each next_run_at (generous bound: a
    # loaded machine, but far below the tick that a missed wake would wait)
    assert max(created - nominal for nominal, created, _ in rows[ids[0]]) < timedelta(
        seconds=10)
    minutes = [r[0] for r in rows[ids[1]]]
    assert len(minutes) == 3
    assert all(m.second == 0 for m in minutes)
    assert [b - a for a, b in pairwise(minutes)] == [
        timedelta(minutes=1)] * 2
    verified = cli("verify", "--tenant", "bank42", "--since",
                   (min(interval[0], minutes[0]) - timedelta(minutes=1)).isoformat(),
                   "--json")
    assert verified.code == 0, verified.out + verified.err
    report = verified.json()
    assert report["unaccounted_count"] == 0 and report["duplicated_count"] == 0, report
    assert report["fires"] >= 8 and report.get("unreadable", []) == []

