"""The lease keeper: keeps alive in the database what the worker holds."""

from __future__ import annotations

import time
from datetime import datetime

from wfctl.engine.time.workers import WorkerRecord
from wfctl.worker.held_attempts import Attempts
from wfctl.worker.loop import Loop, Shared

LEASE_TICK = 0.1


class LeaseKeeper(Loop):
    """Renews the worker's liveness lease every few seconds (a third of it, at most 5 s), and
    writes each running attempt's latest heartbeat once its write interval has passed, so that
    the details are stored even when the handler stops calling `heartbeat()`."""

    name = "lease"

    def __init__(self, shared: Shared, record: WorkerRecord, attempts: Attempts) -> None:
        super().__init__(shared)
        self.record = record
        self.attempts = attempts
        self.renew_every = record.renew_every
        self._renewed_at: datetime | None = None
        # When (time.monotonic()) the last renewal was written, and when renewals last came
        # on time again after one came late.
        self._written: float | None = None
        self._steady_since: float | None = None

    def run_once(self, now: datetime) -> bool:
        for attempt in self.attempts.running():
            attempt.flush_heartbeats_if_due()
        if self._renewed_at is not None \
                and (now - self._renewed_at).total_seconds() < self.renew_every:
            return False
        self.record.renew(now, stopping=self.shared.stopping.is_set())
        self._renewed_at = now
        written = time.monotonic()
        if self._written is not None and written - self._written > self._late:
            self._steady_since = written
        self._written = written
        return True

    @property
    def _late(self) -> float:
        return 1.5 * self.renew_every + LEASE_TICK

    def leases_tell(self) -> bool:
        """Whether other workers' leases are evidence now: not while this worker's own renewal
        is late, nor for one lease after it was. A database that refused every writer (a lock
        held, a server away) let every lease lapse, and a lease that lapsed then says nothing
        of the worker that held it; once writes go through, each worker has a lease's time
        to renew its own."""
        if self._written is None:
            return True
        since = time.monotonic()
        if since - self._written > self._late:
            return False
        return self._steady_since is None \
            or since - self._steady_since >= self.record.lease_seconds

    def pause(self, acted: bool) -> float:
        return LEASE_TICK
