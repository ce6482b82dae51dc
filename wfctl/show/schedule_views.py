"""What `wfctl schedules` and `schedule describe` show (SPEC §12): the read models, JSON first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wfctl.errors import NotFound
from wfctl.lang.definitions import Definitions
from wfctl.store import Store
from wfctl.store.records import ScheduleAction, ScheduleState

# The actions `schedule describe` lists, newest first.
RECENT_ACTIONS = 20
NEXT_TICKS = 5


def _action(action: ScheduleAction) -> dict[str, Any]:
    return {"tick_at": action.tick_at, "action": action.action,
            "instance_id": action.instance_id, "reason": action.reason}


def _summary(row: ScheduleState, definitions: Definitions, last: ScheduleAction | None) -> \
        dict[str, Any]:
    schedule = definitions.schedules.get(row.name)
    ticking = schedule is not None and row.removed_at is None and not row.paused
    return {
        "name": row.name,
        "workflow": row.workflow_type,
        "spec": schedule.spec.text if schedule else None,
        "description": schedule.spec.describe() if schedule else None,
        "timezone": schedule.spec.timezone if schedule else None,
        "paused": row.paused,
        "next_tick_at": row.next_tick_at if ticking else None,
        "last_action": _action(last) if last is not None else None,
    }


def schedules(store: Store, definitions: Definitions) -> list[dict[str, Any]]:
    """Every schedule the database knows, by name (one removed from the file has no spec)."""
    with store.read() as tx:
        return [_summary(row, definitions, next(iter(tx.schedule_actions(row.name, 1)), None))
                for row in tx.schedules()]


def schedule(store: Store, definitions: Definitions, name: str) -> dict[str, Any]:
    """One schedule: the summary, its next five ticks and its recent actions (newest first)."""
    with store.read() as tx:
        row = tx.get_schedule(name)
        if row is None:
            raise NotFound(f"no schedule {name!r}")
        actions = tx.schedule_actions(name, RECENT_ACTIONS)
    found = _summary(row, definitions, actions[0] if actions else None)
    spec = definitions.schedules.get(name)
    next_at: datetime | None = found["next_tick_at"]
    ticks = [] if spec is None or next_at is None else \
        [next_at, *spec.spec.upcoming(next_at, NEXT_TICKS - 1)]
    found.update(paused_reason=row.paused_reason, overlap=spec.overlap if spec else None,
                 next_ticks=ticks, actions=[_action(action) for action in actions],
                 counts={kind: getattr(row, f"{kind}_count")
                         for kind in ("started", "skipped", "missed", "buffered")})
    return found
