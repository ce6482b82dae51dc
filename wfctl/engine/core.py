"""What every engine transaction shares: the clock reading, events, and closing a run."""

from __future__ import annotations

import functools
import itertools
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from wfctl import clock
from wfctl.engine.time.claims import ClaimsInHand
from wfctl.errors import StructuralLimitExceeded, TransientConflict
from wfctl.lang import definitions as defs_module
from wfctl.lang.definitions import Definitions, Limits, WorkflowType
from wfctl.store import Row, Store, Tx, dumps
from wfctl.store.codec import EventKind, event_kind
from wfctl.store.records import ClosedAttempt, Instance, PlannedClose, Run, assign

if TYPE_CHECKING:
    from wfctl.engine.tasks import ActivityTask, Offer

# Ready tasks a claim tries before it gives up for this pass: each one lost was taken by another
# writer in the meantime (claims are conditional updates, acted on only when they won).
CLAIM_TRIES = 8




@dataclass(slots=True, frozen=True)
class Fixed:
    """Instance fields that never change for a run once it exists, with the definitions they
    name (`wf`: the run's type in them, `limits`: theirs): read once per process and run
    (`Ctx.fixed`), not once per transaction. A run id is never reused, and stored definitions
    never change, so an entry never goes stale."""

    definitions_digest: str
    workflow_type: str
    child_depth: int
    child_policy: str
    definitions: Definitions
    wf: WorkflowType
    limits: Limits

# Runs whose fixed fields a process keeps at most (the cache starts over beyond it).
FIXED_KEPT = 10_000

# How many times an operation runs in all when the store keeps asking for it to be run again.
OPERATION_RUNS = 8

# The events every step appends, from their values (`Ctx.event_of`), in their attributes' order.
WORKFLOW_TASK_SCHEDULED = event_kind("WorkflowTaskScheduled", "reason")
WORKFLOW_TASK_STARTED = event_kind("WorkflowTaskStarted", "scheduled_event_id worker_id timeout_at")
WORKFLOW_TASK_COMPLETED = event_kind("WorkflowTaskCompleted", "scheduled_event_id started_event_id")
ACTIVITY_SCHEDULED = event_kind(
    "ActivityScheduled", "activity_id step handler queue attempt max_attempts retry_policy "
    "schedule_deadline_at schedule_to_close_deadline_at")
ACTIVITY_STARTED = event_kind(
    "ActivityStarted",
    "activity_id step attempt worker_id scheduled_event_id close_deadline_at heartbeat_deadline_at")
ACTIVITY_COMPLETED = event_kind(
    "ActivityCompleted", "activity_id step attempt scheduled_event_id started_event_id result")

Op = TypeVar("Op", bound=Callable[..., Any])


def operation(function: Op) -> Op:
    """An engine operation: one transaction, run again whole when the store could not
    serialize it (`TransientConflict`). Nothing of a failed run is kept: its transaction rolled
    back, and wake-ups and listeners hear only of commits. Inside an engine batch the conflict
    goes to the batch's owner, which runs the batch again."""

    @functools.wraps(function)
    def run(engine: EngineCore, /, *args: Any, **kwargs: Any) -> Any:
        for runs in range(1, OPERATION_RUNS + 1):
            try:
                return function(engine, *args, **kwargs)
            except TransientConflict:
                if engine.in_batch() or runs == OPERATION_RUNS:
                    raise
                # A little jitter, so that two writers that collided do not collide again.
                time.sleep(random.uniform(0, 0.002 * runs))
        raise AssertionError("unreachable")

    return run  # type: ignore[return-value]


class _Ids:
    """A process's ids: a random first half, and a second half counting up from a random start
    (after a fork, the child draws its own). Two processes' ids meet no more often than 64
    random bits would, and the ids one process makes go side by side into each index they are
    keys of: random ones dirty a page of each index apiece, which a commit then writes out."""

    def __init__(self) -> None:
        self.draw()
        os.register_at_fork(after_in_child=self.draw)

    def draw(self) -> None:
        self.prefix = os.urandom(4).hex()
        self.count = itertools.count(int.from_bytes(os.urandom(4), "big"))

    def next(self) -> str:
        return f"{self.prefix}{next(self.count) & 0xFFFFFFFF:08x}"


