"""Logging set-up: plain lines for people, one JSON object per line for machines.

Fields passed with ``extra=`` (run_id, job_id, tenant, attempt, worker, …) appear as keys in
JSON mode and as ``key=value`` pairs in text mode. Payloads and secrets are never logged.

One record is one line in either mode: a tenant's text (a job key, a target's error) may
hold newlines or terminal escapes, so the text mode writes control characters of the
message and the fields escaped (``\n``, ``\x1b``); JSON escapes them by itself. Only a
traceback, which crondepot writes, spans lines.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import sys
from datetime import UTC, datetime

# color_message: uvicorn attaches an ANSI-coloured copy of the message to its records.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}


# C0 and C1 controls, DEL, and the line and paragraph separators some terminals and log
# viewers break lines at.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escaped(text: str) -> str:
    """``text`` with every control character written as its Python escape."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
            **_extras(record),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:
        if _CONTROL.search(record.message):
            # a copy: other handlers of the same record see the message as it was
            record = copy.copy(record)
            record.message = escaped(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = " ".join(f"{k}={escaped(str(v))}" for k, v in _extras(record).items())
        return f"{line} {extras}" if extras else line


def setup(level: str | None = None, as_json: bool | None = None) -> None:
    level = (level or os.environ.get("CRONDEPOT_LOG_LEVEL") or "INFO").upper()
    if as_json is None:
        as_json = os.environ.get("CRONDEPOT_LOG_FORMAT", "text") == "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if as_json else TextFormatter(
        "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # pgserver narrates every start at INFO (command lines, stdout); keep its warnings only.
    logging.getLogger("pgserver").setLevel(max(logging.WARNING, root.level))
