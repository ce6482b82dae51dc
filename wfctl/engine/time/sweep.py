"""One watchdog pass: finds what time made due (lost workers, timeouts, timers) and expires it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime

from wfctl.engine.core import EngineCore
from wfctl.engine.time.expiry import Expired, expire, lose_workers
from wfctl.engine.time.workers import worker_alive

BATCH = 500


@dataclass
class SweepReport(Expired):
    """What one watchdog pass did (what its `expire` did, and the workers it found lost), and
    when the next one has work."""

    workers_lost: list[str] = field(default_factory=list)
    next_due: datetime | None = None

    @property
    def acted(self) -> bool:
        return bool(self.activities_timed_out or self.workflow_tasks_timed_out
                    or self.timers_fired or self.runs_woken or self.workers_lost)


def sweep(engine: EngineCore, now: datetime, *, alive: Collection[str] = (),
          clock_now: Callable[[], datetime] | None = None,
          leases_tell: bool = True) -> SweepReport:
    """One pass: lost workers, activity and workflow-task timeouts, timers, run deadlines.

    `alive` names workers known to be alive whatever their lease says: the sweeping worker
    itself, whose lease may have lapsed while the database was unavailable. With `leases_tell`
    false, no worker is found lost by its lease alone (see `worker_alive`). With `clock_now`,
    what is found due at `now` is enforced instance by instance at the instant the clock
    reads then (see `EngineCore.expire`).
    """
    with engine.store.read() as tx:
        lost = [w.worker_id for w in tx.live_workers()
                if w.worker_id not in alive
                and not worker_alive(w, now, leases_tell=leases_tell)]
        due = tx.next_due(now)
    if lost:
        lose_workers(engine, lost, now)
    elif due is None or due > now:
        # Nothing was due: what is due next is what was read.
        return SweepReport(next_due=due)
    expired = expire(engine, now, BATCH, clock_now) if due is not None and due <= now \
        else Expired()
    with engine.store.read() as tx:
        next_due = tx.next_due(now)
    return SweepReport(**dataclasses.asdict(expired), workers_lost=lost, next_due=next_due)


