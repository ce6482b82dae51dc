"""The Python API: start, inspect and steer workflows without a subprocess; the CLI uses it."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from wfctl import durations, jsonvalue, views
from wfctl.errors import InvalidInput, brief
from wfctl.store import Store, open_store
from wfctl.vocabulary import INSTANCE_STATUSES

# Reads (describe, history, list) need only the store: the engine, the worker and the definitions
# (YAML) are imported by the calls that use them, so that `wfctl describe` starts fast.
if TYPE_CHECKING:
    from wfctl.definitions import Definitions
    from wfctl.engine import Engine
    from wfctl.worker import Worker, WorkerOptions

Duration = str | int | float | dict[str, Any] | None
_UNSET: Any = object()
# SQLite's integers are 64-bit; a larger limit asks for everything all the same.
_MAX_LIMIT = 2**63 - 1


def _timeout(name: str, value: Duration) -> float | None:
    try:
        return durations.parse_timeout(value)
    except durations.DurationError as exc:
        raise InvalidInput(f"{name}: {exc}") from None


def _text(what: str, value: str | None) -> None:
    """Refuse text that is not valid Unicode (undecodable bytes from a command line come as lone
    surrogates), before it reaches the database."""
    _strict(what, value, str, "text")


def _json_object(what: str, value: Any) -> None:
    """Refuse data that is not a strict JSON object: NaN, Infinity, lone surrogates, deep nesting."""
    _strict(what, value, dict, "a JSON object")


def _strict(what: str, value: Any, kind: type, noun: str) -> None:
    if value is None:
        return
    if not isinstance(value, kind):
        raise InvalidInput(f"{what} must be {noun} (got {type(value).__name__})")
    try:
        jsonvalue.check(value, what)
    except jsonvalue.JSONValueError as exc:
        raise InvalidInput(str(exc)) from None


def _cursor(before: tuple[datetime | str, str] | None) -> tuple[datetime, str] | None:
    """`list`'s `before`: (created_at, instance id), the instant a datetime or ISO text."""
    if before is None:
        return None
    try:
        at, instance_id = before
        if isinstance(at, str):
            at = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        raise InvalidInput(f"before: expected (created_at, instance id) of a listed instance "
                           f"(got {brief(before)})") from None
    if not isinstance(at, datetime) or at.tzinfo is None or not isinstance(instance_id, str):
        raise InvalidInput(f"before: expected (created_at, instance id) of a listed instance "
                           f"(got {brief(before)})")
    _text("before", instance_id)
    return at, instance_id


