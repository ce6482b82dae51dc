"""The schedules' queries (SPEC §12), written once for both backends as a part of `SQLTx`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from wfctl.store import records
from wfctl.store.records import ScheduleAction, ScheduleState

Row = dict[str, Any]
_SCHEDULE = records.select(ScheduleState)
_ACTION = records.select(ScheduleAction)
# Active: neither paused nor removed, as the partial index `schedules_due` is spelled.
_ACTIVE = "paused = 0 AND removed_at IS NULL"


class ScheduleQueries:
    """The schedules' part of `SQLTx`, over its hooks (`_execute`, `_records`, `_at`...). A
    due schedule is read with the row locked where the database locks rows (PostgreSQL: FOR
    UPDATE SKIP LOCKED in a write transaction), so that two workers never decide one tick at
    once; every change of a schedule's tick is conditional and says whether it won."""

    # " FOR UPDATE SKIP LOCKED" where a write transaction locks the rows a claim reads.
    _lock = ""

    def schedules(self) -> list[ScheduleState]:
        return self._records(ScheduleState, f"SELECT {_SCHEDULE} FROM schedules ORDER BY name")

    def get_schedule(self, name: str) -> ScheduleState | None:
        return self._record(ScheduleState,
                            f"SELECT {_SCHEDULE} FROM schedules WHERE name = %s", (name,))

    def insert_schedule(self, row: Row) -> bool:
        return self._execute(
            f"INSERT INTO schedules ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))}) "
            "ON CONFLICT (name) DO NOTHING", tuple(self._stored(row)),
        ).rowcount == 1

    def update_schedule(self, name: str, expect: Row, /, **fields: Any) -> bool:
        assigned = ", ".join(f"{column} = %s" for column in fields)
        conditions = "".join(f" AND {column} {self._IS} %s" for column in expect)
        return self._execute(
            f"UPDATE schedules SET {assigned} WHERE name = %s{conditions}",
            (*self._stored(fields), name, *self._stored(expect)),
        ).rowcount == 1

    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleState]:
        return self._records(
            ScheduleState,
            f"SELECT {_SCHEDULE} FROM schedules WHERE {_ACTIVE} AND due_at <= %s "
            f"ORDER BY due_at LIMIT %s{self._lock}", (self._at(now), limit))

    def next_schedule_due(self) -> datetime | None:
        row = self._one(f"SELECT min(due_at) AS at FROM schedules WHERE {_ACTIVE}")
        return None if row is None else row["at"]

    def buffered_schedules(self) -> list[ScheduleState]:
        return self._records(
            ScheduleState, f"SELECT {_SCHEDULE} FROM schedules "
            f"WHERE buffered_tick_at IS NOT NULL AND {_ACTIVE} ORDER BY name{self._lock}")

    def open_schedule_instances(self, name: str) -> list[str]:
        return [row["workflow_instance_id"] for row in self._all(
            "SELECT workflow_instance_id FROM instances WHERE schedule_name = %s "
            "AND closed_at IS NULL ORDER BY created_at", (name,))]

    def insert_schedule_actions(self, rows: Sequence[Row]) -> None:
        for row in rows:
            self._execute(
                f"INSERT INTO schedule_actions ({', '.join(row)}) "
                f"VALUES ({', '.join(['%s'] * len(row))})", tuple(self._stored(row)))

    def schedule_actions(self, name: str, limit: int) -> list[ScheduleAction]:
        return self._records(
            ScheduleAction, f"SELECT {_ACTION} FROM schedule_actions WHERE schedule_name = %s "
            "ORDER BY action_id DESC LIMIT %s", (name, limit))

    # what SQLTx supplies (see queries.py)
    _IS: str
    _execute: Callable[..., Any]
    _one: Callable[..., Row | None]
    _all: Callable[..., list[Row]]
    _records: Callable[..., list[Any]]
    _record: Callable[..., Any]
    _at: Callable[[datetime], Any]
    _stored: Callable[[Row], list[Any]]
