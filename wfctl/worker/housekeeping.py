"""Housekeeping: watching the running attempts and telling systemd how the worker is (a loop
that never writes), and pruning what retention lets go (a loop of its own, which does)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from wfctl.engine.prune import Pacer, prune_batch
from wfctl.ops import log, systemd
from wfctl.worker.held_attempts import Attempt, Attempts
from wfctl.worker.loop import Loop, Shared

HOUSEKEEPING_TICK = 0.1
# With nothing to prune, look again after this long, or when the next retention runs out.
PRUNE_IDLE = 60.0
# How often the running attempts are checked against the database (one query for all).
CURRENT_CHECK_INTERVAL = 1.0


class Housekeeping(Loop):
    """Marks each running attempt that is no longer current: past one of its own deadlines,
    its heartbeat rejected, or — one query a second for all of them — timed out, cancelled or
    closed by someone else. Sends systemd STATUS= (what `status` says) when it changes and WATCHDOG=1 on time.

    It never writes to the database, so that a database outage never stops the watchdog
    pings: a worker waiting out an outage is not wedged. A wedged worker stops pinging.
    """

    name = "housekeeping"
    writes = False

    def __init__(self, shared: Shared, attempts: Attempts, status: Callable[[], str]) -> None:
        super().__init__(shared)
        self.attempts = attempts
        self._status = status
        self._ping_every = systemd.watchdog_interval()
        self._last_ping = time.monotonic()
        self._last_status = status()
        self._last_check = float("-inf")

    def run_once(self, now: datetime) -> bool:
        self._notify()
        acted = False
        attempts = self.attempts.running()
        for attempt in attempts:
            expired = attempt.expired(now)
            if attempt.abandon.is_set():
                acted = True
                attempt.give_up(now, attempt.reason or "a heartbeat was rejected: the attempt "
                                "timed out, was cancelled or its workflow closed")
            elif expired is not None:
                acted = True
                attempt.give_up(now, f"its {expired} deadline passed")
        if attempts and time.monotonic() - self._last_check >= CURRENT_CHECK_INTERVAL:
            acted = self._check_current(now, attempts) or acted
        return acted

    def pause(self, acted: bool) -> float:
        return HOUSEKEEPING_TICK

    def _check_current(self, now: datetime, attempts: list[Attempt]) -> bool:
        shared = self.shared
        started = self._last_check = time.monotonic()
        with shared.engine.store.read() as tx:
            owned = {(row.activity_id, row.attempt)
                     for row in tx.activities_owned_by([shared.worker_id])}
        acted = False
        for attempt in attempts:
            # An attempt claimed after the query began may not show in it yet.
            if attempt.claimed < started and attempt.key not in owned \
                    and not attempt.abandon.is_set():
                attempt.give_up(now, "it timed out, was cancelled or its workflow closed")
                acted = True
        return acted

    def _notify(self) -> None:
        status = self._status()
        if self._ping_every is not None \
                and time.monotonic() - self._last_ping >= self._ping_every:
            systemd.notify(f"WATCHDOG=1\nSTATUS={status}")
            self._last_ping, self._last_status = time.monotonic(), status
        elif status != self._last_status:
            systemd.notify(f"STATUS={status}")
            self._last_status = status


class Pruner(Loop):
    """Deletes closed instances past their type's retention (`wfctl.engine.prune`), one small
    batch a pass, in the long-running worker only. Between batches it leaves the write lock to
    the slots and other workers (`Pacer`: nineteen times as long as the batch held it while
    they write), so that they keep their pace; a backlog (a retention just shortened, an
    upgrade) drains at a steady rate, and fast on a quiet database."""

    name = "prune"

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._wait = 0.0
        self._pacer = Pacer(shared.engine.store)
        self._pruned = self._batches = 0
        self._longest = 0.0

    def run_once(self, now: datetime) -> bool:
        engine = self.shared.engine
        self._pacer.before()
        batch = prune_batch(engine, now)
        if not batch.empty:
            self._pruned += len(batch.instance_ids)
            self._batches += 1
            self._longest = max(self._longest, batch.held_seconds)
            self._wait = self._pacer.after(batch)
            return True
        self._pacer.flush()
        if self._pruned:
            log.event("instances_pruned", count=self._pruned, batches=self._batches,
                      longest_batch_ms=round(self._longest * 1000, 1))
            self._pruned = self._batches = 0
            self._longest = 0.0
        with engine.store.read() as tx:
            next_due = tx.next_retain_until(now)
        self._wait = PRUNE_IDLE if next_due is None \
            else min(PRUNE_IDLE, (next_due - now).total_seconds())
        return False

    def pause(self, acted: bool) -> float:
        return self._wait
