"""What to do after a failed attempt: retry later, fail, or dead-letter (pure).

- TemporaryError → queued again after ``uniform(0, min(600, 30·2^(attempt-1)))`` seconds
  ("full jitter": 50,000 runs that failed together do not all come back in one second), or
  after the target's ``Retry-After`` when it gave one, whichever is later.
- PermanentError → ``failed``; no retry can fix a wrong number or an opted-out customer.
- ``OutcomeUnknown`` (a timeout against a target that does not drop repeated keys) →
  ``dead``: a second automatic call could send a second SMS; a person decides.
- Out of attempts (``attempt >= max_attempts``) → ``dead``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

BASE_SECONDS = 30.0
CAP_SECONDS = 600.0
RETRY_AFTER_CAP_SECONDS = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    action: Literal["retry", "fail", "dead"]
    delay_seconds: float = 0.0
    reason: str = ""


def backoff_cap(attempt: int) -> float:
    """The longest wait after failed attempt number ``attempt`` (1-based): 30, 60, … 600 s."""
    return float(min(CAP_SECONDS, BASE_SECONDS * 2 ** max(0, attempt - 1)))


def full_jitter(attempt: int, rng: random.Random | None = None) -> float:
    return (rng or random).uniform(0, backoff_cap(attempt))


def decide(*, kind: Literal["temporary", "permanent", "unknown"], attempt: int,
           max_attempts: int, retry_after: float | None = None,
           rng: random.Random | None = None) -> Decision:
    if kind == "permanent":
        return Decision(action="fail", reason="permanent error")
    if kind == "unknown":
        return Decision(action="dead", reason="outcome unknown: the target may have acted; "
                                              "it does not drop repeated keys")
    if attempt >= max_attempts:
        return Decision(action="dead", reason=f"gave up after {attempt} attempts")
    delay = full_jitter(attempt, rng)
    if retry_after is not None:
        delay = max(delay, min(retry_after, RETRY_AFTER_CAP_SECONDS))
    return Decision(action="retry", delay_seconds=delay, reason="temporary error")
