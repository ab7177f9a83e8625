"""A run's states, defined once: the API's schemas, the reads, the CLI, the console and
the metrics take them from here; the ``runs`` table's CHECK spells the same set (a test,
tests/unit/test_closed_sets.py, compares them).

``queued → running → succeeded | failed | queued (a retry) | dead``; ``skipped`` (a misfire
rule, a deadline, a pause said no) and ``cancelled`` are written instead of a call.
"""

from __future__ import annotations

from typing import Literal, get_args

RunState = Literal["queued", "running", "succeeded", "failed", "dead", "skipped", "cancelled"]
RUN_STATES: tuple[RunState, ...] = get_args(RunState)
# The states a finished run ends in, counted by `status` and the overview.
OUTCOMES: tuple[RunState, ...] = ("succeeded", "failed", "dead", "skipped")
