"""crondepot's closed sets and name patterns, each defined once: every layer takes them from here.

The SQL spells the same sets in its CHECK constraints and in the claim's queue order;
tests/unit/test_closed_sets.py holds each SQL spelling to the tuple below. A leaf module:
it imports nothing of crondepot, so every layer may use it.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

# A job's priority, in claim order (urgent first).
Priority = Literal["urgent", "normal", "bulk"]
PRIORITIES: tuple[Priority, ...] = get_args(Priority)

# A run's state. ``queued -> running -> succeeded | failed | queued (a retry) | dead``;
# ``skipped`` (a misfire rule, a deadline, a pause said no) and ``cancelled`` are written
# instead of a call.
RunState = Literal["queued", "running", "succeeded", "failed", "dead", "skipped", "cancelled"]
RUN_STATES: tuple[RunState, ...] = get_args(RunState)
# The states a finished run ends in, counted by `status` and the overview.
OUTCOMES: tuple[RunState, ...] = ("succeeded", "failed", "dead", "skipped")

# Names a job refers to, matched whole (``fullmatch``): a shared rate limit's and a Python
# handler's. The job document, the grants, the buckets and the holds check the same two.
LIMIT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
HANDLER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