_IDS = _Ids()


def new_id() -> str:
    """16 hex digits (64 bits): activity, timer and run ids (see `_Ids`)."""
    return _IDS.next()


class Ctx:
    """One engine transaction: the store transaction, the instant it acts at, and definitions."""

    def __init__(self, engine: EngineCore, tx: Tx, now: datetime,
                 rows: tuple[dict[str, Instance], dict[str, Run]] | None = None,
                 check_deadlines: bool = False, offer: Offer | None = None) -> None:
        self.engine = engine
        self.tx = tx
        self.now = now
        # True where deadlines are checked (the long-running worker, never --once): there a
        # decision that meets a passed deadline_at hands the run to the deadline path.
        self.check_deadlines = check_deadlines
        # The free slots of the worker whose batch this is, for what it schedules (tasks.Offer).
        self.offer = offer
        self.woke = False
        # Set when this transaction claimed a passed deadline for the deciding worker: its
        # deadline runner is woken after the commit to run on_deadline and record the failure.
        self.deadline_claimed = False
        self.appended: list[dict[str, Any]] = []
        # Instances and runs read in this transaction (`rows`: shared by the operations of
        # one batch, which share its transaction); every change goes through them.
        self._instances, self._runs = rows if rows is not None else ({}, {})
        # Workflow tasks scheduled in this transaction and not written yet, by run id: one that
        # is decided before the commit (`decide_now`) never needs a row, only its events.
        self.pending_tasks: dict[str, Row] = {}
        # What only a commit makes true (a cache entry, say): done after it, never before.
        self.after_commit: list[Callable[[], None]] = []
        # (run id, step index) of single-activity steps whose activity completed in this
        # transaction: deciding them needs no read of the step's activities.
        self.completed_steps: set[tuple[str, int]] = set()
        # Run fields changed but not written yet, by run id (`set_run_later`).
        self._unwritten: dict[str, tuple[Run, dict[str, Any]]] = {}

    def flush_tasks(self) -> None:
        """Write the workflow tasks scheduled in this transaction and not decided in it."""
        pending, self.pending_tasks = self.pending_tasks, {}
        for row in pending.values():
            self.tx.insert_workflow_task(row)
            self.woke = True

    def event(self, run: Run, event_type: str, /, **attributes: Any) -> int:
        """Append an event to the run's history. Its attributes are JSON values, but for its
        instants (store/codec.py names them), which may be datetimes: history reads them back as
        datetimes."""
        seq = self.tx.append_event(run, event_type, self.now, attributes)
        engine = self.engine
        if engine._listeners and event_type not in engine._unheard:
            self._heard(run, seq, event_type, attributes)
        return seq

    def event_of(self, run: Run, kind: EventKind, /, *values: Any) -> int:
        """`event` of an event of `kind`, its attribute values given in the kind's order: no
        dict is made unless a listener hears of it (the events every step appends)."""
        seq = self.tx.append_values(run, kind, self.now, values)
        engine = self.engine
        if engine._listeners and kind.event_type not in engine._unheard:
            self._heard(run, seq, kind.event_type, dict(zip(kind.names, values, strict=True)))
        return seq

    def _heard(self, run: Run, seq: int, event_type: str, attributes: dict[str, Any]) -> None:
        """An event kept for the listeners told of a commit (a worker's log): only those of
        the types one of them does something with."""
        self.appended.append({
            "workflow_instance_id": run.workflow_instance_id,
            "run_number": run.run_number,
            "seq": seq,
            "event_type": event_type,
            "attributes": attributes,
        })

    def next_seq(self, run: Run) -> int:
        """The seq the next event of the run's instance will get."""
        return self.tx.last_seq(run.workflow_instance_id) + 1

    def definitions(self, instance: Instance | Fixed) -> Definitions:
        found = self.engine._definitions.get(instance.definitions_digest)
        return found if found is not None else \
            self.engine.definitions_by_digest(self.tx, instance.definitions_digest)

    def workflow_type(self, instance: Instance | Fixed) -> WorkflowType:
        return self.definitions(instance).types[instance.workflow_type]

    def limits(self, instance: Instance | Fixed) -> Limits:
        return self.definitions(instance).limits

    def fixed(self, run: Run) -> Fixed:
        """The fields of the run's instance that never change (`Fixed`): enough
        for its definitions, type, limits, child depth and child policy, without reading the
        instance row in every transaction."""
        kept = self.engine.fixed_fields
        found = kept.get(run.workflow_run_id)
        if found is None:
            known = self.tx.run_instance_fields(run.workflow_run_id)
            if known is None:
                instance = self.instance(run.workflow_instance_id)
                known = (instance.definitions_digest, instance.workflow_type,
                         instance.child_depth, instance.child_policy)
            definitions = self.engine.definitions_by_digest(self.tx, known[0])
            found = Fixed(*known, definitions, definitions.types[known[1]], definitions.limits)
            if len(kept) >= FIXED_KEPT:
                kept.clear()
            kept[run.workflow_run_id] = found
        return found

    def instance(self, instance_id: str) -> Instance:
        """The instance, read once per transaction (set_status keeps it current)."""
        found = self._instances.get(instance_id)
        if found is None:
            found = self._instances[instance_id] = self.tx.get_instance(instance_id)
        return found

    def held_run_and_close(self, task: ActivityTask, accept: Callable[[Run | None], bool], /,
                           **fields: Any) -> tuple[Run | None, ClosedAttempt | None]:
        """The task's run, read once its family is held, and, if `accept` takes the run, the
        task's attempt closed with `fields` (`Tx.hold_run_and_close`: one round trip): what
        a completion records of it, or None when it was not closed."""
        instance_id, run_id = task.workflow_instance_id, task.workflow_run_id
        found = self._runs.get(run_id)
        if found is not None:
            self.tx.hold(instance_id)
            closed = accept(found) and self.tx.close_current_attempt(
                task.activity_id, task.attempt, task.worker_id, self.now, **fields)
        else:
            found, closed = self.tx.hold_run_and_close(instance_id, run_id, accept,
                                                       task.activity_id, task.attempt,
                                                       task.worker_id, self.now, **fields)
            if found is not None:
                self._runs[run_id] = found
        if not closed:
            return found, None
        # The attempt was current and not superseded: the task tells the rest.
        return found, ClosedAttempt(task.activity_id, run_id, task.step_index, task.branch_index,
                                    False, task.step, task.attempt, task.scheduled_event_id,
                                    task.started_event_id)

    def keep_run(self, run: Run) -> Run:
        """A run read along with another row: the transaction's record of it, if it has one
        (with the changes made since), else this one, kept as its record from now on."""
        return self._runs.setdefault(run.workflow_run_id, run)

    def run(self, run_id: str) -> Run:
        """The run, one record per run and transaction, so that every change is seen."""
        found = self._runs.get(run_id)
        if found is None:
            found = self.tx.get_run(run_id)
            if found is not None:
                self._runs[run_id] = found
        return found

    def set_run(self, run: Run, /, **fields: Any) -> None:
        assign(run, fields)
        unwritten = self._unwritten.pop(run.workflow_run_id, None)
        if unwritten is not None:
            fields = {**unwritten[1], **fields}
        self.tx.update_run(run.workflow_run_id, **fields)

    def set_run_later(self, run: Run, /, **fields: Any) -> None:
        """Change the run now and write the change with its next one, or when the operation
        ends (`flush_runs`): a step that ends and the next that begins take one UPDATE."""
        assign(run, fields)
        _, unwritten = self._unwritten.setdefault(run.workflow_run_id, (run, {}))
        unwritten.update(fields)

    def flush_runs(self) -> None:
        """Write the run changes `set_run_later` kept."""
        unwritten, self._unwritten = self._unwritten, {}
        for run, fields in unwritten.values():
            self.tx.update_run(run.workflow_run_id, **fields)

    def set_status(self, run: Run, status: str, /, **fields: Any) -> None:
        """Run and instance statuses move together; the instance shows its current run.

        An instance that closes is kept until its type's retention has passed since.
        """
        self.set_run(run, status=status, **fields)
        if status == "continued_as_new":
            return
        instance_fields: dict[str, Any] = {"status": status, "updated_at": self.now}
        if "closed_at" in fields:
            instance_fields["closed_at"] = fields["closed_at"]
            instance_fields["retain_until"] = self._retain_until(run, fields["closed_at"])
        self.update_instance(run.workflow_instance_id, **instance_fields)

    def _retain_until(self, run: Run, closed_at: datetime | None) -> datetime | None:
        if closed_at is None:
            return None
        retention = self.fixed(run).wf.retention
        return clock.after(closed_at, retention)

    def update_instance(self, instance_id: str, /, **fields: Any) -> None:
        self.tx.update_instance(instance_id, **fields)
        self._instances.pop(instance_id, None)


