"""A log record is one line: text a tenant wrote (a job key, a target's error) cannot forge
another record in the text log, nor send escapes to an operator's terminal."""

from __future__ import annotations

import json
import logging
import sys

from crondepot.runtime.logs import JsonFormatter, TextFormatter, escaped

FORGED_KEY = "bank42:1\n2026-12-04 09:00:00,000 CRITICAL crondepot.worker[1]: all runs lost"


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "crondepot.worker", "levelno": logging.INFO,
                                    "levelname": "INFO", "msg": msg, "args": args})
    record.__dict__.update(extra)
    return record


def test_a_key_with_a_newline_stays_on_its_records_line_in_the_text_log() -> None:
    text = TextFormatter("%(levelname)s %(name)s: %(message)s").format(
        _record("run of %s failed", FORGED_KEY, job_key=FORGED_KEY, error="\x1b[2Jcleared"))
    assert text.count("\n") == 0
    assert "\\n2026-12-04 09:00:00,000 CRITICAL" in text
    assert "error=\\x1b[2Jcleared" in text and "\x1b" not in text


def test_every_control_character_and_line_separator_is_escaped() -> None:
    for char in [chr(c) for c in (*range(0x20), *range(0x7f, 0xa0))] + ["\u2028", "\u2029"]:
        assert escaped(f"a{char}b").isprintable()
    assert escaped("Zoë 09:00 ✓") == "Zoë 09:00 ✓"      # printable text is left alone


def test_a_traceback_keeps_its_lines() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed")
        record.exc_info = sys.exc_info()
    text = TextFormatter("%(message)s").format(record)
    assert text.startswith("failed\nTraceback")


def test_the_json_log_is_one_line_holding_the_text_as_written() -> None:
    line = JsonFormatter().format(_record("run of %s failed", FORGED_KEY, job_key=FORGED_KEY))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["job_key"] == FORGED_KEY and entry["msg"] == f"run of {FORGED_KEY} failed"
