"""The schedule loop: starts due ticks at their instants (SPEC §12), sleeping until the nearest."""

from __future__ import annotations

from datetime import datetime

from wfctl.engine.schedules import fire_due, sync_schedules
from wfctl.lang.definitions import Definitions
from wfctl.ops import log
from wfctl.worker.loop import Loop, Shared

# The longest sleep between looks: a schedule another process unpaused, triggered or changed
# is seen within this, and a buffered tick starts this soon after its open instance closes.
SCHEDULE_TICK = 1.0


class ScheduleLoop(Loop):
    """Records the file's schedules at its first pass, then, at each pass, starts the ticks
    that are due (`fire_due`) and sleeps until the nearest next one (at most `SCHEDULE_TICK`):
    a pass with nothing due is one index read, however many schedules are idle."""

    name = "schedules"

    def __init__(self, shared: Shared, definitions: Definitions) -> None:
        super().__init__(shared)
        self.definitions = definitions
        self._synced = False
        self._wake_at: datetime | None = None

    def run_once(self, now: datetime) -> bool:
        engine = self.shared.engine
        if not self._synced:
            sync_schedules(engine, self.definitions, now, remove_missing=True)
            self._synced = True
        acted = False
        if self._wake_at is None or now >= self._wake_at or self._buffered():
            actions = fire_due(engine, self.definitions, now)
            for action in actions:
                log.event("schedule_tick", schedule=action.schedule,
                          tick_at=action.tick_at.isoformat(), action=action.action,
                          instance=action.instance_id, reason=action.reason)
            acted = bool(actions)
        with engine.store.read() as tx:
            self._wake_at = tx.next_schedule_due()
        return acted

    def _buffered(self) -> bool:
        with self.shared.engine.store.read() as tx:
            return bool(tx.buffered_schedules())

    def idle_wait(self) -> float:
        if self._wake_at is None:
            return SCHEDULE_TICK
        wait = (self._wake_at - self.shared.clock()).total_seconds()
        return min(SCHEDULE_TICK, max(0.0, wait))

    def catch_up(self, now: datetime) -> bool:
        """All that is due at `now`, pass after pass (`work --once`)."""
        acted = False
        while self.run_once(now):
            acted = True
        return acted
