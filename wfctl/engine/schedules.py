"""Schedules (SPEC §12): what a due tick does, decided and started in one transaction at `now`.

A tick is decided in the transaction that moves its schedule's next tick on, on the condition
that the next tick is still the one read (a claim that says whether it won: the loser writes
nothing), and the instance it starts has an id made from the tick, unique in the database. So a
tick starts at most once whatever the number of workers, and a crash before the commit leaves
the tick due for the next pass: it starts exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from wfctl.engine.closing import close_run, request_cancel
from wfctl.engine.core import Ctx, EngineCore, operation
from wfctl.engine.start import create_instance, validate_start
from wfctl.errors import Conflict, InvalidInput, NotFound
from wfctl.lang.definitions import Definitions
from wfctl.lang.schedule_spec import ACTIONS, Schedule
from wfctl.store.records import ScheduleState
from wfctl.vocabulary import OPEN_RUN

# Schedules decided in one transaction at most; the rest wait for the next pass.
DUE_BATCH = 50
# Missed ticks recorded one by one after downtime; those before them are summed up in one.
MISSED_RECORDED = 100
# Ticks a backfill takes at most.
BACKFILL_MAX = 10_000
_MICRO = timedelta(microseconds=1)


@dataclass(frozen=True)
class Action:
    """What a schedule did with one tick."""

    schedule: str
    tick_at: datetime
    action: str
    instance_id: str | None = None
    reason: str | None = None

    def row(self, now: datetime) -> dict[str, Any]:
        return {"schedule_name": self.schedule, "tick_at": self.tick_at, "action": self.action,
                "instance_id": self.instance_id, "reason": self.reason, "at": now}


@operation
def sync_schedules(engine: EngineCore, definitions: Definitions, now: datetime, *,
                   remove_missing: bool = False) -> None:
    """Record the file's schedules: a new one ticks from `now` on (or from its `start_at`); a
    changed spec ticks again from `now`; a changed `paused:` sets its state. With
    `remove_missing` (a worker starting), a known schedule the file lacks is marked removed."""
    with engine.transaction(now) as c:
        known = {row.name: row for row in c.tx.schedules()}
        for schedule in definitions.schedules.values():
            row = known.get(schedule.name)
            if row is None:
                tick = schedule.first_tick(now)
                c.tx.insert_schedule({
                    "name": schedule.name, "workflow_type": schedule.workflow,
                    "spec_digest": schedule.digest, "file_paused": schedule.paused,
                    "paused": schedule.paused, "next_tick_at": tick,
                    "due_at": schedule.due_at(tick), "created_at": now,
                })
                continue
            fields: dict[str, Any] = {}
            if row.workflow_type != schedule.workflow:
                fields["workflow_type"] = schedule.workflow
            if row.removed_at is not None:
                fields["removed_at"] = None
            if row.file_paused != schedule.paused:
                fields.update(file_paused=schedule.paused, paused=schedule.paused,
                              paused_reason=None)
            if row.spec_digest != schedule.digest or (row.paused and fields.get("paused") is False):
                tick = schedule.first_tick(now)
                fields.update(spec_digest=schedule.digest, next_tick_at=tick,
                              due_at=schedule.due_at(tick))
            if fields:
                c.tx.update_schedule(schedule.name, {}, **fields)
        if remove_missing:
            for name, row in known.items():
                if name not in definitions.schedules and row.removed_at is None:
                    c.tx.update_schedule(name, {}, removed_at=now)


@operation
def fire_due(engine: EngineCore, definitions: Definitions, now: datetime) -> list[Action]:
    """Start what is due at `now`: buffered ticks whose open instance closed, then the due
    ticks of up to `DUE_BATCH` schedules (missed ones recorded, those inside the catch-up
    window started in order under the overlap policy). Returns what was done."""
    done: list[Action] = []
    with engine.transaction(now) as c:
        for row in c.tx.buffered_schedules():
            schedule = definitions.schedules.get(row.name)
            if schedule is not None and row.buffered_tick_at is not None \
                    and not c.tx.open_schedule_instances(row.name):
                done += _release_buffered(c, definitions, schedule, row)
        for row in c.tx.due_schedules(now, DUE_BATCH):
            schedule = definitions.schedules.get(row.name)
            if schedule is not None:
                done += _fire(c, definitions, schedule, row)
        c.tx.insert_schedule_actions([action.row(now) for action in done])
    return done


def _release_buffered(c: Ctx, definitions: Definitions, schedule: Schedule,
                      row: ScheduleState) -> list[Action]:
    tick = row.buffered_tick_at
    assert tick is not None
    if not c.tx.update_schedule(schedule.name, {"buffered_tick_at": tick}, buffered_tick_at=None):
        return []
    action = _start(c, definitions, schedule, tick, "buffered: the open instance closed")
    _count(c, schedule.name, [action])
    return [action]


def _fire(c: Ctx, definitions: Definitions, schedule: Schedule, row: ScheduleState) -> list[Action]:
    now = c.now
    tick = row.next_tick_at
    if tick is None or row.spec_digest != schedule.digest:
        # Changed by a process reading another version of the file: it ticks from now on.
        first = schedule.first_tick(now)
        c.tx.update_schedule(schedule.name, {"next_tick_at": row.next_tick_at},
                             spec_digest=schedule.digest, next_tick_at=first,
                             due_at=schedule.due_at(first))
        return []
    window_start = now - timedelta(seconds=schedule.catchup_window)
    missed: list[datetime] = []
    missed_total = 0
    due: list[datetime] = []
    while schedule.due_at(tick) <= now:
        if tick < window_start and len(missed) >= MISSED_RECORDED:
            # Far behind: the rest of the missed ticks are counted, not listed one by one.
            later = schedule.spec.next_after(window_start - _MICRO)
            missed_total += _count_ticks(schedule, tick, later)
            tick = later
            continue
        if tick < window_start:
            missed.append(tick)
            missed_total += 1
        else:
            due.append(tick)
        tick = schedule.spec.next_after(tick)
    # The claim: the next tick moves on only if no one else moved it since it was read.
    if not c.tx.update_schedule(schedule.name, {"next_tick_at": row.next_tick_at},
                                next_tick_at=tick, due_at=schedule.due_at(tick)):
        return []
    outside = "outside the catch-up window"
    actions = [Action(schedule.name, t, "missed", reason=outside) for t in missed]
    if missed_total > len(missed):
        actions.append(Action(schedule.name, missed[-1], "missed", reason=(
            f"{outside}, and so were the {missed_total - len(missed)} ticks after this one "
            "up to the window")))
    buffered = row.buffered_tick_at
    late = timedelta(seconds=1 + schedule.jitter)
    for due_tick in due:
        why = "on time" if now - due_tick <= late else "caught up after downtime"
        action, buffered = decide_tick(c, definitions, schedule, due_tick, buffered, why,
                                       schedule.overlap)
        actions.append(action)
    if buffered != row.buffered_tick_at:
        c.tx.update_schedule(schedule.name, {}, buffered_tick_at=buffered)
    _count(c, schedule.name, actions, missed=missed_total)
    return actions


def _count_ticks(schedule: Schedule, first: datetime, before: datetime) -> int:
    if schedule.spec.every is not None:
        return round((before - first).total_seconds() / schedule.spec.every)
    count, tick = 0, first
    while tick < before:
        count += 1
        tick = schedule.spec.next_after(tick)
    return count


def decide_tick(c: Ctx, definitions: Definitions, schedule: Schedule, tick: datetime,
                buffered: datetime | None, why: str,
                overlap: str) -> tuple[Action, datetime | None]:
    """A due tick under an overlap policy, judged against the open instances the schedule
    started: (what was done, the tick now buffered)."""
    open_ids = c.tx.open_schedule_instances(schedule.name)
    if open_ids and overlap in ("skip", "buffer_one"):
        if overlap == "buffer_one" and buffered is None:
            return Action(schedule.name, tick, "buffered", reason=f"behind {open_ids[0]}, "
                          "still open; starts when it closes"), tick
        reason = f"{open_ids[0]} is still open" if overlap == "skip" else \
            f"{open_ids[0]} is still open and a tick is already buffered"
        return Action(schedule.name, tick, "skipped", reason=f"{reason} (overlap: {overlap})"), \
            buffered
    stopped = _stop_others(c, open_ids, schedule.name, overlap)
    if stopped:
        verb = "cancellation requested of" if overlap == "cancel_other" else "terminated"
        why = f"{why}; {verb} {', '.join(stopped)} (overlap: {overlap})"
    return _start(c, definitions, schedule, tick, why), buffered


def _stop_others(c: Ctx, open_ids: Iterable[str], name: str, overlap: str) -> list[str]:
    if overlap not in ("cancel_other", "terminate_other"):
        return []
    stopped = []
    reason = f"schedule {name}: a new tick is due (overlap: {overlap})"
    for instance_id in open_ids:
        instance = c.tx.get_instance(instance_id)
        if instance is None or instance.status not in OPEN_RUN:
            continue
        run = c.run(instance.current_run_id)
        if overlap == "terminate_other":
            close_run(c, run, "terminated", "WorkflowTerminated", {"reason": reason},
                      reason="terminated")
        elif not run.cancel_requested:
            request_cancel(c, run, reason)
        stopped.append(instance_id)
    return stopped


def _start(c: Ctx, definitions: Definitions, schedule: Schedule, tick: datetime,
           why: str) -> Action:
    """Start the tick's instance, or say why it was not (its id taken: it already started)."""
    try:
        instance_id = schedule.instance_id(tick)
        state = validate_start(definitions, schedule.workflow, instance_id,
                               dict(schedule.input), "reject")
    except (InvalidInput, ValueError) as exc:
        return Action(schedule.name, tick, "skipped", reason=f"cannot start: {exc}")
    if c.tx.get_instance(instance_id) is not None:
        return Action(schedule.name, tick, "skipped", instance_id,
                      f"instance {instance_id} already exists")
    c.engine.save_definitions(c, definitions)
    create_instance(c, definitions, definitions.types[schedule.workflow], instance_id, state,
                    schedule.overrides, schedule=(schedule.name, tick))
    return Action(schedule.name, tick, "started", instance_id, why)


