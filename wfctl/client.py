"""The Python API: start, inspect and steer workflows without a subprocess; the CLI uses it."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from wfctl import jsonvalue
from wfctl.errors import InvalidInput, StoreUnavailable, WfctlError, brief
from wfctl.lang import durations
from wfctl.show import views
from wfctl.store import Store, open_store
from wfctl.vocabulary import INSTANCE_STATUSES

# Reads (describe, history, list) need only the store: the engine, the worker and the definitions
# (YAML) are imported by the calls that use them, so that `wfctl describe` starts fast.
if TYPE_CHECKING:
    from wfctl.engine import Engine
    from wfctl.lang.definitions import Definitions
    from wfctl.worker import Worker, WorkerOptions

Duration = str | int | float | dict[str, Any] | None
_UNSET: Any = object()
# What `Client.batch` does to each instance it matches.
BATCH_ACTIONS = ("retry", "cancel", "terminate", "pause", "resume", "signal")
# A batch reads the instances it matches this many at a time.
_BATCH_PAGE = 1000
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


def _filter_values(what: str, value: str | Sequence[str] | None) -> tuple[str, ...]:
    """A batch's filter as the values it takes: one, several (any of them), or none."""
    values = () if value is None else (value,) if isinstance(value, str) else tuple(value)
    for given in values:
        _text(what, given)
    return tuple(dict.fromkeys(values))


