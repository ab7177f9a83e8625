"""``crondepot jobs bulk``, ``jobs list --label``, ``limits pause|resume`` and ``hosts``
as real processes on a real database: the count first, a question on a
terminal, ``--yes`` required off one, exit 2 with a message for bad input."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from crondepot.job.store import get_job
from tests.support.jobs import add_job, tenant

SMS = {"type": "http", "url": "https://sms.example.com/send"}


def crondepot(db_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args, "--db", db_url,
                           "--tenant", "bank42"], input=stdin, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture
def jobs(conn: psycopg.Connection[Any]) -> tuple[int, list[int]]:
    t = tenant(conn, "bank42")
    made = [add_job(conn, t, key=f"emi:{i}", cron="0 9 * * *", target=SMS,
                    labels={"bank": "42"}) for i in range(3)]
    add_job(conn, t, key="other", cron="0 9 * * *")
    return t, made


def test_dry_run_counts_and_changes_nothing(db_url: str, conn: psycopg.Connection[Any],
                                           jobs: tuple[int, list[int]]) -> None:
    t, made = jobs
    done = crondepot(db_url, "jobs", "bulk", "pause", "--label", "bank=42", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "3 jobs match (pause): emi:0, emi:1, emi:2; dry run" in done.stdout
    done = crondepot(db_url, "jobs", "bulk", "pause", "--host", "sms.example.com",
                     "--dry-run", "--json")
    assert json.loads(done.stdout) == {"action": "pause", "dry_run": True, "count": 3,
                                       "sample": ["emi:0", "emi:1", "emi:2"]}
    assert not any(get_job(conn, t, j).paused for j in made)


def test_off_a_terminal_it_needs_yes(db_url: str, conn: psycopg.Connection[Any],
                                     jobs: tuple[int, list[int]]) -> None:
    t, made = jobs
    done = crondepot(db_url, "jobs", "bulk", "pause", "--key-prefix", "emi:", stdin="y\n")
    assert done.returncode == 2
    assert "add --yes" in done.stderr
    assert not any(get_job(conn, t, j).paused for j in made)
    done = crondepot(db_url, "jobs", "bulk", "pause", "--key-prefix", "emi:", "--yes",
                     "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["count"] == 3
    assert all(get_job(conn, t, j).paused for j in made)
    done = crondepot(db_url, "jobs", "bulk", "resume", "--label", "bank=42", "--yes")
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "resume: 3 jobs changed")


def _on_a_terminal(db_url: str, answer: bytes, *args: str) -> tuple[int, str]:
    """Run with stdin and stdout on a pseudo-terminal, answering the question."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "crondepot", *args, "--db", db_url,
                                "--tenant", "bank42"], stdin=follower, stdout=follower,
                               stderr=follower)
    os.close(follower)
    seen = b""
    while b"[y/N]" not in seen:
        chunk = os.read(leader, 1024)
        assert chunk, seen
        seen += chunk
    os.write(leader, answer)
    code = process.wait(timeout=60)
    try:
        while chunk := os.read(leader, 1024):
            seen += chunk
    except OSError:                 # the terminal closed with the process
        pass
    os.close(leader)
    return code, seen.decode()


def test_on_a_terminal_it_asks_first(db_url: str, conn: psycopg.Connection[Any],
                                     jobs: tuple[int, list[int]]) -> None:
    t, made = jobs
    code, seen = _on_a_terminal(db_url, b"n\n", "jobs", "bulk", "cancel", "--label",
                                "bank=42")
    assert code == 1 and "3 jobs match (cancel)" in seen and "nothing changed" in seen
    assert all(get_job(conn, t, j).active for j in made)
    code, seen = _on_a_terminal(db_url, b"y\n", "jobs", "bulk", "cancel", "--label",
                                "bank=42")
    assert code == 0 and "cancel: 3 jobs changed" in seen
    assert not any(get_job(conn, t, j).active for j in made)


@pytest.mark.parametrize(("args", "message"), [
    ((), "filter: a bulk action needs at least one criterion"),
    (("--label", "bank"), "expected a label filter like bank=42"),
    (("--host", "https://sms.example.com/"), "--host: expected host"),
    (("--rate-limit", "Bad Name"), "--rate-limit: expected rate_limit"),
    (("--priority", "high"), "invalid choice")])
def test_bad_filters_exit_2_with_a_message(db_url: str, conn: psycopg.Connection[Any],
                                           jobs: tuple[int, list[int]], args: tuple[str, ...],
                                           message: str) -> None:
    t, made = jobs
    done = crondepot(db_url, "jobs", "bulk", "pause", *args, "--yes")
    assert done.returncode == 2, done.stdout
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert not any(get_job(conn, t, j).paused for j in made)


