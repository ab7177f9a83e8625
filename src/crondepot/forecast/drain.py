"""How a rate limit's token bucket drains the runs that reach it (pure).

The model: the bucket holds at most ``burst`` tokens and refills at ``rate`` a second; a run
takes one token when it is sent. The order is the claim's (docs/worker.md, "Deadline first
within a rate limit"; db/sql/functions/claim_deadline.sql): each turn belongs to the oldest
run still waiting (by ready time: due time, or the window's opening for a deferred run;
at one ready time a run with a deadline first). A run with no misfire deadline takes its
own turn; a turn that falls to a run with a deadline goes to the ready run with the
earliest deadline (at one deadline the older first), so when the bucket is the bottleneck
the runs that would pass their deadline soonest go first. A run whose deadline has passed
before it is sent is skipped and takes no token, as the claim skips it. With one deadline
for all (480 k reminders "until 20:00") or none, this is first ready first sent: ``n``
runs ready at ``T`` with ``L`` tokens in the bucket send ``min(n, L)`` at once and the
k-th after those at ``T + (k - L) / rate``.

``drain`` is the only place that decides the order (``fifo=True`` keeps the order before
deadline first, for comparison). Workers are not modelled: enough slots are assumed to
take every token, and a run is taken when its token comes (a worker that claims runs
ahead of its tokens sends a few of them, at most its free slots, after their deadline
instead of skipping them).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["Arrival", "Wave", "drain", "held"]

# Float slack when counting the runs whose send time falls at or before an instant.
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
    """In queue order, by ready time (ties by deadline, so the order does not depend on
    the order the runs were found in); a run ready before ``start`` is ready at it, and
    keeps its place in the queue."""
    ordered = sorted((a for a in arrivals if a.count > 0),
                     key=lambda a: (a.at, a.deadline is None, a.deadline or a.at))
    return [Arrival(max(a.at, start), a.count, a.deadline) for a in ordered]


@dataclass(slots=True)
class _Batch:
    """Runs of one arrival still waiting: ``left`` of them, counted in ``wave``."""

    at: datetime
    deadline: datetime | None
    left: int
    wave: Wave
    seq: int


class _Bucket:
    """The token bucket and its clock; sends runs as soon as tokens allow."""

    def __init__(self, *, rate: float, burst: float, tokens: float, start: datetime) -> None:
        self.rate, self.burst = rate, float(burst)
        self.clock, self.level = start, min(self.burst, max(0.0, tokens))

    def advance(self, to: datetime) -> None:
        if to > self.clock:
            seconds = (to - self.clock).total_seconds()
            self.level = min(self.burst, self.level + self.rate * seconds)
            self.clock = to

    def by(self, moment: datetime) -> int:
        """How many runs sent one after another from now are sent at or before ``moment``."""
        if moment < self.clock:
            return 0
        seconds = (moment - self.clock).total_seconds()
        return math.floor(self.level + self.rate * seconds + _EPSILON)

    def send(self, count: int) -> datetime:
        """Sends ``count`` runs one after another; the last one's send time."""
        if count <= self.level:
            self.level -= count
            return self.clock
        self.clock += timedelta(seconds=(count - self.level) / self.rate)
        self.level = 0.0
        return self.clock


def drain(arrivals: Iterable[Arrival], *, rate: float, burst: float, tokens: float,
          start: datetime, fifo: bool = False) -> list[Wave]:
    """The waves in which a bucket of ``rate``/s and ``burst`` holding ``tokens`` at
    ``start`` sends ``arrivals``, in the claim's order (earliest deadline first within the
    turns of runs with a deadline; ``fifo``: first ready first sent)."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    bucket = _Bucket(rate=rate, burst=burst, tokens=tokens, start=start)
    incoming = deque(_ordered(arrivals, start))
    waves: list[Wave] = []
    last_sent: datetime | None = None
    # Waiting runs: in queue order (every batch), and those with a deadline by deadline.
    queue: deque[_Batch] = deque()
    by_deadline: list[tuple[datetime, datetime, int, _Batch]] = []
    seq = 0

    def admit() -> None:
        nonlocal seq
        while incoming and incoming[0].at <= bucket.clock:
            a = incoming.popleft()
            if not waves or (not queue and (last_sent is None or a.at > last_sent)):
                waves.append(Wave(start=a.at))
            waves[-1].runs += a.count
            batch = _Batch(a.at, a.deadline, a.count, waves[-1], seq)
            seq += 1
            queue.append(batch)
            if a.deadline is not None and not fifo:
                heapq.heappush(by_deadline, (a.deadline, a.at, batch.seq, batch))

    def settle() -> None:
        """Drops from the front of the queue the batches sent, or past their deadline."""
        while queue and (queue[0].left == 0 or (queue[0].deadline is not None
                                                and queue[0].deadline < bucket.clock)):
            gone = queue.popleft()
            gone.wave.miss(gone.deadline, gone.left)
            gone.left = 0
        while by_deadline and (by_deadline[0][3].left == 0
                               or by_deadline[0][0] < bucket.clock):
            _, _, _, gone = heapq.heappop(by_deadline)
            gone.wave.miss(gone.deadline, gone.left)
            gone.left = 0

    while True:
        settle()
        admit()
        settle()
        if not queue:
            if not incoming:
                break
            bucket.advance(incoming[0].at)
            continue
        head = queue[0]
        # The turn's run: the head itself (no deadline, or FIFO), else the earliest deadline.
        turn = head if head.deadline is None or fifo else by_deadline[0][3]
        # It keeps the turns until it is sent out, its deadline passes, or (deadline
        # first) a new arrival may bring an earlier deadline.
        stops = [turn.deadline] if turn.deadline is not None else []
        if incoming and not fifo and turn.deadline is not None:
            stops.append(incoming[0].at)
        count = turn.left
        if stops:
            count = min(count, bucket.by(min(stops)))
        if count > 0:
            sent_at = bucket.send(count)
            turn.left -= count
            turn.wave.sent += count
            drained = turn.wave.drained_at
            turn.wave.drained_at = sent_at if drained is None else max(drained, sent_at)
            last_sent = sent_at if last_sent is None else max(last_sent, sent_at)
        if turn.left > 0:
            # Stopped short: move the clock to the stop (its deadline passes just after).
            stop = min(stops)
            if stop == turn.deadline:
                bucket.advance(stop + timedelta(microseconds=1))
            else:
                bucket.advance(stop)
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
