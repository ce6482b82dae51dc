"""The PostgreSQL store: a connection pool, transactions and every query wfctl runs there.

It implements the interface of base.py with the meaning sqlite.py gives it, and passes the same
contract suite. Rows cross it as Python values, as base.py says: instants are `timestamptz` columns,
read back as aware datetimes in `datetime.UTC` (exact to the microsecond) and sent as datetimes;
JSON columns are `text` and flags `integer`, converted by a record's declared kinds
(store/records.py) or, for rows still read as dicts and every write, by name (store/columns.py:
once per result's columns, in the row factory, and in every write of a row's values); history
is encoded with store/codec.py.

Write transactions are READ COMMITTED and lock what they change one workflow family at a time
(a workflow started on its own and all its children): the first time a transaction reads a row
of a family (an instance, a run, an activity, a workflow task), it takes a transaction-scoped
advisory lock on the family's root (`instances.family_key`) and reads the row again, so every
decision on a family sees what the previous one committed, decisions on other families go on
at the same time, and a parent and its children, locked as one, never deadlock. A transaction
waits for a family only in ascending key order; a family below one it holds is only tried, and
a busy one makes the whole operation run again (`TransientConflict`), as a deadlock or a
serialization failure does. Claims lock the row they take (FOR UPDATE SKIP LOCKED), then only
try the family's lock and pass over a busy family; they change the row with a conditional
update whose row count says whether they won.

A write transaction that leaves an activity or a workflow task ready sends one payload-free
NOTIFY at its commit; each worker process hears it on a connection of its own (`ReadyListener`),
so that work made ready on one host is picked up at once on the others.
"""

from __future__ import annotations

import functools
import logging
import operator
import re
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar, get_args, get_type_hints
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg
from psycopg import pq
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool, PoolTimeout

from wfctl import clock
from wfctl.errors import (
    DatabaseError,
    DatabaseNotFound,
    DatabaseTooNew,
    InvalidInput,
    StoreUnavailable,
    TransientConflict,
    WfctlError,
)
from wfctl.store import codec, columns, postgres_arrays, records
from wfctl.store import postgres_schema as schema
from wfctl.store.queries import (
    GET_RUN,
    PENDING_ACTIVITY_SQL,
    READ_RUNS,
    TASK_COLUMNS,
    WAITING_DEADLINES_HOLD,
    RunRead,
    SQLTx,
    current_attempt,
    insert_statement,
    keep_run_extras,
)
from wfctl.store.records import (
    Activity,
    Instance,
    PlannedClose,
    Run,
    WorkflowTask,
)
from wfctl.vocabulary import PENDING_ACTIVITY

Row = dict[str, Any]
R = TypeVar("R")

# Write transactions run prepared statements on generic plans: the claims and scans of the step
# path cost far more to plan (0.4 ms for a claim, re-planned at every call under the default
# `auto`) than to run, and their status conditions are written as literals, so that a generic
# plan still uses the partial indexes.
# Sent with the transaction's first statement (`PostgresTx._send`), one statement each.
_GENERIC_PLANS = "SET LOCAL plan_cache_mode = force_generic_plan"
_BEGIN_WRITE = ("BEGIN ISOLATION LEVEL READ COMMITTED", _GENERIC_PLANS)
# A statement that costs far more to plan than to run, read outside a transaction (`peek`):
# in a transaction of its own, which asks for generic plans (`_PerStatement.planned`).
_PLANNED_ALONE = ("BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY", _GENERIC_PLANS)
# Family locks are advisory locks keyed by the root's instance_key (small positive bigints; the
# migration lock's key is far above them). An instance id not stored yet is locked by name, in
# the two-integer key space, which never meets the one-bigint space: two starts of one new id
# take turns, and the second finds the first's instance.
_NAME_LOCKS = 0x77666964    # "wfid"
# How many ready rows of busy families a claim passes over before it reports nothing ready.
_CLAIM_SKIPS = 16
# The columns of an activity a claim selects, of its LATERAL row (`a`).
_CLAIMED_ACTIVITY = records.select(Activity, "a")
# A read transaction's snapshot is taken by its first statement: `SELECT 1` takes it at once, so
# that it holds from the moment `read()` begins, as a caller expects.
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1"
# Each session's settings. How long a writer waits for another's locks before it gives up
# (StoreUnavailable "busy"), as SQLite's busy timeout; a transaction left idle this long belongs
# to a stuck process. A random page is costed at 1.1 sequential ones at most (PostgreSQL's
# default, 4.0, is for spinning disks; its documentation suggests lower values where data is
# cached or on SSDs): wfctl's statements find rows by key in tables whose recent rows stay in
# memory, and under the default a generic plan made while a table holds a few thousand rows
# reads all of it (a hash join instead of key lookups), a plan write transactions keep as the
# table grows. A server configured lower keeps its own value.
_SESSION = ("SET TIME ZONE 'UTC'; SET DateStyle = 'ISO'; SET lock_timeout = '30s'; "
            "SET idle_in_transaction_session_timeout = '60s'; "
            "SELECT set_config('random_page_cost', "
            "least(current_setting('random_page_cost')::float8, 1.1)::text, false)")
_CONNECT_TIMEOUT_S = 10
# How long a thread waits for a connection of the pool before the server counts as unreachable.
_POOL_TIMEOUT_S = 15.0
_POOL_SIZE = 16
# A transaction's events in one statement, a column an array, packed in binary
# (store/postgres_arrays.py): as text, every JSON attribute would be quoted and escaped element
# by element in Python.
_EVENT_KINDS = ("bigint", "integer", "integer", "smallint", "bigint", "text")
_EVENTS_INSERT = (
    "INSERT INTO events (instance_key, seq, run_number, event_type, at, attributes) "
    f"SELECT * FROM unnest({', '.join(f'%b::{kind}[]' for kind in _EVENT_KINDS)})"
)
_COUNT_KINDS = ("text", "text", "text", "bigint")
_COUNTS_UPSERT = (
    "INSERT INTO timeout_event_counts (event_type, timeout_kind, failure_category, count) "
    f"SELECT * FROM unnest({', '.join(f'%b::{kind}[]' for kind in _COUNT_KINDS)}) "
    "ON CONFLICT (event_type, timeout_kind, failure_category) "
    "DO UPDATE SET count = timeout_event_counts.count + excluded.count"
)
# The channel write transactions notify when they leave work ready (payload-free: a listener
# only learns that it should look again), and workers LISTEN on, one connection per process.
READY_CHANNEL = "wfctl_ready"
_NOTIFY = f"NOTIFY {READY_CHANNEL}"
# Takes the family lock of the instance `id` (see the module's text).
_LOCK_FAMILY = ("SELECT family_key, wfctl_lock_family(family_key, %(wait)s AND family_key > "
                "%(top)s) AS locked FROM instances WHERE workflow_instance_id = %(id)s")


def _each(ids: str, select: str) -> str:
    """The row `select` finds by `k.id`, for each id of the text array `ids` (a placeholder of
    a packed array, `postgres_arrays`), each found by a lookup of its own (`LIMIT 1` keeps the
    subquery apart). A generic plan of `key = ANY(array)`, or of a join with the array's
    `unnest`, does not know the array is short: made while the table is small, it reads every
    row (a hash join), and write transactions keep it as the table grows."""
    return (f"SELECT x.* FROM unnest({ids}::text[]) AS k(id) "
            f"CROSS JOIN LATERAL ({select} LIMIT 1) AS x")


# Takes the family locks of the instances `ids`, waiting only for those above `top`: the
# subquery yields the instances in key order, and each family is locked as its first instance
# comes (again, at no cost, for the others).
_LOCK_FAMILIES = (
    "SELECT workflow_instance_id, family_key, "
    "wfctl_lock_family(family_key, family_key > %(top)s) AS locked FROM ("
    + _each("%(ids)b", "SELECT workflow_instance_id, family_key FROM instances "
                       "WHERE workflow_instance_id = k.id")
    + " ORDER BY family_key) AS f")
# How many instances' families a process remembers (`PostgresStore.families`).
_FAMILIES_SEEN = 100_000
# Closes one statement makes at most (`_closes_statement`): psycopg converts a statement's
# text (its named placeholders into PostgreSQL's) once only if it is at most 4,096 characters
# long, and parses a longer one again at each use, some 17,000 bytecodes for 16 closes; six
# closes are 3,700 characters at most.
_CLOSES_AT_ONCE = 6
# An attempt's close says the status it requires as a parameter (`SQLTx._STARTED`), which no
# partial index's predicate matches: with the literal, a generic plan reads the index of started
# attempts by owner, which holds an entry of each attempt closed since the table's last vacuum,
# where the primary key finds the row.
_STARTED = "%(started)s"
# The runs of a batch's first close and of the closes done ahead with it, in one statement.
_GET_RUNS = _each("%b", f"{READ_RUNS}WHERE r.workflow_run_id = k.id")
# The oldest ready workflow tasks, up to `limit`, passing over those of `%(passed)s`.
_READY_TASKS = (f"SELECT {TASK_COLUMNS} FROM workflow_tasks WHERE status = 'scheduled' "
                "AND available_at <= %(now)s AND task_id <> ALL(%(passed)s::bigint[]) "
                "ORDER BY available_at, task_id LIMIT {limit}{lock}")