def public_state(state: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in state.items() if not str(key).startswith("_")}


def check_payload(limits: Limits, value: Any) -> str:
    """A payload as JSON text, refused when it is not strict JSON or is larger than the
    payload_size limit."""
    # A handler that returns nothing (most do) has nothing to encode.
    text = "null" if value is None else dumps(value)
    size = len(text.encode())
    if limits.payload_size and size > limits.payload_size:
        raise StructuralLimitExceeded("payload_size", size, limits.payload_size)
    return text


def merge_state(c: Ctx, run: Run, values: dict[str, Any]) -> None:
    """Merge a result into the run's state; a state over the payload limit is refused."""
    state = dict(run.state)
    state.update(values)
    check_payload(c.fixed(run).limits, state)
    c.set_run(run, state=state)


# Why a run's first workflow task is scheduled, once, as the run is created: the decision that
# takes it finds nothing of any step (decide's `first`).
FIRST_TASK = "started"


def schedule_workflow_task(c: Ctx, run: Run, reason: str) -> None:
    """Make sure the run has an open workflow task, so that a worker decides what comes next."""
    run_id = run.workflow_run_id
    if run.closed_at is not None or run_id in c.pending_tasks \
            or c.tx.open_workflow_task(run_id):
        return
    seq = c.event_of(run, WORKFLOW_TASK_SCHEDULED, reason)
    c.pending_tasks[run_id] = {
        "workflow_run_id": run.workflow_run_id,
        "workflow_instance_id": run.workflow_instance_id,
        "status": "scheduled",
        "reason": reason,
        "available_at": c.now,
        "scheduled_event_id": seq,
    }


