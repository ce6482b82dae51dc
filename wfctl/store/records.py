"""The typed records rows cross the store's seam as, one per entity, each field's kind declared.

A record is a dataclass with `slots=True`, made positionally from a statement's tuple of stored
values. It builds as fast as a named tuple (about 0.35 µs for a dozen fields; a frozen dataclass
takes 2.6 µs) and reads as fast, and unlike a tuple it is neither indexable, iterable nor a
container: a leftover `row["fire_at"]` or `"timer_id" in row` fails loudly instead of reading
a wrong value. Its fields are its columns, in the order `select` lists them.

A field's annotation declares what its column holds, the same on every backend:

- `datetime` (or `datetime | None`): an instant, an aware UTC datetime here (SQLite stores ISO
  text, which its `instant` reads; PostgreSQL's driver gives `timestamptz` as datetimes);
- `bool`: a flag, 0 or 1 in the table;
- `Json`: JSON text in the table, its value here (NULL, and a stored JSON `null`, as None);
- `Policy`: an activity's retry policy, JSON in `codec.encode_policy`'s compact form, as a dict;
- anything else: the stored value as it is.

History's events cross as `Event`, which `Tx.events` makes itself: history is stored in its own
compact encoding (store/codec.py: type codes, integer instants, coded attributes), which codec
reads back, not the columns' kinds above.

Converted: definitions, instances, runs, workflow tasks, activities, timers, signals, children,
failures, workers and events. Inserts and updates take dicts, which store/columns.py converts
by the kinds declared here.

Records are not frozen: the engine keeps one `Run` per run and transaction and changes its
fields as it writes them (`assign`), so that whatever reads the run later in the transaction
sees the change.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, TypeVar

from wfctl.store import codec

INSTANT, FLAG, JSON, POLICY = "instant", "flag", "json", "policy"

# A column of JSON text, whose value crosses the seam.
Json = Annotated[Any, JSON]
# An activity's retry policy, stored compactly (`codec.encode_policy`), as its dict.
Policy = Annotated[dict[str, Any], POLICY]

R = TypeVar("R")


@dataclass(slots=True)
class StoredDefinitions:
    """The text of a definitions file an instance started with, kept by its digest."""

    digest: str
    path: str
    source: str
    created_at: datetime


@dataclass(slots=True)
class Instance:
    """A workflow instance: what it was started as, its current run and how it stands."""

    workflow_instance_id: str
    workflow_type: str
    definitions_digest: str
    status: str
    current_run_id: str
    run_count: int
    execution_timeout_seconds: float | None
    deadline_seconds: float | None
    deadline_at: datetime | None
    on_deadline: str | None
    child_policy: str
    parent_instance_id: str | None
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    child_depth: int
    instance_key: int | None
    # The workflow's retry policy, as started (None without one).
    retry_policy: Policy
    retain_until: datetime | None
    # The schedule that started it and the tick it started for (None for any other start).
    schedule_name: str | None
    schedule_tick_at: datetime | None


@dataclass(slots=True)
class Run:
    """A run of an instance: where it stands in its steps, its state and its deadlines. The
    engine changes a run's fields as it writes them (`assign`), so a transaction sees one run."""

    workflow_run_id: str
    workflow_instance_id: str
    run_number: int
    status: str
    closed_reason: str | None
    run_timeout_seconds: float | None
    execution_deadline_at: datetime | None
    run_deadline_at: datetime | None
    workflow_task_timeout_seconds: float | None
    deadline_at: datetime | None
    deadline_claimed_by: str | None
    deadline_claimed_at: datetime | None
    step_index: int
    step_started: bool
    wait_kind: str | None
    cancel_requested: bool
    state: Json
    first_seq: int
    failure_id: int | None
    continued_to_run_id: str | None
    started_at: datetime
    closed_at: datetime | None
    rejected_starts: int
    retry_attempt: int