def _family_tried(sql: str) -> str:
    """A claim's query (`sql`, selecting its record's columns), each row's family lock tried
    in the same statement, for the rows found: a row the claim locks is read as it is now, and
    the family's other rows are read after."""
    return (f"SELECT c.*, i.family_key, pg_try_advisory_xact_lock(i.family_key) "
            f"FROM ({sql}) c JOIN instances i "
            "ON i.workflow_instance_id = c.workflow_instance_id")


# Up to `limit` of them claimed (`PostgresTx._claim_tasks`), the oldest first.
_CLAIM_TASKS = _family_tried(_READY_TASKS.format(
    limit="%(limit)s", lock=" FOR UPDATE SKIP LOCKED")) + " ORDER BY c.available_at, c.task_id"
# The oldest ready activities of the queues `%(queues)s`, up to `limit`, passing over those of
# `%(passed)s`: each queue read through its own range of the ready index.
_READY_ACTIVITIES = (
    f"SELECT {_CLAIMED_ACTIVITY} FROM unnest(%(queues)s::text[]) AS q(queue) "
    "CROSS JOIN LATERAL (SELECT * FROM activities WHERE queue = q.queue "
    f"AND status IN {PENDING_ACTIVITY_SQL} AND available_at <= %(now)s "
    f"AND activity_id <> ALL(%(passed)s::text[]) {WAITING_DEADLINES_HOLD} "
    "ORDER BY available_at, rowid LIMIT {limit}{lock}) a "
    "ORDER BY a.available_at, a.rowid LIMIT {limit}")
# Up to `limit` of them claimed (`PostgresTx._claim_activities`), the oldest first.
_CLAIM_ACTIVITIES = _family_tried(_READY_ACTIVITIES.format(
    limit="%(limit)s", lock=" FOR UPDATE SKIP LOCKED")) + " ORDER BY c.available_at"
# Tables whose inserts (without RETURNING) are held back for the next round trip: nothing reads
# their result, nor expects their error at once; and the record each table's rows are of.
_HELD_BACK_INSERTS = {"activities": Activity}
_HELD_INSERT_PREFIXES = tuple(f"INSERT INTO {table} (" for table in sorted(_HELD_BACK_INSERTS))
# Updates held back (`_write`) that may be merged, by key: `queries._update_statement`'s of a
# table by its key, and the record of the table's rows.
_MERGED_UPDATES = {("runs", "workflow_run_id"): Run,
                   ("instances", "workflow_instance_id"): Instance}
_UPDATE_PREFIXES = tuple(f"UPDATE {table} SET " for table, _ in sorted(_MERGED_UPDATES))
# A taken workflow task's delete (held back: its row is locked by the claim), and its merged form.
_TASK_DELETE = "DELETE FROM workflow_tasks WHERE task_id = %s"
_TASKS_DELETE = "DELETE FROM workflow_tasks WHERE task_id = ANY(%b::bigint[])"
_MERGEABLE = (*_HELD_INSERT_PREFIXES, *_UPDATE_PREFIXES, _TASK_DELETE)


def _array_kind(record: type, name: str) -> str | None:
    """The kind of array (`postgres_arrays`) a column of `record` is sent in, as the store
    writes its values (store/columns.py), which the statement's assignment casts to the
    column's own type; None for a column sent no such way (or that the record does not have)."""
    kind = columns.DECLARED.get(name)
    if kind == records.INSTANT:
        return "timestamptz"
    if kind in (records.JSON, records.POLICY):
        return "text"
    if kind == records.FLAG:
        return "bigint"
    hint = get_type_hints(record).get(name)
    types = set(get_args(hint)) - {type(None)} or {hint}
    return {str: "text", int: "bigint", float: "float8"}.get(types.pop()) \
        if len(types) == 1 else None