def _count(c: Ctx, name: str, actions: list[Action], *, missed: int | None = None) -> None:
    """The schedule's last action, its counts by outcome (`missed`: how many, where more were
    missed than listed) and the lag of its last start behind its tick."""
    if not actions:
        return
    row = c.tx.get_schedule(name)
    assert row is not None
    added = {kind: sum(1 for a in actions if a.action == kind) for kind in ACTIONS}
    if missed is not None:
        added["missed"] = missed
    last = actions[-1]
    fields: dict[str, Any] = {f"{kind}_count": getattr(row, f"{kind}_count") + added[kind]
                              for kind in ACTIONS}
    fields.update(last_tick_at=last.tick_at, last_action=last.action,
                  last_instance_id=last.instance_id, last_action_at=c.now)
    started = [a for a in actions if a.action == "started"]
    if started:
        fields["last_lag_seconds"] = (c.now - started[-1].tick_at).total_seconds()
    c.tx.update_schedule(name, {}, **fields)


def _known(definitions: Definitions, name: str) -> Schedule:
    schedule = definitions.schedules.get(name)
    if schedule is None:
        known = ", ".join(sorted(definitions.schedules)) or "none"
        raise NotFound(f"no schedule {name!r} in {definitions.path} (defined: {known})")
    return schedule


