"""The wake-up listener: hears commits of other processes (any host) that left work ready; wakes slots."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from wfctl.worker.loop import Loop, Shared

if TYPE_CHECKING:
    from wfctl.store.base import ReadyListener

# How long one wait for a notification lasts: how late the loop notices it was stopped.
LISTEN_WAIT = 0.5


class Wakeups(Loop):
    """Waits on the store's listener (PostgreSQL's LISTEN) and calls `wake` (the idle slots look)
    when another process made work ready, instead of leaving it to their next poll.

    A lost connection is an outage like any (logged once, backed off from); once listening
    again it wakes the slots, since what was made ready meanwhile went unheard. While it is not
    listening, the worker polls instead (`listening`).
    """

    name = "wakeups"
    # Hearing writes nothing: it never tells that a database outage is over.
    writes = False

    def __init__(self, shared: Shared, listener: ReadyListener, wake: Callable[[], None]) -> None:
        super().__init__(shared)
        self.listener = listener
        self._wake = wake
        self.listening = False

    def run_once(self, now: datetime) -> bool:
        heard = self.listener.wait(LISTEN_WAIT)
        self.listening = True
        if heard:
            self._wake()
        return heard

    def pause(self, acted: bool) -> float:
        # The wait is the listener's own.
        return 0.0

    def failed(self, error: Exception) -> float:
        self.listening = False
        if self.stopped.is_set():
            # Stopping, its connection ended with the process's: nothing to report.
            return 0.0
        return super().failed(error)

    def run(self) -> None:
        try:
            super().run()
        finally:
            self.listening = False
            self.listener.close()