class Client:
    """One database and one definitions file.

    >>> client = Client(db="wfctl.db", workflows="workflows.yaml")
    >>> client.start("data_import", "order-123", input={"source": url}, execution_timeout="2h")

    The database is opened at the first call that needs it. With `create=False` a missing
    database raises `DatabaseNotFound` instead of being created. Every error is a `WfctlError`:
    `DatabaseTooNew` for a file of a newer wfctl, `DatabaseError` for one that is not a wfctl
    database, `StoreUnavailable` when a write is refused (busy, disk full, read-only).
    """

    def __init__(self, db: str | os.PathLike[str] = "wfctl.db",
                 workflows: str | os.PathLike[str] = "workflows.yaml", *,
                 create: bool = True,
                 clock_now: Callable[[], datetime] | None = None) -> None:
        self.db_path = os.fsdecode(db)
        self.workflows_path = os.fsdecode(workflows)
        self.create = create
        # Deadlines are compared with the database's clock (SPEC §2); tests pass their own.
        self._now = clock_now if clock_now is not None else self._database_now
        self._store: Store | None = None
        self._engine: Engine | None = None
        self._definitions: Definitions | None = None

    @property
    def store(self) -> Store:
        """The database, opened at first use; reads need nothing more."""
        if self._store is None:
            self._store = open_store(self.db_path, create=self.create)
        return self._store

    def _database_now(self) -> datetime:
        return self.store.now()

    def now(self) -> datetime:
        """The instant every deadline is compared with: the database server's clock on
        PostgreSQL, this host's on SQLite (or the clock the client was given)."""
        return self._now()

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            from wfctl.engine import Engine

            self._engine = Engine(self.store)
        return self._engine

    def definitions(self) -> Definitions:
        """The definitions file, read once (handler modules beside it become importable)."""
        if self._definitions is None:
            from wfctl import definitions, handlers

            self._definitions = definitions.load(self.workflows_path)
            handlers.add_search_path(self.workflows_path)
        return self._definitions

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
            self._engine = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, workflow_type: str, workflow_id: str | None = None, *,
              input: dict[str, Any] | None = None,
              execution_timeout: Duration = _UNSET, run_timeout: Duration = _UNSET,
              deadline: Duration = _UNSET, on_duplicate: str = "reject") -> dict[str, Any]:
        """Start an instance. Timeouts take every duration form; None or "NONE" means none.

        Returns the `start --json` document; `outcome` is `started_new`,
        `returned_existing_active` or `rejected_duplicate`.
        """
        _text("workflow type", workflow_type)
        _text("instance id", workflow_id)
        _json_object("input", input)
        overrides = {
            name: _timeout(name, value)
            for name, value in (("execution_timeout", execution_timeout),
                                ("run_timeout", run_timeout), ("deadline", deadline))
            if value is not _UNSET
        }
        from wfctl.engine.start import validate_start

        definitions = self.definitions()
        validate_start(definitions, workflow_type, workflow_id, input, on_duplicate)
        return self.engine.start(definitions, workflow_type, workflow_id, input, self._now(),
                                 overrides=overrides, on_duplicate=on_duplicate)

    def describe(self, workflow_id: str, run: int | None = None) -> dict[str, Any]:
        """The `describe --json` document; raises NotFound for an unknown id or run."""
        _text("instance id", workflow_id)
        return views.describe(self.store, workflow_id, run)

    def history(self, workflow_id: str, *, run: int | None = None, all_runs: bool = False,
                after_seq: int = 0, event_types: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        _text("instance id", workflow_id)
        if run is not None and all_runs:
            raise InvalidInput("run and all_runs exclude each other")
        return views.history(self.store, workflow_id, run_number=run, all_runs=all_runs,
                             after_seq=after_seq, event_types=event_types)

    def list(self, *, status: str | None = None, workflow_type: str | None = None,
             since: datetime | None = None, limit: int = 50,
             before: tuple[datetime | str, str] | None = None,
             schedule: str | None = None) -> list[dict[str, Any]]:
        """Instances, newest first. `before=(created_at, id)` of a row listed (its `created_at`
        as the row gives it) lists the ones after it: the next page, read through an index
        however deep it is."""
        if status is not None and status not in INSTANCE_STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(INSTANCE_STATUSES)} (got {status!r})")
        _text("workflow type", workflow_type)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be a whole number of at least 1 (got {limit!r})")
        return views.list_instances(self.store, status=status, workflow_type=workflow_type,
                                    since=since, limit=min(limit, _MAX_LIMIT),
                                    before=_cursor(before), schedule=schedule)

    def count(self, *, status: str | None = None, workflow_type: str | None = None,
              since: datetime | None = None, schedule: str | None = None) -> int:
        """How many instances `list` with these filters would show without a limit."""
        if status is not None and status not in INSTANCE_STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(INSTANCE_STATUSES)} (got {status!r})")
        _text("workflow type", workflow_type)
        return views.count_instances(self.store, status=status, workflow_type=workflow_type,
                                     since=since, schedule=schedule)

    def instance_ids(self, prefix: str = "", limit: int = 200) -> list[str]:
        """Instance ids starting with `prefix`, newest first (shell completion)."""
        _text("prefix", prefix)
        with self.store.read() as tx:
            return tx.instance_ids(prefix, min(limit, _MAX_LIMIT))

    def signal_names(self, workflow_id: str) -> tuple[str, ...]:
        """The signals the instance's type waits for (its `wait_for_signal` steps, at any
        depth), by the definitions it was started with; raises NotFound for an unknown id."""
        _text("instance id", workflow_id)
        return views.signal_names(self.store, workflow_id)

    def serves(self, queue: str | None) -> bool:
        """Whether a live worker (not stopped, its lease not lapsed) serves `queue` (None: any
        queue, as every worker decides workflow tasks)."""
        now = self._now()
        with self.store.read() as tx:
            workers = tx.live_workers()
        return any(worker.lease_expires_at > now
                   and (queue is None or queue in worker.queues.split(","))
                   for worker in workers)

    def metrics(self) -> str:
        """The metrics of SPEC §10 the database holds, in the Prometheus text format."""
        from wfctl import metrics

        return metrics.exposition(self.store, self._now)

    def signal(self, workflow_id: str, name: str, data: dict[str, Any] | None = None, *,
               force: bool = False, reason: str | None = None) -> dict[str, Any]:
        """Deliver a signal; a name no `wait_for_signal` step of the instance's type waits
        for is refused (InvalidInput) unless `force`. A `reason` (as for pause, resume and
        retry) is recorded in the event."""
        _text("instance id", workflow_id)
        _text("signal name", name)
        _text("reason", reason)
        if not name:
            raise InvalidInput("a signal name must not be empty")
        _json_object("signal data", data)
        return self.engine.signal(workflow_id, name, data, self._now(), force=force,
                                  reason=reason)

    def pause(self, workflow_id: str, reason: str | None = None) -> dict[str, Any]:
        _text("instance id", workflow_id)
        _text("reason", reason)
        return self.engine.pause(workflow_id, self._now(), reason=reason)

    def resume(self, workflow_id: str, reason: str | None = None) -> dict[str, Any]:
        _text("instance id", workflow_id)
        _text("reason", reason)
        return self.engine.resume(workflow_id, self._now(), reason=reason)

    def cancel(self, workflow_id: str, reason: str | None = None) -> dict[str, Any]:
        _text("instance id", workflow_id)
        _text("reason", reason)
        return self.engine.cancel(workflow_id, reason, self._now())

    def terminate(self, workflow_id: str, reason: str | None = None) -> dict[str, Any]:
        _text("instance id", workflow_id)
        _text("reason", reason)
        return self.engine.terminate(workflow_id, reason, self._now())

    def retry(self, workflow_id: str, *, extend_deadline: Duration = None,
              clear_deadline: bool = False, reason: str | None = None) -> dict[str, Any]:
        """Run a failed or timed_out instance again from its failed step; see `warnings`."""
        _text("instance id", workflow_id)
        _text("reason", reason)
        if extend_deadline is not None and clear_deadline:
            raise InvalidInput("extend_deadline and clear_deadline exclude each other")
        extend = None
        if extend_deadline is not None:
            extend = _timeout("extend_deadline", extend_deadline)
            if extend is None:
                raise InvalidInput("extend_deadline: expected a duration, not NONE "
                                   "(pass clear_deadline=True to remove the deadline)")
        return self.engine.retry(workflow_id, self._now(), extend_deadline=extend,
                                 clear_deadline=clear_deadline, reason=reason)

    def backup(self, target: str | os.PathLike[str]) -> dict[str, Any]:
        """Copy an SQLite database into a new file at `target` (never over an existing one),
        consistent while workers run: SQLite's online backup. Returns `{"path", "size"}`."""
        from wfctl.store import POSTGRES_SCHEMES, SQLiteStore

        if self.db_path.startswith(POSTGRES_SCHEMES):
            raise InvalidInput("backup copies an SQLite file; back up PostgreSQL with pg_dump")
        store = self.store
        assert isinstance(store, SQLiteStore)
        size = store.backup(os.fspath(target))
        return {"path": os.path.abspath(os.fspath(target)), "size": size}

    def prune(self, *, older_than: Duration = None, dry_run: bool = False,
              vacuum: bool = False) -> dict[str, Any]:
        """Delete closed instances past their type's retention, with every row they own (what
        `wfctl prune` runs); `older_than` instead takes every instance closed longer ago than
        that, whatever its retention. Open instances, and closed children of open parents,
        are never deleted. Returns what was deleted (or, `dry_run`, what would be); `vacuum`
        then rebuilds the file to give the space back (`file_size_before`, `file_size_after`).
        """
        if dry_run and vacuum:
            raise InvalidInput("dry_run and vacuum exclude each other")
        seconds = None
        if older_than is not None:
            try:
                seconds = durations.parse_interval(older_than, minimum=0)
            except durations.DurationError as exc:
                raise InvalidInput(f"older_than: {exc}") from None
        import time

        # Between batches, workers (in this process or others) get their turn at the file.
        report = self.engine.prune(self._now(), older_than=seconds, dry_run=dry_run,
                                   pause=time.sleep)
        if vacuum:
            before = self.store.file_size()
            self.store.vacuum()
            report.update(file_size_before=before, file_size_after=self.store.file_size())
        return report

    def check_deadlines(self) -> list[dict[str, Any]]:
        """One deadline sweep (what `wfctl deadlines check` runs); returns what it failed.

        The handlers run one after another, each in a thread of its own while this one keeps
        the check's lease (and so its claims) alive: a lapsed lease would let a worker take the
        claims over and run their handlers a second time.
        """
        from wfctl import handlers
        from wfctl.engine.time.deadlines import sweep_deadlines
        from wfctl.engine.time.workers import WorkerRecord, keeping_lease

        checker = WorkerRecord(self.store, kind="deadlines")
        checker.register(self._now())

        def run_handler(spec: str, state: dict[str, Any]) -> object:
            self.definitions()      # read only when a handler runs: its module may sit beside it
            return handlers.call(spec, state)

        try:
            return sweep_deadlines(
                self.engine, checker.worker_id, self._now(), run_handler, clock=self._now,
                keep_alive=lambda call: keeping_lease(checker, self._now, call))
        finally:
            checker.unregister(self._now())

    # schedules (SPEC §12): each call records the file's schedules first (a schedule's ticks
    # begin when it is first seen)

    def _schedules(self) -> Definitions:
        from wfctl.engine.schedules import sync_schedules

        definitions = self.definitions()
        sync_schedules(self.engine, definitions, self._now())
        return definitions

    def schedules(self) -> list[dict[str, Any]]:
        """The `schedules --json` document."""
        from wfctl import schedule_views

        return schedule_views.schedules(self.store, self._schedules())

    def schedule(self, name: str) -> dict[str, Any]:
        """The `schedule describe --json` document; raises NotFound for an unknown name."""
        from wfctl import schedule_views

        _text("schedule", name)
        return schedule_views.schedule(self.store, self._schedules(), name)

    def pause_schedule(self, name: str, *, paused: bool = True,
                       reason: str | None = None) -> dict[str, Any]:
        """Pause (or, with `paused=False`, unpause) a schedule; its `schedule describe`."""
        from wfctl.engine.schedules import set_paused

        _text("schedule", name)
        set_paused(self.engine, self._schedules(), name, paused, reason, self._now())
        return self.schedule(name)

    def trigger(self, name: str, *, backfill: tuple[datetime, datetime] | None = None,
                overlap: str | None = None) -> list[dict[str, Any]]:
        """Start a tick now (the overlap policy applies), or every tick from `backfill[0]` to
        `backfill[1]`, in order; what was done with each tick."""
        from wfctl.engine.schedules import backfill_ticks, start_ticks
        from wfctl.schedule_spec import OVERLAP_POLICIES

        _text("schedule", name)
        if overlap is not None and overlap not in OVERLAP_POLICIES:
            raise InvalidInput(f"overlap must be one of {', '.join(OVERLAP_POLICIES)} "
                               f"(got {overlap!r})")
        definitions = self._schedules()
        now = self._now()
        if backfill is None:
            ticks, why = [now.replace(microsecond=0)], "triggered"
        else:
            if backfill[0] > backfill[1]:
                raise InvalidInput("the range of a backfill must not end before it begins")
            schedule = definitions.schedules.get(name)
            ticks = backfill_ticks(schedule, *backfill) if schedule else []
            why = "backfill"
        actions = start_ticks(self.engine, definitions, name, ticks, why, now, overlap=overlap)
        return [{"tick_at": a.tick_at, "action": a.action, "instance_id": a.instance_id,
                 "reason": a.reason} for a in actions]

    def worker(self, options: WorkerOptions | None = None) -> Worker:
        """A worker on this database, on this client's clock; handler modules beside the
        definitions file import."""
        from wfctl import handlers
        from wfctl.worker import Worker

        handlers.add_search_path(self.workflows_path)
        worker = Worker(self.engine, options, clock=self._now)
        if self._definitions is not None and self._definitions.schedules:
            from wfctl.worker.schedules import ScheduleLoop

            worker.schedules = ScheduleLoop(worker.shared, self._definitions)
        return worker
