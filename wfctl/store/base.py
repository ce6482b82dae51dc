"""The store interface: what the engine, the worker, the watchdog and the client may ask of a database.

`wfctl/store/queries.py` writes its queries once; `sqlite.py` and `postgres.py` run them.
Another backend implements the same methods with the same meaning and passes the same contract
suite (tests/store/), which has a test for every method. Errors leave as wfctl's own
(wfctl/errors.py), never a driver's. Rows cross it as Python values, whatever the database
holds: instants as aware UTC datetimes, exact to the microsecond; JSON columns (a run's state,
details, errors, signal data, retry policies) as the values they hold, never their text; flags
as bools. An entity with a record in store/records.py (a timer, a signal, a failure...) crosses
as that record, whose fields declare their kinds; the others still as dicts, whose columns'
kinds store/columns.py names. A method named for a condition (`expect_status`,
`expect_attempt`, a claim) changes a row only while the condition holds and says whether it
did: the engine acts only on what it won. Events appended in a transaction are written at its
commit, in one statement, and are visible to its own reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from wfctl.store.codec import EventKind
from wfctl.store.records import (
    Activity,
    Child,
    Event,
    Failure,
    Instance,
    PlannedClose,
    RegisteredWorker,
    Run,
    ScheduleAction,
    ScheduleState,
    Signal,
    StoredDefinitions,
    Timer,
    WorkflowTask,
)

Row = dict[str, Any]


class Tx(Protocol):
    """The queries and changes of one transaction (or, from `Store.peek`, of none)."""

    # definitions
    def put_definitions(self, digest: str, path: str, source: str, now: datetime) -> None: ...
    def get_definitions(self, digest: str) -> StoredDefinitions | None: ...

    # instances and runs
    def hold(self, instance_id: str) -> None:
        """This write transaction is about to read and change rows of this instance: a store
        that locks workflow families takes its family's lock now, so that those rows are read
        once, after it (a no-op where one writer holds the whole database)."""
    def expect(self, instance_ids: Sequence[str], closes: Sequence[PlannedClose] = ()) -> None:
        """This write transaction is about to change rows of these instances, one after
        another (an instance once for each operation on it): a store that locks workflow
        families may take all their locks with the first one it takes, and, where no other
        operation of these changes its family, close an attempt of `closes` and read its run
        along with the first (a no-op where one writer holds the whole database). Each of
        `closes` is then asked for by `hold_run_and_close` with the same values before the
        transaction commits (else the commit fails)."""
    def get_instance(self, instance_id: str) -> Instance | None: ...
    def insert_instance(self, row: Row) -> None: ...
    def update_instance(self, instance_id: str, /, **fields: Any) -> None: ...
    def list_instances(self, *, status: str | None, workflow_type: str | None,
                       since: datetime | None, limit: int,
                       before: tuple[datetime, str] | None = None,
                       schedule: str | None = None) -> list[Row]:
        """Instances newest first (created_at, then insertion); `before` (created_at, id) keeps
        those that come after that instance in this order (keyset paging); `schedule`: only
        those that schedule started."""
    def count_instances(self, *, status: str | None, workflow_type: str | None,
                        since: datetime | None, schedule: str | None = None) -> int: ...
    def open_deadlines(self, run_ids: Sequence[str]) -> list[Row]:
        """Every pending deadline of these runs' open work (workflow_run_id, kind, at): open
        attempts' four deadlines, scheduled timers (a signal wait's as `signal_wait`, a delay
        as `timer`), started workflow tasks' timeouts."""
    def instance_ids(self, prefix: str, limit: int) -> list[str]: ...
    def get_run(self, run_id: str) -> Run | None: ...
    def hold_run(self, instance_id: str, run_id: str) -> Run | None:
        """`hold` the instance, then `get_run` one of its runs (where these are two statements,
        in one round trip)."""
    def run_instance_fields(self, run_id: str) -> tuple[str, str, int, str] | None:
        """The unchanging fields of the run's instance (definitions digest, workflow type, child
        depth, child policy) when this transaction read the run, which reads them with it."""
    def get_run_by_number(self, instance_id: str, run_number: int) -> Run | None: ...
    def insert_run(self, row: Row) -> None: ...
    def update_run(self, run_id: str, /, **fields: Any) -> None: ...

    # history
    def instance_key(self, instance_id: str) -> int | None:
        """The integer key history is stored under (read once per transaction)."""
    def last_seq(self, instance_id: str) -> int: ...
    def append_event(self, run: Run, event_type: str, at: datetime, attributes: Row) -> int:
        """Append one event to the instance's history; returns its seq (the event id). The
        attributes are JSON values, but for the instants of `codec.INSTANT_ATTRIBUTES` and a
        failure's `deadline_at`, which may be datetimes (or wfctl's ISO text)."""
    def append_values(self, run: Run, kind: EventKind, at: datetime,
                      values: tuple[Any, ...]) -> int:
        """`append_event` of an event of `kind`, its attribute values in the kind's order."""
    def flush(self) -> None:
        """Write the events appended so far (one statement for all of them)."""
    def history_count(self, run: Run) -> int:
        """Events of a run that count toward history_size (refused starts excluded)."""
    def events(self, instance_id: str, *, run_number: int | None = None, after_seq: int = 0,
               until_seq: int | None = None, event_types: Sequence[str] = ()) -> list[Event]:
        """An instance's events in seq order, each `at` a datetime, attributes as dicts (whose
        values are the event's JSON, but for its instants: aware UTC datetimes)."""
    def event(self, instance_id: str, seq: int) -> Event | None:
        """One event of an instance's history, as `events` gives it."""

    # workflow tasks
    def open_workflow_task(self, run_id: str) -> WorkflowTask | None: ...
    def insert_workflow_task(self, row: Row) -> int: ...
    def get_workflow_task(self, task_id: int) -> WorkflowTask | None: ...
    def update_workflow_task(self, task_id: int, /, *, expect_status: str | None = None,
                             **fields: Any) -> bool: ...
    def next_ready_workflow_task(self, now: datetime) -> WorkflowTask | None: ...
    def take_ready_workflow_task(self, now: datetime, ahead: int = 1) -> WorkflowTask | None:
        """Remove the oldest ready task, to be decided in this transaction (None if none is).
        `ahead`: how many this transaction will take at most, one after another: a store may
        claim that many at once and hand the others out at its next calls (those it never
        hands out stay ready)."""
    def close_workflow_task(self, task_id: int) -> None:
        """A workflow task ended: its row goes, its story stays in history."""
    def close_workflow_tasks(self, run_id: str, keep: int | None) -> None:
        """End every open workflow task of the run but `keep`."""
    def timed_out_workflow_tasks(self, now: datetime, limit: int) -> list[WorkflowTask]: ...
    def workflow_tasks_owned_by(self, worker_ids: Sequence[str]) -> list[WorkflowTask]: ...

    # activities
    def insert_activity(self, row: Row) -> None: ...
    def get_activity(self, activity_id: str) -> Activity | None: ...
    def update_activity(self, activity_id: str, /, *, expect_attempt: int | None = None,
                        expect_status: Iterable[str] = (), **fields: Any) -> bool: ...
    def close_current_attempt(self, activity_id: str, attempt: int, worker_id: str, now: datetime, /,
                              **fields: Any) -> bool:
        """Set `fields` on the attempt if it is still `worker_id`'s, started, not superseded
        and within its deadlines at `now`; whether it was."""
    def hold_run_and_close(self, instance_id: str, run_id: str,
                           accept: Callable[[Run | None], bool], activity_id: str,
                           attempt: int, worker_id: str, now: datetime, /,
                           **fields: Any) -> tuple[Run | None, bool]:
        """`hold_run`, then, if `accept` takes the run, `close_current_attempt` (where these are
        three statements, in one round trip: a close `accept` refuses is undone)."""
    def step_activities(self, run_id: str, step_index: int) -> list[Activity]: ...
    def run_activities(self, run_id: str) -> list[Activity]: ...
    def open_activities(self, run_id: str) -> list[Activity]: ...
    def count_open_activities(self, run_id: str) -> int: ...
    def next_ready_activity(self, queues: Sequence[str], now: datetime) -> Activity | None:
        """The oldest activity ready on these queues whose schedule deadlines still hold."""
    def next_ready_activity_with_run(self, queues: Sequence[str], now: datetime,
                                     ahead: int = 1) -> tuple[Activity, Run] | None:
        """What a claim reads: `next_ready_activity`'s activity and its run (`get_run`).
        `ahead`: how many this transaction will claim at most, one after another, on these
        queues at this instant: a store may find that many at once and hand the others out
        at its next calls (those it never hands out, or whose claims do not start them, stay
        ready)."""
    def next_activity_available_at(self, queues: Sequence[str]) -> datetime | None: ...
    def expired_activities(self, now: datetime, limit: int) -> list[Activity]:
        """Open activities past any of their four deadlines, found through the partial indexes."""
    def activities_owned_by(self, worker_ids: Sequence[str]) -> list[Activity]: ...

    # timers
    def insert_timer(self, row: Row) -> None: ...
    def update_timer(self, timer_id: str, /, *, expect_status: str | None = None, **fields: Any) -> bool: ...
    def step_timers(self, run_id: str, step_index: int) -> list[Timer]: ...
    def run_timers(self, run_id: str) -> list[Timer]: ...
    def open_timers(self, run_id: str) -> list[Timer]: ...
    def due_timers(self, now: datetime, limit: int,
                   after: tuple[datetime, str] | None = None) -> list[Timer]:
        """Scheduled timers due at `now`, by fire_at (then as scheduled); `after` (the
        fire_at and timer_id of the last one of a page) gives the page after it."""

    # signals
    def insert_signal(self, row: Row) -> None: ...
    def first_pending_signal(self, instance_id: str, name: str) -> Signal | None: ...
    def pending_signals(self, instance_id: str) -> list[Signal]:
        """The signals received and not yet consumed, oldest first."""
    def count_pending_signals(self, instance_id: str) -> int: ...
    def consume_signal(self, signal_id: int, run_id: str, step_index: int, now: datetime) -> None: ...
    def consumed_signal(self, run_id: str, step_index: int) -> Signal | None: ...

    # children
    def insert_child(self, row: Row) -> None: ...
    def child_link(self, child_instance_id: str) -> Child | None: ...
    def step_children(self, run_id: str, step_index: int) -> list[Child]: ...
    def run_children(self, run_id: str) -> list[Child]: ...
    def supersede_child(self, child_instance_id: str) -> None:
        """The parent no longer waits for this child: it is let go, as a superseded one."""
    def supersede_children(self, run_id: str, step_index: int) -> None: ...

    # failures
    def insert_failure(self, row: Row) -> int: ...
    def get_failure(self, failure_id: int) -> Failure | None: ...
    def activity_failure(self, activity_id: str) -> Failure | None:
        """The last failure recorded of an activity."""

    # deadlines (must complete within)
    def expired_deadlines(self, now: datetime, limit: int) -> list[Run]: ...
    def earliest_deadline(self) -> datetime | None: ...
    def claimed_deadlines(self) -> list[Run]: ...
    def claim_deadline(self, run_id: str, worker_id: str, now: datetime,
                       previous_owner: str | None) -> bool: ...

    # workflow timeouts
    def runs_past_deadline_without_task(self, now: datetime, limit: int) -> list[Run]: ...
    def next_due(self, now: datetime) -> datetime | None:
        """The earliest instant at which the watchdog has something to do."""

    # retention
    def prunable_instances(self, now: datetime, *, closed_before: datetime | None,
                           limit: int) -> list[Row]:
        """Closed instances past their retention (or closed before `closed_before`), first due
        first, with `events`, the length of their history; none whose parent is open. A
        `limit` of -1 takes them all."""
    def next_retain_until(self, now: datetime) -> datetime | None: ...
    def delete_instances(self, instance_ids: Sequence[str]) -> dict[str, int]:
        """Delete these instances and every row they own; rows deleted, by table."""
    def mark_pruning(self, instance_id: str, now: datetime) -> None:
        """The instance is deleted over several transactions from now on: its history may go,
        and it is found no more."""
    def pruning_instance(self) -> str | None: ...
    def is_pruning(self, instance_id: str) -> bool: ...
    def delete_instance_part(self, instance_id: str, limit: int) -> dict[str, int]:
        """Up to `limit` rows of a marked instance; the instance itself (`instances`: 1) once
        nothing else is left."""
    def count_owned_rows(self, instance_ids: Sequence[str]) -> dict[str, int]: ...

    # workers
    def register_worker(self, row: Row) -> None: ...
    def renew_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> bool: ...
    def revive_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> None: ...
    def stop_worker(self, worker_id: str, now: datetime) -> None: ...
    def live_workers(self) -> list[RegisteredWorker]:
        """The workers registered and not stopped (whatever their leases say)."""
    def get_worker(self, worker_id: str) -> RegisteredWorker | None: ...

    # schedules (SPEC §12)
    def schedules(self) -> list[ScheduleState]:
        """Every schedule the database knows, by name."""
    def get_schedule(self, name: str) -> ScheduleState | None: ...
    def insert_schedule(self, row: Row) -> bool:
        """Record a schedule first seen; False (nothing written) when it is already known."""
    def update_schedule(self, name: str, expect: Row, /, **fields: Any) -> bool:
        """Set `fields` on the schedule if each column of `expect` holds its value (None: is
        NULL); whether it did."""
    def due_schedules(self, now: datetime, limit: int) -> list[ScheduleState]:
        """Active schedules (not paused, not removed) whose `due_at` has come, first due first;
        in a write transaction, none that another transaction is deciding."""
    def next_schedule_due(self) -> datetime | None:
        """The earliest `due_at` of the active schedules."""
    def buffered_schedules(self) -> list[ScheduleState]:
        """Active schedules holding a buffered tick (as `due_schedules`, locked)."""
    def open_schedule_instances(self, name: str) -> list[str]:
        """Ids of the open instances the schedule started, oldest first."""
    def insert_schedule_actions(self, rows: Sequence[Row]) -> None: ...
    def schedule_actions(self, name: str, limit: int) -> list[ScheduleAction]:
        """A schedule's latest actions, newest first."""

    # metrics (SPEC §10): counts kept as rows change, index ranges and minimums, never a scan
    def instance_counts(self) -> list[Row]:
        """Instances by workflow_type and status, with their `count`."""
    def open_activity_counts(self) -> list[Row]:
        """Open activities by queue and status, with their `count`."""
    def ready_activity_counts(self, now: datetime) -> list[Row]:
        """Per queue, the activities claimable at `now` (`count`) and the `oldest` available_at."""
    def ready_workflow_task_count(self, now: datetime) -> Row:
        """The workflow tasks claimable at `now` (`count`) and the `oldest` available_at."""
    def timeout_event_counts(self) -> list[Row]:
        """History events that may record a timeout or a deadline expiry (TIMEOUT_EVENTS), by
        event_type, timeout_kind and failure_category (None where the event has none)."""
    def next_deadlines(self) -> Row:
        """The earliest pending deadline of each kind (None where none is pending), by kind:
        execution_timeout, run_timeout, deadline, workflow_task_timeout, schedule_to_start,
        start_to_close, heartbeat, schedule_to_close, signal_wait."""