@dataclass(slots=True)
class WorkflowTask:
    """A workflow task: a run's turn to be decided, scheduled, then started by a worker."""

    task_id: int
    workflow_run_id: str
    workflow_instance_id: str
    status: str
    # Why it was scheduled (`started`, `activity_completed`, `timer_fired`, ...).
    reason: str
    available_at: datetime
    scheduled_event_id: int
    started_event_id: int | None
    owner: str | None
    started_at: datetime | None
    timeout_at: datetime | None
    closed_at: datetime | None


@dataclass(slots=True)
class Activity:
    """An activity of a step's branch, as its current attempt leaves it."""

    activity_id: str
    workflow_run_id: str
    workflow_instance_id: str
    step_index: int
    branch_index: int
    step: str
    handler: str
    queue: str
    status: str
    attempt: int
    max_attempts: int
    retry_policy: Policy
    available_at: datetime
    scheduled_at: datetime
    schedule_deadline_at: datetime | None
    close_deadline_at: datetime | None
    schedule_to_close_deadline_at: datetime | None
    heartbeat_deadline_at: datetime | None
    started_at: datetime | None
    owner: str | None
    last_heartbeat_at: datetime | None
    last_heartbeat_details: Json
    last_heartbeat_event_at: datetime | None
    scheduled_event_id: int
    started_event_id: int | None
    last_error: Json
    superseded: bool
    closed_at: datetime | None


@dataclass(slots=True)
class ClosedAttempt:
    """What a completion records of the attempt it closed (`Ctx.held_run_and_close`): the
    columns its event and the decision that follows read, as its task tells them (the close
    reads nothing back)."""

    activity_id: str
    workflow_run_id: str
    step_index: int
    branch_index: int
    superseded: bool
    step: str
    attempt: int
    scheduled_event_id: int
    started_event_id: int | None


@dataclass(slots=True)
class PlannedClose:
    """An attempt a write transaction is about to close, with its run read just before
    (`Tx.expect`): `hold_run_and_close(workflow_instance_id, workflow_run_id, …, activity_id,
    attempt, worker_id, now, **fields)` will ask for it."""

    workflow_instance_id: str
    workflow_run_id: str
    activity_id: str
    attempt: int
    worker_id: str
    now: datetime
    fields: dict[str, Any]


@dataclass(slots=True)
class Timer:
    """A durable timer: a delay step's, a signal wait's timeout, or a retry policy's backoff."""

    timer_id: str
    workflow_run_id: str
    workflow_instance_id: str
    step_index: int
    step: str
    kind: str
    fire_at: datetime
    status: str
    scheduled_event_id: int
    superseded: bool
    closed_at: datetime | None


@dataclass(slots=True)
class Signal:
    """A signal delivered to an instance, and the step that consumed it (if one did)."""

    signal_id: int
    workflow_instance_id: str
    name: str
    data: Json
    received_at: datetime
    received_event_id: int
    consumed_run_id: str | None
    consumed_step_index: int | None
    consumed_at: datetime | None


@dataclass(slots=True)
class Child:
    """A child workflow a parent's step started, with its instance's status and when it closed."""

    child_instance_id: str
    parent_instance_id: str
    parent_run_id: str
    step_index: int
    branch_index: int
    step: str
    workflow_type: str
    started_event_id: int
    superseded: bool
    created_at: datetime
    # Of the child's instance (`column`: what the query selects for a field of another table).
    status: str = field(metadata={"column": "i.status"})
    closed_at: datetime | None = field(metadata={"column": "i.closed_at"})


@dataclass(slots=True)
class Failure:
    """Why a run (or an activity's attempt) failed, as recorded when it did."""

    failure_id: int
    workflow_instance_id: str
    workflow_run_id: str
    activity_id: str | None
    failure_category: str
    propagation_kind: str | None
    timeout_kind: str | None
    exception_class: str | None
    message: str
    deadline_at: datetime | None
    details: Json
    created_at: datetime


@dataclass(slots=True)
class RegisteredWorker:
    """A `wfctl work` process (or another that holds leases) as registered, with its lease."""

    worker_id: str
    kind: str
    hostname: str
    pid: int
    pid_started: str | None
    # The queues it serves, comma-separated.
    queues: str
    started_at: datetime
    heartbeat_at: datetime
    lease_expires_at: datetime
    stopped_at: datetime | None
    # None for a worker registered before hosts were recorded.
    host_id: str | None


