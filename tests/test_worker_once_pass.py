"""A `work --once` pass with several slots ends only once nothing is left to run: the
interleavings of its slots, forced one by one (no database, no sleeps)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from conftest import at

from wfctl.worker.slots import _SideBySide

# The longest a forced interleaving waits for its other side before the test gives up.
BOUND = 5.0


class FakeSlot:
    """A slot that runs `script(self, call)` for its `call`-th pass, in a thread of its name."""

    def __init__(self, name: str, shared: Any, script: Callable[[FakeSlot, int], bool]) -> None:
        self.name = name
        self.shared = shared
        self.script = script
        self.abandoned = False
        self.held: str | None = None
        self.ran: list[str] = []
        self.calls = 0

    def run_once(self, now: datetime, *, check_deadlines: bool = True) -> bool:
        assert check_deadlines is False
        self.calls += 1
        return self.script(self, self.calls)


class PausingCondition(threading.Condition):
    """`changed`, where one thread stops just after its `nth` release of the lock until
    `resume()` says so: the window in which another slot looks at what is busy."""

    def __init__(self, thread_name: str, nth: int, resume: Callable[[], bool]) -> None:
        super().__init__()
        self.thread_name, self.nth, self.resume = thread_name, nth, resume
        self.releases = 0
        self.paused = threading.Event()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if threading.current_thread().name != self.thread_name:
            return
        self.releases += 1
        if self.releases == self.nth:
            self.paused.set()
            looks = threading.Event()
            for _ in range(int(BOUND / 0.001)):
                if self.resume():
                    return
                looks.wait(0.001)


def test_a_slot_holding_its_next_attempt_keeps_the_pass_going():
    """Slot b records an outcome and gets its next attempt (load) in the same exchange; slot a,
    finding nothing ready just then, must not end the pass before b runs it."""
    shared = SimpleNamespace(stopping=threading.Event(), clock=lambda: at(0))

    def a_script(slot: FakeSlot, call: int) -> bool:
        if call == 1:
            # Looks only once b has finished its task and let go of the lock.
            assert side.changed.paused.wait(BOUND)
        return False

    def b_script(slot: FakeSlot, call: int) -> bool:
        if call == 1:
            slot.held = "load"      # claimed along with the outcome of the attempt it ran
            return True
        if slot.held is not None:
            slot.ran.append(slot.held)
            slot.held = None
            return True
        return False

    a, b = FakeSlot("a", shared, a_script), FakeSlot("b", shared, b_script)
    side = _SideBySide([a, b], lambda now: [])
    # b pauses after its first pass's bookkeeping (its second release of the lock) until a
    # has looked twice more (so it decided whether the pass is over), or ended the pass.
    side.changed = PausingCondition("b", 2, lambda: a.calls >= 3 or side.done)

    assert side.run(at(0)) is True

    assert b.ran == ["load"]
    assert b.held is None
