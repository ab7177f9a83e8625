"""WeightedOrder counts along one precomputed period of smooth weighted round robin; it must
give exactly what stepping the algorithm pick by pick gives, for any weights and any claim
sizes, across calls."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crondepot.base.vocab import PRIORITIES
from crondepot.queue import WeightedOrder


class StepByStep:
    """The algorithm as nginx states it: every pick, each priority gains its weight and the
    one ahead is picked and set back by the total."""

    def __init__(self, weights: tuple[int, int, int]) -> None:
        self.weights = dict(zip(PRIORITIES, weights, strict=True))
        self.current = dict.fromkeys(PRIORITIES, 0)

    def next(self) -> str:
        total = sum(self.weights.values())
        for p in PRIORITIES:
            self.current[p] += self.weights[p]
        best = max(PRIORITIES, key=lambda p: self.current[p])
        self.current[best] -= total
        return best


weights = st.tuples(*[st.integers(0, 12)] * 3).filter(any)


@given(weights, st.lists(st.integers(0, 60), max_size=12))
def test_take_counts_what_stepping_picks(w: tuple[int, int, int], sizes: list[int]) -> None:
    order, reference = WeightedOrder(w), StepByStep(w)
    for n in sizes:
        expected = dict.fromkeys(PRIORITIES, 0)
        for _ in range(n):
            expected[reference.next()] += 1
        assert order.take(n) == expected
    assert [order.next() for _ in range(25)] == [reference.next() for _ in range(25)]
