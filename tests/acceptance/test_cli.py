"""The command line as a user runs it: real processes, real databases."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from urllib.request import urlopen

import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import conninfo_to_dict

from crondepot.db import connect
from crondepot_testkit.processes import Proc, free_port, wait_until
from tests.support.jobs import bulk_due_jobs, counts


def crondepot(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_next_prints_one_instant_on_the_fall_back_day() -> None:
    result = crondepot("next", "30 1 * * *", "--tz", "America/New_York", "--after",
                       "2026-10-31T12:00:00Z", "-n", "3", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z",
                                         "2026-11-03T06:30:00Z"]


def test_next_marks_fires_that_dst_moved() -> None:
    result = crondepot("next", "30 2 * * *", "--tz", "America/New_York", "--after",
                       "2026-03-07T12:00:00Z", "-n", "2")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.strip().splitlines()
    assert first.startswith("2026-03-08T03:00:00-04:00  2026-03-08T07:00:00Z  # DST gap")
    assert second.startswith("2026-03-09T02:30:00-04:00  2026-03-09T06:30:00Z")


@pytest.mark.parametrize(("args", "needle"), [
    (["61 * * * *"], "minute"),
    (["0 9 * * *", "--tz", "Mars/Olympus"], "Mars/Olympus"),
    (["0 0 30 2 *"], "day-of-month"),
    (["0 9 * * *", "--after", "2026-10-31T12:00:00"], "offset"),
    (["0 9 * * *", "-n", "0"], "count"),
])
def test_next_rejects_bad_input_with_a_message_naming_it(args: list[str], needle: str) -> None:
    result = crondepot("next", *args)
    assert result.returncode != 0
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_next_json_error_is_json() -> None:
    result = crondepot("next", "61 * * * *", "--json")
    assert result.returncode == 2
    assert "minute" in json.loads(result.stderr)["error"]


def test_scheduler_serves_prometheus_metrics_that_move(db_url: str) -> None:
    port = free_port()
    with connect(db_url) as conn:
        bulk_due_jobs(conn, 300, due_in_seconds=-1)
        copy = Proc("scheduler", "--db", db_url, "--metrics-port", str(port))
        try:
            wait_until(lambda: counts(conn)["runs"] == 300, timeout=30, message="runs")

            def scrape() -> dict[str, float]:
                text = urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                return {s.name + str(sorted(s.labels.items())): s.value
                        for family in text_string_to_metric_families(text)
                        for s in family.samples}

            wait_until(lambda: bool(_try(scrape)), timeout=10, message="/metrics")
            samples = scrape()
        finally:
            copy.stop()
    assert samples["crondepot_scheduler_tick_duration_seconds_count[]"] >= 1
    assert samples["crondepot_runs_created_total[('priority', 'normal')]"] == 300
    assert samples["crondepot_scheduler_enqueue_delay_seconds_count[('priority', 'normal')]"] \
        == 300


def _try(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except OSError:
        return None


def _child_pid(up: Proc, name: str) -> int | None:
    pids = [line["child_pid"] for line in up.lines()
            if line.get("msg") == f"started {name}" and line.get("child_pid")]
    return int(pids[-1]) if pids else None


def test_up_migrates_runs_schedulers_and_stops_on_ctrl_c(empty_db_url: str) -> None:
    up = Proc("up", "--db", empty_db_url, "--schedulers", "2", "--workers", "0", "--tick",
              "500ms", "--port", str(free_port()))
    try:
        def ready() -> bool:
            try:
                with connect(empty_db_url) as conn:
                    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                       "application_name LIKE 'crondepot-scheduler-%'"
                                       ).fetchone()
                    return bool(row and row[0] >= 4)    # 2 copies × (tick + listener)
            except Exception:
                return False

        wait_until(ready, timeout=60, message="two scheduler copies connected")
        with connect(empty_db_url) as conn:
            bulk_due_jobs(conn, 50, due_in_seconds=0)
            wait_until(lambda: counts(conn)["runs"] == 50, timeout=30, message="runs")
    finally:
        up.kill(signal.SIGINT)
        code = up.popen.wait(timeout=60)
    assert code == 0, up.output()
    assert "all stopped" in up.output()


def test_up_restarts_a_crashed_scheduler(empty_db_url: str) -> None:
    up = Proc("up", "--db", empty_db_url, "--schedulers", "1", "--port", str(free_port()))
    try:
        wait_until(lambda: _child_pid(up, "scheduler-1") is not None, timeout=60,
                   message="scheduler up")
        first = _child_pid(up, "scheduler-1")
        assert first is not None
        time.sleep(1)
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: _child_pid(up, "scheduler-1") not in (None, first), timeout=30,
                   message="restart")
    finally:
        up.stop()


@pytest.mark.slow
def test_up_demo_serves_the_api_runs_demo_jobs_and_stops_on_sigint(empty_db_url: str) -> None:
    port = free_port()
    up = Proc("up", "--db", empty_db_url, "--demo", "--port", str(port), "--tick", "500ms")
    try:
        def healthy() -> bool:
            try:
                return bool(urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200)
            except OSError:
                return False

        wait_until(healthy, timeout=90, message="/healthz")
        with connect(empty_db_url) as conn:
            wait_until(lambda: bool(conn.execute(
                "SELECT count(*) FROM runs WHERE status = 'succeeded'").fetchone()[0]),  # type: ignore[index]
                timeout=60, message="a demo run succeeded")
            jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()
    finally:
        up.kill(signal.SIGINT)
        code = up.popen.wait(timeout=60)
    output = up.output()
    assert code == 0, output
    assert jobs == (4,)
    assert f"docs http://127.0.0.1:{port}/docs" in output
    assert "demo tenant token (shown once): cdp_" in output


def test_embedded_database_is_shared_and_stopped_by_the_last_user() -> None:
    folder = Path(tempfile.mkdtemp(prefix="crondepot-embedded-")) / "pgdata"
    env_args = ["--data-dir", str(folder)]
    first = crondepot("migrate", *env_args)   # starts the server, and stops it on exit
    assert first.returncode == 0, first.stderr
    holder = Proc("scheduler", *env_args, "--tick", "60s")
    try:
        wait_until(lambda: "scheduler started" in holder.output(), timeout=120,
                   message="embedded server + scheduler")
        pid_file = folder / "postmaster.pid"
        server_pid = int(pid_file.read_text().splitlines()[0])
        # A second command joins the same server instead of starting another.
        migrate = crondepot("migrate", *env_args, "--json")
        assert migrate.returncode == 0, migrate.stderr
        assert json.loads(migrate.stdout) == {"applied": [], "functions": [],
                                              "runtime_role": "crondepot_runtime"}
        assert int(pid_file.read_text().splitlines()[0]) == server_pid
        url = json.loads(crondepot("db", "url", *env_args, "--json").stdout)
        assert url["embedded"] is True
        # Without a word from the user, the scheduler runs as the runtime role, not the owner.
        with connect(url["owner_url"]) as conn:
            users = conn.execute("SELECT DISTINCT usename FROM pg_stat_activity WHERE "
                                 "application_name LIKE 'crondepot-scheduler%'").fetchall()
        assert users == [("crondepot_runtime",)]
        assert conninfo_to_dict(url["url"])["user"] == "crondepot_runtime"
        assert crondepot("db", "url", *env_args, "--owner").stdout.strip() == url["owner_url"]
        _alive(server_pid)
    finally:
        holder.stop()
    # The last user gone, the server stops.
    wait_until(lambda: not _alive(server_pid), timeout=30, message="embedded server stopped")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_unreachable_database_gives_a_clean_error() -> None:
    result = crondepot("migrate", "--db", "postgresql://127.0.0.1:1/x?connect_timeout=2",
                       "--json")
    assert result.returncode == 3
    assert "database connection failed" in json.loads(result.stderr)["error"]


def test_scheduler_refuses_an_unmigrated_database(empty_db_url: str) -> None:
    result = crondepot("scheduler", "--db", empty_db_url, timeout=60)
    assert result.returncode == 2
    assert "run `crondepot migrate` first" in result.stderr


def test_verify_prints_each_lost_fire_and_exits_1(db_url: str) -> None:
    from crondepot.job import JobSpec, create_jobs
    from crondepot.scheduler.tick import tick
    from tests.support.jobs import tenant

    with connect(db_url) as conn:
        (now,) = conn.execute("SELECT now()").fetchone()  # type: ignore[misc]
        specs = [JobSpec.from_document({"key": f"k{i}", "cron": "* * * * *", "tz": "UTC",
                                        "target": {"type": "python", "handler": "h"}})
                 for i in range(3)]
        create_jobs(conn, tenant(conn), specs, now=now - timedelta(minutes=10))
        tick(conn, batch=100)                  # the scheduler writes the ten minutes missed
    clean = crondepot("verify", "--db", db_url, "--json")
    assert clean.returncode == 0, clean.stderr
    assert json.loads(clean.stdout)["clean"] is True
    with connect(db_url) as conn:
        # A bug deleted one row: a reminder neither sent nor recorded.
        (run_id, job_id) = conn.execute(
            "DELETE FROM runs WHERE run_id = (SELECT min(r.run_id) FROM runs r JOIN jobs j "
            "ON j.id = r.job_id WHERE j.key = 'k2') RETURNING run_id, job_id"
        ).fetchone()  # type: ignore[misc]
    lost = crondepot("verify", "--db", db_url, "--json")
    assert lost.returncode == 1, lost.stderr
    report = json.loads(lost.stdout)
    assert report["unaccounted_count"] == 1
    (fire,) = report["unaccounted"]
    assert (fire["job_id"], fire["job_key"], fire["run_id"]) == (job_id, "k2", run_id)
    text = crondepot("verify", "--db", db_url)
    assert text.returncode == 1 and run_id in text.stdout
    bad = crondepot("verify", "--db", db_url, "--since", "2026-01-02T00:00:00Z",
                    "--until", "2026-01-01T00:00:00Z")
    assert bad.returncode == 2 and "after until" in bad.stderr
    assert "Traceback" not in bad.stderr