def record_failure(c: Ctx, run: Run, *, category: str, message: str,
                   activity_id: str | None = None, propagation_kind: str | None = None,
                   timeout_kind: str | None = None, exception_class: str | None = None,
                   deadline_at: datetime | None = None,
                   details: dict[str, Any] | None = None) -> int:
    return c.tx.insert_failure({
        "workflow_instance_id": run.workflow_instance_id,
        "workflow_run_id": run.workflow_run_id,
        "activity_id": activity_id,
        "failure_category": category,
        "propagation_kind": propagation_kind,
        "timeout_kind": timeout_kind,
        "exception_class": exception_class,
        "message": message,
        "deadline_at": deadline_at,
        "details": details,
        "created_at": c.now,
    })


def cancel_open_work(c: Ctx, run: Run, reason: str, keep_task: int | None = None, *,
                     steps_ended: bool = False) -> None:
    """Cancel every open task, activity and timer of the run (all but the current task).
    `steps_ended`: the run ended its last step, so none of its activities is open (a step ends
    only once each of its activities did, and a retry of a step sets aside only closed ones)."""
    run_id = run.workflow_run_id
    c.flush_tasks()
    c.tx.close_workflow_tasks(run_id, keep_task)
    for activity in () if steps_ended else c.tx.open_activities(run_id):
        c.tx.update_activity(activity.activity_id, status="cancelled", closed_at=c.now,
                             owner=None)
        c.event(run, "ActivityCancelled", activity_id=activity.activity_id,
                step=activity.step, attempt=activity.attempt, reason=reason,
                scheduled_event_id=activity.scheduled_event_id,
                started_event_id=activity.started_event_id)
    if not c.fixed(run).wf.sets_timers:
        return
    for timer in c.tx.open_timers(run_id):
        c.tx.update_timer(timer.timer_id, status="cancelled", closed_at=c.now)
        c.event(run, "TimerCancelled", timer_id=timer.timer_id, step=timer.step,
                kind=timer.kind, fire_at=timer.fire_at, reason=reason,
                scheduled_event_id=timer.scheduled_event_id)


