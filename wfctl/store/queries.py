"""Every query wfctl runs, written once for both backends (`SQLTx`), with hooks for where their
SQL truly differs.

Statements are written in PostgreSQL's placeholders (`%s`, `%(name)s`); the SQLite store turns
each text into its own (`?`, `:name`) once and keeps it. A backend's transaction class supplies
how a statement runs and its rows come back (`_execute`, `_one`, `_all`, `_insert`; for typed
records, `_tuples` of stored values and the `_readers` that convert them), a list of
values in a condition (`_any`), an instant as a parameter (`_at`), and the few spellings that
differ (`_IS`, `_IS_NOT`, ...). Where a backend does more than run the query — PostgreSQL
locks workflow families before it reads their rows (`_owned`, `_scan`, `hold`) and remembers
the work it leaves ready — it overrides the hook or the method.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from wfctl import jsonvalue
from wfctl.store import codec, records
from wfctl.store.records import (
    Activity,
    Child,
    Event,
    Failure,
    Instance,
    PlannedClose,
    RegisteredWorker,
    Run,
    Signal,
    StoredDefinitions,
    Timer,
    WorkflowTask,
)
from wfctl.store.schedule_queries import ScheduleQueries
from wfctl.store.tables import status_is
from wfctl.vocabulary import (
    ACTIVITY_TIMEOUTS,
    CLOSED_INSTANCE,
    OPEN_ACTIVITY,
    OPEN_RUN,
    OPEN_WORKFLOW_TASK,
    PENDING_ACTIVITY,
    TIMEOUT_EVENTS,
    UNSUCCESSFUL_RUN,
    WORKFLOW_TIMEOUTS,
    Timeout,
)

Row = dict[str, Any]
R = TypeVar("R")


def sql_list(words: Iterable[str]) -> str:
    """Vocabulary words as an SQL list, `('a', 'b')`: they are plain words, never input."""
    return "(" + ", ".join(f"'{word}'" for word in words) + ")"


def _pending(timeout: Timeout) -> str:
    """The condition on a row of its table under which a timeout's deadline is pending: the
    deadline is set, and the activity is in a status the timeout counts in (a workflow's: the
    run is open). Spelled as its partial index is (`tables.status_is`)."""
    counts = status_is(timeout.counts_while) if timeout.counts_while else "closed_at IS NULL"
    return f"{counts} AND {timeout.column} IS NOT NULL"


# The status lists queries filter on. The partial indexes spell the same lists in the same
# order, which SQLite needs before it will use such an index for a query.
OPEN_WORKFLOW_TASK_SQL = sql_list(OPEN_WORKFLOW_TASK)
PENDING_ACTIVITY_SQL = sql_list(PENDING_ACTIVITY)
_OPEN_ACTIVITY = status_is(OPEN_ACTIVITY)
_UNSUCCESSFUL_RUN = sql_list(UNSUCCESSFUL_RUN)
_TIMEOUT_EVENTS = frozenset(TIMEOUT_EVENTS)
# The codes of the event types that have one and that metrics do not count: most of those a
# step appends (`SQLTx.append_event`).
_PLAIN_CODES = {name: code for name, code in codec.TYPE_CODES.items()
                if name not in _TIMEOUT_EVENTS}
# A closed instance may be deleted unless it is the child of an instance still open: the parent
# may yet read it (its retry supersedes a failed child, its describe lists it).
_PRUNABLE = (
    "{plus}i.status IN " + sql_list(CLOSED_INSTANCE) + " AND NOT EXISTS (SELECT 1 FROM "
    "instances p WHERE p.workflow_instance_id = i.parent_instance_id AND p.status IN "
    + sql_list(OPEN_RUN) + ")"
)
# What an instance owns, table by table, in an order its rows can be deleted in with the
# references checked: what points at a run or the instance first, the instance row, and its
# history last (the history trigger lets it go only once the instance row is gone or marked).
# Each is (table, column, what the column holds: one of the instance's runs, ids or keys).
_OWNED = (
    ("children", "parent_run_id", "runs"),
    ("children", "child_instance_id", "ids"),
    ("workflow_tasks", "workflow_run_id", "runs"),
    ("activities", "workflow_run_id", "runs"),
    ("timers", "workflow_run_id", "runs"),
    ("failures", "workflow_run_id", "runs"),
    ("signals", "workflow_instance_id", "ids"),
    ("runs", "workflow_instance_id", "ids"),
    ("instances", "workflow_instance_id", "ids"),
    ("events", "instance_key", "keys"),
)
# A run past its execution or run deadline needs the watchdog only while nothing else will decide
# it: an open workflow task will, and so will a claimed expiry of its `deadline`.
_RUN_NEEDS_WAKING = (
    "AND runs.deadline_claimed_at IS NULL AND NOT EXISTS (SELECT 1 FROM workflow_tasks t "
    f"WHERE t.workflow_run_id = runs.workflow_run_id AND t.status IN {OPEN_WORKFLOW_TASK_SQL})"
)


@dataclasses.dataclass(slots=True)
class RunRead(Run):
    """A run as `GET_RUN` reads it, with what `keep_run_extras` keeps: its instance's history
    key, last seq and its instant, unchanging fields, and an open workflow task of the run (if
    it has one)."""

    read_instance_key: int | None = dataclasses.field(metadata={"column": "i.instance_key"})
    read_last_seq: int | None = dataclasses.field(metadata={
        "column": "(SELECT coalesce(max(seq), 0) FROM events WHERE instance_key = i.instance_key)"})
    # The instant of that last event, in microseconds: the next is stamped no earlier.
    read_last_at: int | None = dataclasses.field(metadata={
        "column": "(SELECT at FROM events WHERE instance_key = i.instance_key "
                  "ORDER BY seq DESC LIMIT 1)"})
    read_open_task: int | None = dataclasses.field(metadata={
        "column": "(SELECT t.task_id FROM workflow_tasks t WHERE t.workflow_run_id = "
                  f"r.workflow_run_id AND t.status IN {OPEN_WORKFLOW_TASK_SQL} LIMIT 1)"})
    read_definitions_digest: str | None = dataclasses.field(
        metadata={"column": "i.definitions_digest"})
    read_workflow_type: str | None = dataclasses.field(metadata={"column": "i.workflow_type"})
    read_child_depth: int | None = dataclasses.field(metadata={"column": "i.child_depth"})
    read_child_policy: str | None = dataclasses.field(metadata={"column": "i.child_policy"})


# A run as `RunRead` reads it: of one run (`GET_RUN`), or of several (PostgreSQL's
# `GET_RUNS`, its first column the run's id).
READ_RUNS = (
    f"SELECT {records.select(RunRead, 'r')} FROM runs r "
    "LEFT JOIN instances i ON i.workflow_instance_id = r.workflow_instance_id "
)
GET_RUN = f"{READ_RUNS}WHERE r.workflow_run_id = %s"
# The columns of each record (store/records.py), as the queries that make them select them
# (the backends' own claims select a workflow task's and an activity's too).
TASK_COLUMNS = records.select(WorkflowTask)
ACTIVITY_COLUMNS = records.select(Activity)
_DEFINITIONS = records.select(StoredDefinitions)
_TIMER = records.select(Timer)
_SIGNAL = records.select(Signal)
_CHILD = records.select(Child, "c")
_FAILURE = records.select(Failure)
_WORKER = records.select(RegisteredWorker)
_RUN = records.select(Run)
_INSTANCE = records.select(Instance)
# The earliest pending deadline of each kind, as metrics shows them.
_NEXT_DEADLINES = (
    "SELECT "
    + "".join(f"(SELECT min({t.column}) FROM runs WHERE {_pending(t)}) AS {t.kind}, "
              for t in WORKFLOW_TIMEOUTS)
    + "(SELECT min(deadline_at) FROM runs WHERE status = 'running'"
    " AND deadline_at IS NOT NULL AND deadline_claimed_at IS NULL) AS deadline,"
    " (SELECT min(timeout_at) FROM workflow_tasks WHERE status = 'started'"
    " AND timeout_at IS NOT NULL) AS workflow_task_timeout, "
    + "".join(f"(SELECT min({t.column}) FROM activities WHERE {_pending(t)}) AS {t.kind}, "
              for t in ACTIVITY_TIMEOUTS)
    + "(SELECT min(fire_at) FROM timers WHERE status = 'scheduled'"
    " AND kind = 'signal_timeout') AS signal_wait"
)
# A waiting activity may be claimed while each deadline that counts as it waits still holds.
WAITING_DEADLINES_HOLD = " ".join(
    f"AND ({t.column} IS NULL OR {t.column} > %(now)s)" for t in ACTIVITY_TIMEOUTS
    if set(PENDING_ACTIVITY) <= set(t.counts_while))
# Activities past one of their deadlines, and runs past their execution or run deadline: one
# part per timeout, each read through its partial index.
_EXPIRED_ACTIVITIES = " UNION ".join(
    f"SELECT activity_id FROM activities WHERE {_pending(t)} AND {t.column} <= %(now)s"
    for t in ACTIVITY_TIMEOUTS)
_EXPIRED_RUNS = " UNION ".join(
    f"SELECT workflow_run_id FROM runs WHERE {_pending(t)} AND {t.column} <= %(now)s"
    for t in WORKFLOW_TIMEOUTS)
# The earliest instant at which each timeout has something for the watchdog, as `next_due`
# reads them: a workflow timeout's still ahead, or passed where nothing else will decide its run.
_NEXT_DUE = " UNION ALL ".join((
    *(f"SELECT min({t.column}) AS at FROM runs WHERE {_pending(t)} AND {t.column} > %(now)s"
      for t in WORKFLOW_TIMEOUTS),
    *(f"SELECT min({t.column}) FROM runs WHERE {_pending(t)} AND {t.column} <= %(now)s "
      f"{_RUN_NEEDS_WAKING}" for t in WORKFLOW_TIMEOUTS),
    "SELECT min(timeout_at) FROM workflow_tasks WHERE status = 'started' AND timeout_at IS NOT NULL",
    "SELECT min(fire_at) FROM timers WHERE status = 'scheduled'",
    *(f"SELECT min({t.column}) FROM activities WHERE {_pending(t)}" for t in ACTIVITY_TIMEOUTS),
))


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix`; None if there is none.

    Both databases compare instance ids as UTF-8 bytes (PostgreSQL through COLLATE "C"), which
    orders like code points, so incrementing the last code point that can grow gives the bound.
    Surrogates cannot be stored, so the step skips them.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code <= 0x10FFFF:
            return "".join(chars) + chr(0xE000 if 0xD800 <= code <= 0xDFFF else code)
    return None


# How many ready workflow tasks `take_ready_workflow_task` looks at before it gives up.
_TAKE_TRIES = 8


def current_attempt(activity_id: str, attempt: str, owner: str, started: str) -> str:
    """The condition of an `UPDATE activities` that the attempt (`activity_id`, `attempt`: SQL
    expressions) is still current and `owner`'s: started (`started`: the status, or the
    parameter that holds it: `SQLTx._STARTED`), not superseded, and within each deadline that
    counts while it runs (at `%(now)s`)."""
    return (f"activity_id = {activity_id} AND status = {started} AND attempt = {attempt} "
            f"AND owner = {owner} AND superseded = 0 "
            + " ".join(f"AND ({t.column} IS NULL OR {t.column} > %(now)s)"
                       for t in ACTIVITY_TIMEOUTS if "started" in t.counts_while))


def keep_run_extras(read: RunRead | None, keys: dict[str, int], seqs: dict[str, int],
                    ats: dict[str, int | None], without_task: set[str] | None,
                    fields: dict[str, tuple[str, str, int, str]]) -> Run | None:
    """The run read with `GET_RUN`, what came with it kept: its instance's history key, last
    seq and that event's instant go into a transaction's caches (`keys`, `seqs`, `ats`: what it
    knew already stays), its
    instance's unchanging fields into `fields` (`run_instance_fields`), and, in a write
    transaction (`without_task` given), that the run has no open workflow task, so that
    `open_workflow_task` need not ask (inserting one for the run forgets it). The read is the
    run from then on (a `RunRead` is a `Run`): its own fields change with the run's, the
    others are read here only."""
    if read is None:
        return None
    if read.read_instance_key is not None:
        keys.setdefault(read.workflow_instance_id, read.read_instance_key)
        seqs.setdefault(read.workflow_instance_id, read.read_last_seq)
        ats.setdefault(read.workflow_instance_id, read.read_last_at)
        fields[read.workflow_run_id] = (read.read_definitions_digest, read.read_workflow_type,
                                        read.read_child_depth, read.read_child_policy)
    if without_task is not None and read.read_open_task is None:
        without_task.add(read.workflow_run_id)
    return read


@functools.lru_cache(maxsize=64)
def _close_attempt_statement(names: tuple[str, ...], started: str) -> str:
    """`SQLTx._close_attempt`'s statement, setting `names` (made once per set of them). It
    returns no columns: the worker knows what it closed (`ClosedAttempt`), and on SQLite a
    RETURNING clause costs half as much again as the update itself."""
    sets = ", ".join(f"{name} = %({name})s" for name in names)
    return (f"UPDATE activities SET {sets} WHERE "
            + current_attempt("%(activity_id)s", "%(attempt)s", "%(worker_id)s", started))


@functools.lru_cache(maxsize=256)
def insert_statement(mark: str, table: str, names: tuple[str, ...]) -> str:
    """An insert of one row's `names`, in a backend's placeholders (`mark`)."""
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"


@functools.lru_cache(maxsize=512)
def _update_statement(mark: str, table: str, key: str, names: tuple[str, ...], where: str) -> str:
    sets = ", ".join(f"{name} = {mark}" for name in names)
    return f"UPDATE {table} SET {sets} WHERE {key} = {mark}{where}"


def _history_row(row: list[Any]) -> tuple[Any, ...]:
    """A history row to write (`SQLTx._open_rows`): an event alone keeps its own type."""
    seq, run_number, at, items, key = row
    if len(items) == 2:
        return key, seq, run_number, items[0], at, jsonvalue.dumps_checked(items[1])
    return key, seq, run_number, codec.PACKED, at, jsonvalue.dumps_checked(items)


class SQLTx(ScheduleQueries):
    """The queries of one transaction, whatever the backend (see the module's text)."""

    # The placeholder of a statement built per call (inserts, updates), in the backend's own.
    _MARK = "%s"
    # Comparisons that hold for NULL on both sides.
    _IS = "IS NOT DISTINCT FROM"
    _IS_NOT = "IS DISTINCT FROM"
    # How `list` orders instances created at the same instant: by the order they were inserted.
    _INSERTION = "i.instance_key"
    # Before a column whose index a query should not use (SQLite's unary `+`).
    _NO_INDEX = ""
    # A LIMIT that takes every row.
    _NO_LIMIT: int | None = None
    # How a run's open activities and timers come: in the order they were inserted (SQLite
    # gives them in its index's order, without a sort).
    _IN_ORDER = " ORDER BY rowid"
    # How an attempt's close says it must be started (`current_attempt`), and the parameter
    # that holds the status, if it is one.
    _STARTED = "'started'"
    _STARTED_PARAMETER: ClassVar[dict[str, str]] = {}

    def __init__(self, *, writing: bool) -> None:
        self._seq: dict[str, int] = {}
        # The instant of each instance's last event (`_seq`'s), in microseconds; None: none yet.
        self._last_at: dict[str, int | None] = {}
        self._keys: dict[str, int] = {}
        # In a write transaction: runs read without an open workflow task (`keep_run_extras`).
        self._without_task: set[str] | None = set() if writing else None
        # The unchanging fields of the instances of the runs read (`run_instance_fields`).
        self._instance_fields: dict[str, tuple[str, str, int, str]] = {}
        # The history rows of the events appended in this transaction (see codec.py), written
        # in one statement before any read of the history and at commit: each instance's row
        # still open to the events that follow its last (`[seq, run_number, at, [type,
        # attributes, …], instance key]`, by instance id), and rows closed before them.
        self._open_rows: dict[str, list[Any]] = {}
        self._closed_rows: list[tuple[Any, ...]] = []
        # The instant the events were last appended at, and it in microseconds: a
        # transaction appends most of its events at its `now`.
        self._event_at: datetime | None = None
        self._event_micros = 0
        # Timeout and deadline events appended, by (type, timeout kind, failure category), for
        # the counts metrics read (written with the events).
        self._timeout_counts: dict[tuple[str, str, str], int] = {}

    # what a backend supplies

    def _execute(self, sql: str, params: Sequence[Any] | Row = ()) -> Any:
        """Run a statement; the result has the `rowcount`."""
        raise NotImplementedError

    def _run(self, sql: str, params: Sequence[Any]) -> Any:
        """Run a statement built in the backend's own placeholders (`_MARK`)."""
        raise NotImplementedError

    def _write(self, sql: str, params: Sequence[Any]) -> None:
        """Run a write built in the backend's own placeholders whose result nobody reads (a
        backend may send it with its next statement)."""
        self._run(sql, params)

    def _one(self, sql: str, params: Sequence[Any] | Row = ()) -> Row | None:
        raise NotImplementedError

    def _all(self, sql: str, params: Sequence[Any] | Row = ()) -> list[Row]:
        raise NotImplementedError

    def _tuples(self, sql: str, params: Sequence[Any] | Row = ()) -> list[Sequence[Any]]:
        """Rows as tuples of stored values, in the order the statement selects them."""
        raise NotImplementedError

    # How this backend makes each record from its stored values (store/records.py).
    _readers: records.Readers

    def _records(self, record: type[R], sql: str, params: Sequence[Any] | Row = ()) -> list[R]:
        """Rows as records: `sql` selects the record's columns (`records.select`)."""
        read = self._readers[record]
        return [read(values) for values in self._tuples(sql, params)]

    def _record(self, record: type[R], sql: str, params: Sequence[Any] | Row = ()) -> R | None:
        found = self._records(record, sql, params)
        return found[0] if found else None

    def _insert(self, table: str, row: Row, returning: str | None = None) -> int:
        """Insert a row; the value of its column `returning` (its integer key)."""
        raise NotImplementedError

    def _any(self, column: str, values: Sequence[Any], name: str | None = None) -> \
            tuple[str, Any]:
        """A condition that `column` is one of `values`, and its parameters: a tuple, or with
        `name` a dict for a statement with named parameters."""
        raise NotImplementedError

    @staticmethod
    def _at(instant: datetime) -> Any:
        """An instant as a statement's parameter."""
        return instant

    @staticmethod
    def _instant(stored: Any) -> datetime | None:
        """An instant from a column store/columns.py cannot name."""
        return stored

    def _owned(self, sql: str, params: Sequence[Any], record: type | None = None) -> Any:
        """One row of a workflow family (a backend that locks families reads it again after);
        a record of `record` where given."""
        return self._one(sql, params) if record is None else self._record(record, sql, params)

    def _scan(self, sql: str, params: Row, key: str, column: str | None = None,
              record: type | None = None) -> list[Any]:
        """Rows found by a scan, `sql` with `{only}` where a backend that locks families may
        add a condition on `key` (the column `column` of the query); records of `record`
        where given."""
        return self._all(sql, params) if record is None else self._records(record, sql, params)

    def _planned_once(self, sql: str, params: Row) -> Row | None:
        """A statement that costs far more to plan than to run."""
        return self._one(sql, params)

    def _delete_first(self, table: str, where: str, params: Row, limit: int) -> int:
        """Delete up to `limit` rows of `table` that match `where`; how many."""
        raise NotImplementedError

    def _update(self, table: str, key: str, value: Any, fields: Row,
                where: str = "", params: Sequence[Any] = ()) -> int:
        return self._run(_update_statement(self._MARK, table, key, tuple(fields), where),
                         (*self._stored(fields), value, *params)).rowcount

    def _update_unread(self, table: str, key: str, value: Any, fields: Row) -> None:
        """An update whose result nobody reads (`_write`)."""
        self._write(_update_statement(self._MARK, table, key, tuple(fields), ""),
                    (*self._stored(fields), value))

    _stored: Any

    # definitions

    def put_definitions(self, digest: str, path: str, source: str, now: datetime) -> None:
        self._execute(
            "INSERT INTO definitions (digest, path, source, created_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (digest) DO NOTHING",
            (digest, path, source, self._at(now)),
        )

    def get_definitions(self, digest: str) -> StoredDefinitions | None:
        return self._record(StoredDefinitions, f"SELECT {_DEFINITIONS} FROM definitions "
                            "WHERE digest = %s", (digest,))

    # instances and runs

    def hold(self, instance_id: str) -> None:
        """Nothing to take where the write transaction holds the whole database."""

    def expect(self, instance_ids: Sequence[str], closes: Sequence[PlannedClose] = ()) -> None:
        """Nothing to take where the write transaction holds the whole database."""

    def get_instance(self, instance_id: str) -> Instance | None:
        return self._owned(f"SELECT {_INSTANCE} FROM instances WHERE workflow_instance_id = %s",
                           (instance_id,), Instance)

    def update_instance(self, instance_id: str, /, **fields: Any) -> None:
        self._update_unread("instances", "workflow_instance_id", instance_id, fields)

    def _instance_filter(self, status: str | None, workflow_type: str | None,
                         since: datetime | None, schedule: str | None = None) -> \
            tuple[str, list[Any]]:
        clauses, params = [], []
        if schedule:
            clauses.append("i.schedule_name = %s")
            params.append(schedule)
        if status:
            clauses.append("i.status = %s")
            params.append(status)
        if workflow_type:
            clauses.append("i.workflow_type = %s")
            params.append(workflow_type)
        if since:
            clauses.append("i.created_at >= %s")
            params.append(self._at(since))
        return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params

    def list_instances(self, *, status: str | None, workflow_type: str | None,
                       since: datetime | None, limit: int,
                       before: tuple[datetime, str] | None = None,
                       schedule: str | None = None) -> list[Row]:
        where, params = self._instance_filter(status, workflow_type, since, schedule)
        if before is not None:
            # The rows after (older than) the one named, through the created_at index; one
            # since deleted names its instant alone.
            key = self._INSERTION.removeprefix("i.")
            where += (" AND " if where else "WHERE ") + \
                f"(i.created_at, {self._INSERTION}) < (%s, coalesce((SELECT {key} FROM instances " \
                "WHERE workflow_instance_id = %s), 0))"
            params += [self._at(before[0]), before[1]]
        return self._all(
            "SELECT i.*, r.run_number, r.execution_deadline_at, r.run_deadline_at, "
            "r.step_index, r.wait_kind FROM instances i "
            f"JOIN runs r ON r.workflow_run_id = i.current_run_id {where} "
            f"ORDER BY i.created_at DESC, {self._INSERTION} DESC LIMIT %s", (*params, limit),
        )

    def count_instances(self, *, status: str | None, workflow_type: str | None,
                        since: datetime | None, schedule: str | None = None) -> int:
        where, params = self._instance_filter(status, workflow_type, since, schedule)
        return self._one(f"SELECT count(*) AS n FROM instances i {where}", params)["n"]

    def open_deadlines(self, run_ids: Sequence[str]) -> list[Row]:
        runs, params = self._any("workflow_run_id", run_ids)
        return self._all(
            "".join(f"SELECT workflow_run_id, '{t.kind}' AS kind, {t.column} AS at FROM "
                    f"activities WHERE {runs} AND {_pending(t)} UNION ALL "
                    for t in ACTIVITY_TIMEOUTS)
            + "SELECT workflow_run_id, CASE kind WHEN 'signal_timeout' THEN 'signal_wait' "
            "WHEN 'delay' THEN 'timer' ELSE kind END, fire_at FROM timers "
            f"WHERE {runs} AND status = 'scheduled' "
            "UNION ALL SELECT workflow_run_id, 'workflow_task_timeout', timeout_at "
            f"FROM workflow_tasks WHERE {runs} AND status = 'started' "
            "AND timeout_at IS NOT NULL", params * (len(ACTIVITY_TIMEOUTS) + 2),
        )

    def instance_ids(self, prefix: str, limit: int) -> list[str]:
        # A range on the primary key reads only the matches; `LIKE` cannot use the index and
        # scanned every instance. Ids come in key order: the newest first would need every match.
        upper = prefix_upper_bound(prefix)
        where, params = "workflow_instance_id >= %s", [prefix]
        if upper is not None:
            where += " AND workflow_instance_id < %s"
            params.append(upper)
        rows = self._all(
            f"SELECT workflow_instance_id FROM instances WHERE {where} "
            "ORDER BY workflow_instance_id LIMIT %s", (*params, limit),
        )
        return [row["workflow_instance_id"] for row in rows]

    def get_run(self, run_id: str) -> Run | None:
        """The run row (read after its family's lock where families are locked); its instance's
        history key and last seq come along in the same statement, since a transaction that
        reads a run mostly appends to its history."""
        return keep_run_extras(self._owned(GET_RUN, (run_id,), RunRead), self._keys, self._seq,
                               self._last_at, self._without_task, self._instance_fields)

    def hold_run(self, instance_id: str, run_id: str) -> Run | None:
        self.hold(instance_id)
        return self.get_run(run_id)

    def run_instance_fields(self, run_id: str) -> tuple[str, str, int, str] | None:
        """The unchanging fields of the run's instance (definitions digest, workflow type, child
        depth, child policy) when this transaction read the run, which reads them with it."""
        return self._instance_fields.get(run_id)

    def get_run_by_number(self, instance_id: str, run_number: int) -> Run | None:
        return self._owned(
            f"SELECT {_RUN} FROM runs WHERE workflow_instance_id = %s AND run_number = %s",
            (instance_id, run_number), Run,
        )

    def insert_run(self, row: Row) -> None:
        self._insert("runs", row)

    def update_run(self, run_id: str, /, **fields: Any) -> None:
        self._update_unread("runs", "workflow_run_id", run_id, fields)

    # history

    def instance_key(self, instance_id: str) -> int | None:
        """The integer key history is stored under (read once per transaction)."""
        key = self._keys.get(instance_id)
        if key is None:
            row = self._one("SELECT instance_key FROM instances WHERE workflow_instance_id = %s",
                            (instance_id,))
            if row is None:
                return None
            key = self._keys[instance_id] = row["instance_key"]
        return key

    def last_seq(self, instance_id: str) -> int:
        seq = self._seq.get(instance_id)
        if seq is None:
            key = self._keys.get(instance_id)
            if key is None:
                # The key, the last seq and its instant in one statement: each is read once per
                # transaction.
                row = self._one(
                    "SELECT i.instance_key, (SELECT coalesce(max(seq), 0) FROM events "
                    "WHERE instance_key = i.instance_key) AS seq, (SELECT at FROM events "
                    "WHERE instance_key = i.instance_key ORDER BY seq DESC LIMIT 1) AS micros "
                    "FROM instances i WHERE i.workflow_instance_id = %s", (instance_id,),
                )
                if row is None:
                    return 0
                self._keys[instance_id] = row["instance_key"]
            else:
                row = self._one(
                    "SELECT seq, at AS micros FROM events WHERE instance_key = %s "
                    "ORDER BY seq DESC LIMIT 1", (key,),
                ) or {"seq": 0, "micros": None}
            # `micros`: history's stored instant, which no column name would convert.
            seq = self._seq[instance_id] = row["seq"]
            self._last_at[instance_id] = row["micros"]
        return seq

    def append_event(self, run: Run, event_type: str, at: datetime, attributes: Row) -> int:
        """Append one event to the instance's history; returns its seq (the event id). The events
        one transaction appends to one run at one instant, their seqs one after another, share
        a row keyed by the last seq (see codec.py)."""
        stored_at = self._stamp(run.workflow_instance_id, at)
        code = _PLAIN_CODES.get(event_type)
        if code is None:
            code = self._uncommon_event(event_type, attributes)
        return self._append(run, code, stored_at, codec.stored_attributes(attributes, stored_at))

    def append_values(self, run: Run, kind: codec.EventKind, at: datetime,
                      values: tuple[Any, ...]) -> int:
        """`append_event` of an event of `kind` with these attribute values, in its order."""
        stored_at = self._stamp(run.workflow_instance_id, at)
        return self._append(run, kind.code, stored_at,
                            codec.stored_values(kind.head, kind.special, values, stored_at))

    def _stamp(self, instance_id: str, at: datetime) -> int:
        """The instant, in microseconds, an event appended at `at` is stored at: never before
        the instance's last event. A transaction acts at the instant it was given, read before
        it waited for the write lock or its family's; one that began later may have appended to
        the instance meanwhile, and history's instants never go back as its seqs go up."""
        if at is not self._event_at:
            self._event_at = at
            self._event_micros = codec.micros(at)
        stored_at = self._event_micros
        last_at = self._last_at.get(instance_id)
        if last_at is None and instance_id not in self._seq:
            self.last_seq(instance_id)
            last_at = self._last_at.get(instance_id)
        return stored_at if last_at is None or last_at <= stored_at else last_at

    def _append(self, run: Run, code: int | str, stored_at: int, stored: list[Any]) -> int:
        instance_id = run.workflow_instance_id
        # The instance's open row holds its last seq (`_seq` says the same).
        row = self._open_rows.get(instance_id)
        if row is not None and row[2] == stored_at and row[1] == run.run_number:
            row[3] += (code, stored)
            seq = self._seq[instance_id] = row[0] = row[0] + 1
            return seq
        seq = self._seq.get(instance_id)
        seq = self._seq[instance_id] = (self.last_seq(instance_id) if seq is None else seq) + 1
        self._last_at[instance_id] = stored_at
        if row is not None:
            self._closed_rows.append(_history_row(row))
        self._open_rows[instance_id] = [seq, run.run_number, stored_at, [code, stored],
                                        self._keys[instance_id]]
        return seq

    def _uncommon_event(self, event_type: str, attributes: Row) -> int | str:
        """The stored type of an event that has no code, or one that metrics count (a timeout
        or a deadline's expiry: counted here, written with the events)."""
        if event_type in _TIMEOUT_EVENTS:
            key = (event_type, attributes.get("timeout_kind") or "",
                   attributes.get("failure_category") or "")
            self._timeout_counts[key] = self._timeout_counts.get(key, 0) + 1
        return codec.TYPE_CODES.get(event_type, event_type)

    def _history_rows(self) -> list[tuple[Any, ...]]:
        """The history rows of the events appended since the last call, to be written."""
        rows, self._closed_rows = self._closed_rows, []
        rows.extend(map(_history_row, self._open_rows.values()))
        self._open_rows = {}
        return rows

    def flush(self) -> None:
        """Write the events appended so far (one statement for all of them)."""
        raise NotImplementedError

    def history_count(self, run: Run) -> int:
        """Events of a run that count toward history_size, without a scan: a run's events are
        contiguous from its first_seq to the last, less the refused starts it recorded."""
        return self.last_seq(run.workflow_instance_id) - run.first_seq + 1 \
            - run.rejected_starts

    def event(self, instance_id: str, seq: int) -> Event | None:
        """One event of an instance's history, as `events` gives it."""
        found = self.events(instance_id, after_seq=seq - 1, until_seq=seq)
        return found[0] if found else None

    def events(self, instance_id: str, *, run_number: int | None = None,
               after_seq: int = 0, until_seq: int | None = None,
               event_types: Sequence[str] = ()) -> list[Event]:
        """An instance's events in order (after `after_seq`, up to `until_seq`), each with its
        type's name, its instant and its attributes as a dict."""
        self.flush()
        key = self.instance_key(instance_id)
        # A row of several events (codec.PACKED) is keyed by the last of their seqs: the rows
        # after `after_seq` begin with the one that holds the event after it, and the first row
        # at or after `until_seq` holds that event; each row's events are then taken by seq.
        sql = ("SELECT seq, run_number, event_type, at, attributes FROM events "
               "WHERE instance_key = %s AND seq > %s")
        params: tuple[Any, ...] = (key, after_seq)
        if until_seq is not None:
            sql += (" AND seq <= (SELECT coalesce(min(seq), %s) FROM events "
                    "WHERE instance_key = %s AND seq >= %s)")
            params += (until_seq, key, until_seq)
        if run_number is not None:
            sql += " AND run_number = %s"
            params += (run_number,)
        if event_types:
            types, codes = self._any("event_type", [codec.type_code(n) for n in event_types])
            sql += f" AND ({types} OR event_type = {codec.PACKED})"
            params += codes
        events = []
        # History's own encoding (codec.py), not the columns' of other tables.
        for seq, run, code, at, attributes in self._tuples(sql + " ORDER BY seq", params):
            if code != codec.PACKED:
                if until_seq is None or seq <= until_seq:
                    events.append(Event(instance_id, seq, run, codec.type_name(code),
                                        codec.instant(at), codec.decode_attributes(attributes, at)))
                continue
            packed = codec.unpack(attributes)
            instant = codec.instant(at)
            for event_seq, (code, items) in enumerate(packed, seq - len(packed) + 1):
                name = codec.type_name(code)
                if event_seq > after_seq and (until_seq is None or event_seq <= until_seq) \
                        and (not event_types or name in event_types):
                    events.append(Event(instance_id, event_seq, run, name, instant,
                                        codec.decode_items(items, at)))
        return events

    # workflow tasks

    def open_workflow_task(self, run_id: str) -> WorkflowTask | None:
        if self._without_task is not None and run_id in self._without_task:
            return None
        return self._record(
            WorkflowTask, f"SELECT {TASK_COLUMNS} FROM workflow_tasks WHERE workflow_run_id = %s "
            f"AND status IN {OPEN_WORKFLOW_TASK_SQL} LIMIT 1", (run_id,),
        )

    def insert_workflow_task(self, row: Row) -> int:
        if self._without_task is not None:
            self._without_task.discard(row["workflow_run_id"])
        return self._insert("workflow_tasks", row, "task_id")

    def get_workflow_task(self, task_id: int) -> WorkflowTask | None:
        return self._owned(f"SELECT {TASK_COLUMNS} FROM workflow_tasks WHERE task_id = %s", (task_id,),
                           WorkflowTask)

    def update_workflow_task(self, task_id: int, /, *, expect_status: str | None = None,
                             **fields: Any) -> bool:
        where, params = ("", ()) if expect_status is None else (f" AND status = {self._MARK}",
                                                                (expect_status,))
        return self._update("workflow_tasks", "task_id", task_id, fields, where, params) == 1

    def take_ready_workflow_task(self, now: datetime, ahead: int = 1) -> WorkflowTask | None:
        """The oldest ready task, removed: it is decided in this transaction (a task another
        writer started first is passed over)."""
        for _ in range(_TAKE_TRIES):
            task = self.next_ready_workflow_task(now)
            if task is None or self._execute(
                    "DELETE FROM workflow_tasks WHERE task_id = %s AND status = 'scheduled'",
                    (task.task_id,)).rowcount == 1:
                return task
        return None

    def close_workflow_task(self, task_id: int) -> None:
        """A workflow task ended (completed, timed out or cancelled): its row goes, its story
        stays in history."""
        self._execute("DELETE FROM workflow_tasks WHERE task_id = %s", (task_id,))

    def close_workflow_tasks(self, run_id: str, keep: int | None) -> None:
        """End every open workflow task of the run but `keep`."""
        if self._without_task is not None and run_id in self._without_task:
            return
        self._execute(
            f"DELETE FROM workflow_tasks WHERE workflow_run_id = %s AND status IN "
            f"{OPEN_WORKFLOW_TASK_SQL} AND task_id {self._IS_NOT} %s", (run_id, keep),
        )

    def timed_out_workflow_tasks(self, now: datetime, limit: int) -> list[WorkflowTask]:
        return self._scan(
            f"SELECT {TASK_COLUMNS} FROM workflow_tasks WHERE status = 'started' "
            "AND timeout_at IS NOT NULL AND timeout_at <= %(now)s{only} ORDER BY timeout_at "
            "LIMIT %(limit)s", {"now": self._at(now), "limit": limit}, "task_id",
            record=WorkflowTask,
        )

    def workflow_tasks_owned_by(self, worker_ids: Sequence[str]) -> list[WorkflowTask]:
        owners, params = self._any("owner", worker_ids, "ids")
        return self._scan(
            f"SELECT {TASK_COLUMNS} FROM workflow_tasks WHERE status = 'started' AND {owners}{{only}}",
            params, "task_id", record=WorkflowTask,
        )

    # activities

    def insert_activity(self, row: Row) -> None:
        self._insert("activities", row)

    def get_activity(self, activity_id: str) -> Activity | None:
        return self._owned(f"SELECT {ACTIVITY_COLUMNS} FROM activities WHERE activity_id = %s",
                           (activity_id,), Activity)

    def update_activity(self, activity_id: str, /, *, expect_attempt: int | None = None,
                        expect_status: Iterable[str] = (), **fields: Any) -> bool:
        where, params = "", ()
        if expect_attempt is not None:
            where, params = f" AND attempt = {self._MARK}", (expect_attempt,)
        statuses = tuple(expect_status)
        if statuses:
            condition, values = self._any("status", statuses)
            where += f" AND {condition}"
            params += values
        return self._update("activities", "activity_id", activity_id, fields, where,
                            params) == 1

    def close_current_attempt(self, activity_id: str, attempt: int, worker_id: str, now: datetime, /,
                              **fields: Any) -> bool:
        """Set `fields` on an attempt that is still `worker_id`'s, started, not superseded
        and within every deadline that counts while it runs, in one statement; whether it was
        (when not, the caller reads the row to say why)."""
        return self._execute(
            *self._close_attempt(activity_id, attempt, worker_id, now, fields)).rowcount == 1

    def _close_attempt(self, activity_id: str, attempt: int, worker_id: str, now: datetime,
                       fields: Row) -> tuple[str, Row]:
        """`close_current_attempt`'s statement and its parameters."""
        return (
            _close_attempt_statement(tuple(fields), self._STARTED),
            {**dict(zip(fields, self._stored(fields), strict=True)), "activity_id": activity_id,
             "attempt": attempt, "worker_id": worker_id, "now": self._at(now),
             **self._STARTED_PARAMETER},
        )

    def hold_run_and_close(self, instance_id: str, run_id: str,
                           accept: Callable[[Run | None], bool], activity_id: str,
                           attempt: int, worker_id: str, now: datetime, /,
                           **fields: Any) -> tuple[Run | None, bool]:
        run = self.hold_run(instance_id, run_id)
        if not accept(run):
            return run, False
        return run, self.close_current_attempt(activity_id, attempt, worker_id, now, **fields)

    def step_activities(self, run_id: str, step_index: int) -> list[Activity]:
        return self._records(
            Activity, f"SELECT {ACTIVITY_COLUMNS} FROM activities WHERE workflow_run_id = %s "
            "AND step_index = %s AND superseded = 0 ORDER BY branch_index", (run_id, step_index),
        )

    def run_activities(self, run_id: str) -> list[Activity]:
        return self._records(
            Activity, f"SELECT {ACTIVITY_COLUMNS} FROM activities WHERE workflow_run_id = %s "
            "ORDER BY scheduled_at, rowid", (run_id,),
        )

    def open_activities(self, run_id: str) -> list[Activity]:
        return self._records(
            Activity, f"SELECT {ACTIVITY_COLUMNS} FROM activities WHERE workflow_run_id = %s "
            f"AND {_OPEN_ACTIVITY}{self._IN_ORDER}", (run_id,),
        )

    def count_open_activities(self, run_id: str) -> int:
        return self._one(
            "SELECT count(*) AS n FROM activities WHERE workflow_run_id = %s "
            f"AND {_OPEN_ACTIVITY}", (run_id,),
        )["n"]

    def next_ready_activity_with_run(self, queues: Sequence[str], now: datetime,
                                     ahead: int = 1) -> tuple[Activity, Run] | None:
        activity = self.next_ready_activity(queues, now)
        if activity is None:
            return None
        return activity, self.get_run(activity.workflow_run_id)

    def next_activity_available_at(self, queues: Sequence[str]) -> datetime | None:
        condition, params = self._any("queue", queues, "queues")
        return self._planned_once(
            f"SELECT min(available_at) AS at FROM activities WHERE {condition} "
            f"AND status IN {PENDING_ACTIVITY_SQL}", params,
        )["at"]

    def expired_activities(self, now: datetime, limit: int) -> list[Activity]:
        """Open activities past any of their four deadlines, found through the partial indexes."""
        return self._scan(
            f"SELECT {ACTIVITY_COLUMNS} FROM activities WHERE activity_id IN "
            f"({_EXPIRED_ACTIVITIES}){{only}} LIMIT %(limit)s",
            {"now": self._at(now), "limit": limit}, "activity_id", record=Activity,
        )

    def activities_owned_by(self, worker_ids: Sequence[str]) -> list[Activity]:
        owners, params = self._any("owner", worker_ids, "ids")
        return self._scan(
            f"SELECT {ACTIVITY_COLUMNS} FROM activities WHERE status = 'started' "
            f"AND {owners}{{only}}", params, "activity_id", record=Activity,
        )

    # timers

    def insert_timer(self, row: Row) -> None:
        self._insert("timers", row)

    def update_timer(self, timer_id: str, /, *, expect_status: str | None = None,
                     **fields: Any) -> bool:
        where, params = ("", ()) if expect_status is None else (f" AND status = {self._MARK}",
                                                                (expect_status,))
        return self._update("timers", "timer_id", timer_id, fields, where, params) == 1

    def step_timers(self, run_id: str, step_index: int) -> list[Timer]:
        return self._records(
            Timer, f"SELECT {_TIMER} FROM timers WHERE workflow_run_id = %s AND step_index = %s "
            "AND superseded = 0 ORDER BY rowid", (run_id, step_index),
        )

    def run_timers(self, run_id: str) -> list[Timer]:
        return self._records(
            Timer, f"SELECT {_TIMER} FROM timers WHERE workflow_run_id = %s ORDER BY rowid",
            (run_id,),
        )

    def open_timers(self, run_id: str) -> list[Timer]:
        return self._records(
            Timer, f"SELECT {_TIMER} FROM timers WHERE workflow_run_id = %s "
            f"AND status = 'scheduled'{self._IN_ORDER}", (run_id,)
        )

    def due_timers(self, now: datetime, limit: int,
                   after: tuple[datetime, str] | None = None) -> list[Timer]:
        # The index on fire_at holds its rows in (fire_at, rowid) order: a page goes on from
        # the last timer of the one before.
        if after is None:
            return self._scan(
                f"SELECT {_TIMER} FROM timers WHERE status = 'scheduled' "
                "AND fire_at <= %(now)s{only} ORDER BY fire_at, rowid LIMIT %(limit)s",
                {"now": self._at(now), "limit": limit}, "timer_id", record=Timer,
            )
        return self._scan(
            f"SELECT {_TIMER} FROM timers WHERE status = 'scheduled' AND fire_at <= %(now)s "
            "AND fire_at >= %(after)s AND (fire_at, rowid) > "
            "(%(after)s, (SELECT rowid FROM timers WHERE timer_id = %(after_id)s)){only} "
            "ORDER BY fire_at, rowid LIMIT %(limit)s",
            {"now": self._at(now), "limit": limit, "after": self._at(after[0]),
             "after_id": after[1]}, "timer_id", record=Timer,
        )

    # signals

    def insert_signal(self, row: Row) -> None:
        self._insert("signals", row)

    def first_pending_signal(self, instance_id: str, name: str) -> Signal | None:
        return self._record(
            Signal, f"SELECT {_SIGNAL} FROM signals WHERE workflow_instance_id = %s "
            "AND name = %s AND consumed_at IS NULL ORDER BY signal_id LIMIT 1",
            (instance_id, name),
        )

    def pending_signals(self, instance_id: str) -> list[Signal]:
        return self._records(
            Signal, f"SELECT {_SIGNAL} FROM signals WHERE workflow_instance_id = %s "
            "AND consumed_at IS NULL ORDER BY signal_id", (instance_id,),
        )

    def count_pending_signals(self, instance_id: str) -> int:
        return self._one(
            "SELECT count(*) AS n FROM signals WHERE workflow_instance_id = %s "
            "AND consumed_at IS NULL", (instance_id,),
        )["n"]

    def consume_signal(self, signal_id: int, run_id: str, step_index: int, now: datetime) -> None:
        self._execute(
            "UPDATE signals SET consumed_run_id = %s, consumed_step_index = %s, "
            "consumed_at = %s WHERE signal_id = %s", (run_id, step_index, self._at(now),
                                                       signal_id),
        )

    def consumed_signal(self, run_id: str, step_index: int) -> Signal | None:
        return self._record(
            Signal, f"SELECT {_SIGNAL} FROM signals WHERE consumed_run_id = %s "
            "AND consumed_step_index = %s ORDER BY signal_id DESC LIMIT 1", (run_id, step_index),
        )

    # children

    def insert_child(self, row: Row) -> None:
        self._insert("children", row)

    def child_link(self, child_instance_id: str) -> Child | None:
        return self._record(
            Child, f"SELECT {_CHILD} FROM children c JOIN instances i "
            "ON i.workflow_instance_id = c.child_instance_id WHERE c.child_instance_id = %s",
            (child_instance_id,),
        )

    def step_children(self, run_id: str, step_index: int) -> list[Child]:
        return self._records(
            Child, f"SELECT {_CHILD} FROM children c JOIN instances i "
            "ON i.workflow_instance_id = c.child_instance_id "
            "WHERE c.parent_run_id = %s AND c.step_index = %s AND c.superseded = 0 "
            "ORDER BY c.branch_index", (run_id, step_index),
        )

    def run_children(self, run_id: str) -> list[Child]:
        return self._records(
            Child, f"SELECT {_CHILD} FROM children c JOIN instances i "
            "ON i.workflow_instance_id = c.child_instance_id WHERE c.parent_run_id = %s "
            "ORDER BY c.created_at, c.rowid", (run_id,),
        )

    def supersede_child(self, child_instance_id: str) -> None:
        self._execute("UPDATE children SET superseded = 1 WHERE child_instance_id = %s",
                      (child_instance_id,))

    def supersede_children(self, run_id: str, step_index: int) -> None:
        self._execute(
            "UPDATE children SET superseded = 1 WHERE parent_run_id = %s AND step_index = %s "
            "AND child_instance_id IN (SELECT workflow_instance_id FROM instances "
            f"WHERE status IN {_UNSUCCESSFUL_RUN})", (run_id, step_index),
        )

    # failures

    def insert_failure(self, row: Row) -> int:
        return self._insert("failures", row, "failure_id")

    def get_failure(self, failure_id: int) -> Failure | None:
        return self._record(Failure, f"SELECT {_FAILURE} FROM failures WHERE failure_id = %s",
                            (failure_id,))

    def activity_failure(self, activity_id: str) -> Failure | None:
        return self._record(
            Failure, f"SELECT {_FAILURE} FROM failures WHERE activity_id = %s "
            "ORDER BY failure_id DESC LIMIT 1", (activity_id,),
        )

    # deadlines (must complete within)

    def expired_deadlines(self, now: datetime, limit: int) -> list[Run]:
        return self._scan(
            f"SELECT {_RUN} FROM runs WHERE status = 'running' AND deadline_at IS NOT NULL "
            "AND deadline_claimed_at IS NULL AND deadline_at <= %(now)s{only} "
            "ORDER BY deadline_at LIMIT %(limit)s", {"now": self._at(now), "limit": limit},
            "workflow_run_id", record=Run,
        )

    def earliest_deadline(self) -> datetime | None:
        return self._one(
            "SELECT min(deadline_at) AS at FROM runs WHERE status = 'running' "
            "AND deadline_at IS NOT NULL AND deadline_claimed_at IS NULL"
        )["at"]

    def claimed_deadlines(self) -> list[Run]:
        return self._scan(
            f"SELECT {_RUN} FROM runs WHERE deadline_claimed_at IS NOT NULL "
            "AND closed_at IS NULL{only}", {}, "workflow_run_id", record=Run,
        )

    def claim_deadline(self, run_id: str, worker_id: str, now: datetime,
                       previous_owner: str | None) -> bool:
        return self._execute(
            "UPDATE runs SET deadline_claimed_by = %s, deadline_claimed_at = %s "
            f"WHERE workflow_run_id = %s AND closed_at IS NULL AND deadline_claimed_by {self._IS} "
            "%s", (worker_id, self._at(now), run_id, previous_owner),
        ).rowcount == 1

    # workflow timeouts

    def runs_past_deadline_without_task(self, now: datetime, limit: int) -> list[Run]:
        return self._scan(
            f"SELECT {_RUN} FROM runs WHERE workflow_run_id IN ({_EXPIRED_RUNS}) "
            f"{_RUN_NEEDS_WAKING}{{only}} LIMIT %(limit)s", {"now": self._at(now), "limit": limit},
            "workflow_run_id", record=Run,
        )

    def next_due(self, now: datetime) -> datetime | None:
        """The earliest instant at which the watchdog has something to do.

        A run past its deadline counts only while the watchdog can act on it (no open workflow
        task, no claimed deadline); otherwise the watchdog would wake again at once, forever.
        """
        return self._planned_once(
            f"SELECT min(at) AS at FROM ({_NEXT_DUE}) AS due", {"now": self._at(now)},
        )["at"]

    # retention

    def prunable_instances(self, now: datetime, *, closed_before: datetime | None,
                           limit: int) -> list[Row]:
        """Closed instances past their retention (with `closed_before`: closed before it,
        whatever their retention), first due first, each with how many events its history
        holds; none whose parent is still open. Where families are locked, those of a write
        transaction are, and those still prunable then are returned."""
        if closed_before is None:
            where, at = "i.retain_until IS NOT NULL AND i.retain_until <= %(at)s", now
            order = "i.retain_until"
        else:
            where, at = "i.closed_at IS NOT NULL AND i.closed_at <= %(at)s", closed_before
            order = "i.closed_at"
        prunable = _PRUNABLE.format(plus=self._NO_INDEX)
        return self._scan(
            "SELECT i.workflow_instance_id, (SELECT coalesce(max(e.seq), 0) FROM events e "
            "WHERE e.instance_key = i.instance_key) AS events FROM instances i "
            f"WHERE {where} AND {prunable}{{only}} ORDER BY {order} LIMIT %(limit)s",
            {"at": self._at(at), "limit": self._NO_LIMIT if limit < 0 else limit},
            "workflow_instance_id", column="i.workflow_instance_id",
        )

    def next_retain_until(self, now: datetime) -> datetime | None:
        """When the next closed instance's retention runs out, after `now`."""
        return self._one(
            "SELECT min(retain_until) AS at FROM instances WHERE retain_until IS NOT NULL "
            "AND retain_until > %s", (self._at(now),),
        )["at"]

    def delete_instances(self, instance_ids: Sequence[str]) -> dict[str, int]:
        """Delete these instances with every row they own; how many rows, by table."""
        deleted: dict[str, int] = {}
        for table, where, params in self._owned_rows(instance_ids):
            count = self._execute(f"DELETE FROM {table} WHERE {where}", params).rowcount
            deleted[table] = deleted.get(table, 0) + count
        return deleted

    def mark_pruning(self, instance_id: str, now: datetime) -> None:
        """Mark an instance as being deleted over several transactions (`delete_instance_part`):
        from now on its history may be deleted, and readers see it no more."""
        self._execute(
            "INSERT INTO pruning (workflow_instance_id, instance_key, started_at) "
            "SELECT workflow_instance_id, instance_key, %s FROM instances "
            "WHERE workflow_instance_id = %s", (self._at(now), instance_id),
        )

    def pruning_instance(self) -> str | None:
        """The instance whose deletion over several transactions is under way, if any (held,
        where families are locked)."""
        row = self._one("SELECT workflow_instance_id FROM pruning ORDER BY started_at LIMIT 1")
        if row is None:
            return None
        self.hold(row["workflow_instance_id"])
        return row["workflow_instance_id"]

    def is_pruning(self, instance_id: str) -> bool:
        return self._one("SELECT 1 AS marked FROM pruning WHERE workflow_instance_id = %s",
                         (instance_id,)) is not None

    def delete_instance_part(self, instance_id: str, limit: int) -> dict[str, int]:
        """Delete up to `limit` rows a marked instance owns, table by table in the order
        `delete_instances` keeps; once nothing else is left, its mark and the instance itself
        (then `instances` is 1). How many rows, by table."""
        deleted: dict[str, int] = {}
        left = limit
        for table, where, params in self._owned_rows([instance_id]):
            if table == "instances":
                continue
            count = self._delete_first(table, where, params, left)
            deleted[table] = deleted.get(table, 0) + count
            left -= count
            if left <= 0:
                return deleted
        self._execute("DELETE FROM pruning WHERE workflow_instance_id = %s", (instance_id,))
        deleted["instances"] = self._execute(
            "DELETE FROM instances WHERE workflow_instance_id = %s", (instance_id,)).rowcount
        return deleted

    def count_owned_rows(self, instance_ids: Sequence[str]) -> dict[str, int]:
        """How many rows `delete_instances` would delete, by table."""
        counted: dict[str, int] = {}
        owned = self._owned_rows(instance_ids)
        for table, where, params in owned:
            if table == "children":
                continue
            counted[table] = self._one(f"SELECT count(*) AS n FROM {table} WHERE {where}",
                                       params)["n"]
        # A link between two instances both deleted is one row, counted once.
        (_, parents, params), (_, children, _) = owned[0], owned[1]
        counted["children"] = self._one(
            f"SELECT count(*) AS n FROM children WHERE {parents} OR {children}", params
        )["n"]
        return counted

    def _owned_rows(self, instance_ids: Sequence[str]) -> list[tuple[str, str, Row]]:
        ids, params = self._any("workflow_instance_id", instance_ids, "ids")
        # History is keyed by the instance's integer key, read before the instance row goes.
        keys = [row["instance_key"] for row in self._all(
            f"SELECT instance_key FROM instances WHERE {ids}", params)]
        _, key_params = self._any("instance_key", keys, "keys")
        params = {**params, **key_params}
        runs = f"IN (SELECT workflow_run_id FROM runs WHERE {ids})"
        owned = []
        for table, column, holds in _OWNED:
            if holds == "runs":
                where = f"{column} {runs}"
            else:
                where = self._any(column, instance_ids if holds == "ids" else keys, holds)[0]
            owned.append((table, where, params))
        return owned

    # workers

    def register_worker(self, row: Row) -> None:
        """Record a worker; a record already there under its id is kept as it is (written by
        this very registration, when the worker was told its commit had failed)."""
        self._execute(
            f"INSERT INTO workers ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))}) "
            "ON CONFLICT (worker_id) DO NOTHING",
            tuple(self._stored(row)),
        )

    def renew_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> bool:
        return self._execute(
            "UPDATE workers SET heartbeat_at = %s, lease_expires_at = %s "
            "WHERE worker_id = %s AND stopped_at IS NULL",
            (self._at(now), self._at(lease_expires_at), worker_id),
        ).rowcount == 1

    def revive_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> None:
        self._execute(
            "UPDATE workers SET heartbeat_at = %s, lease_expires_at = %s, stopped_at = NULL "
            "WHERE worker_id = %s", (self._at(now), self._at(lease_expires_at), worker_id),
        )

    def stop_worker(self, worker_id: str, now: datetime) -> None:
        self._execute(
            "UPDATE workers SET stopped_at = %s WHERE worker_id = %s AND stopped_at IS NULL",
            (self._at(now), worker_id),
        )

    def live_workers(self) -> list[RegisteredWorker]:
        return self._records(RegisteredWorker,
                             f"SELECT {_WORKER} FROM workers WHERE stopped_at IS NULL")

    def get_worker(self, worker_id: str) -> RegisteredWorker | None:
        return self._record(RegisteredWorker,
                            f"SELECT {_WORKER} FROM workers WHERE worker_id = %s", (worker_id,))

    # metrics (SPEC §10): each read is a count kept as rows change, an index range or an
    # index's minimum

    def instance_counts(self) -> list[Row]:
        """Instances by type and status, as kept as instances change."""
        return self._all("SELECT workflow_type, status, CAST(sum(count) AS bigint) AS count "
                         "FROM instance_counts GROUP BY workflow_type, status "
                         "ORDER BY workflow_type, status")

    def open_activity_counts(self) -> list[Row]:
        """Open activities by queue and status: one part per partial index, the ready
        activities' and the started ones' (`activities_owner`)."""
        return self._all(
            f"SELECT queue, status, count(*) AS count FROM activities WHERE status IN "
            f"{PENDING_ACTIVITY_SQL} GROUP BY queue, status UNION ALL "
            "SELECT queue, status, count(*) AS count FROM activities WHERE status = 'started' "
            "GROUP BY queue, status"
        )

    def ready_activity_counts(self, now: datetime) -> list[Row]:
        """Per queue, the activities a worker may claim at `now` and the oldest available_at."""
        return self._all(
            "SELECT queue, count(*) AS count, min(available_at) AS oldest FROM activities "
            f"WHERE status IN {PENDING_ACTIVITY_SQL} AND available_at <= %s GROUP BY queue",
            (self._at(now),),
        )

    def ready_workflow_task_count(self, now: datetime) -> Row:
        return self._one(
            "SELECT count(*) AS count, min(available_at) AS oldest FROM workflow_tasks "
            "WHERE status = 'scheduled' AND available_at <= %s", (self._at(now),),
        )

    def timeout_event_counts(self) -> list[Row]:
        """The history events that may record a timeout or a deadline expiry (TIMEOUT_EVENTS),
        by type, timeout kind and failure category (None where the event has none), as the
        store counts them when it appends them."""
        return self._all(
            "SELECT event_type, nullif(timeout_kind, '') AS timeout_kind, "
            "nullif(failure_category, '') AS failure_category, count FROM timeout_event_counts"
        )

    def next_deadlines(self) -> Row:
        """The earliest pending deadline of each kind (None where none is pending): what the
        watchdog and the deadline runner act on next."""
        return {kind: self._instant(at) for kind, at in self._one(_NEXT_DEADLINES).items()}
