"""``crondepot calendars set|show|list|delete`` from the command line: dates given inline, in
a plain list or an iCalendar file; bad input exits 2 naming what is wrong and writes
nothing; a calendar a live job uses is not deleted."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.test_cli_jobs import Cli, _count, _tenant, cli

__all__ = ["cli"]   # the fixture, imported for these tests

ICS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bank42//EN\r\nBEGIN:VEVENT\r\n"
       "UID:r@bank42\r\nSUMMARY:Republic Day\r\nDTSTART;VALUE=DATE:20270126\r\n"
       "END:VEVENT\r\nEND:VCALENDAR\r\n")


def test_calendars_set_show_list_delete(cli: Cli, tmp_path: Path) -> None:
    _tenant(cli, "bank42")
    made = cli("calendars", "set", "in-bank-holidays", "--tenant", "bank42", "--dates",
               "2026-12-25,2027-01-26", "--json")
    assert made.code == 0, made.err
    assert made.json()["dates"] == ["2026-12-25", "2027-01-26"]
    plain = tmp_path / "holidays.txt"
    plain.write_text("# bank holidays\n2026-12-25\n\n2027-08-15  # independence day\n")
    replaced = cli("calendars", "set", "in-bank-holidays", "--tenant", "bank42", "--file",
                   str(plain))
    assert replaced.code == 0 and "2 dates" in replaced.out and "version 2" in replaced.out
    ics = tmp_path / "holidays.ics"
    ics.write_text(ICS)
    assert cli("calendars", "set", "republic", "--tenant", "bank42", "--file",
               str(ics)).code == 0
    shown = cli("calendars", "show", "republic", "--tenant", "bank42")
    assert "2027-01-26 Tue" in shown.out
    listed = cli("calendars", "list", "--tenant", "bank42", "--json").json()
    assert [c["name"] for c in listed] == ["in-bank-holidays", "republic"]
    assert cli("calendars", "delete", "republic", "--tenant", "bank42").code == 0
    assert cli("calendars", "show", "republic", "--tenant", "bank42").code == 2


def test_bad_calendar_input_exits_2_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    _tenant(cli, "bank42")
    bad = tmp_path / "bad.txt"
    bad.write_text("2026-12-25\n2026-13-01\n")
    for args, message in [
            (("--dates", "2026-02-30"), "is not a real date"),
            (("--dates", "25/12/2026"), "expected a date YYYY-MM-DD"),
            (("--file", str(bad)), "line 2"),
            (("--file", str(tmp_path / "missing.ics")), "cannot read")]:
        result = cli("calendars", "set", "in-bank-holidays", "--tenant", "bank42", *args)
        assert result.code == 2 and message in result.err, (args, result.err)
    named = cli("calendars", "set", "Bank Holidays", "--tenant", "bank42", "--dates",
                "2026-12-25")
    assert named.code == 2 and "calendar name" in named.err
    assert _count(cli.db_url, "SELECT count(*) FROM calendars") == 0


def test_a_calendar_a_live_job_uses_is_not_deleted(cli: Cli) -> None:
    _tenant(cli, "bank42")
    assert cli("calendars", "set", "in-bank-holidays", "--tenant", "bank42", "--dates",
               "2026-12-25").code == 0
    doc = {"key": "emi", "cron": "0 9 5 * *", "tz": "Asia/Kolkata",
           "target": {"type": "python", "handler": "test.noop"},
           "calendar": {"exclude": "in-bank-holidays", "on_excluded": "previous_business_day"}}
    added = cli("jobs", "add", "--tenant", "bank42", json.dumps(doc), "--json")
    assert added.code == 0, added.err
    refused = cli("calendars", "delete", "in-bank-holidays", "--tenant", "bank42")
    assert refused.code == 2 and "used by live jobs" in refused.err
    assert _count(cli.db_url, "SELECT count(*) FROM calendars") == 1
    unknown = cli("jobs", "add", "--tenant", "bank42", json.dumps(
        {**doc, "key": "emi2", "calendar": {"exclude": "no-such"}}))
    assert unknown.code == 2 and "calendar.exclude" in unknown.err


def test_next_previews_which_fires_a_calendar_skips_or_moves(cli: Cli) -> None:
    _tenant(cli, "bank42")
    assert cli("calendars", "set", "in-bank-holidays", "--tenant", "bank42", "--dates",
               "2027-01-05").code == 0
    base = ("next", "0 9 5 * *", "--tz", "Asia/Kolkata", "--after", "2026-12-10T00:00:00Z",
            "-n", "2", "--calendar", "in-bank-holidays", "--tenant", "bank42")
    moved = cli(*base, "--on-excluded", "previous_business_day", "--json")
    assert moved.code == 0, moved.err
    assert moved.json() == [
        {"at": "2027-01-05T03:30:00Z", "due_at": "2027-01-04T03:30:00Z", "calendar": "moved"},
        {"at": "2027-02-05T03:30:00Z", "due_at": "2027-02-05T03:30:00Z", "calendar": None}]
    skipped = cli(*base)
    assert skipped.code == 0 and "2027-01-05 excluded, skipped" in skipped.out
    unknown = cli("next", "0 9 5 * *", "--calendar", "nope", "--tenant", "bank42")
    assert unknown.code == 2 and "no calendar named 'nope'" in unknown.err
    no_tenant = cli("next", "0 9 5 * *", "--calendar", "in-bank-holidays")
    assert no_tenant.code == 2 and "--tenant" in no_tenant.err