def _arrays(record: type, names: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """The `unnest` of one array for each of the columns `names` of `record`, and the arrays'
    kinds; None when a column has no kind."""
    kinds = [_array_kind(record, name) for name in names]
    known = tuple(kind for kind in kinds if kind is not None)
    if len(known) < len(kinds):
        return None
    return f"unnest({', '.join(f'%b::{kind}[]' for kind in known)})", known


@functools.lru_cache(maxsize=128)
def _rows_statement(statement: str) -> tuple[str, tuple[str, ...]] | None:
    """A held-back row insert (`queries.insert_statement`), keyed update
    (`queries._update_statement`) or taken workflow task's delete (`_TASK_DELETE`, by its key)
    as a statement of any number of rows, each column an array,
    and the arrays' kinds; None for a statement not so merged. One text whatever the rows,
    which psycopg converts once and the server prepares, where a text of each row count would
    be parsed in Python at each use (psycopg caches no text of more than 50 parameters: some
    90 µs a row) and planned afresh."""
    if statement == _TASK_DELETE:
        return _TASKS_DELETE, ("bigint",)
    if statement.startswith(_HELD_INSERT_PREFIXES):
        head = statement[:statement.index(" VALUES (")]
        table = head.split()[2]
        names = head[head.index("(") + 1:-1].split(", ")
        found = _arrays(_HELD_BACK_INSERTS[table], names)
        return None if found is None else (f"{head} SELECT * FROM {found[0]}", found[1])
    parts = re.fullmatch(r"UPDATE (\w+) SET ((?:\w+ = %s, )*\w+ = %s) WHERE (\w+) = %s",
                         statement)
    record = parts and _MERGED_UPDATES.get((parts[1], parts[3]))
    if not parts or record is None:
        return None
    table, key = parts[1], parts[3]
    names = [assignment.split(" = ")[0] for assignment in parts[2].split(", ")]
    found = _arrays(record, [*names, key])
    if found is None:
        return None
    sets = ", ".join(f"{name} = u.{name}" for name in names)
    return (f"UPDATE {table} SET {sets} FROM {found[0]} AS u({', '.join([*names, key])}) "
            f"WHERE {table}.{key} = u.{key}", found[1])


@functools.lru_cache(maxsize=64)
def _closes_statement(names: tuple[str, ...], count: int) -> tuple[str, tuple[str, ...]]:
    """`count` attempts' closes, each setting `names`, as one statement (`PostgresTx._closes`):
    an `UPDATE` of each by its primary key, as a close alone is, each a data-modifying `WITH`
    item, which returns the attempt's id if it closed it. The parameters are arrays (`c0`,
    `c1`, …: the attempts' ids, numbers and owners, then each of `names`), each `UPDATE`
    taking its element of them; their kinds. (One `UPDATE … FROM unnest(…)` of them all would
    be planned by the table's size: made while the table is small or not analyzed yet, its
    plan reads all of it.)"""
    kinds = ("text", "bigint", "text", *map(functools.partial(_array_kind, Activity), names))
    if None in kinds:
        raise TypeError(f"no array kind for a column of {names}")

    def element(array: int, index: int) -> str:
        return f"(%(c{array})b::{kinds[array]}[])[{index}]"

    closes = []
    for index in range(1, count + 1):
        sets = ", ".join(f"{name} = {element(place, index)}"
                         for place, name in enumerate(names, 3))
        closes.append(f"closed{index} AS (UPDATE activities SET {sets} WHERE "
                      + current_attempt(element(0, index), element(1, index),
                                        element(2, index), _STARTED)
                      + " RETURNING activity_id)")
    return (f"WITH {', '.join(closes)} "
            + " UNION ALL ".join(f"SELECT activity_id FROM closed{index}"
                                 for index in range(1, count + 1)), kinds)


def _merged_writes(held: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The statements held back, the row inserts of one held-back table and column list, and
    the keyed updates of one table and column list, each made one statement where the last
    of them was: the server does less for one statement of many rows than for a statement
    each. A write only ever goes later, past statements that cannot need its row (reads send
    what is held back first), and never before those it may need: an insert's run goes
    before it, and updates are merged only where no row of theirs is written twice in what is
    held back (the later write must stay later)."""
    if len({statement for statement, _ in held}) == len(held):
        # No text twice (the most of round trips): nothing to merge.
        return held
    texts = Counter(statement for statement, _ in held if statement.startswith(_MERGEABLE))
    mergeable = {statement for statement, count in texts.items()
                 if count > 1 and _rows_statement(statement) is not None}
    if not mergeable:
        return held
    updates = [(statement, values) for statement, values in held
               if statement.startswith(_UPDATE_PREFIXES)]
    if any(_rows_statement(statement) is None for statement, _ in updates):
        # An update of another shape: which rows it writes is not known here.
        mergeable.difference_update(statement for statement, _ in updates)
    else:
        # A keyed update's row: its table, and its last parameter, the key.
        rows_of = [(statement, (statement.split(" ", 2)[1], values[-1]))
                   for statement, values in updates]
        written = Counter(row for _, row in rows_of)
        mergeable.difference_update(statement for statement, row in rows_of if written[row] > 1)
    merged: list[tuple[str, Any]] = []
    rows: dict[str, list[Any]] = {}
    for statement, values in held:
        if statement not in mergeable:
            merged.append((statement, values))
            continue
        waiting = rows.setdefault(statement, [])
        waiting.append(values)
        if len(waiting) == texts[statement]:
            sql, kinds = _rows_statement(statement)  # type: ignore[misc]
            merged.append((sql, postgres_arrays.columns(waiting, kinds)))
    return merged



# Tables whose presence without wfctl's migrations table means the database is another's.
_OWN_TABLES = ("instances", "runs", "events", "activities", "workflow_tasks")


# The pool would log each connection it discards and each failed reconnection, many lines per
# outage; wfctl reports an outage itself, once when it starts and once when it ends.
logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)


def redact(url: str) -> str:
    """The URL as messages show it: a password, in the authority or the query, becomes ***."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username or ''}:***@{netloc.rpartition('@')[2]}"
    except ValueError:
        return re.sub(r"(://[^/@]*?:)[^/]*@", r"\1***@", url)
    query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets(url: str) -> list[str]:
    """The password as it may appear in a message: as written in the URL and decoded, as
    libpq reads it, and (for a malformed URL with a raw `@` in it) each part of it."""
    found = [match.group(1) for match in
             re.finditer(r"(?i)(?:^|[?&])password=([^&]*)", url.partition("?")[2])]
    try:
        found.append(urlsplit(url).password or "")
        found.append(conninfo_to_dict(url).get("password") or "")
    except (ValueError, psycopg.Error):
        pass
    for secret in list(found):
        found.extend(secret.split("@"))
    texts = {text for secret in found if secret for text in (secret, unquote(secret))}
    # The longest first, so that no part of one is left behind a shorter one's replacement.
    return sorted(texts, key=len, reverse=True)


# SQLSTATEs that mean "not now": the same operation may succeed later.
_UNAVAILABLE = {
    "53100": ("full", "the database server's disk is full"),
    "25006": ("readonly", "the database is read-only"),
    "58030": ("io", "I/O error on the database server"),
    "53300": ("unreachable", "the database server has too many connections"),
    "57P01": ("unreachable", "the database server is shutting down"),
    "57P02": ("unreachable", "the database server crashed"),
    "57P03": ("unreachable", "the database server is starting up"),
}
# serialization_failure, deadlock_detected, lock_not_available (lock_timeout): the operation
# runs again whole, in a new transaction.
_TRANSIENT = {"40001", "40P01", "55P03"}
# What the server or libpq says when the URL itself is wrong: no later try will do better.
_REFUSED = ("password authentication failed", "does not exist", "no pg_hba.conf entry",
            "role", "invalid", "missing", "SSL", "certificate")


def _one_line(exc: BaseException, secrets: Sequence[str]) -> str:
    text = " ".join(str(exc).split())
    for secret in secrets:
        text = text.replace(secret, "***")
    return text.removeprefix("connection failed: ")


def translate(exc: psycopg.Error, path: str, secrets: Sequence[str] = ()) -> WfctlError:
    """A psycopg error as wfctl's own: `StoreUnavailable` when a later try may succeed,
    `TransientConflict` when the operation should run again at once, `InvalidInput` for text
    PostgreSQL cannot hold. The password of the URL never appears in the message."""
    message = _one_line(exc, secrets)
    state = exc.sqlstate
    if isinstance(exc, psycopg.DataError) and "NUL (0x00)" in message:
        # psycopg refuses it before sending: an id with a NUL can be neither stored nor found.
        return InvalidInput("PostgreSQL cannot store text with a NUL character (\\x00) in it")
    if state in _TRANSIENT:
        return TransientConflict(f"{path}: {message}")
    if isinstance(exc, PoolTimeout):
        return StoreUnavailable("unreachable", f"{path}: no connection to the database server "
                                               f"within {_POOL_TIMEOUT_S:g} s")
    if state in _UNAVAILABLE:
        reason, text = _UNAVAILABLE[state]
        return StoreUnavailable(reason, f"{path}: {text}")
    connection_lost = (state is not None and state.startswith("08")) or (
        state is None and isinstance(exc, psycopg.OperationalError))
    if connection_lost and not any(word in message for word in _REFUSED):
        return StoreUnavailable("unreachable", f"{path}: cannot reach the database server: "
                                               f"{message}")
    if connection_lost:
        return DatabaseError(f"cannot connect to {path}: {message}")
    return DatabaseError(f"database {path}: {message}")


class _UtcInstant(Loader):
    """A `timestamptz` as an aware datetime in `datetime.UTC`, from the ISO text the server
    writes (`2026-04-12 12:00:00.123456+00`, its fraction left out when zero). Only for a
    session psycopg does not know to be in UTC (see `_configure`): psycopg's own loader, in C,
    is faster."""

    def load(self, data: Any) -> datetime:
        instant = datetime.fromisoformat(str(data, "ascii"))
        return instant if instant.tzinfo is UTC else instant.astimezone(UTC)


RowMaker = Callable[[Sequence[Any]], Row]


def _rows_as_dicts(cursor: psycopg.Cursor) -> RowMaker | type[dict]:
    """Rows as dicts of their columns' Python values (store/columns.py), less the `rowid` some
    tables keep for insertion order; the function that makes them is made once per set of
    column names.

    Column names come from the result itself (`fname`), not from `cursor.description`, which
    builds an object per column on every statement: a third of the client's time per step.
    """
    result = cursor.pgresult
    if result is None or result.status not in _ROWS:
        return dict
    names = tuple(map(_column_name, map(result.fname, range(result.nfields))))
    make = _ROW_MAKERS.get(names)
    if make is None:
        make = _row_maker(names)
        if len(_ROW_MAKERS) < 1_000:
            _ROW_MAKERS[names] = make
    return make


def _row_maker(names: tuple[str, ...]) -> RowMaker:
    """What makes a row of a result with these columns: a dict, its JSON and flag columns
    read (instants come as datetimes from the loader already)."""
    plan = columns.read_plan(names, None)
    build: RowMaker
    if "rowid" in names:
        kept = [(index, name) for index, name in enumerate(names) if name != "rowid"]

        def build(values: Sequence[Any]) -> Row:
            return {name: values[index] for index, name in kept}
    else:
        def build(values: Sequence[Any]) -> Row:
            return dict(zip(names, values, strict=True))
    if not plan:
        return build

    def make(values: Sequence[Any]) -> Row:
        return columns.read(build(values), plan)
    return make


# Row makers by the column names of a result (a statement's columns never change).
_ROW_MAKERS: dict[tuple[str, ...], RowMaker] = {}
_ROWS = (pq.ExecStatus.TUPLES_OK, psycopg.pq.ExecStatus.SINGLE_TUPLE)


@functools.cache
def _column_name(name: bytes | None) -> str:
    # Sessions use UTF8 (set with the others in `_SESSION`); wfctl's own names are ASCII.
    return (name or b"").decode()


def _configure(conn: psycopg.Connection) -> None:
    conn.row_factory = _rows_as_dicts
    postgres_arrays.register(conn.adapters)
    conn.execute(_SESSION)
    # psycopg reads a `timestamptz` into the session's time zone, and knows 'UTC' (set above)
    # as `datetime.UTC` itself; should it not, instants are parsed here instead.
    if conn.info.timezone is not UTC:
        conn.adapters.register_loader("timestamptz", _UtcInstant)


class PostgresStore:
    """One PostgreSQL database, shared by every thread and process (and host) of wfctl.

    Threads take connections from one pool per process; a transaction holds its connection
    until it ends, and a read outside one (`peek`) holds it for one statement.
    """

    # A batch's families are locked together, and its closes sent with the first (`expect`).
    takes_announcements = True

    def __init__(self, url: str, *, create: bool = True, pool_size: int = _POOL_SIZE) -> None:
        """Open the database at `url`, applying pending migrations.

        Raises DatabaseNotFound when it holds no wfctl schema and `create` is false, DatabaseTooNew
        for a database of a newer wfctl, StoreUnavailable when the server cannot be reached and
        DatabaseError for anything else; nothing is written in any of these cases.
        """
        self.path = redact(url)
        self._url = url
        self._secrets = _secrets(url)
        self._pool_size = pool_size
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self._clock = clock.ServerClock(self._server_time)
        # The server processes of this pool's connections: the listener passes over what they
        # notify, since this process wakes its own slots when it commits.
        self.own_sessions: set[int] = set()
        # The family of each instance as this process's transactions last saw it (an instance
        # started again as a child may have moved): what a batch plans by (`PostgresTx.expect`).
        self.families: dict[str, int] = {}
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise DatabaseError(f"{self.path} is not a valid PostgreSQL URL: "
                                f"{_one_line(exc, self._secrets)}") from None
        self._connect_options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in given:
            self._connect_options["connect_timeout"] = _CONNECT_TIMEOUT_S
        if "application_name" not in given:
            self._connect_options["application_name"] = "wfctl"
        self._migrate(create)

    def _error(self, exc: psycopg.Error) -> WfctlError:
        error = translate(exc, self.path, self._secrets)
        pool = self._pool
        if isinstance(error, StoreUnavailable) and error.reason == "unreachable" and \
                pool is not None and not isinstance(exc, PoolTimeout):
            # The other idle connections were most likely lost with this one (a server restart,
            # a terminated session): test them now, so that the next transaction gets a live one.
            pool.check()
        return error

    # opening and migrating

    def _migrate(self, create: bool) -> None:
        """Apply pending migrations; an up-to-date database costs two reads. Several processes
        opening a fresh database at once take turns on an advisory lock, so each migration is
        applied once."""
        try:
            conn = psycopg.connect(self._url, **self._connect_options)
        except psycopg.Error as exc:
            raise self._error(exc) from None
        try:
            with conn:
                applied = self._applied(conn)
                if applied is None:
                    self._check_empty(conn, create)
                elif applied == [name for name, _ in schema.MIGRATIONS]:
                    return
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (schema.MIGRATION_LOCK,))
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {schema.MIGRATIONS_TABLE} ("
                        "version integer PRIMARY KEY, name text NOT NULL UNIQUE, "
                        "applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
                    )
                    applied = self._applied(conn) or []
                    for version, (name, function) in enumerate(schema.MIGRATIONS, 1):
                        if name in applied:
                            continue
                        function(conn)
                        conn.execute(f"INSERT INTO {schema.MIGRATIONS_TABLE} (version, name) "
                                     "VALUES (%s, %s)", (version, name))
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def _applied(self, conn: psycopg.Connection) -> list[str] | None:
        """The migrations the database records, in order; None when it has no record at all.
        Raises DatabaseTooNew when it records one this wfctl does not know."""
        found = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                             (schema.MIGRATIONS_TABLE,)).fetchone()[0]
        if not found:
            return None
        names = [row[0] for row in conn.execute(
            f"SELECT name FROM {schema.MIGRATIONS_TABLE} ORDER BY version")]
        known = [name for name, _ in schema.MIGRATIONS]
        if any(name not in known for name in names):
            raise DatabaseTooNew(self.path, len(names), len(known))
        return names

    def _check_empty(self, conn: psycopg.Connection, create: bool) -> None:
        """A database without wfctl's migrations table: wfctl's to create, unless it holds
        tables of the same names (another application's) or the caller only reads."""
        taken = [name for name in _OWN_TABLES if conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0]]
        # Another wfctl process may have committed the first migration since the caller looked
        # (it creates its tables and its migrations table together): look again.
        if taken:
            if self._applied(conn) is not None:
                return
            raise DatabaseError(f"{self.path} is not a wfctl database (it has a table "
                                f"{taken[0]} of its own and no {schema.MIGRATIONS_TABLE})")
        if not create:
            raise DatabaseNotFound(f"no wfctl database at {self.path}")

    def _connections(self) -> ConnectionPool:
        pool = self._pool
        if pool is None:
            with self._pool_lock:
                pool = self._pool
                if pool is None:
                    pool = ConnectionPool(
                        self._url, min_size=1, max_size=self._pool_size, open=False,
                        kwargs=self._connect_options, configure=self._configure,
                        timeout=_POOL_TIMEOUT_S, name="wfctl",
                    )
                    pool.open(wait=False)
                    self._pool = pool
        return pool

    def _configure(self, conn: psycopg.Connection) -> None:
        _configure(conn)
        self.own_sessions.add(conn.info.backend_pid)

    def close(self) -> None:
        """Close the pool; a connection still in use closes when its transaction ends. The
        store opens a new pool if it is used again."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    # transactions

    @contextmanager
    def write(self) -> Iterator[PostgresTx]:
        """A READ COMMITTED write transaction that locks the families it changes (see the
        module's text); the events appended are written at its end, then it commits."""
        try:
            with self._connections().connection() as conn:
                tx = PostgresTx(conn, locking=True, begin=_BEGIN_WRITE, families=self.families)
                try:
                    yield tx
                    tx.commit()
                except BaseException:
                    _roll_back(conn)
                    raise
                finally:
                    self._saw_families(tx)
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def _saw_families(self, tx: PostgresTx) -> None:
        """Remember the families the transaction looked up (a bounded memory: forgotten all at
        once when it holds `_FAMILIES_SEEN`)."""
        if len(self.families) + len(tx.families_seen) > _FAMILIES_SEEN:
            self.families.clear()
        self.families.update(tx.families_seen)

    @contextmanager
    def read(self) -> Iterator[PostgresTx]:
        """A read transaction: one consistent snapshot across several queries."""
        try:
            with self._connections().connection() as conn:
                try:
                    conn.execute(_BEGIN_READ)
                    yield PostgresTx(conn, locking=False)
                finally:
                    _end_read(conn)
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def peek(self) -> PostgresTx:
        """Queries outside a transaction: each one statement on a connection of the pool."""
        return PostgresTx(_PerStatement(self), locking=False)

    def now(self) -> datetime:
        """The database server's clock (SPEC §2), which every deadline is compared with: workers
        on hosts whose clocks disagree still agree on every timeout."""
        return self._clock.now()

    def _server_time(self) -> datetime:
        return self.peek()._one("SELECT clock_timestamp() AS now")["now"]

    def listen(self) -> ReadyListener:
        """What hears, across hosts, each commit that left work ready (LISTEN/NOTIFY)."""
        return ReadyListener(self)

    def fit_connections(self, threads: int) -> None:
        """Size the pool for `threads` (the worker's: its slots and loops), instead of the
        default that suits a command or a script."""
        with self._pool_lock:
            self._pool_size = threads
            if self._pool is not None:
                self._pool.resize(min_size=1, max_size=threads)

    def defer_checkpoints(self) -> None:
        """The server keeps its own log: nothing to defer."""

    def checkpoint(self) -> int:
        """The server keeps its own log: nothing to copy."""
        return 0

    @contextmanager
    def bulk_write(self) -> Iterator[PostgresTx]:
        """A write transaction for a large change (the same as `write` here)."""
        with self.write() as tx:
            yield tx

    def file_size(self) -> int:
        """Bytes the database takes on the server."""
        with self.read() as tx:
            return tx._one("SELECT pg_database_size(current_database()) AS size")["size"]

    def vacuum(self) -> None:
        """The server reclaims space itself (autovacuum): nothing to do here."""

    def data_version(self) -> int:
        """Changes whenever a transaction that wrote ends, in this database or another of the
        server (a hint to look again, never a promise of news): the server's snapshot, whose
        bounds and list of running transactions move with each."""
        row = self.peek()._one("SELECT pg_current_snapshot()::text AS snapshot")
        return zlib.crc32(row["snapshot"].encode())


class ReadyListener:
    """A connection of its own, outside the pool, that LISTENs on `READY_CHANNEL`: it hears
    each commit, by any process on any host, that left work ready."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._conn: psycopg.Connection | None = None

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a notification: True when one came, and also when
        the connection was made (again) just now, since what was made ready while nobody
        listened went unheard and calls for a look. Raises StoreUnavailable when the server
        cannot be reached; the next call connects again."""
        try:
            if self._conn is None:
                conn = psycopg.connect(self._store._url, **self._store._connect_options)
                conn.execute(f"LISTEN {READY_CHANNEL}")
                self._conn = conn
                return True
            end = time.monotonic() + timeout
            own = self._store.own_sessions
            while (left := end - time.monotonic()) > 0:
                notes = list(self._conn.notifies(timeout=left, stop_after=1))
                if any(note.pid not in own for note in notes):
                    return True
            return False
        except psycopg.Error as exc:
            self.close()
            raise self._store._error(exc) from None

    def backend_pid(self) -> int | None:
        """The server process of the listening connection (None while there is none)."""
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(psycopg.Error):
                conn.close()


def _end_read(conn: psycopg.Connection) -> None:
    """End a read transaction: COMMIT when it is sound (a read-only one changes nothing
    either way, and psycopg forgets every statement it prepared on a connection that sends
    ROLLBACK), else ROLLBACK."""
    if not conn.closed and conn.info.transaction_status == pq.TransactionStatus.INTRANS:
        with suppress(psycopg.Error):
            conn.execute("COMMIT")
            return
    _roll_back(conn)


def _roll_back(conn: psycopg.Connection) -> None:
    """End the connection's transaction, if it still has one (a read, or a failed write)."""
    if conn.closed or conn.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    # When the connection broke, the server dropped the transaction with it, and the pool
    # discards the connection.
    with suppress(psycopg.Error):
        conn.execute("ROLLBACK")


class _Result:
    """A statement's rows and row count, fetched before its connection went back to the pool."""

    def __init__(self, rows: list[Row], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Row]:
        return self._rows


class _PerStatement:
    """Runs each statement on a connection of the pool, outside any transaction; its errors
    leave as wfctl's (what `write` and `read` do for a whole transaction)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def execute(self, sql: str, params: Sequence[Any] | None = None, *,
                tuples: bool = False) -> _Result:
        try:
            with self._store._connections().connection() as conn:
                cursor = conn.cursor(row_factory=tuple_row) if tuples else conn.cursor()
                cursor.execute(sql, params)
                rows = cursor.fetchall() if cursor.description is not None else []
                return _Result(rows, cursor.rowcount)
        except psycopg.Error as exc:
            raise self._store._error(exc) from None

    def planned(self, sql: str, params: Row) -> Row | None:
        """`PostgresTx._planned_once` outside a transaction: the statement's first row, read
        in a read-only transaction of its own that asks for generic plans, begun and ended in
        the statement's round trip."""
        try:
            with self._store._connections().connection() as conn:
                cursor = conn.cursor()
                with conn.pipeline():
                    for statement in _PLANNED_ALONE:
                        conn.execute(statement)
                    cursor.execute(sql, params, prepare=True)
                    conn.execute("COMMIT")
                return cursor.fetchone()
        except psycopg.Error as exc:
            raise self._store._error(exc) from None


class PostgresTx(SQLTx):
    """The queries of one transaction (or, from `peek`, of none). `locking`: the transaction
    locks the families it reads (see the module's text), and claims lock the rows they return
    (FOR UPDATE SKIP LOCKED), which only a write transaction may."""

    # A row's values as its columns store them (store/columns.py): JSON as text, flags as
    # integers (psycopg would send a bool as a boolean, which an integer column refuses);
    # instants stay datetimes, which psycopg sends as `timestamptz`.
    _stored = columns.Writer(None).values
    _readers = records.Readers(None)
    _STARTED = _STARTED
    _STARTED_PARAMETER: ClassVar[dict[str, str]] = {"started": "started"}

    def __init__(self, conn: psycopg.Connection | _PerStatement, *, locking: bool,
                 begin: Sequence[str] = (), families: dict[str, int] | None = None) -> None:
        super().__init__(writing=locking)
        self.conn = conn
        self._cursor = conn.cursor() if isinstance(conn, psycopg.Connection) else None
        # The cursor whose rows are tuples of stored values, for records (made on first use).
        self._tuple_cursor: psycopg.Cursor[tuple[Any, ...]] | None = None
        # Statements whose results nobody reads, held back to go with the next statement
        # whose result is read, or with the COMMIT, in one round trip (psycopg's pipeline
        # mode): the BEGIN, a run's update, an activity's insert, the history rows. An error
        # in one fails the transaction all the same, a statement later.
        self._held_back: list[tuple[str, Any]] = [(statement, None) for statement in begin]
        self._blind: psycopg.Cursor[Any] | None = None
        self._locking = locking
        self._lock = " FOR UPDATE SKIP LOCKED" if locking else ""
        # The family keys this transaction holds, and the family of each instance it looked up.
        self._held: set[int] = set()
        self._family: dict[str, int] = {}
        # Families this transaction started (new roots): nobody else can lock them yet.
        self._created: set[int] = set()
        # The instances of the operations `expect` announced, one for each, whose families the
        # transaction will lock with the first it locks, and the closes their completions will
        # ask for; the closes done ahead, with their runs' reads, by activity id, each taken by
        # the `hold_run_and_close` that asks for it.
        self._outcomes: list[str] = []
        self._planned: Sequence[PlannedClose] = ()
        self._ahead: dict[str, tuple[PlannedClose, Sequence[Any] | None, bool]] = {}
        # The family of each instance as the process last saw it (`PostgresStore.families`):
        # which closes may go ahead is planned by it, and checked against the lock's rows.
        self._seen_families = {} if families is None else families
        # Ready rows a claim passed over because their family was busy (they stay row-locked
        # by this transaction, which its own next claim would not skip).
        self._passed_over: dict[str, list[Any]] = {}
        # Activities and workflow tasks this transaction left ready to claim (now or at a later
        # available_at); one it claimed itself again (the step path's group commit) needs no
        # other worker, so a transaction that claimed all it readied notifies no one.
        self._readied: set[tuple[str, Any]] = set()
        # The attempt and status of each activity a claim returned, its row locked by this
        # transaction and unchanged since: the update that starts it cannot miss.
        self._claimed: dict[str, tuple[int, str]] = {}
        # Ready workflow tasks claimed together (`take_ready_workflow_task`'s `ahead`), the next
        # last, each handed out by a later call; and their runs, read together after the
        # families' locks, each until `get_run` asks for it or a write of the run forgets it.
        self._tasks_ahead: list[WorkflowTask] = []
        self._runs_ahead: dict[str, RunRead] = {}
        # Likewise ready activities (`next_ready_activity_with_run`'s `ahead`), with the queues
        # and the instant they were claimed for.
        self._activities_ahead: list[Activity] = []
        self._ahead_on: tuple[tuple[str, ...], datetime] | None = None
        # What a claim of many found fewer of than it asked for ("workflow_task", "activity"),
        # and for what (the instant; the queues and the instant): nothing more is ready to it
        # until this transaction readies one (other writers' commits are no more seen than
        # after a claim that finds nothing).
        self._drained: dict[str, Any] = {}

    @property
    def families_seen(self) -> dict[str, int]:
        """The family of each instance this transaction looked up."""
        return self._family

    @property
    def readied(self) -> bool:
        """Whether the transaction leaves an activity or a workflow task for a worker to claim."""
        return bool(self._readied)

    def _execute(self, sql: str, params: Sequence[Any] | Row | None = None) -> Any:
        # One cursor for the transaction's statements (each is read before the next is sent):
        # `Connection.execute` would make a new one every time.
        if self._cursor is None:
            return self.conn.execute(sql, params)
        return self._send(self._cursor, sql, params)

    _run = _execute

    def _write(self, sql: str, params: Sequence[Any] | Row | None) -> None:
        if self._cursor is None:
            self.conn.execute(sql, params)
        else:
            self._held_back.append((sql, params))

    def _send(self, cursor: psycopg.Cursor[Any], sql: str | None,
              params: Sequence[Any] | Row | None = None) -> psycopg.Cursor[Any]:
        """Run `sql` on `cursor` after the statements held back, in one round trip."""
        if not self._held_back:
            return cursor.execute(sql, params) if sql is not None else cursor
        self._pipeline([] if sql is None else [(cursor, sql, params)])
        return cursor

    def _pipeline(self, read: list[tuple[psycopg.Cursor[Any], str, Any]], *,
                  prepare: bool | None = None) -> None:
        """The statements held back, then each of `read` on its cursor (prepared at once with
        `prepare`), in one round trip."""
        assert isinstance(self.conn, psycopg.Connection)
        held, self._held_back = self._held_back, []
        if self._blind is None:
            self._blind = self.conn.cursor()
        with self.conn.pipeline():
            for statement, values in _merged_writes(held):
                self._blind.execute(statement, values)
            for cursor, statement, values in read:
                cursor.execute(statement, values, prepare=prepare)

    def commit(self) -> None:
        """Write what is held back and commit, in one round trip. A NOTIFY is delivered at the
        commit, and only if it commits: workers on every host look for work at once instead of
        at their next poll."""
        if self._ahead:
            # A close done ahead that no operation took was never decided on: undone.
            raise RuntimeError(f"attempts closed ahead and never recorded: {sorted(self._ahead)}")
        self.flush()
        if self.readied:
            self._held_back.append((_NOTIFY, None))
        self._held_back.append(("COMMIT", None))
        assert self._cursor is not None
        self._send(self._cursor, None)

    def _one(self, sql: str, params: Sequence[Any] | Row | None = None) -> Row | None:
        return self._execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] | Row | None = None) -> list[Row]:
        return self._execute(sql, params).fetchall()

    def _tuples(self, sql: str, params: Sequence[Any] | Row | None = None) -> \
            list[Sequence[Any]]:
        if self._cursor is None:
            return self.conn.execute(sql, params, tuples=True).fetchall()
        if self._tuple_cursor is None:
            self._tuple_cursor = self.conn.cursor(row_factory=tuple_row)
        return self._send(self._tuple_cursor, sql, params).fetchall()

    def _insert(self, table: str, row: Row, returning: str | None = None) -> int:
        sql = insert_statement(self._MARK, table, tuple(row))
        if returning is None:
            if table in _HELD_BACK_INSERTS:
                self._write(sql, self._stored(row))
            else:
                self._execute(sql, self._stored(row))
            return 0
        return self._one(f"{sql} RETURNING {returning}", self._stored(row))[returning]

    def _any(self, column: str, values: Sequence[Any], name: str | None = None) -> \
            tuple[str, Any]:
        if name is None:
            return f"{column} = ANY(%s)", (list(values),)
        return f"{column} = ANY(%({name})s)", {name: list(values)}

    def _delete_first(self, table: str, where: str, params: Row, limit: int) -> int:
        # A row's physical address (ctid) picks the first `limit` rows of any table.
        return self._execute(
            f"DELETE FROM {table} WHERE ctid = ANY(ARRAY("
            f"SELECT ctid FROM {table} WHERE {where} LIMIT %(left)s))", {**params, "left": limit},
        ).rowcount

    def _planned_once(self, sql: str, params: Row) -> Row | None:
        """A statement that costs far more to plan than to run (a dozen probes of partial
        indexes, planned in 5-30 ms, run in 0.3): it is prepared, with one generic plan per
        connection, reused by every later call; the setting that asks for it goes in the same
        round trip (outside a transaction, `peek`'s, with a transaction of its own)."""
        conn = self.conn
        if not isinstance(conn, psycopg.Connection):
            return conn.planned(sql, params)
        self._held_back.append((_GENERIC_PLANS, None))
        self._pipeline([(self._cursor, sql, params)], prepare=True)
        return self._cursor.fetchone()

    # workflow families (see the module's text)

    def hold(self, instance_id: str) -> None:
        """Take the instance's family lock before its rows are read: each is then read once,
        instead of read, locked and read again."""
        if self._locking:
            self._lock_family(instance_id)

    def expect(self, instance_ids: Sequence[str], closes: Sequence[PlannedClose] = ()) -> None:
        """Lock these instances' families with the first family lock the transaction waits
        for (`hold_run_and_close`'s), and close along with it each of `closes` whose family no
        other of the operations changes, with its run's read: a batch of outcomes then takes
        one round trip, where each would otherwise take one more (and one more again to lock
        its family). The run of a family only its own operation changes reads the same before
        the others' operations as after them."""
        if self._locking:
            self._outcomes = list(instance_ids)
            self._planned = closes

    def hold_run(self, instance_id: str, run_id: str) -> Run | None:
        """The family's lock and the run's read in one round trip: the server runs them in
        order, so the run is read after the lock, as `get_run` would read it."""
        if not self._locking or self._holds(instance_id):
            return super().hold_run(instance_id, run_id)
        lock = self.conn.cursor()
        if self._tuple_cursor is None:
            self._tuple_cursor = self.conn.cursor(row_factory=tuple_row)
        self._pipeline([(lock, _LOCK_FAMILY, self._lock_params(instance_id, wait=True)),
                        (self._tuple_cursor, GET_RUN, (run_id,))])
        self._locked(instance_id, lock.fetchone(), wait=True)
        found = self._tuple_cursor.fetchall()
        read = self._readers[RunRead](found[0]) if found else None
        return keep_run_extras(read, self._keys, self._seq, self._last_at,
                               self._without_task, self._instance_fields)

    def hold_run_and_close(self, instance_id: str, run_id: str,
                           accept: Callable[[Run | None], bool], activity_id: str,
                           attempt: int, worker_id: str, now: datetime, /,
                           **fields: Any) -> tuple[Run | None, bool]:
        """The family's lock, the run's read and the attempt's close in one round trip, in a
        transaction that holds no family yet (where waiting for the lock, and then for the
        attempt's row, can close no cycle), the families it `expect`s locked along with it;
        the run's read and the close in one round trip where it holds the family already; no
        round trip at all for a close `expect` announced and the first one did ahead. A close
        `accept` refuses is undone, in this transaction (the undo goes with its next round
        trip), so that no one ever sees it."""
        if not self._locking:
            return super().hold_run_and_close(instance_id, run_id, accept, activity_id,
                                              attempt, worker_id, now, **fields)
        if activity_id in self._ahead:
            found, closed = self._taken(instance_id, run_id, activity_id, attempt, worker_id,
                                        now, fields)
        else:
            held = self._holds(instance_id)
            if not held and (self._held or self._created):
                return super().hold_run_and_close(instance_id, run_id, accept, activity_id,
                                                  attempt, worker_id, now, **fields)
            close = PlannedClose(instance_id, run_id, activity_id, attempt, worker_id, now,
                                 fields)
            found, closed = self._read_and_close(close) if held else \
                self._lock_read_and_close(close)
        run = keep_run_extras(None if found is None else self._readers[RunRead](found),
                              self._keys, self._seq, self._last_at, self._without_task,
                              self._instance_fields)
        if accept(run):
            return run, closed
        if closed:
            self._write("UPDATE activities SET status = 'started', closed_at = NULL, "
                        "owner = %s WHERE activity_id = %s", (worker_id, activity_id))
        return run, False

    def _read_and_close(self, close: PlannedClose) -> tuple[Sequence[Any] | None, bool]:
        """The run's read and the attempt's close in one round trip, its family held already
        (the reads wait for no lock): the run's row, if any, and whether it closed."""
        if self._tuple_cursor is None:
            self._tuple_cursor = self.conn.cursor(row_factory=tuple_row)
        closing = self.conn.cursor()
        self._pipeline([(self._tuple_cursor, GET_RUN, (close.workflow_run_id,)),
                        (closing, *self._close_attempt(close.activity_id, close.attempt,
                                                       close.worker_id, close.now,
                                                       close.fields))])
        found = self._tuple_cursor.fetchall()
        return (found[0] if found else None), closing.rowcount == 1

    def _lock_read_and_close(self, first: PlannedClose) -> tuple[Sequence[Any] | None, bool]:
        """The family locks of `first`'s instance and of those `expect`ed along with it, all
        waited for in key order, then the runs of `first` and of the closes that may go ahead
        with it (`_closes_ahead`) read, and the attempts closed: a statement for the locks, one
        for the runs and one for every `_CLOSES_AT_ONCE` closes (of one set of fields), in one
        round trip. `first`'s run's row, and whether it closed."""
        lock = self.conn.cursor()
        if self._tuple_cursor is None:
            self._tuple_cursor = self.conn.cursor(row_factory=tuple_row)
        closes = [first, *self._closes_ahead(first.activity_id)]
        groups: dict[tuple[Any, ...], list[PlannedClose]] = {}
        for close in closes:
            groups.setdefault((*close.fields, close.now), []).append(close)
        closing = [(self.conn.cursor(row_factory=tuple_row),
                    *self._closes(group[start:start + _CLOSES_AT_ONCE]))
                   for group in groups.values()
                   for start in range(0, len(group), _CLOSES_AT_ONCE)]
        self._pipeline([
            (lock, _LOCK_FAMILIES,
             {"top": 0, "ids": postgres_arrays.pack(
                 "text", sorted({first.workflow_instance_id, *self._outcomes}))}),
            (self._tuple_cursor, _GET_RUNS,
             (postgres_arrays.pack("text", [close.workflow_run_id for close in closes]),)),
            *closing,
        ])
        self._locked_all(lock.fetchall())
        runs = {row[0]: row for row in self._tuple_cursor.fetchall()}
        closed = {row[0] for cursor, _, _ in closing for row in cursor.fetchall()}
        self._keep_ahead(closes[1:], runs, closed)
        return runs.get(first.workflow_run_id), first.activity_id in closed

    def _closes(self, group: list[PlannedClose]) -> tuple[str, Row]:
        """The statement that closes the attempts of `group` (whose fields have the same names
        and whose instant is the same), and its parameters."""
        sql, kinds = _closes_statement(tuple(group[0].fields), len(group))
        stored, rows = self._stored, []
        for close in group:
            self._claimed.pop(close.activity_id, None)
            rows.append((close.activity_id, close.attempt, close.worker_id,
                         *stored(close.fields)))
        arrays = postgres_arrays.columns(rows, kinds)
        return sql, {"now": group[0].now, **self._STARTED_PARAMETER,
                     **{f"c{n}": array for n, array in enumerate(arrays)}}

    def _close_attempt(self, activity_id: str, attempt: int, worker_id: str, now: datetime,
                       fields: Row) -> tuple[str, Row]:
        self._claimed.pop(activity_id, None)
        return super()._close_attempt(activity_id, attempt, worker_id, now, fields)

    def _closes_ahead(self, first: str) -> list[PlannedClose]:
        """Of the closes `expect` announced, those that may go with the first outcome's round
        trip (`first`, its activity): each of a family none of the other operations changes,
        as the families were last seen."""
        planned, self._planned = self._planned, ()
        # Read once: other threads' transactions add to it meanwhile.
        seen = {instance_id: self._seen_families.get(instance_id)
                for instance_id in self._outcomes}
        if not planned or None in seen.values():
            return []
        operations = Counter(seen[instance_id] for instance_id in self._outcomes)
        return [close for close in planned
                if close.activity_id != first
                and operations[seen.get(close.workflow_instance_id)] == 1]

    def _keep_ahead(self, ahead: list[PlannedClose], runs: dict[str, Sequence[Any]],
                    closed: set[str]) -> None:
        """Keep what the closes done ahead found (their runs' rows, by run id, and the
        attempts closed), once the lock's rows (read before them) confirm that no other
        operation of the batch is of their families; where one is (an instance started again
        in another family since it was seen), the transaction cannot go on."""
        outcomes, self._outcomes = self._outcomes, []
        if not ahead:
            return
        families = self._family
        operations = Counter(families.get(instance_id) for instance_id in outcomes)
        for close in ahead:
            if operations[families.get(close.workflow_instance_id)] != 1:
                raise TransientConflict("a workflow family changed since it was seen")
            self._ahead[close.activity_id] = (close, runs.get(close.workflow_run_id),
                                              close.activity_id in closed)

    def _taken(self, instance_id: str, run_id: str, activity_id: str, attempt: int,
               worker_id: str, now: datetime, fields: Row) -> tuple[Sequence[Any] | None, bool]:
        """The run's read and the close done ahead for this activity, asked for with the
        values they were done with."""
        close, found, closed = self._ahead.pop(activity_id)
        if (close.workflow_instance_id, close.workflow_run_id, close.attempt, close.worker_id,
                close.now, close.fields) != (instance_id, run_id, attempt, worker_id, now,
                                             fields):
            raise RuntimeError(f"attempt {activity_id} was closed ahead otherwise")
        return found, closed

    def _holds(self, instance_id: str) -> bool:
        key = self._family.get(instance_id)
        return key is not None and (key in self._held or key in self._created)

    def _lock_params(self, instance_id: str, *, wait: bool) -> dict[str, Any]:
        return {"wait": wait, "top": max(self._held, default=0), "id": instance_id}

    def _lock_family(self, instance_id: str, *, wait: bool = True) -> bool | None:
        """Hold the lock of the instance's family: True when taken now (a row of it read
        before may be stale), False when held already (or the instance is gone), None when a
        claim (`wait` false) found it busy. Raises TransientConflict when the family is busy
        and ranks below one this transaction holds: waiting for it could close a cycle."""
        if self._holds(instance_id):
            return False
        return self._locked(instance_id, self._one(
            _LOCK_FAMILY, self._lock_params(instance_id, wait=wait)), wait=wait)

    def _locked(self, instance_id: str, row: Row | None, *, wait: bool) -> bool | None:
        """What `_lock_family` returns, from its statement's row."""
        if row is None:
            return False
        key = self._family[instance_id] = row["family_key"]
        if not row["locked"]:
            if not wait:
                return None
            raise TransientConflict(f"workflow family of {instance_id} is busy")
        if key in self._held:
            return False
        self._held.add(key)
        return True

    def _lock_name(self, instance_id: str) -> None:
        """Hold the lock of an instance id no row has yet (see _NAME_LOCKS)."""
        if not self._held:
            self._execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                          (_NAME_LOCKS, instance_id))
            return
        if not self._one("SELECT pg_try_advisory_xact_lock(%s, hashtext(%s)) AS locked",
                         (_NAME_LOCKS, instance_id))["locked"]:
            raise TransientConflict(f"instance {instance_id} is being started")

    def _owned(self, sql: str, params: Sequence[Any], record: type | None = None) -> Any:
        """One row of a family (a record of `record` where given), read after its family's
        lock in a write transaction."""
        read = self._one if record is None else functools.partial(self._record, record)
        row = read(sql, params)
        if row is not None and self._locking and self._lock_family(
                row["workflow_instance_id"] if record is None else row.workflow_instance_id):
            row = read(sql, params)
        return row

    def _claimable(self, sql: str, params: dict[str, Any], key: str,
                   record: type[R]) -> R | None:
        """The first `record` the claim query (selecting its columns) finds, rows of
        `_passed_over` left out (as %(passed)s), whose family this transaction holds or could
        take at once."""
        if not self._locking:
            return self._record(record, sql, {**params, "passed": []})
        sql = _family_tried(sql)
        for _ in range(_CLAIM_SKIPS):
            passed = self._passed_over.setdefault(key, [])
            found = self._tuples(sql, {**params, "passed": passed})
            if not found:
                return None
            row = self._claimed_row(found[0], key, record)
            if row is not None:
                return row
        return None

    def _claimed_row(self, found: Sequence[Any], key: str, record: type[R]) -> R | None:
        """A claim's row (`_family_tried`) as a record, if its family is this transaction's
        now; else None, the row passed over by the next claims."""
        *values, family, locked = found
        row = self._readers[record](values)
        self._family[row.workflow_instance_id] = family  # type: ignore[attr-defined]
        if locked or family in self._created:
            self._held.add(family)
            return row
        self._passed_over[key].append(getattr(row, key))
        return None

    def _scan(self, sql: str, params: Row, key: str, column: str | None = None,
              record: type | None = None) -> list[Any]:
        """Rows found by a scan (records of `record` where given); in a write transaction
        their families are locked in key order, then the rows read again, so that only those
        that still match are returned, as they are now."""
        rows = super()._scan(sql.format(only=""), params, key, column, record)
        if not rows or not self._locking:
            return rows
        field = operator.itemgetter if record is None else operator.attrgetter
        if not self._lock_families(set(map(field("workflow_instance_id"), rows))):
            return rows
        ids = list(map(field(key), rows))
        return super()._scan(sql.format(only=f" AND {column or key} = ANY(%(only)s)"),
                             {**params, "only": ids}, key, column, record)

    def _lock_families(self, instance_ids: set[str]) -> bool:
        """Hold the families of these instances, waiting in ascending key order (see
        `_lock_family`); True when any was taken now."""
        unknown = [i for i in instance_ids
                   if self._family.get(i) not in self._held | self._created]
        if not unknown:
            return False
        # One statement: the subquery yields the instances in key order, and each family is
        # locked as its first instance comes (again, at no cost, for the others).
        return self._locked_all(self._all(
            _LOCK_FAMILIES, {"top": max(self._held, default=0),
                             "ids": postgres_arrays.pack("text", unknown)}))

    def _locked_all(self, rows: list[Row]) -> bool:
        """What `_lock_families` returns, from its statement's rows."""
        if not all(row["locked"] for row in rows):
            raise TransientConflict("a workflow family is busy")
        taken = {row["family_key"] for row in rows} - self._held
        for row in rows:
            self._family[row["workflow_instance_id"]] = row["family_key"]
        self._held.update(taken)
        return bool(taken)

    # what differs from queries.py: instances are keyed and locked by the server, work left
    # ready is remembered for the NOTIFY at commit, claims lock what they take

    def get_instance(self, instance_id: str) -> Instance | None:
        row = super().get_instance(instance_id)
        if row is None and self._locking:
            # Another transaction may be starting it: wait for it, then look again.
            self._lock_name(instance_id)
            row = super().get_instance(instance_id)
        return row

    def insert_instance(self, row: Row) -> None:
        instance_id = row["workflow_instance_id"]
        names = ", ".join(row)
        marks = ", ".join("%s" for _ in row)
        inserted = self._one(f"INSERT INTO instances ({names}) VALUES ({marks}) "
                             "RETURNING instance_key, family_key", self._stored(row))
        self._keys[instance_id] = inserted["instance_key"]
        self._family[instance_id] = family = inserted["family_key"]
        if family == inserted["instance_key"]:
            # A new family: no other transaction can see it before this one commits.
            self._created.add(family)

    def _uncommon_event(self, event_type: str, attributes: Row) -> int | str:
        if not isinstance(codec.type_code(event_type), int):
            # The column holds codes only: a new event type gets its code in codec.EVENT_CODES.
            raise ValueError(f"event type {event_type!r} has no code in codec.EVENT_CODES")
        return super()._uncommon_event(event_type, attributes)

    def flush(self) -> None:
        """Write the events appended so far (one statement for all of them)."""
        if self._open_rows:
            events = self._history_rows()
            self._write(_EVENTS_INSERT, postgres_arrays.columns(events, _EVENT_KINDS))
        if self._timeout_counts:
            counts, self._timeout_counts = self._timeout_counts, {}
            # In key order, so that two writers adding to the same counts never deadlock.
            rows = [(*key, count) for key, count in sorted(counts.items())]
            self._write(_COUNTS_UPSERT, postgres_arrays.columns(rows, _COUNT_KINDS))

    def insert_workflow_task(self, row: Row) -> int:
        self._runs_ahead.pop(row["workflow_run_id"], None)
        task_id = super().insert_workflow_task(row)
        if row.get("status") == "scheduled":
            self._ready_if(True, ("workflow_task", task_id))
        return task_id

    def update_workflow_task(self, task_id: int, /, *, expect_status: str | None = None,
                             **fields: Any) -> bool:
        changed = super().update_workflow_task(task_id, expect_status=expect_status, **fields)
        if changed and "status" in fields:
            self._ready_if(fields["status"] == "scheduled", ("workflow_task", task_id))
        return changed

    def _ready_if(self, ready: bool, row: tuple[str, Any]) -> None:
        if ready:
            self._readied.add(row)
            self._drained.pop(row[0], None)
        else:
            self._readied.discard(row)

    def next_ready_workflow_task(self, now: datetime) -> WorkflowTask | None:
        """The oldest ready workflow task; in a write transaction it is locked for the claim that
        follows, and one another writer has locked, or of a busy family, is passed over."""
        return self._claimable(_READY_TASKS.format(limit="1", lock=self._lock), {"now": now},
                               "task_id", WorkflowTask)

    def close_workflow_task(self, task_id: int) -> None:
        super().close_workflow_task(task_id)
        self._readied.discard(("workflow_task", task_id))

    def take_ready_workflow_task(self, now: datetime, ahead: int = 1) -> WorkflowTask | None:
        if not self._locking:
            return super().take_ready_workflow_task(now)
        if not self._tasks_ahead and (self._drained.get("workflow_task") == now or (
                ahead > 1 and not self._claim_tasks(now, ahead))):
            return None
        task = self._tasks_ahead.pop() if self._tasks_ahead else \
            self.next_ready_workflow_task(now)
        if task is not None:
            run = self._runs_ahead.get(task.workflow_run_id)
            if run is not None and run.read_open_task == task.task_id:
                # Its run was read before the task's delete, which goes with the next round trip.
                run.read_open_task = None
            # Its row is locked by the claim that found it, still scheduled: the delete cannot
            # miss, and goes with the next round trip.
            self._write(_TASK_DELETE, (task.task_id,))
            self._readied.discard(("workflow_task", task.task_id))
        return task

    def _claim_tasks(self, now: datetime, limit: int) -> bool:
        """Claim up to `limit` of the oldest ready workflow tasks by one statement, which tries
        each one's family lock, to be handed out one a call (`_tasks_ahead`); then read the
        runs of them all by one more (`_runs_ahead`), after those locks, as `get_run` would
        read each: two round trips for a batch's decisions, where each took two. False when
        no task was ready (where none was of a free family, the claims go on one by one)."""
        passed = self._passed_over.setdefault("task_id", [])
        found = self._tuples(_CLAIM_TASKS, {"now": now, "passed": passed, "limit": limit})
        if len(found) < limit:
            self._drained["workflow_task"] = now
        tasks = [task for task in (self._claimed_row(row, "task_id", WorkflowTask)
                                   for row in found) if task is not None]
        if tasks:
            self._read_runs_ahead([task.workflow_run_id for task in tasks])
            self._tasks_ahead = tasks[::-1]
        return bool(found)

    def get_run(self, run_id: str) -> Run | None:
        read = self._runs_ahead.pop(run_id, None) if self._runs_ahead else None
        if read is None:
            return super().get_run(run_id)
        return keep_run_extras(read, self._keys, self._seq, self._last_at,
                               self._without_task, self._instance_fields)

    def update_run(self, run_id: str, /, **fields: Any) -> None:
        self._runs_ahead.pop(run_id, None)
        super().update_run(run_id, **fields)

    def claim_deadline(self, run_id: str, worker_id: str, now: datetime,
                       previous_owner: str | None) -> bool:
        self._runs_ahead.pop(run_id, None)
        return super().claim_deadline(run_id, worker_id, now, previous_owner)

    def close_workflow_tasks(self, run_id: str, keep: int | None) -> None:
        self._runs_ahead.pop(run_id, None)
        super().close_workflow_tasks(run_id, keep)

    def insert_activity(self, row: Row) -> None:
        super().insert_activity(row)
        if row.get("status") in PENDING_ACTIVITY:
            self._ready_if(True, ("activity", row["activity_id"]))

    def update_activity(self, activity_id: str, /, *, expect_attempt: int | None = None,
                        expect_status: Iterable[str] = (), **fields: Any) -> bool:
        statuses = tuple(expect_status)
        if self._activities_ahead:
            self._activities_ahead = [activity for activity in self._activities_ahead
                                      if activity.activity_id != activity_id]
        claimed = self._claimed.pop(activity_id, None)
        if claimed is not None and expect_attempt in (None, claimed[0]) \
                and (not statuses or claimed[1] in statuses):
            # The claim's row, as the claim read it: the update holds, and goes with the next
            # round trip.
            self._update_unread("activities", "activity_id", activity_id, fields)
            changed = True
        else:
            changed = super().update_activity(activity_id, expect_attempt=expect_attempt,
                                              expect_status=statuses, **fields)
        if changed and "status" in fields:
            self._ready_if(fields["status"] in PENDING_ACTIVITY, ("activity", activity_id))
        return changed

    def next_ready_activity(self, queues: Sequence[str], now: datetime) -> Activity | None:
        """The oldest activity ready on these queues whose schedule deadlines still hold; in a
        write transaction it is locked for the claim that follows, and one another writer has
        locked, or of a busy family, is passed over. Each queue is read through its own index
        range (the head of each is locked until the transaction ends)."""
        found = self._claimable(_READY_ACTIVITIES.format(limit="1", lock=self._lock),
                                {"queues": list(queues), "now": now}, "activity_id", Activity)
        if found is not None and self._locking:
            self._claimed[found.activity_id] = (found.attempt, found.status)
        return found

    def next_ready_activity_with_run(self, queues: Sequence[str], now: datetime,
                                     ahead: int = 1) -> tuple[Activity, Run] | None:
        on = (tuple(queues), now)
        if self._activities_ahead and self._ahead_on != on:
            self._activities_ahead = []
        if not self._activities_ahead and self._drained.get("activity") == on:
            return None
        if not self._locking or (ahead <= 1 and not self._activities_ahead):
            return super().next_ready_activity_with_run(queues, now)
        if not self._activities_ahead and not self._claim_activities(queues, now, ahead):
            return None
        if not self._activities_ahead:
            return super().next_ready_activity_with_run(queues, now)
        activity = self._activities_ahead.pop()
        return activity, self.get_run(activity.workflow_run_id)

    def _claim_activities(self, queues: Sequence[str], now: datetime, limit: int) -> bool:
        """Claim up to `limit` of the oldest ready activities on these queues by one statement,
        which tries each one's family lock, to be handed out one a call (`_activities_ahead`,
        for the same queues and instant); then read their runs by one more (`_runs_ahead`), as
        `_claim_tasks` does. False when none was ready (where none was of a free family, the
        claims go on one by one)."""
        passed = self._passed_over.setdefault("activity_id", [])
        found = self._tuples(_CLAIM_ACTIVITIES, {"queues": list(queues), "now": now,
                                                 "passed": passed, "limit": limit})
        if len(found) < limit:
            self._drained["activity"] = (tuple(queues), now)
        activities = [activity for activity in (
            self._claimed_row(row, "activity_id", Activity) for row in found)
            if activity is not None]
        if activities:
            for activity in activities:
                self._claimed[activity.activity_id] = (activity.attempt, activity.status)
            self._read_runs_ahead([activity.workflow_run_id for activity in activities])
            self._activities_ahead = activities[::-1]
            self._ahead_on = (tuple(queues), now)
        return bool(found)

    def _read_runs_ahead(self, run_ids: list[str]) -> None:
        """Read these runs by one statement, each kept for `get_run` (`_runs_ahead`)."""
        read = self._readers[RunRead]
        self._runs_ahead.update(
            (row[0], read(row)) for row in self._tuples(
                _GET_RUNS, (postgres_arrays.pack("text", list(dict.fromkeys(run_ids))),)))
