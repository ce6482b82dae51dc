"""The step path: a slot that combines the others' outcomes still runs its own next attempt soon."""

from __future__ import annotations

import threading

import pytest

from wfctl.worker import slots
from wfctl.worker.slots import Exchange, StepPath

# What one batch takes on the fake clock.
BATCH = 0.001


class BusySlots(StepPath):
    """A step path whose batches are faked: each takes `BATCH` on the fake clock, gives every
    exchange that asks a next attempt, and meanwhile the other slots hand their next outcomes
    in (as slots with no-op handlers do while the combiner lets them go first)."""

    def __init__(self, clock: list[float], refills: int) -> None:
        shared = type("Shared", (), {"turn": threading.Lock()})()
        super().__init__(shared, attempts=None, queues=("default",))  # type: ignore[arg-type]
        self.clock, self.refills, self.batches = clock, refills, 0
        self._monotonic = lambda: clock[0]
        self.others = [waiting() for _ in range(3)]

    def _combine(self, batch: list[Exchange], yielding: bool = False) -> None:
        self.batches += 1
        self.clock[0] += BATCH
        for exchange in batch:
            exchange.next = object()  # type: ignore[assignment]
            exchange.done = True
        if self.batches <= self.refills:
            self.others = [waiting() for _ in range(3)]
            self._queue.extend(self.others)


def waiting() -> Exchange:
    """An exchange another slot handed in, waiting on its own event."""
    return Exchange(claim=True, taken=threading.Event(), thread=-1)  # type: ignore[arg-type]


@pytest.fixture
def clock():
    return [0.0]


def test_a_combining_slot_leaves_once_its_own_attempt_waited_its_lead_and_wakes_the_next(clock):
    path = BusySlots(clock, refills=1_000)
    own = waiting()
    path._queue.append(own)

    assert path._serve(own) is True

    # Its own next attempt came with the first batch; it went on combining for LEAD_FOR, no
    # longer, however much the others keep handing in.
    assert own.done and own.next is not None
    assert path.batches == round(slots.LEAD_FOR / BATCH) + 1
    # What still waits goes to the slot that handed in first, woken to combine it.
    assert [exchange.taken.is_set() for exchange in path.others] == [True, False, False]
    assert not any(exchange.done for exchange in path.others)


def test_a_combiner_with_no_attempt_of_its_own_serves_until_nothing_waits(clock):
    path = BusySlots(clock, refills=20)
    path._queue.extend(waiting() for _ in range(3))

    assert path._serve() is True

    assert path.batches == 21
    assert not path._queue
    assert all(exchange.done for exchange in path.others)
