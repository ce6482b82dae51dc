"""The lease keeper: keeps alive in the database what the worker holds."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from wfctl.worker.loop import Loop

if TYPE_CHECKING:
    from wfctl.worker.process import Worker

LEASE_TICK = 0.1


class LeaseKeeper(Loop):
    """Renews the worker's liveness lease every few seconds (a third of it, at most 5 s), and
    writes each running attempt's latest heartbeat once its write interval has passed, so that
    the details are stored even when the handler stops calling `heartbeat()`."""

    name = "lease"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.renew_every = min(5.0, worker.options.worker_lease / 3)
        self._renewed_at: datetime | None = None

    def run_once(self, now: datetime) -> bool:
        worker = self.worker
        for attempt in worker.attempts():
            attempt.heartbeats.flush_if_due()
        if self._renewed_at is not None \
                and (now - self._renewed_at).total_seconds() < self.renew_every:
            return False
        worker.renew(now)
        self._renewed_at = now
        return True

    def pause(self, acted: bool) -> float:
        return LEASE_TICK
