"""A job's priorities, defined once, in claim order (urgent first): the job document's field
table, the claim's weights, the reads, the CLI, the console and the metrics take them from
here. The SQL spells them too (the claim function's queue order, the tables' CHECKs); a test
(tests/unit/test_closed_sets.py) holds those to this list. A leaf module: nothing to import,
so every layer may use it."""

from __future__ import annotations

from typing import Literal, get_args

Priority = Literal["urgent", "normal", "bulk"]
PRIORITIES: tuple[Priority, ...] = get_args(Priority)
