"""The drain's batch size: doubled while ticks are quick, halved when one is slow, so an
urgent job due during a burst waits for a short tick, not a long one."""

from __future__ import annotations

from crondepot.scheduler.loop import FIRST_BATCH, TICK_TARGET_SECONDS, next_batch


def test_quick_full_ticks_double_the_batch_up_to_the_most() -> None:
    batch, seen = FIRST_BATCH, []
    for _ in range(8):
        batch = next_batch(batch, TICK_TARGET_SECONDS / 10, 2000)
        seen.append(batch)
    assert seen[:4] == [200, 400, 800, 1600] and set(seen[4:]) == {2000}


def test_a_slow_tick_halves_the_batch_but_not_below_the_first() -> None:
    assert next_batch(2000, TICK_TARGET_SECONDS * 5, 2000) == 1000
    assert next_batch(150, TICK_TARGET_SECONDS * 5, 2000) == FIRST_BATCH
    assert next_batch(50, TICK_TARGET_SECONDS * 5, 50) == 50   # --batch below FIRST_BATCH


def test_a_tick_near_the_target_keeps_its_batch() -> None:
    assert next_batch(800, TICK_TARGET_SECONDS * 0.75, 2000) == 800