class ReadyListener(Protocol):
    """Hears commits of other processes, on any host, that left work ready."""

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds: True when such a commit was heard, or when listening
        (re)started and whatever was made ready meanwhile calls for a look. Raises
        StoreUnavailable when the server cannot be reached; the next call tries again."""

    def close(self) -> None: ...


class Store(Protocol):
    """A database: transactions for this thread, and what tells a process of others' commits."""

    path: str
    # Whether a write transaction's `Tx.expect` takes what a batch announces (the families its
    # outcomes change, the closes they ask for): a batch announces nothing to one that does not.
    takes_announcements: bool

    def write(self) -> AbstractContextManager[Tx]:
        """A write transaction that commits when the block ends and rolls back if it raises.
        Raises StoreUnavailable (busy, full, read-only, I/O) and TransientConflict (run the
        whole operation again)."""

    def read(self) -> AbstractContextManager[Tx]:
        """A read transaction: one consistent snapshot across several queries."""

    def peek(self) -> Tx:
        """Single reads outside a transaction, each its own snapshot."""

    def data_version(self) -> int:
        """A number that changes whenever another connection commits."""

    def listen(self) -> ReadyListener | None:
        """A listener for commits that left work ready, where the backend can deliver them
        (PostgreSQL's LISTEN/NOTIFY); None where `data_version` is the only way to notice."""

    def fit_connections(self, threads: int) -> None:
        """Keep enough connections for `threads` threads that may each hold one at a time
        (a backend without a pool ignores it)."""

    def defer_checkpoints(self) -> None:
        """Commits leave their log's upkeep to `checkpoint` (a backend with none ignores it)."""

    def checkpoint(self) -> int:
        """Upkeep of the write-ahead log, off the write path; returns its size in pages."""

    def bulk_write(self) -> AbstractContextManager[Tx]:
        """A write transaction for a large change, whose commit leaves the log's upkeep to
        `checkpoint`."""

    def file_size(self) -> int:
        """Bytes the database takes on disk."""

    def vacuum(self) -> None:
        """Give the space of deleted rows back to the file system."""

    def now(self) -> datetime:
        """The clock every deadline is compared with (SPEC §2): this host's on SQLite, the
        database server's on PostgreSQL, so that hosts whose clocks disagree still agree."""

    def close(self) -> None:
        """Close this thread's connection (and those of threads that ended)."""
