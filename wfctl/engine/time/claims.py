"""A claimed deadline expiry, and the claims one process holds, so that each is handed out once."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass
class DeadlineClaim:
    """An expired deadline this process has claimed: only it may run the handler and record."""

    worker_id: str
    workflow_instance_id: str
    workflow_run_id: str
    deadline_at: datetime
    on_deadline: str | None
    state: dict[str, Any]
    reclaimed: bool
    # on_deadline already ran for this deadline instant (the run was retried keeping it): it
    # runs once per deadline, and the expiry is only recorded.
    handler_ran: bool = False


class ClaimsInHand:
    """What one process's deadline runner holds, so that each claim is handed out once.

    A claim of a worker's own that is in the database but not in hand was made by one of its
    decisions (which hand a passed deadline over instead of advancing), or was dropped by a
    record that failed: both are handed out on the next call, the latter as reclaimed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._dropped: set[str] = set()
        self._handed_over: datetime | None = None

    def handed_over(self, deadline_at: datetime) -> None:
        """A decision claimed this deadline (in a transaction not yet committed)."""
        with self._lock:
            if self._handed_over is None or deadline_at < self._handed_over:
                self._handed_over = deadline_at

    def take_handed_over(self) -> None:
        with self._lock:
            self._handed_over = None

    def earliest_handed_over(self) -> datetime | None:
        return self._handed_over

    def held(self, run_id: str) -> bool:
        return run_id in self._held

    def hold(self, claim: DeadlineClaim) -> None:
        with self._lock:
            self._held.add(claim.workflow_run_id)
            self._dropped.discard(claim.workflow_run_id)

    def was_dropped(self, run_id: str) -> bool:
        return run_id in self._dropped

    def release(self, run_id: str, *, dropped: bool) -> None:
        with self._lock:
            self._held.discard(run_id)
            if dropped:
                self._dropped.add(run_id)