def test_jobs_list_filters_by_label_and_shows_labels(db_url: str,
                                                     jobs: tuple[int, list[int]]) -> None:
    done = crondepot(db_url, "jobs", "list", "--label", "bank=42", "--json")
    assert [j["key"] for j in json.loads(done.stdout)["items"]] == ["emi:0", "emi:1", "emi:2"]
    assert json.loads(done.stdout)["items"][0]["labels"] == {"bank": "42"}
    done = crondepot(db_url, "jobs", "list", "--label", "bank=42")
    assert "bank=42" in done.stdout and "other" not in done.stdout


def test_limits_and_hosts_pause_and_resume(db_url: str, conn: psycopg.Connection[Any],
                                           jobs: tuple[int, list[int]]) -> None:
    from crondepot.limits.buckets import set_limit
    from crondepot.tenancy.grants import grant
    set_limit(conn, "sms-gateway", 10.0, 10)
    grant(conn, jobs[0], limits=["sms-gateway"])
    done = crondepot(db_url, "hosts", "pause", "SMS.example.com", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"kind": "host", "name": "sms.example.com",
                                       "held": True, "changed": True, "queued": 0}
    done = crondepot(db_url, "limits", "pause", "sms-gateway")
    assert done.returncode == 0, done.stderr
    assert "rate limit sms-gateway held for bank42" in done.stdout
    listed = json.loads(crondepot(db_url, "hosts", "holds", "--json").stdout)["items"]
    assert [(h["kind"], h["name"]) for h in listed] == [("host", "sms.example.com"),
                                                        ("rate_limit", "sms-gateway")]
    assert crondepot(db_url, "limits", "resume", "sms-gateway").returncode == 0
    assert crondepot(db_url, "hosts", "resume", "sms.example.com").returncode == 0
    assert "no holds" in crondepot(db_url, "hosts", "holds").stdout
    bad = crondepot(db_url, "hosts", "pause", "a/b")
    assert bad.returncode == 2 and "expected host" in bad.stderr
    # A name that holds nothing is a typo, not a hold: refused, with the closest known one.
    typo = crondepot(db_url, "limits", "pause", "sms-gatewya")
    assert typo.returncode == 2 and "(did you mean 'sms-gateway'?)" in typo.stderr
    typo = crondepot(db_url, "hosts", "pause", "sms.exmaple.com")
    assert typo.returncode == 2 and "(did you mean 'sms.example.com'?)" in typo.stderr
    assert "no holds" in crondepot(db_url, "hosts", "holds").stdout


def test_status_shows_the_holds_and_the_runs_they_hold(db_url: str,
                                                       conn: psycopg.Connection[Any],
                                                       jobs: tuple[int, list[int]]) -> None:
    from crondepot.scheduler.tick import tick
    conn.execute("UPDATE jobs SET next_run_at = now() - interval '1 minute', "
                 "next_nominal_at = now() - interval '1 minute'")
    tick(conn, batch=100)
    assert crondepot(db_url, "hosts", "pause", "sms.example.com").returncode == 0
    done = crondepot(db_url, "status", "--json")
    assert done.returncode == 0, done.stderr
    (held,) = json.loads(done.stdout)["holds"]
    assert (held["tenant"], held["kind"], held["name"], held["queued"]) == (
        "bank42", "host", "sms.example.com", 3)
    done = crondepot(db_url, "status")
    assert "host sms.example.com of bank42: 3 queued runs" in done.stdout


def test_jobs_add_file_takes_labels_and_show_prints_them(db_url: str, tmp_path: Any,
                                                         jobs: tuple[int, list[int]]) -> None:
    doc = tmp_path / "job.json"
    doc.write_text(json.dumps({"key": "filed", "cron": "0 9 * * *", "tz": "UTC",
                               "target": SMS, "labels": {"bank": "42", "kind": "emi"}}))
    added = crondepot(db_url, "jobs", "add", "--file", str(doc), "--json")
    assert added.returncode == 0, added.stderr
    job_id = str(json.loads(added.stdout)["id"])
    assert json.loads(added.stdout)["labels"] == {"bank": "42", "kind": "emi"}
    shown = crondepot(db_url, "jobs", "show", job_id)
    assert "labels      bank=42, kind=emi" in shown.stdout
    doc.write_text(json.dumps({"cron": "0 9 * * *", "tz": "UTC", "target": SMS,
                               "labels": {"bank": "4 2"}}))
    bad = crondepot(db_url, "jobs", "add", "--file", str(doc))
    assert bad.returncode == 2 and "labels.bank" in bad.stderr