@dataclass(slots=True)
class ScheduleState:
    """A schedule as the database keeps it (its spec is the definitions file's): whether it is
    paused, its next tick and when that tick's start is due (the tick plus its jitter), the
    tick buffered behind an open instance, its last action and its counts by outcome."""

    name: str
    workflow_type: str
    spec_digest: str
    # `paused:` as the file said when last seen: a change of it in the file sets `paused`.
    file_paused: bool
    paused: bool
    paused_reason: str | None
    next_tick_at: datetime | None
    due_at: datetime | None
    buffered_tick_at: datetime | None
    last_tick_at: datetime | None
    last_action: str | None
    last_instance_id: str | None
    last_action_at: datetime | None
    last_lag_seconds: float | None
    started_count: int
    skipped_count: int
    missed_count: int
    buffered_count: int
    # When a file without it was last seen by a worker (it ticks no more), else None.
    removed_at: datetime | None
    created_at: datetime


@dataclass(slots=True)
class ScheduleAction:
    """What a schedule did with one tick: started an instance, skipped, missed or buffered it."""

    schedule_name: str
    tick_at: datetime
    action: str
    instance_id: str | None
    reason: str | None
    at: datetime


@dataclass(slots=True)
class Event:
    """One event of an instance's history, as history's own encoding reads back (codec.py)."""

    workflow_instance_id: str
    # Its place in the instance's history, from 1: the event's id.
    seq: int
    run_number: int
    event_type: str
    at: datetime
    # The event's JSON values, but for its instants (`codec.INSTANT_ATTRIBUTES`, a failure's
    # `deadline_at`): aware UTC datetimes.
    attributes: dict[str, Any]
def assign(record: Any, fields: dict[str, Any]) -> None:
    """Set a record's fields from `fields` (a name it lacks fails, as a typo should)."""
    for name, value in fields.items():
        setattr(record, name, value)


def kind(hint: Any) -> str | None:
    """The kind of column a field's type declares (INSTANT, FLAG, JSON), None for a plain one."""
    if typing.get_origin(hint) is Annotated:
        return hint.__metadata__[0]
    parts = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
    parts.discard(type(None))
    if parts == {datetime}:
        return INSTANT
    if parts == {bool}:
        return FLAG
    return None


def kinds(record: type) -> tuple[str | None, ...]:
    """The kind of each of a record's fields, in order."""
    hints = typing.get_type_hints(record, include_extras=True)
    return tuple(kind(hints[f.name]) for f in dataclasses.fields(record))


def select(record: type, alias: str = "") -> str:
    """A record's columns as a SELECT list, in its fields' order (`alias` qualifies them)."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f.metadata.get("column", prefix + f.name) for f in dataclasses.fields(record))


class Readers:
    """How one backend makes each record from a row of its stored values: the conversion of
    each field whose stored value is not its value, worked out once per record type. `instant`
    reads a stored instant (None where the driver gives datetimes)."""

    def __init__(self, instant: Callable[[Any], datetime | None] | None) -> None:
        self._convert: dict[str, Callable[[Any], Any] | None] = {
            INSTANT: instant, FLAG: bool, JSON: codec.decode_json, POLICY: codec.decode_policy}
        self._readers: dict[type, Callable[[Sequence[Any]], Any]] = {}

    def __getitem__(self, record: type[R]) -> Callable[[Sequence[Any]], R]:
        found = self._readers.get(record)
        if found is None:
            found = self._readers[record] = self._reader(record)
        return found

    def _reader(self, record: type[R]) -> Callable[[Sequence[Any]], R]:
        plan = tuple((index, convert) for index, convert in
                     enumerate(self._convert.get(k) if k else None for k in kinds(record))
                     if convert is not None)

        def read(values: Sequence[Any]) -> R:
            values = list(values)
            for index, convert in plan:
                value = values[index]
                if value is not None:
                    values[index] = convert(value)
            return record(*values)

        def read_as_stored(values: Sequence[Any]) -> R:
            return record(*values)

        return read if plan else read_as_stored