Listener = Callable[[list[dict[str, Any]]], None]


class _Transaction:
    """`EngineCore.transaction`, as a context manager: a class, since one is entered for each
    operation and the step path runs several a step."""

    __slots__ = ("batch", "check_deadlines", "ctx", "engine", "now", "write")

    def __init__(self, engine: EngineCore, now: datetime, check_deadlines: bool) -> None:
        self.engine, self.now, self.check_deadlines = engine, now, check_deadlines

    def __enter__(self) -> Ctx:
        engine = self.engine
        state = engine._batch
        self.batch = batch = getattr(state, "ctxs", None)
        if batch is not None:
            self.ctx = Ctx(engine, state.tx, self.now, state.rows, self.check_deadlines,
                           state.offer)
            return self.ctx
        self.write = engine.store.write()
        tx = self.write.__enter__()
        try:
            self.ctx = Ctx(engine, tx, self.now, check_deadlines=self.check_deadlines)
        except BaseException:
            self.write.__exit__(*sys.exc_info())
            raise
        return self.ctx

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> bool:
        c = self.ctx
        if self.batch is not None:
            if kind is None:
                c.flush_runs()
                c.flush_tasks()
                self.batch.append(c)
            return False
        if kind is None:
            try:
                c.flush_runs()
                c.flush_tasks()
            except BaseException:
                if not self.write.__exit__(*sys.exc_info()):
                    raise
                return False
        if self.write.__exit__(kind, error, trace):
            return True
        if kind is None:
            self.engine._committed([c])
        return False


class _Batch:
    """`EngineCore.batch`, as a context manager: a class, since the step path enters one for
    each batch."""

    __slots__ = ("closes", "ctxs", "done", "engine", "families", "offer", "write")

    def __init__(self, engine: EngineCore, offer: Offer | None, families: Sequence[str],
                 closes: Sequence[PlannedClose]) -> None:
        self.engine, self.offer, self.families, self.closes = engine, offer, families, closes

    def __enter__(self) -> BatchDone:
        engine = self.engine
        state = engine._batch
        if getattr(state, "ctxs", None) is not None:
            raise RuntimeError("engine batches do not nest")
        self.ctxs: list[Ctx] = []
        self.done = BatchDone()
        self.write = engine.store.write()
        state.tx = tx = self.write.__enter__()
        if self.families:
            tx.expect(self.families, self.closes)
        state.ctxs, state.rows, state.offer = self.ctxs, ({}, {}), self.offer
        return self.done

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> bool:
        state = self.engine._batch
        state.tx = state.ctxs = state.rows = state.offer = None
        if self.write.__exit__(kind, error, trace):
            return True
        if kind is None:
            self.engine._committed(self.ctxs, wake=not self.done.nothing_left_ready)
        return False


class BatchDone:
    """What the owner of a batch learnt inside it: `nothing_left_ready` when it claimed every
    task that was ready, so that waking idle slots after the commit would find them nothing."""

    nothing_left_ready = False


