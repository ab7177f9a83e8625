"""What to do after a failed attempt: retry later, fail, or dead-letter (pure).

- TemporaryError → queued again after ``u · min(cap_s, base_s·2^(attempt-1))`` seconds, ``u``
  drawn uniformly from [0, 1) ("full jitter": 50,000 runs that failed together do not all
  come back in one second), or after the target's ``Retry-After`` when it gave one,
  whichever is later. ``base_s`` and ``cap_s`` are the job's (its ``retry`` object; 30 and
  600 unless it says otherwise). The worker draws ``u``; the statement that records the
  retry (``queries/queue.sql`` record_retry) reads the job's curve and computes the wait with
  ``retry_wait``'s formula, so every worker waits by the job's current curve.
- PermanentError → ``failed``; no retry can fix a wrong number or an opted-out customer.
- ``OutcomeUnknown`` (a timeout against a target that does not drop repeated keys) →
  ``dead``: a second automatic call could send a second SMS; a person decides.
- Out of attempts (``attempt >= max_attempts``) → ``dead``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

# The default curve (job/fields.py RETRY_BASE_S, RETRY_CAP_S: the same numbers).
BASE_SECONDS = 30.0
CAP_SECONDS = 600.0
RETRY_AFTER_CAP_SECONDS = 3600.0
MAX_DOUBLINGS = 60      # base·2^60 is past any cap; 2.0 ** 1024 would overflow


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    action: Literal["retry", "fail", "dead"]
    delay_seconds: float = 0.0      # the wait by the curve decide was given
    jitter: float = 0.0             # u in [0, 1): the wait's share of the curve's cap
    at_least: float = 0.0           # the target's Retry-After (capped), or 0
    reason: str = ""


def backoff_cap(attempt: int, base_s: float = BASE_SECONDS,
                cap_s: float = CAP_SECONDS) -> float:
    """The longest wait after failed attempt number ``attempt`` (1-based): by default 30, 60,
    … 600 s."""
    return float(min(cap_s, base_s * 2.0 ** min(max(0, attempt - 1), MAX_DOUBLINGS)))


def retry_wait(attempt: int, *, jitter: float, at_least: float = 0.0,
               base_s: float = BASE_SECONDS, cap_s: float = CAP_SECONDS) -> float:
    """The wait before the next attempt: ``jitter`` (in [0, 1)) of the curve's cap for this
    attempt, or ``at_least`` (a Retry-After) if that is longer. record_retry computes it in
    SQL with the job's curve: the same formula."""
    return max(jitter * backoff_cap(attempt, base_s, cap_s), at_least)


def full_jitter(attempt: int, rng: random.Random | None = None, *,
                base_s: float = BASE_SECONDS, cap_s: float = CAP_SECONDS) -> float:
    return retry_wait(attempt, jitter=(rng or random).random(), base_s=base_s, cap_s=cap_s)


def decide(*, kind: Literal["temporary", "permanent", "unknown"], attempt: int,
           max_attempts: int, retry_after: float | None = None,
           rng: random.Random | None = None, base_s: float = BASE_SECONDS,
           cap_s: float = CAP_SECONDS) -> Decision:
    if kind == "permanent":
        return Decision(action="fail", reason="permanent error")
    if kind == "unknown":
        return Decision(action="dead", reason="outcome unknown: the target may have acted; "
                                              "it does not drop repeated keys")
    if attempt >= max_attempts:
        return Decision(action="dead", reason=f"gave up after {attempt} attempts")
    jitter = (rng or random).random()
    at_least = 0.0 if retry_after is None else min(retry_after, RETRY_AFTER_CAP_SECONDS)
    delay = retry_wait(attempt, jitter=jitter, at_least=at_least, base_s=base_s, cap_s=cap_s)
    return Decision(action="retry", delay_seconds=delay, jitter=jitter, at_least=at_least,
                    reason="temporary error")
