"""How a rate limit's token bucket drains the runs that reach it (pure).

The model: the bucket holds at most ``burst`` tokens and refills at ``rate`` a second; a run
takes one token when it is sent. Runs are served first come, first served by their ready
time (due time, or the window's opening for a deferred run); a run whose misfire deadline
has passed when its turn comes is skipped and takes no token, as the claim skips it. So a
batch of ``n`` runs ready at ``T`` with ``L`` tokens in the bucket sends ``min(n, L)`` at
once and the k-th after those at ``T + (k - L) / rate``.

``drain`` is the only place that decides the order: the claim may one day take the earliest
deadline first among runs waiting on one limit, and then this function changes, nothing
else. Workers are not modelled (enough slots are assumed to take every token).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["Arrival", "Wave", "drain", "held"]

# Float slack when counting the runs whose send time falls at or before a deadline.
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Arrival:
    """``count`` runs ready at ``at``, each with the misfire deadline ``deadline``."""

    at: datetime
    count: int
    deadline: datetime | None = None


@dataclass(slots=True, kw_only=True)
class Wave:
    """Runs that follow one another with no idle bucket between them: the first is ready at
    ``start``, the last is sent at ``drained_at`` (None: held, nothing is sent)."""

    start: datetime
    runs: int = 0
    sent: int = 0
    drained_at: datetime | None = None
    past_deadline: int = 0
    # deadline instant -> runs that would pass it
    deadlines: dict[datetime, int] = field(default_factory=dict)

    @property
    def waited(self) -> bool:
        """Whether any run of the wave had to wait for a token."""
        return self.drained_at is None or self.drained_at > self.start

    def miss(self, deadline: datetime | None, count: int) -> None:
        if count and deadline is not None:
            self.past_deadline += count
            self.deadlines[deadline] = self.deadlines.get(deadline, 0) + count


def _ordered(arrivals: Iterable[Arrival], start: datetime) -> list[Arrival]:
    """FIFO by ready time (a run ready before ``start`` is ready at it); ties by deadline,
    so the order does not depend on the order the runs were found in."""
    ready = [Arrival(max(a.at, start), a.count, a.deadline) for a in arrivals if a.count > 0]
    return sorted(ready, key=lambda a: (a.at, a.deadline is None, a.deadline or a.at))


def drain(arrivals: Iterable[Arrival], *, rate: float, burst: float, tokens: float,
          start: datetime) -> list[Wave]:
    """The waves in which a bucket of ``rate``/s and ``burst`` holding ``tokens`` at
    ``start`` sends ``arrivals``, first ready first sent."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    waves: list[Wave] = []
    clock, level = start, min(float(burst), max(0.0, tokens))   # the bucket at ``clock``
    last_sent: datetime | None = None
    for batch in _ordered(arrivals, start):
        if not waves or last_sent is None or batch.at > last_sent:
            waves.append(Wave(start=batch.at))
        wave = waves[-1]
        wave.runs += batch.count
        now = max(batch.at, clock)
        level = min(float(burst), level + rate * (now - clock).total_seconds())
        clock = now
        sendable = batch.count
        if batch.deadline is not None:
            spare = (batch.deadline - now).total_seconds()
            sendable = 0 if spare < 0 else min(batch.count,
                                               math.floor(level + rate * spare + _EPSILON))
        wave.miss(batch.deadline, batch.count - sendable)
        if sendable == 0:
            continue
        wave.sent += sendable
        if sendable <= level:
            level -= sendable
            sent_at = now
        else:
            sent_at = now + timedelta(seconds=(sendable - level) / rate)
            clock, level = sent_at, 0.0
        wave.drained_at = sent_at if wave.drained_at is None else max(wave.drained_at, sent_at)
        last_sent = wave.drained_at
    return waves


def held(arrivals: Iterable[Arrival], *, start: datetime, until: datetime) -> list[Wave]:
    """A held limit sends nothing: one wave of every run, and those whose deadline comes
    before ``until`` pass it while the hold lasts."""
    ordered = _ordered(arrivals, start)
    if not ordered:
        return []
    wave = Wave(start=ordered[0].at)
    for batch in ordered:
        wave.runs += batch.count
        if batch.deadline is not None and batch.deadline <= until:
            wave.miss(batch.deadline, batch.count)
    return [wave]