class EngineCore:
    """What the engine's operations share over one store: transactions and batches, the
    definitions and instance fields already read, and who hears of a commit. The operations
    themselves are functions of the modules beside this one, taking it first; `Engine` offers
    them as methods."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._definitions: dict[str, Definitions] = {}
        self._saved_digests: set[str] = set()
        # `Ctx.fixed`: the unchanging instance fields of the runs this process touched.
        self.fixed_fields: dict[str, Fixed] = {}
        self.deadline_claims = ClaimsInHand()
        self._lock = threading.Lock()
        self._batch = threading.local()
        self._wakers: list[Callable[[], None]] = []
        self._deadline_wakers: list[Callable[[], None]] = []
        self._listeners: list[Listener] = []
        # The event types none of the listeners does anything with (`add_listener`).
        self._unheard: frozenset[str] = frozenset()

    # plumbing

    def transaction(self, now: datetime, *, check_deadlines: bool = False) -> _Transaction:
        """A write transaction; wakers and event listeners hear of it only after it commits.
        With `check_deadlines`, a decision in it that meets a passed deadline hands the run
        to the deadline path (`Ctx.check_deadlines`).

        Inside `batch()` (same thread) it is a part of the batch's transaction instead.
        """
        return _Transaction(self, now, check_deadlines)

    def in_batch(self) -> bool:
        """Whether this thread is inside `batch()`."""
        return getattr(self._batch, "ctxs", None) is not None

    def batch(self, offer: Offer | None = None, families: Sequence[str] = (),
              closes: Sequence[PlannedClose] = ()) -> _Batch:
        """One write transaction for every engine operation this thread runs inside it (group
        commit). All of them commit, or none: a failure rolls the whole batch back, and the
        caller may run the operations again one by one. `offer`: free slots of the caller's
        worker, which take the activities the batch schedules for them (`tasks.Offer`);
        `families`: the instances its operations change, one for each operation;
        `closes`: the attempts its completions close (`activities.completion_close`), each
        asked for by one of its operations (`Tx.expect`)."""
        return _Batch(self, offer, families, closes)

    def _committed(self, ctxs: list[Ctx], *, wake: bool = True) -> None:
        """What waits for a commit: caches, wake-ups of slots and deadline runners, listeners."""
        for c in ctxs:
            for action in c.after_commit:
                action()
        if wake and any(c.woke for c in ctxs):
            for wake in self._wakers:
                wake()
        if any(c.deadline_claimed for c in ctxs):
            for wake in self._deadline_wakers:
                wake()
        if self._listeners:
            appended = [event for c in ctxs for event in c.appended]
            if appended:
                for listener in self._listeners:
                    listener(appended)

    def add_waker(self, wake: Callable[[], None]) -> None:
        """Call `wake` after each commit that made a task ready."""
        self._wakers.append(wake)

    def remove_waker(self, wake: Callable[[], None]) -> None:
        self._wakers.remove(wake)

    def add_deadline_waker(self, wake: Callable[[], None]) -> None:
        """Call `wake` after each commit that handed a run to the deadline path."""
        self._deadline_wakers.append(wake)

    def remove_deadline_waker(self, wake: Callable[[], None]) -> None:
        self._deadline_wakers.remove(wake)

    def add_listener(self, listener: Listener, *, ignores: Collection[str] = ()) -> None:
        """Call `listener` with the events each transaction appended, after it commits; but for
        those of the types in `ignores`, which it does nothing with."""
        self._unheard = frozenset(ignores) if not self._listeners \
            else self._unheard & frozenset(ignores)
        self._listeners.append(listener)

    def definitions_by_digest(self, tx: Tx, digest: str) -> Definitions:
        """The definitions an instance started with (workflows run the shape they began with)."""
        found = self._definitions.get(digest)
        if found is None:
            row = tx.get_definitions(digest)
            if row is None:
                raise LookupError(f"definitions {digest} are missing from the database")
            found = defs_module.parse(row.source, row.path)
            with self._lock:
                self._definitions[digest] = found
        return found

    def save_definitions(self, c: Ctx, definitions: Definitions) -> None:
        """Store the definitions text an instance starts with; known as stored once committed."""
        digest = definitions.digest
        if digest in self._saved_digests:
            return
        c.tx.put_definitions(digest, definitions.path, definitions.source, c.now)

        def saved() -> None:
            with self._lock:
                self._saved_digests.add(digest)
                self._definitions.setdefault(digest, definitions)

        c.after_commit.append(saved)
