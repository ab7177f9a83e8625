"""``crondepot forecast`` as an operator runs it, on a real database: the text and JSON of a
burst through a rate limit, and bad input refused (exit 2, the option named)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from crondepot.cli import main
from crondepot.db import connect
from crondepot.job import JobSpec
from crondepot.job.store import create_jobs
from crondepot.limits.buckets import set_limit
from tests.support.jobs import grant_limit, tenant


def cli(capsys: pytest.CaptureFixture[str], db_url: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(["forecast", "--db", db_url, *args])
    except SystemExit as exc:           # argparse refuses bad arguments this way
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def burst(db_url: str) -> datetime:
    """100 one-shot jobs of bank42 two hours ahead on `sms` (10/s, burst 10); their instant.
    One-shot jobs fire once, whatever second the test runs in."""
    when = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    with connect(db_url) as conn:
        made = tenant(conn)
        set_limit(conn, "sms", 10, 10)
        grant_limit(conn, made, "sms")
        doc = {"at": when.isoformat(), "tz": "UTC", "rate_limit": "sms",
               "target": {"type": "python", "handler": "test.noop"}}
        create_jobs(conn, made, [JobSpec.from_document(doc)] * 100)
    return when


def test_the_burst_and_its_drain(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    when = burst(db_url)
    code, out, err = cli(capsys, db_url, "--tenant", "bank42", "--hours", "3")
    assert code == 0, err
    drained = when + timedelta(seconds=9)       # 10 at once, 90 more at 10/s
    assert (f"{when:%Y-%m-%d %H:%M:%S}: 100 runs on `sms` at 10/s, drained by "
            f"{drained:%H:%M:%S}, 0 past deadline") in out
    code, out, err = cli(capsys, db_url, "--tenant", "bank42", "--json")
    assert code == 0, err
    document = json.loads(out)
    (sms,) = document["limits"]
    assert (document["jobs"], document["groups"], sms["runs"]) == (100, 1, 100)
    assert sms["waves"][0]["drained_at"] == drained.isoformat()
    code, out, _ = cli(capsys, db_url, "--tenant", "bank42", "--hours", "1")
    assert code == 0 and "0 runs of 0 jobs" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--tenant", "bank42", "--hours", "0"], "expected a number of hours from 1 to 168, got '0'"),
    (["--tenant", "bank42", "--hours", "10000"], "from 1 to 168, got '10000'"),
    (["--tenant", "bank42", "--hours", "a day"], "from 1 to 168, got 'a day'"),
    (["--tenant", "bank42", "--tz", "Mars/Olympus"], "Mars/Olympus"),
    (["--tenant", "nobank"], "unknown tenant 'nobank'"),
])
def test_bad_input_is_refused(db_url: str, capsys: pytest.CaptureFixture[str],
                              args: list[str], message: str) -> None:
    burst(db_url)
    code, out, err = cli(capsys, db_url, *args)
    assert code == 2 and message in err and out == ""
