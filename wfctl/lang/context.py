"""What a handler sees of its attempt: `ActivityContext`, and the throttled heartbeats behind it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from wfctl.errors import ActivityCancelled, StoreUnavailable

# The longest a heartbeat's details wait in memory before they are written.
MAX_WRITE_INTERVAL = 1.0
_NOTHING = object()


class Flag:
    """Set once, read from any thread, never waited on: what `threading.Event` offers for an
    attempt's `abandon`, at a twentieth of its cost to make (an attempt begins every step)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class HeartbeatBuffer:
    """Keeps the latest heartbeat in memory and writes it at most once per write interval.

    A write both stores the details and pushes the heartbeat deadline, so the interval is a
    third of the heartbeat timeout (at most a second): the deadline never lapses while the
    handler keeps calling. Pending details are written by the worker's lease keeper
    (`flush_if_due`) or with the attempt's result, so the latest details are never lost.

    `abandon` is set once the attempt is known to be no longer current (a write was rejected,
    or the worker found out otherwise); from then on every heartbeat raises ActivityCancelled.
    A write the database cannot take now (`StoreUnavailable`) keeps the details for the next.
    """

    def __init__(self, write: Callable[[Any], bool], heartbeat_timeout: float | None,
                 monotonic: Callable[[], float] = time.monotonic, *,
                 abandon: Flag | None = None,
                 heartbeat_deadline_at: datetime | None = None) -> None:
        self._write = write
        self._monotonic = monotonic
        self.interval = min(MAX_WRITE_INTERVAL, (heartbeat_timeout or 3 * MAX_WRITE_INTERVAL) / 3)
        self._lock = threading.Lock()      # guards `_pending`, held only to swap it
        self._writing = threading.Lock()   # one write at a time; no thread waits for it
        self._pending: Any = _NOTHING
        self._last_write = float("-inf")
        self.abandon = abandon if abandon is not None else Flag()
        # The heartbeat deadline as the last accepted write moved it (the writer sets it).
        self.heartbeat_deadline_at = heartbeat_deadline_at

    @property
    def cancelled(self) -> bool:
        return self.abandon.is_set()

    def beat(self, details: Any) -> None:
        """Record a heartbeat; raises ActivityCancelled once the attempt is no longer current."""
        if self.cancelled:
            raise ActivityCancelled("this activity attempt is no longer current")
        with self._lock:
            self._pending = details
        if self._monotonic() - self._last_write >= self.interval:
            self.flush()
        if self.cancelled:
            raise ActivityCancelled("this activity attempt is no longer current")

    def flush_if_due(self) -> None:
        if self._pending is not _NOTHING and self._monotonic() - self._last_write >= self.interval:
            self.flush()

    def flush(self) -> None:
        """Write the pending details. A write already under way in another thread is not waited
        for: what is pending goes with the next one."""
        if not self._writing.acquire(blocking=False):
            return
        try:
            with self._lock:
                details, self._pending = self._pending, _NOTHING
            if details is _NOTHING or self.cancelled:
                return
            self._last_write = self._monotonic()
            try:
                written = self._write(details)
            except StoreUnavailable:
                # Kept for the next write, unless the handler sent newer details meanwhile.
                with self._lock:
                    if self._pending is _NOTHING:
                        self._pending = details
                return
            if not written:
                self.abandon.set()
        finally:
            self._writing.release()

    def take_pending(self) -> Any:
        """Details not yet written (to go with the attempt's result), or the marker `_NOTHING`."""
        with self._lock:
            details, self._pending = self._pending, _NOTHING
            return details

    def keep_pending(self, details: Any) -> None:
        """Hold `details` as the latest heartbeat, unwritten: they go with the attempt's result
        (`take_pending`) or with the next due write. For heartbeats that reach the worker
        after their handler's own throttle held them back (a handler in a child process)."""
        with self._lock:
            self._pending = details


class ActivityContext:
    """The second argument of a handler: who this attempt is, its deadlines, and heartbeats."""

    def __init__(self, *, workflow_id: str, run_id: str, activity_id: str, step: str,
                 attempt: int, max_attempts: int, last_heartbeat_details: Any,
                 schedule_to_close_deadline_at: datetime | None,
                 close_deadline_at: datetime | None, heartbeat_deadline_at: datetime | None,
                 heartbeat_timeout: float | None = None,
                 heartbeats: HeartbeatBuffer | None = None) -> None:
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.activity_id = activity_id
        self.step = step
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.last_heartbeat_details = last_heartbeat_details
        self.schedule_to_close_deadline_at = schedule_to_close_deadline_at
        self.close_deadline_at = close_deadline_at
        self._heartbeat_deadline_at = heartbeat_deadline_at
        self.heartbeat_timeout = heartbeat_timeout
        self._heartbeats = heartbeats

    @property
    def heartbeat_deadline_at(self) -> datetime | None:
        """The heartbeat deadline, moved by each heartbeat written."""
        moved = self._heartbeats.heartbeat_deadline_at if self._heartbeats is not None else None
        return moved or self._heartbeat_deadline_at

    def heartbeat(self, details: Any = None) -> None:
        """Report progress; `details` reach the next attempt as `last_heartbeat_details`.

        Cheap to call often: writes are throttled. Raises `ActivityCancelled` once this
        attempt timed out, was cancelled, or its workflow closed.
        """
        if self._heartbeats is not None:
            self._heartbeats.beat(details)

    @property
    def cancelled(self) -> bool:
        """True once the attempt is known to be no longer current."""
        return self._heartbeats is not None and self._heartbeats.cancelled
