"""The deadline runner: finds expired deadlines and runs their on_deadline handlers side by side."""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from wfctl.engine.time.claims import DeadlineClaim
from wfctl.engine.time.deadlines import fire_deadline
from wfctl.engine.time.workers import worker_alive
from wfctl.lang import handlers
from wfctl.ops import log
from wfctl.worker.loop import Loop, Shared, until_written
from wfctl.worker.watchdog import WATCH_TICK

# on_deadline handlers of one worker that run at once.
HANDLER_THREADS = 4


class DeadlineRunner(Loop):
    """Claims expired deadlines at least every `interval` (`--deadline-interval`), at the earliest pending
    `deadline_at`, and when a decision claimed one for this worker; a small pool of threads
    runs each claim's on_deadline handler and records the failure. The loop never waits for
    a handler, so a slow one delays no other workflow's deadline. The claims stay this
    worker's while its lease holds (the lease keeper renews it)."""

    name = "deadlines"

    def __init__(self, shared: Shared, *, interval: float, leases_tell: Callable[[], bool],
                 handler_threads: int = HANDLER_THREADS) -> None:
        super().__init__(shared)
        self.interval = interval
        self._leases_tell = leases_tell
        self._claims: queue.SimpleQueue[DeadlineClaim | None] = queue.SimpleQueue()
        self._handler_threads = handler_threads
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._next_sweep: datetime | None = None
        self._wake_at: datetime | None = None
        self._claimed_for_us = False

    def start_handlers(self) -> None:
        """Start the handler threads (daemons: a handler that never returns never holds up
        the worker's exit)."""
        for n in range(self._handler_threads):
            thread = threading.Thread(target=self._serve, name=f"on_deadline-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        for _ in self._threads:
            self._claims.put(None)

    @property
    def busy(self) -> bool:
        """Handlers claimed by this runner and not yet recorded."""
        with self._lock:
            return bool(self._in_flight)

    def claimed_for_us(self) -> None:
        """The engine's deadline waker: a decision claimed an expiry for this worker."""
        self._claimed_for_us = True
        self.wake()

    def run_once(self, now: datetime) -> bool:
        shared = self.shared
        engine = shared.engine
        earliest = engine.earliest_deadline()
        due = (self._claimed_for_us or self._next_sweep is None or now >= self._next_sweep
               or (earliest is not None and earliest <= now))
        submitted = 0
        if due:
            self._claimed_for_us = False
            claims = engine.claim_expired_deadlines(
                shared.worker_id, now,
                functools.partial(worker_alive, leases_tell=self._leases_tell()))
            self._next_sweep = now + timedelta(seconds=self.interval)
            submitted = self._submit(claims)
            earliest = engine.earliest_deadline()
        self._wake_at = self._next_sweep
        if earliest is not None and (self._wake_at is None or earliest < self._wake_at):
            self._wake_at = earliest
        return submitted > 0

    def idle_wait(self) -> float:
        if self._wake_at is None:
            return WATCH_TICK
        return min(WATCH_TICK, max(0.0, (self._wake_at - self.shared.clock()).total_seconds()))

    def _submit(self, claims: list[DeadlineClaim]) -> int:
        # A claim of this worker's still being handled comes back from each sweep (as left by
        # an earlier one); it is handled once.
        submitted = 0
        with self._lock:
            for claim in claims:
                if claim.workflow_run_id not in self._in_flight:
                    self._in_flight.add(claim.workflow_run_id)
                    self._claims.put(claim)
                    submitted += 1
        return submitted

    def _serve(self) -> None:
        while True:
            claim = self._claims.get()
            if claim is None:
                return
            try:
                self.finish(claim)
            except Exception as exc:
                # Left claimed by this worker: its next sweep takes the claim up again.
                log.failure("deadline_not_recorded", exc, instance=claim.workflow_instance_id)
            finally:
                with self._lock:
                    self._in_flight.discard(claim.workflow_run_id)

    def finish(self, claim: DeadlineClaim) -> None:
        """Fire the claim (`fire_deadline`), waiting out a database outage to record it."""
        shared = self.shared
        fire_deadline(shared.engine, claim, handlers.call, shared.clock,
                      write=lambda record: until_written(shared, record)[1])