def _retry_deadline(extend_deadline: Duration, clear_deadline: bool,
                    keep_deadline: bool) -> float | None:
    """The seconds `extend_deadline` gives a retry's deadline from now, the three deadline
    options checked: they exclude each other."""
    given = [name for name, value in (("extend_deadline", extend_deadline is not None),
                                      ("clear_deadline", clear_deadline),
                                      ("keep_deadline", keep_deadline)) if value]
    if len(given) > 1:
        raise InvalidInput(f"{', '.join(given[:-1])} and {given[-1]} exclude each other")
    if extend_deadline is None:
        return None
    extend = _timeout("extend_deadline", extend_deadline)
    if extend is None:
        raise InvalidInput("extend_deadline: expected a duration, not NONE "
                           "(pass clear_deadline=True to remove the deadline)")
    return extend


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
            from wfctl.lang import definitions, handlers

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

    def start_many(self, workflow_type: str, starts: Iterable[Any], *, source: str = "starts",
                   **defaults: Any) -> list[dict[str, Any]]:
        """Start one instance for each mapping of `starts` (keys, all optional: `id`, `input`,
        `deadline`, `execution_timeout`, `run_timeout`, `on_duplicate`; `defaults` gives the
        ones a mapping leaves out). Every one is checked before any starts: a bad one raises
        InvalidInput naming it, `SOURCE:N:` (N counts from 1), and nothing is started. They
        start in transactions of up to 1,000, each by its own duplicate policy.

        Returns each one's outcome in their order: the `start` document, or for an id whose
        closed instance is being pruned, `{"started": false, "outcome": "failed", "error"}`.
        """
        from wfctl.engine import bulk
        from wfctl.engine.start import validate_start

        _text("workflow type", workflow_type)
        unknown = [key for key in defaults if key not in bulk.START_KEYS[2:]]
        if unknown:
            raise InvalidInput(f"unknown start option {unknown[0]!r} "
                               f"(known: {', '.join(bulk.START_KEYS[2:])})")
        definitions = self.definitions()
        validate_start(definitions, workflow_type, None, None, "reject")
        planned = []
        for number, item in enumerate(starts, 1):
            try:
                planned.append(bulk.plan_start(definitions, workflow_type, item, defaults))
            except InvalidInput as exc:
                raise InvalidInput(f"{source}:{number}: {exc}") from None
        return bulk.start_many(self.engine, definitions, workflow_type, planned, self._now)

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
        from wfctl.ops import metrics

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
              clear_deadline: bool = False, keep_deadline: bool = False,
              reason: str | None = None) -> dict[str, Any]:
        """Run a failed or timed_out instance again from its failed step; see `warnings`.

        The deadline is kept unless `extend_deadline` or `clear_deadline` says otherwise; one
        that has already passed is refused (InvalidInput) unless `keep_deadline` says so.
        """
        _text("instance id", workflow_id)
        _text("reason", reason)
        extend = _retry_deadline(extend_deadline, clear_deadline, keep_deadline)
        return self.engine.retry(workflow_id, self._now(), extend_deadline=extend,
                                 clear_deadline=clear_deadline, keep_deadline=keep_deadline,
                                 reason=reason)

    def batch(self, action: str, *, status: str | Sequence[str] | None = None,
              workflow_type: str | Sequence[str] | None = None,
              schedule: str | Sequence[str] | None = None, since: datetime | None = None,
              dry_run: bool = False, name: str | None = None,
              data: dict[str, Any] | None = None, force: bool = False,
              reason: str | None = None, extend_deadline: Duration = None,
              clear_deadline: bool = False, keep_deadline: bool = False,
              worded: Callable[[WfctlError], str] = str) -> dict[str, Any]:
        """Do `action` (one of `BATCH_ACTIONS`) to every instance the filters match, as `list`
        filters (a sequence: any of its values), newest first; `signal` sends the signal
        `name` (with `data`, `force`), `retry` takes the deadline options of `retry`, and
        each takes a `reason`. At least one filter is needed.

        It acts in transactions that each hold the write lock about 10 ms (and a commit) at most. An instance
        that no longer matches the filters when its turn comes, or that the action refuses as
        no longer possible (already cancelled, not paused, closed), is skipped with the
        reason; one that already has a signal `name` waiting to be taken is skipped too, so
        that a batch run again after a crash acts only on the instances it had not reached.

        Returns `{"matched", "done", "skipped": [{"id", "reason"}], "failed": [{"id",
        "error"}]}` (each error as `worded` words it); with `dry_run`, `{"matched",
        "instances"}`: the rows `list` gives of the instances it would act on, nothing changed.
        """
        from wfctl.engine import bulk

        statuses, types = _filter_values("status", status), _filter_values("workflow_type",
                                                                           workflow_type)
        for given in statuses:
            if given not in INSTANCE_STATUSES:
                raise InvalidInput(f"status must be one of {', '.join(INSTANCE_STATUSES)} "
                                   f"(got {given!r})")
        if since is not None and (not isinstance(since, datetime) or since.tzinfo is None):
            raise InvalidInput(f"since must be an aware datetime (got {brief(since)})")
        schedules = _filter_values("schedule", schedule)
        if not statuses and not types and not schedules and since is None:
            raise InvalidInput("a batch needs at least one filter: status, workflow_type, "
                               "schedule or since")
        act = self._batch_action(action, name=name, data=data, force=force, reason=reason,
                                 extend_deadline=extend_deadline, clear_deadline=clear_deadline,
                                 keep_deadline=keep_deadline)
        rows = self._matching(statuses, types, schedules, since)
        if dry_run:
            return {"matched": len(rows), "instances": rows}

        def qualifies(c: Any, instance: Any) -> str | None:
            if statuses and instance.status not in statuses:
                return f"it is {instance.status} now, not {' or '.join(statuses)}"
            if action == "signal" and any(pending.name == name for pending in
                                          c.tx.pending_signals(instance.workflow_instance_id)):
                return f"a signal {name} is already waiting to be taken"
            return None

        import time

        report = bulk.act_on_many(self.engine, [row["workflow_instance_id"] for row in rows],
                                  act, qualifies, self._now, pause=time.sleep, worded=worded)
        return report.document()

    def _batch_action(self, action: str, *, name: str | None, data: dict[str, Any] | None,
                      force: bool, reason: str | None, extend_deadline: Duration,
                      clear_deadline: bool, keep_deadline: bool) -> Callable[[str, datetime], Any]:
        """The engine's operation on one instance for `batch`, its options checked once."""
        if action not in BATCH_ACTIONS:
            raise InvalidInput(f"action must be one of {', '.join(BATCH_ACTIONS)} "
                               f"(got {action!r})")
        _text("reason", reason)
        if action != "signal" and (name is not None or data is not None or force):
            raise InvalidInput(f"name, data and force are for signal, not {action}")
        if action != "retry" and (extend_deadline is not None or clear_deadline or keep_deadline):
            raise InvalidInput("extend_deadline, clear_deadline and keep_deadline are for retry, "
                               f"not {action}")
        engine = self.engine
        if action == "signal":
            _text("signal name", name)
            if not name:
                raise InvalidInput("signal needs a signal name")
            _json_object("signal data", data)
            return lambda instance_id, now: engine.signal(instance_id, name, data, now,
                                                          force=force, reason=reason)
        if action == "retry":
            extend = _retry_deadline(extend_deadline, clear_deadline, keep_deadline)
            return lambda instance_id, now: engine.retry(
                instance_id, now, extend_deadline=extend, clear_deadline=clear_deadline,
                keep_deadline=keep_deadline, reason=reason)
        if action in ("cancel", "terminate"):
            stop = getattr(engine, action)
            return lambda instance_id, now: stop(instance_id, reason, now)
        steer = getattr(engine, action)
        return lambda instance_id, now: steer(instance_id, now, reason=reason)

    def _matching(self, statuses: tuple[str, ...], types: tuple[str, ...],
                  schedules: tuple[str, ...], since: datetime | None) -> list[dict[str, Any]]:
        """Every instance the filters of a batch match, as `list` rows, newest first."""
        found: dict[str, dict[str, Any]] = {}
        for status, workflow_type, schedule in itertools.product(
                statuses or (None,), types or (None,), schedules or (None,)):
            before = None
            while True:
                page = views.list_instances(self.store, status=status,
                                            workflow_type=workflow_type, since=since,
                                            limit=_BATCH_PAGE, before=before, schedule=schedule)
                for row in page:
                    found[row["workflow_instance_id"]] = row
                if len(page) < _BATCH_PAGE:
                    break
                before = (page[-1]["created_at"], page[-1]["workflow_instance_id"])
        return sorted(found.values(), key=lambda row: row["created_at"], reverse=True)

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
        from wfctl.engine.time.deadlines import sweep_deadlines
        from wfctl.engine.time.workers import WorkerRecord, keeping_lease
        from wfctl.lang import handlers

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

    def _schedules(self, *, reading: bool = False) -> Definitions:
        from wfctl.engine.schedules import sync_schedules

        definitions = self.definitions()
        try:
            sync_schedules(self.engine, definitions, self._now())
        except StoreUnavailable as exc:
            # A read of a database this process may not write shows what it holds: the
            # schedules some worker or command has recorded.
            if not reading or exc.reason != "readonly":
                raise
        return definitions

    def schedules(self) -> list[dict[str, Any]]:
        """The `schedules --json` document."""
        from wfctl.show import schedule_views

        return schedule_views.schedules(self.store, self._schedules(reading=True))

    def schedule(self, name: str) -> dict[str, Any]:
        """The `schedule describe --json` document; raises NotFound for an unknown name."""
        from wfctl.show import schedule_views

        _text("schedule", name)
        return schedule_views.schedule(self.store, self._schedules(reading=True), name)

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
        from wfctl.lang.schedule_spec import OVERLAP_POLICIES

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
        from wfctl.lang import handlers
        from wfctl.worker import Worker

        handlers.add_search_path(self.workflows_path)
        worker = Worker(self.engine, options, clock=self._now)
        if self._definitions is not None and self._definitions.schedules:
            from wfctl.worker.schedule_loop import ScheduleLoop

            worker.schedules = ScheduleLoop(worker.shared, self._definitions)
        return worker