@operation
def set_paused(engine: EngineCore, definitions: Definitions, name: str, paused: bool,
               reason: str | None, now: datetime) -> ScheduleState:
    """Pause or unpause a schedule; unpaused, it ticks from `now` on (no catch-up of the
    ticks it was paused through)."""
    schedule = _known(definitions, name)
    with engine.transaction(now) as c:
        row = c.tx.get_schedule(name)
        assert row is not None
        if row.paused == paused:
            raise Conflict(f"schedule {name} is {'already' if paused else 'not'} paused")
        fields: dict[str, Any] = {"paused": paused, "paused_reason": reason if paused else None}
        if not paused:
            tick = schedule.first_tick(now)
            fields.update(next_tick_at=tick, due_at=schedule.due_at(tick))
        c.tx.update_schedule(name, {"paused": row.paused}, **fields)
        found = c.tx.get_schedule(name)
        assert found is not None
        return found


@operation
def start_ticks(engine: EngineCore, definitions: Definitions, name: str, ticks: list[datetime],
                why: str, now: datetime, *, overlap: str | None = None) -> list[Action]:
    """`trigger` (one tick: now) and `backfill` (every tick of a range): each tick in order
    under the overlap policy (the schedule's, unless told), whatever its next tick."""
    schedule = _known(definitions, name)
    if len(ticks) > BACKFILL_MAX:
        raise InvalidInput(f"{len(ticks)} ticks is more than {BACKFILL_MAX} at once: "
                           "backfill a shorter range")
    actions = []
    with engine.transaction(now) as c:
        row = c.tx.get_schedule(name)
        assert row is not None
        buffered = row.buffered_tick_at
        for tick in ticks:
            action, buffered = decide_tick(c, definitions, schedule, tick, buffered, why,
                                           overlap or schedule.overlap)
            actions.append(action)
        if buffered != row.buffered_tick_at:
            c.tx.update_schedule(name, {}, buffered_tick_at=buffered)
        _count(c, name, actions)
        c.tx.insert_schedule_actions([action.row(now) for action in actions])
    return actions


def backfill_ticks(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The ticks from `start` to `end`, both included (at most one past `BACKFILL_MAX`)."""
    found = []
    for tick in schedule.spec.ticks(start - _MICRO, end):
        found.append(tick)
        if len(found) > BACKFILL_MAX:
            break
    return found

