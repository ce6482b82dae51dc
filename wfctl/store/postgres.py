"""The PostgreSQL store: a connection pool, transactions and every query wfctl runs there.

It implements the interface of base.py with the meaning sqlite.py gives it, and passes the same
contract suite. Rows cross it as Python values, as base.py says: instants are `timestamptz` columns,
read back as aware datetimes in `datetime.UTC` (exact to the microsecond) and sent as datetimes;
JSON columns are `text` and flags `integer`, converted by name both ways (store/columns.py:
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
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg
from psycopg import pq
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
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
from wfctl.store import codec, columns
from wfctl.store import postgres_schema as schema
from wfctl.store.sqlite import _prefix_upper_bound, _sql_list, keep_run_extras, run_with_extras
from wfctl.vocabulary import (
    CLOSED_INSTANCE,
    OPEN_ACTIVITY,
    OPEN_RUN,
    OPEN_WORKFLOW_TASK,
    PENDING_ACTIVITY,
    TIMEOUT_EVENTS,
    UNSUCCESSFUL_RUN,
)

Row = dict[str, Any]

_OPEN_WORKFLOW_TASK = _sql_list(OPEN_WORKFLOW_TASK)
_PENDING_ACTIVITY = _sql_list(PENDING_ACTIVITY)
_OPEN_ACTIVITY = _sql_list(OPEN_ACTIVITY)
_UNSUCCESSFUL_RUN = _sql_list(UNSUCCESSFUL_RUN)
_TIMEOUT_EVENTS = frozenset(TIMEOUT_EVENTS)
# A closed instance may go once its parent (if any) is closed too.
_PRUNABLE = (
    f"i.status IN {_sql_list(CLOSED_INSTANCE)} AND NOT EXISTS (SELECT 1 FROM instances p "
    f"WHERE p.workflow_instance_id = i.parent_instance_id AND p.status IN {_sql_list(OPEN_RUN)})"
)
# What an instance owns, table by table, in an order its rows can be deleted in with the
# references checked: what points at a run or the instance first, the instance row, and its
# history last (the history trigger lets it go only once the instance row is gone or marked).
_OWNED_ROWS = (
    ("children", "parent_run_id IN ({runs})"),
    ("children", "child_instance_id = ANY(%(ids)s)"),
    ("workflow_tasks", "workflow_run_id IN ({runs})"),
    ("activities", "workflow_run_id IN ({runs})"),
    ("timers", "workflow_run_id IN ({runs})"),
    ("failures", "workflow_run_id IN ({runs})"),
    ("signals", "workflow_instance_id = ANY(%(ids)s)"),
    ("runs", "workflow_instance_id = ANY(%(ids)s)"),
    ("instances", "workflow_instance_id = ANY(%(ids)s)"),
    ("events", "instance_key = ANY(%(keys)s)"),
)
_RUNS_OF = "SELECT workflow_run_id FROM runs WHERE workflow_instance_id = ANY(%(ids)s)"
_RUN_NEEDS_WAKING = (
    "AND runs.deadline_claimed_at IS NULL AND NOT EXISTS (SELECT 1 FROM workflow_tasks t "
    f"WHERE t.workflow_run_id = runs.workflow_run_id AND t.status IN {_OPEN_WORKFLOW_TASK})"
)

# Write transactions run prepared statements on generic plans: the claims and scans of the step
# path cost far more to plan (0.4 ms for a claim, re-planned at every call under the default
# `auto`) than to run, and their status conditions are written as literals, so that a generic
# plan still uses the partial indexes.
_BEGIN_WRITE = ("BEGIN ISOLATION LEVEL READ COMMITTED; "
                "SET LOCAL plan_cache_mode = force_generic_plan")
# Family locks are advisory locks keyed by the root's instance_key (small positive bigints; the
# migration lock's key is far above them). An instance id not stored yet is locked by name, in
# the two-integer key space, which never meets the one-bigint space: two starts of one new id
# take turns, and the second finds the first's instance.
_NAME_LOCKS = 0x77666964    # "wfid"
# How many ready rows of busy families a claim passes over before it reports nothing ready.
_CLAIM_SKIPS = 16
# A read transaction's snapshot is taken by its first statement: `SELECT 1` takes it at once, so
# that it holds from the moment `read()` begins, as a caller expects.
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1"
# How long a writer waits for another's locks before it gives up (StoreUnavailable "busy"), as
# SQLite's busy timeout; a transaction left idle this long belongs to a stuck process.
_SESSION = ("SET TIME ZONE 'UTC'; SET DateStyle = 'ISO'; SET lock_timeout = '30s'; "
            "SET idle_in_transaction_session_timeout = '60s'")
_CONNECT_TIMEOUT_S = 10
# How long a thread waits for a connection of the pool before the server counts as unreachable.
_POOL_TIMEOUT_S = 15.0
_POOL_SIZE = 16
# A transaction's events in one statement, a column an array. The arrays go in binary (%b):
# as text, every JSON attribute would be quoted and escaped element by element in Python.
_EVENTS_INSERT = (
    "INSERT INTO events (instance_key, seq, run_number, event_type, at, attributes) "
    "SELECT * FROM unnest(%b::bigint[], %b::integer[], %b::integer[], %b::smallint[], "
    "%b::bigint[], %b::text[])"
)
_COUNTS_UPSERT = (
    "INSERT INTO timeout_event_counts (event_type, timeout_kind, failure_category, count) "
    "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::bigint[]) "
    "ON CONFLICT (event_type, timeout_kind, failure_category) "
    "DO UPDATE SET count = timeout_event_counts.count + excluded.count"
)
# The channel write transactions notify when they leave work ready (payload-free: a listener
# only learns that it should look again), and workers LISTEN on, one connection per process.
READY_CHANNEL = "wfctl_ready"
_NOTIFY_AND_COMMIT = f"NOTIFY {READY_CHANNEL}; COMMIT"
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
                try:
                    conn.execute(_BEGIN_WRITE)
                    tx = PostgresTx(conn, locking=True)
                    yield tx
                    tx.flush()
                    # A NOTIFY is delivered at the commit, and only if it commits: workers on
                    # every host look for work at once instead of at their next poll. Sent with
                    # the COMMIT, in one round trip.
                    conn.execute(_NOTIFY_AND_COMMIT if tx.readied else "COMMIT")
                except BaseException:
                    _roll_back(conn)
                    raise
        except psycopg.Error as exc:
            raise self._error(exc) from None

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

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> _Result:
        try:
            with self._store._connections().connection() as conn:
                cursor = conn.execute(sql, params)
                rows = cursor.fetchall() if cursor.description is not None else []
                return _Result(rows, cursor.rowcount)
        except psycopg.Error as exc:
            raise self._store._error(exc) from None


_GET_RUN = run_with_extras("%s")


# A row's values as its columns store them (store/columns.py): JSON as text, flags as integers
# (psycopg would send a bool as a boolean, which an integer column refuses); instants stay
# datetimes, which psycopg sends as `timestamptz`.
_stored = columns.Writer(None).values


class PostgresTx:
    """The queries of one transaction (or, from `peek`, of none). `locking`: claims lock the
    rows they return (FOR UPDATE SKIP LOCKED), which only a write transaction may."""

    def __init__(self, conn: psycopg.Connection | _PerStatement, *, locking: bool) -> None:
        self.conn = conn
        self._cursor = conn.cursor() if isinstance(conn, psycopg.Connection) else None
        # Runs read (after their family's lock) without an open workflow task (`keep_run_extras`).
        self._without_task: set[str] = set()
        self._locking = locking
        self._lock = " FOR UPDATE SKIP LOCKED" if locking else ""
        # The family keys this transaction holds, and the family of each instance it looked up.
        self._held: set[int] = set()
        self._family: dict[str, int] = {}
        # Families this transaction started (new roots): nobody else can lock them yet.
        self._created: set[int] = set()
        # Ready rows a claim passed over because their family was busy (they stay row-locked
        # by this transaction, which its own next claim would not skip).
        self._passed_over: dict[str, list[Any]] = {}
        self._seq: dict[str, int] = {}
        self._keys: dict[str, int] = {}
        # Events appended in this transaction, written in one statement before any read of the
        # history and at commit.
        self._events: list[tuple[Any, ...]] = []
        self._timeout_counts: dict[tuple[str, str, str], int] = {}
        # Activities and workflow tasks this transaction left ready to claim (now or at a later
        # available_at); one it claimed itself again (the step path's group commit) needs no
        # other worker, so a transaction that claimed all it readied notifies no one.
        self._readied: set[tuple[str, Any]] = set()

    @property
    def readied(self) -> bool:
        """Whether the transaction leaves an activity or a workflow task for a worker to claim."""
        return bool(self._readied)

    def _execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        # One cursor for the transaction's statements (each is read before the next is sent):
        # `Connection.execute` would make a new one every time.
        if self._cursor is None:
            return self.conn.execute(sql, params)
        return self._cursor.execute(sql, params)

    def _one(self, sql: str, params: Sequence[Any] | None = None) -> Row | None:
        return self._execute(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] | None = None) -> list[Row]:
        return self._execute(sql, params).fetchall()

    def _planned_once(self, sql: str, params: dict[str, Any]) -> Row | None:
        """A statement that costs far more to plan than to run (a dozen probes of partial
        indexes, planned in 5-30 ms, run in 0.3): inside a transaction it is prepared, with
        one generic plan per connection, reused by every later call."""
        conn = self.conn
        if not isinstance(conn, psycopg.Connection):
            return self._one(sql, params)
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        return conn.execute(sql, params, prepare=True).fetchone()

    # workflow families (see the module's text)

    def _lock_family(self, instance_id: str, *, wait: bool = True) -> bool | None:
        """Hold the lock of the instance's family: True when taken now (a row of it read
        before may be stale), False when held already (or the instance is gone), None when a
        claim (`wait` false) found it busy. Raises TransientConflict when the family is busy
        and ranks below one this transaction holds: waiting for it could close a cycle."""
        key = self._family.get(instance_id)
        if key is not None and (key in self._held or key in self._created):
            return False
        row = self._one(
            "SELECT family_key, wfctl_lock_family(family_key, %(wait)s AND family_key > %(top)s)"
            " AS locked FROM instances WHERE workflow_instance_id = %(id)s",
            {"wait": wait, "top": max(self._held, default=0), "id": instance_id},
        )
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

    def _owned(self, sql: str, params: Sequence[Any]) -> Row | None:
        """One row of a family, read after its family's lock in a write transaction."""
        row = self._one(sql, params)
        if row is not None and self._locking and self._lock_family(row["workflow_instance_id"]):
            row = self._one(sql, params)
        return row

    def _claimable(self, sql: str, params: dict[str, Any], key: str) -> Row | None:
        """The first row the claim query finds (rows of `_passed_over` left out, as
        %(passed)s) whose family this transaction holds or could take at once."""
        if not self._locking:
            return self._one(sql, {**params, "passed": []})
        # The family lock is tried in the same statement, for the one row found: a row the
        # claim locks is read as it is now, and the family's other rows are read after.
        sql = (f"SELECT c.*, i.family_key AS _family, pg_try_advisory_xact_lock(i.family_key) "
               f"AS _locked FROM ({sql}) c JOIN instances i "
               "ON i.workflow_instance_id = c.workflow_instance_id")
        for _ in range(_CLAIM_SKIPS):
            passed = self._passed_over.setdefault(key, [])
            row = self._one(sql, {**params, "passed": passed})
            if row is None:
                return None
            family, locked = row.pop("_family"), row.pop("_locked")
            self._family[row["workflow_instance_id"]] = family
            if locked or family in self._created:
                self._held.add(family)
                return row
            passed.append(row[key])
        return None

    def _scan(self, sql: str, params: dict[str, Any], key: str,
              column: str | None = None) -> list[Row]:
        """Rows found by a scan (`sql` with `{only}` where a condition on `key`, the column
        `column` in the query, may go); in a write transaction their families are locked in key
        order, then the rows read again, so that only those that still match are returned, as
        they are now."""
        rows = self._all(sql.format(only=""), params)
        if not rows or not self._locking:
            return rows
        if not self._lock_families({row["workflow_instance_id"] for row in rows}):
            return rows
        ids = [row[key] for row in rows]
        return self._all(sql.format(only=f" AND {column or key} = ANY(%(only)s)"),
                         {**params, "only": ids})

    def _lock_families(self, instance_ids: set[str]) -> bool:
        """Hold the families of these instances, waiting in ascending key order (see
        `_lock_family`); True when any was taken now."""
        unknown = [i for i in instance_ids
                   if self._family.get(i) not in self._held | self._created]
        if not unknown:
            return False
        # One statement: the subquery yields the instances in key order, and each family is
        # locked as its first instance comes (again, at no cost, for the others).
        rows = self._all(
            "SELECT workflow_instance_id, family_key, "
            "wfctl_lock_family(family_key, family_key > %(top)s) AS locked FROM ("
            "SELECT workflow_instance_id, family_key FROM instances "
            "WHERE workflow_instance_id = ANY(%(ids)s) ORDER BY family_key) AS f",
            {"top": max(self._held, default=0), "ids": unknown},
        )
        if not all(row["locked"] for row in rows):
            raise TransientConflict("a workflow family is busy")
        taken = {row["family_key"] for row in rows} - self._held
        for row in rows:
            self._family[row["workflow_instance_id"]] = row["family_key"]
        self._held.update(taken)
        return bool(taken)

    def _insert(self, table: str, row: Row, returning: str | None = None) -> int:
        names = ", ".join(row)
        marks = ", ".join("%s" for _ in row)
        sql = f"INSERT INTO {table} ({names}) VALUES ({marks})"
        if returning is None:
            self._execute(sql, _stored(row))
            return 0
        return self._one(f"{sql} RETURNING {returning}", _stored(row))[returning]

    def _update(self, table: str, key: str, value: Any, fields: Row,
                where: str = "", params: Sequence[Any] = ()) -> int:
        sets = ", ".join(f"{name} = %s" for name in fields)
        return self._execute(
            f"UPDATE {table} SET {sets} WHERE {key} = %s{where}",
            (*_stored(fields), value, *params),
        ).rowcount

    # definitions

    def put_definitions(self, digest: str, path: str, source: str, now: datetime) -> None:
        self._execute(
            "INSERT INTO definitions (digest, path, source, created_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (digest) DO NOTHING", (digest, path, source, now),
        )

    def get_definitions(self, digest: str) -> Row | None:
        return self._one("SELECT * FROM definitions WHERE digest = %s", (digest,))

    # instances and runs

    def get_instance(self, instance_id: str) -> Row | None:
        sql = "SELECT * FROM instances WHERE workflow_instance_id = %s"
        row = self._owned(sql, (instance_id,))
        if row is None and self._locking:
            # Another transaction may be starting it: wait for it, then look again.
            self._lock_name(instance_id)
            row = self._owned(sql, (instance_id,))
        return row

    def insert_instance(self, row: Row) -> None:
        instance_id = row["workflow_instance_id"]
        names = ", ".join(row)
        marks = ", ".join("%s" for _ in row)
        inserted = self._one(f"INSERT INTO instances ({names}) VALUES ({marks}) "
                             "RETURNING instance_key, family_key", _stored(row))
        self._keys[instance_id] = inserted["instance_key"]
        self._family[instance_id] = family = inserted["family_key"]
        if family == inserted["instance_key"]:
            # A new family: no other transaction can see it before this one commits.
            self._created.add(family)

    def update_instance(self, instance_id: str, **fields: Any) -> None:
        self._update("instances", "workflow_instance_id", instance_id, fields)

    def _instance_filter(self, status: str | None, workflow_type: str | None,
                         since: datetime | None) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if status:
            clauses.append("i.status = %s")
            params.append(status)
        if workflow_type:
            clauses.append("i.workflow_type = %s")
            params.append(workflow_type)
        if since:
            clauses.append("i.created_at >= %s")
            params.append(since)
        return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params

    def list_instances(self, *, status: str | None, workflow_type: str | None,
                       since: datetime | None, limit: int,
                       before: tuple[datetime, str] | None = None) -> list[Row]:
        where, params = self._instance_filter(status, workflow_type, since)
        if before is not None:
            # The rows after (older than) the one named, through the created_at index; one
            # since deleted names its instant alone.
            where += (" AND " if where else "WHERE ") + \
                "(i.created_at, i.instance_key) < (%s, coalesce((SELECT instance_key FROM instances " \
                "WHERE workflow_instance_id = %s), 0))"
            params += [before[0], before[1]]
        return self._all(
            "SELECT i.*, r.run_number, r.execution_deadline_at, r.run_deadline_at, "
            "r.step_index, r.wait_kind FROM instances i "
            f"JOIN runs r ON r.workflow_run_id = i.current_run_id {where} "
            "ORDER BY i.created_at DESC, i.instance_key DESC LIMIT %s", (*params, limit),
        )

    def count_instances(self, *, status: str | None, workflow_type: str | None,
                        since: datetime | None) -> int:
        where, params = self._instance_filter(status, workflow_type, since)
        return self._one(f"SELECT count(*) AS n FROM instances i {where}", params)["n"]

    def open_deadlines(self, run_ids: Sequence[str]) -> list[Row]:
        ids = "(SELECT unnest(%s::text[]))"
        return self._all(
            "SELECT workflow_run_id, 'schedule_to_start' AS kind, schedule_deadline_at AS at "
            f"FROM activities WHERE workflow_run_id IN {ids} AND status IN {_PENDING_ACTIVITY} "
            "AND schedule_deadline_at IS NOT NULL "
            "UNION ALL SELECT workflow_run_id, 'start_to_close', close_deadline_at FROM activities "
            f"WHERE workflow_run_id IN {ids} AND status = 'started' "
            "AND close_deadline_at IS NOT NULL "
            "UNION ALL SELECT workflow_run_id, 'heartbeat', heartbeat_deadline_at FROM activities "
            f"WHERE workflow_run_id IN {ids} AND status = 'started' "
            "AND heartbeat_deadline_at IS NOT NULL "
            "UNION ALL SELECT workflow_run_id, 'schedule_to_close', schedule_to_close_deadline_at "
            f"FROM activities WHERE workflow_run_id IN {ids} AND status IN {_OPEN_ACTIVITY} "
            "AND schedule_to_close_deadline_at IS NOT NULL "
            "UNION ALL SELECT workflow_run_id, CASE kind WHEN 'signal_timeout' THEN 'signal_wait' "
            "WHEN 'delay' THEN 'timer' ELSE kind END, fire_at FROM timers "
            f"WHERE workflow_run_id IN {ids} AND status = 'scheduled' "
            "UNION ALL SELECT workflow_run_id, 'workflow_task_timeout', timeout_at "
            f"FROM workflow_tasks WHERE workflow_run_id IN {ids} AND status = 'started' "
            "AND timeout_at IS NOT NULL",
            (list(run_ids),) * 6,
        )

    def instance_ids(self, prefix: str, limit: int) -> list[str]:
        # Instance ids sort byte-wise (COLLATE "C"), so a prefix is a range of the primary key.
        upper = _prefix_upper_bound(prefix)
        where, params = "workflow_instance_id >= %s", [prefix]
        if upper is not None:
            where += " AND workflow_instance_id < %s"
            params.append(upper)
        rows = self._all(
            f"SELECT workflow_instance_id FROM instances WHERE {where} "
            "ORDER BY workflow_instance_id LIMIT %s", (*params, limit),
        )
        return [row["workflow_instance_id"] for row in rows]

    def hold(self, instance_id: str) -> None:
        """Take the instance's family lock before its rows are read: each is then read once,
        instead of read, locked and read again."""
        if self._locking:
            self._lock_family(instance_id)

    def get_run(self, run_id: str) -> Row | None:
        """The run row (read after its family's lock); its instance's history key and last
        seq come along in the same statement, since a transaction that reads a run mostly
        appends to its history."""
        return keep_run_extras(self._owned(_GET_RUN, (run_id,)), self._keys, self._seq,
                               self._without_task if self._locking else None)

    def get_run_by_number(self, instance_id: str, run_number: int) -> Row | None:
        return self._owned(
            "SELECT * FROM runs WHERE workflow_instance_id = %s AND run_number = %s",
            (instance_id, run_number),
        )

    def insert_run(self, row: Row) -> None:
        self._insert("runs", row)

    def update_run(self, run_id: str, **fields: Any) -> None:
        self._update("runs", "workflow_run_id", run_id, fields)

    # history

    def instance_key(self, instance_id: str) -> int | None:
        """The integer key history is stored under (read once per transaction)."""
        key = self._keys.get(instance_id)
        if key is None:
            row = self._one(
                "SELECT instance_key FROM instances WHERE workflow_instance_id = %s",
                (instance_id,),
            )
            if row is None:
                return None
            key = self._keys[instance_id] = row["instance_key"]
        return key

    def last_seq(self, instance_id: str) -> int:
        seq = self._seq.get(instance_id)
        if seq is None:
            key = self._keys.get(instance_id)
            if key is None:
                # The key and the last seq in one statement: both are read once per transaction.
                row = self._one(
                    "SELECT i.instance_key, (SELECT coalesce(max(seq), 0) FROM events "
                    "WHERE instance_key = i.instance_key) AS seq FROM instances i "
                    "WHERE i.workflow_instance_id = %s", (instance_id,),
                )
                if row is None:
                    return 0
                self._keys[instance_id] = row["instance_key"]
                seq = row["seq"]
            else:
                seq = self._one(
                    "SELECT coalesce(max(seq), 0) AS seq FROM events WHERE instance_key = %s",
                    (key,),
                )["seq"]
            self._seq[instance_id] = seq
        return seq

    def append_event(self, run: Row, event_type: str, at: datetime, attributes: Row) -> int:
        """Append one event to the instance's history; returns its seq (the event id)."""
        code = codec.type_code(event_type)
        if not isinstance(code, int):
            # The column holds codes only: a new event type gets its code in codec.EVENT_CODES.
            raise ValueError(f"event type {event_type!r} has no code in codec.EVENT_CODES")
        instance_id = run["workflow_instance_id"]
        seq = self._seq[instance_id] = self.last_seq(instance_id) + 1
        stored_at = codec.micros(at)
        self._events.append((self._keys[instance_id], seq, run["run_number"], code, stored_at,
                             codec.encode_attributes(attributes, stored_at)))
        if event_type in _TIMEOUT_EVENTS:
            key = (event_type, attributes.get("timeout_kind") or "",
                   attributes.get("failure_category") or "")
            self._timeout_counts[key] = self._timeout_counts.get(key, 0) + 1
        return seq

    def flush(self) -> None:
        """Write the events appended so far (one statement for all of them)."""
        if self._events:
            events, self._events = self._events, []
            self._execute(_EVENTS_INSERT, [list(column) for column in zip(*events, strict=True)])
        if self._timeout_counts:
            counts, self._timeout_counts = self._timeout_counts, {}
            # In key order, so that two writers adding to the same counts never deadlock.
            rows = [(*key, count) for key, count in sorted(counts.items())]
            self._execute(_COUNTS_UPSERT, [list(column) for column in zip(*rows, strict=True)])

    def history_count(self, run: Row) -> int:
        """Events of a run that count toward history_size, without a scan: a run's events are
        contiguous from its first_seq to the last, less the refused starts it recorded."""
        return self.last_seq(run["workflow_instance_id"]) - run["first_seq"] + 1 \
            - run["rejected_starts"]

    def event(self, instance_id: str, seq: int) -> Row | None:
        """One event of an instance's history, as `events` gives it."""
        found = self.events(instance_id, after_seq=seq - 1, until_seq=seq)
        return found[0] if found else None

    def events(self, instance_id: str, *, run_number: int | None = None,
               after_seq: int = 0, until_seq: int | None = None,
               event_types: Sequence[str] = ()) -> list[Row]:
        """An instance's events in order (after `after_seq`, up to `until_seq`), each with its
        type's name, its instant (a datetime) and its attributes as a dict."""
        self.flush()
        sql = ("SELECT seq, run_number, event_type, at, attributes FROM events "
               "WHERE instance_key = %s AND seq > %s")
        params: list[Any] = [self.instance_key(instance_id), after_seq]
        if until_seq is not None:
            sql += " AND seq <= %s"
            params.append(until_seq)
        if run_number is not None:
            sql += " AND run_number = %s"
            params.append(run_number)
        if event_types:
            sql += " AND event_type = ANY(%s::smallint[])"
            params.append([codec.type_code(name) for name in event_types])
        return [
            {
                "workflow_instance_id": instance_id,
                "seq": row["seq"],
                "run_number": row["run_number"],
                "event_type": codec.type_name(row["event_type"]),
                "at": codec.instant(row["at"]),
                "attributes": codec.decode_attributes(row["attributes"], row["at"]),
            }
            for row in self._all(sql + " ORDER BY seq", params)
        ]

    # workflow tasks

    def open_workflow_task(self, run_id: str) -> Row | None:
        if self._locking and run_id in self._without_task:
            return None
        return self._one(
            "SELECT * FROM workflow_tasks WHERE workflow_run_id = %s "
            f"AND status IN {_OPEN_WORKFLOW_TASK} LIMIT 1", (run_id,),
        )

    def insert_workflow_task(self, row: Row) -> int:
        self._without_task.discard(row["workflow_run_id"])
        task_id = self._insert("workflow_tasks", row, "task_id")
        if row.get("status") == "scheduled":
            self._readied.add(("workflow_task", task_id))
        return task_id

    def get_workflow_task(self, task_id: int) -> Row | None:
        return self._owned("SELECT * FROM workflow_tasks WHERE task_id = %s", (task_id,))

    def update_workflow_task(self, task_id: int, *, expect_status: str | None = None,
                             **fields: Any) -> bool:
        where, params = ("", ()) if expect_status is None else (" AND status = %s",
                                                                (expect_status,))
        changed = self._update("workflow_tasks", "task_id", task_id, fields, where, params) == 1
        if changed and "status" in fields:
            self._ready_if(fields["status"] == "scheduled", ("workflow_task", task_id))
        return changed

    def _ready_if(self, ready: bool, row: tuple[str, Any]) -> None:
        if ready:
            self._readied.add(row)
        else:
            self._readied.discard(row)

    def next_ready_workflow_task(self, now: datetime) -> Row | None:
        """The oldest ready workflow task; in a write transaction it is locked for the claim that
        follows, and one another writer has locked, or of a busy family, is passed over."""
        return self._claimable(
            "SELECT * FROM workflow_tasks WHERE status = 'scheduled' AND available_at <= %(now)s "
            "AND task_id <> ALL(%(passed)s::bigint[]) "
            f"ORDER BY available_at, task_id LIMIT 1{self._lock}", {"now": now}, "task_id",
        )

    def close_workflow_task(self, task_id: int) -> None:
        """A workflow task ended (completed, timed out or cancelled): its row goes, its story
        stays in history."""
        self._execute("DELETE FROM workflow_tasks WHERE task_id = %s", (task_id,))
        self._readied.discard(("workflow_task", task_id))

    def close_workflow_tasks(self, run_id: str, keep: int | None) -> None:
        """End every open workflow task of the run but `keep`."""
        self._execute(
            f"DELETE FROM workflow_tasks WHERE workflow_run_id = %s AND status IN "
            f"{_OPEN_WORKFLOW_TASK} AND task_id IS DISTINCT FROM %s", (run_id, keep),
        )

    def timed_out_workflow_tasks(self, now: datetime, limit: int) -> list[Row]:
        return self._scan(
            "SELECT * FROM workflow_tasks WHERE status = 'started' AND timeout_at IS NOT NULL "
            "AND timeout_at <= %(now)s{only} ORDER BY timeout_at LIMIT %(limit)s",
            {"now": now, "limit": limit}, "task_id",
        )

    def workflow_tasks_owned_by(self, worker_ids: Sequence[str]) -> list[Row]:
        return self._scan(
            "SELECT * FROM workflow_tasks WHERE status = 'started' AND owner = ANY(%(ids)s){only}",
            {"ids": list(worker_ids)}, "task_id",
        )

    # activities

    def insert_activity(self, row: Row) -> None:
        self._insert("activities", row)
        if row.get("status") in PENDING_ACTIVITY:
            self._readied.add(("activity", row["activity_id"]))

    def get_activity(self, activity_id: str) -> Row | None:
        return self._owned("SELECT * FROM activities WHERE activity_id = %s", (activity_id,))

    def update_activity(self, activity_id: str, *, expect_attempt: int | None = None,
                        expect_status: Iterable[str] = (), **fields: Any) -> bool:
        where, params = "", []
        if expect_attempt is not None:
            where += " AND attempt = %s"
            params.append(expect_attempt)
        statuses = list(expect_status)
        if statuses:
            where += " AND status = ANY(%s)"
            params.append(statuses)
        changed = self._update("activities", "activity_id", activity_id, fields, where,
                               params) == 1
        if changed and "status" in fields:
            self._ready_if(fields["status"] in PENDING_ACTIVITY, ("activity", activity_id))
        return changed

    def step_activities(self, run_id: str, step_index: int) -> list[Row]:
        return self._all(
            "SELECT * FROM activities WHERE workflow_run_id = %s AND step_index = %s "
            "AND superseded = 0 ORDER BY branch_index", (run_id, step_index),
        )

    def run_activities(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM activities WHERE workflow_run_id = %s ORDER BY scheduled_at, rowid",
            (run_id,),
        )

    def open_activities(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM activities WHERE workflow_run_id = %s "
            f"AND status IN {_OPEN_ACTIVITY} ORDER BY rowid", (run_id,),
        )

    def count_open_activities(self, run_id: str) -> int:
        return self._one(
            "SELECT count(*) AS n FROM activities WHERE workflow_run_id = %s "
            f"AND status IN {_OPEN_ACTIVITY}", (run_id,),
        )["n"]

    def next_ready_activity(self, queues: Sequence[str], now: datetime) -> Row | None:
        """The oldest activity ready on these queues whose schedule deadlines still hold; in a
        write transaction it is locked for the claim that follows, and one another writer has
        locked, or of a busy family, is passed over. Each queue is read through its own index
        range (the head of each is locked until the transaction ends)."""
        return self._claimable(
            "SELECT a.* FROM unnest(%(queues)s::text[]) AS q(queue) CROSS JOIN LATERAL ("
            "SELECT * FROM activities WHERE queue = q.queue "
            f"AND status IN {_PENDING_ACTIVITY} AND available_at <= %(now)s "
            "AND activity_id <> ALL(%(passed)s::text[]) "
            "AND (schedule_deadline_at IS NULL OR schedule_deadline_at > %(now)s) "
            "AND (schedule_to_close_deadline_at IS NULL "
            "OR schedule_to_close_deadline_at > %(now)s) "
            f"ORDER BY available_at, rowid LIMIT 1{self._lock}) a "
            "ORDER BY a.available_at, a.rowid LIMIT 1", {"queues": list(queues), "now": now},
            "activity_id",
        )

    def next_activity_available_at(self, queues: Sequence[str]) -> datetime | None:
        return self._one(
            "SELECT min(available_at) AS at FROM activities WHERE queue = ANY(%s) "
            f"AND status IN {_PENDING_ACTIVITY}", (list(queues),),
        )["at"]

    def expired_activities(self, now: datetime, limit: int) -> list[Row]:
        """Open activities past any of their four deadlines, found through the partial indexes."""
        return self._scan(
            "SELECT * FROM activities WHERE activity_id IN ("
            f"SELECT activity_id FROM activities WHERE status IN {_PENDING_ACTIVITY}"
            " AND schedule_deadline_at IS NOT NULL AND schedule_deadline_at <= %(now)s"
            " UNION SELECT activity_id FROM activities WHERE status = 'started'"
            " AND close_deadline_at IS NOT NULL AND close_deadline_at <= %(now)s"
            " UNION SELECT activity_id FROM activities WHERE status = 'started'"
            " AND heartbeat_deadline_at IS NOT NULL AND heartbeat_deadline_at <= %(now)s"
            " UNION SELECT activity_id FROM activities"
            f" WHERE status IN {_OPEN_ACTIVITY}"
            " AND schedule_to_close_deadline_at IS NOT NULL"
            " AND schedule_to_close_deadline_at <= %(now)s){only} LIMIT %(limit)s",
            {"now": now, "limit": limit}, "activity_id",
        )

    def activities_owned_by(self, worker_ids: Sequence[str]) -> list[Row]:
        return self._scan(
            "SELECT * FROM activities WHERE status = 'started' AND owner = ANY(%(ids)s){only}",
            {"ids": list(worker_ids)}, "activity_id",
        )

    # timers

    def insert_timer(self, row: Row) -> None:
        self._insert("timers", row)

    def update_timer(self, timer_id: str, *, expect_status: str | None = None,
                     **fields: Any) -> bool:
        where, params = ("", ()) if expect_status is None else (" AND status = %s",
                                                                (expect_status,))
        return self._update("timers", "timer_id", timer_id, fields, where, params) == 1

    def step_timers(self, run_id: str, step_index: int) -> list[Row]:
        return self._all(
            "SELECT * FROM timers WHERE workflow_run_id = %s AND step_index = %s "
            "AND superseded = 0 ORDER BY rowid", (run_id, step_index),
        )

    def run_timers(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM timers WHERE workflow_run_id = %s ORDER BY rowid", (run_id,)
        )

    def open_timers(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM timers WHERE workflow_run_id = %s AND status = 'scheduled' "
            "ORDER BY rowid", (run_id,)
        )

    def due_timers(self, now: datetime, limit: int,
                   after: tuple[datetime, str] | None = None) -> list[Row]:
        # A page goes on from the last timer of the one before, in (fire_at, rowid) order.
        page = "" if after is None else (
            " AND fire_at >= %(after)s AND (fire_at, rowid) > "
            "(%(after)s, (SELECT rowid FROM timers WHERE timer_id = %(after_id)s))")
        return self._scan(
            f"SELECT * FROM timers WHERE status = 'scheduled' AND fire_at <= %(now)s{page}"
            "{only} ORDER BY fire_at, rowid LIMIT %(limit)s",
            {"now": now, "limit": limit, "after": after and after[0],
             "after_id": after and after[1]}, "timer_id",
        )

    # signals

    def insert_signal(self, row: Row) -> None:
        self._insert("signals", row)

    def first_pending_signal(self, instance_id: str, name: str) -> Row | None:
        return self._one(
            "SELECT * FROM signals WHERE workflow_instance_id = %s AND name = %s "
            "AND consumed_at IS NULL ORDER BY signal_id LIMIT 1", (instance_id, name),
        )

    def pending_signals(self, instance_id: str) -> list[Row]:
        return self._all(
            "SELECT name, received_at FROM signals WHERE workflow_instance_id = %s "
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
            "consumed_at = %s WHERE signal_id = %s", (run_id, step_index, now, signal_id),
        )

    def consumed_signal(self, run_id: str, step_index: int) -> Row | None:
        return self._one(
            "SELECT * FROM signals WHERE consumed_run_id = %s AND consumed_step_index = %s "
            "ORDER BY signal_id DESC LIMIT 1", (run_id, step_index),
        )

    # children

    def insert_child(self, row: Row) -> None:
        self._insert("children", row)

    def child_link(self, child_instance_id: str) -> Row | None:
        return self._one(
            "SELECT * FROM children WHERE child_instance_id = %s", (child_instance_id,)
        )

    def step_children(self, run_id: str, step_index: int) -> list[Row]:
        return self._all(
            "SELECT c.*, i.status FROM children c JOIN instances i "
            "ON i.workflow_instance_id = c.child_instance_id "
            "WHERE c.parent_run_id = %s AND c.step_index = %s AND c.superseded = 0 "
            "ORDER BY c.branch_index", (run_id, step_index),
        )

    def run_children(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT c.*, i.status, i.closed_at FROM children c JOIN instances i "
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
            f"WHERE status IN {_UNSUCCESSFUL_RUN})",
            (run_id, step_index),
        )

    # failures

    def insert_failure(self, row: Row) -> int:
        return self._insert("failures", row, "failure_id")

    def get_failure(self, failure_id: int) -> Row | None:
        return self._one("SELECT * FROM failures WHERE failure_id = %s", (failure_id,))

    def activity_failure(self, activity_id: str) -> Row | None:
        return self._one(
            "SELECT * FROM failures WHERE activity_id = %s ORDER BY failure_id DESC LIMIT 1",
            (activity_id,),
        )

    # deadlines (must complete within)

    def expired_deadlines(self, now: datetime, limit: int) -> list[Row]:
        return self._scan(
            "SELECT * FROM runs WHERE status = 'running' AND deadline_at IS NOT NULL "
            "AND deadline_claimed_at IS NULL AND deadline_at <= %(now)s{only} "
            "ORDER BY deadline_at LIMIT %(limit)s", {"now": now, "limit": limit},
            "workflow_run_id",
        )

    def earliest_deadline(self) -> datetime | None:
        return self._one(
            "SELECT min(deadline_at) AS at FROM runs WHERE status = 'running' "
            "AND deadline_at IS NOT NULL AND deadline_claimed_at IS NULL"
        )["at"]

    def claimed_deadlines(self) -> list[Row]:
        return self._scan(
            "SELECT * FROM runs WHERE deadline_claimed_at IS NOT NULL AND closed_at IS NULL{only}",
            {}, "workflow_run_id",
        )

    def claim_deadline(self, run_id: str, worker_id: str, now: datetime,
                       previous_owner: str | None) -> bool:
        return self._execute(
            "UPDATE runs SET deadline_claimed_by = %s, deadline_claimed_at = %s "
            "WHERE workflow_run_id = %s AND closed_at IS NULL "
            "AND deadline_claimed_by IS NOT DISTINCT FROM %s",
            (worker_id, now, run_id, previous_owner),
        ).rowcount == 1

    # workflow timeouts

    def runs_past_deadline_without_task(self, now: datetime, limit: int) -> list[Row]:
        return self._scan(
            "SELECT * FROM runs WHERE workflow_run_id IN ("
            "SELECT workflow_run_id FROM runs WHERE closed_at IS NULL"
            " AND execution_deadline_at IS NOT NULL AND execution_deadline_at <= %(now)s"
            " UNION SELECT workflow_run_id FROM runs WHERE closed_at IS NULL"
            " AND run_deadline_at IS NOT NULL AND run_deadline_at <= %(now)s) "
            f"{_RUN_NEEDS_WAKING}{{only}} LIMIT %(limit)s", {"now": now, "limit": limit},
            "workflow_run_id",
        )

    def next_due(self, now: datetime) -> datetime | None:
        """The earliest instant at which the watchdog has something to do.

        A run past its deadline counts only while the watchdog can act on it (no open workflow
        task, no claimed deadline); otherwise the watchdog would wake again at once, forever.
        """
        return self._planned_once(
            "SELECT min(at) AS at FROM ("
            "SELECT min(execution_deadline_at) AS at FROM runs WHERE closed_at IS NULL"
            " AND execution_deadline_at IS NOT NULL AND execution_deadline_at > %(now)s"
            " UNION ALL SELECT min(run_deadline_at) FROM runs WHERE closed_at IS NULL"
            " AND run_deadline_at IS NOT NULL AND run_deadline_at > %(now)s"
            " UNION ALL SELECT min(execution_deadline_at) FROM runs WHERE closed_at IS NULL"
            " AND execution_deadline_at IS NOT NULL AND execution_deadline_at <= %(now)s"
            f" {_RUN_NEEDS_WAKING}"
            " UNION ALL SELECT min(run_deadline_at) FROM runs WHERE closed_at IS NULL"
            f" AND run_deadline_at IS NOT NULL AND run_deadline_at <= %(now)s {_RUN_NEEDS_WAKING}"
            " UNION ALL SELECT min(timeout_at) FROM workflow_tasks WHERE status = 'started'"
            " AND timeout_at IS NOT NULL"
            " UNION ALL SELECT min(fire_at) FROM timers WHERE status = 'scheduled'"
            " UNION ALL SELECT min(schedule_deadline_at) FROM activities"
            f" WHERE status IN {_PENDING_ACTIVITY} AND schedule_deadline_at IS NOT NULL"
            " UNION ALL SELECT min(close_deadline_at) FROM activities WHERE status = 'started'"
            " AND close_deadline_at IS NOT NULL"
            " UNION ALL SELECT min(heartbeat_deadline_at) FROM activities WHERE status = 'started'"
            " AND heartbeat_deadline_at IS NOT NULL"
            " UNION ALL SELECT min(schedule_to_close_deadline_at) FROM activities"
            f" WHERE status IN {_OPEN_ACTIVITY}"
            " AND schedule_to_close_deadline_at IS NOT NULL) AS due", {"now": now},
        )["at"]

    # workers

    def register_worker(self, row: Row) -> None:
        self._insert("workers", row)

    def renew_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> bool:
        return self._execute(
            "UPDATE workers SET heartbeat_at = %s, lease_expires_at = %s "
            "WHERE worker_id = %s AND stopped_at IS NULL", (now, lease_expires_at, worker_id),
        ).rowcount == 1

    def revive_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> None:
        self._execute(
            "UPDATE workers SET heartbeat_at = %s, lease_expires_at = %s, stopped_at = NULL "
            "WHERE worker_id = %s", (now, lease_expires_at, worker_id),
        )

    def stop_worker(self, worker_id: str, now: datetime) -> None:
        self._execute(
            "UPDATE workers SET stopped_at = %s WHERE worker_id = %s AND stopped_at IS NULL",
            (now, worker_id),
        )

    def live_workers(self) -> list[Row]:
        return self._all("SELECT * FROM workers WHERE stopped_at IS NULL")

    def get_worker(self, worker_id: str) -> Row | None:
        return self._one("SELECT * FROM workers WHERE worker_id = %s", (worker_id,))

    # metrics (SPEC §10): each read is a count the trigger or the store keeps, an index range
    # or an index's minimum

    def instance_counts(self) -> list[Row]:
        """Instances by type and status, as the trigger on `instances` keeps them."""
        return self._all("SELECT workflow_type, status, sum(count)::bigint AS count "
                         "FROM instance_counts GROUP BY workflow_type, status "
                         "ORDER BY workflow_type, status")

    def open_activity_counts(self) -> list[Row]:
        # One part per partial index: the ready activities, and the started ones.
        return self._all(
            f"SELECT queue, status, count(*) AS count FROM activities WHERE status IN "
            f"{_PENDING_ACTIVITY} GROUP BY queue, status UNION ALL "
            "SELECT queue, status, count(*) AS count FROM activities WHERE status = 'started' "
            "GROUP BY queue, status"
        )

    # retention

    def prunable_instances(self, now: datetime, *, closed_before: datetime | None,
                           limit: int) -> list[Row]:
        """Closed instances past their retention (with `closed_before`: closed before it,
        whatever their retention), first due first, each with how many events its history
        holds; none whose parent is still open. In a write transaction their families are
        locked, and those still prunable then are returned."""
        if closed_before is None:
            where, at = "i.retain_until IS NOT NULL AND i.retain_until <= %(at)s", now
            order = "i.retain_until"
        else:
            where, at = "i.closed_at IS NOT NULL AND i.closed_at <= %(at)s", closed_before
            order = "i.closed_at"
        return self._scan(
            "SELECT i.workflow_instance_id, (SELECT coalesce(max(e.seq), 0) FROM events e "
            "WHERE e.instance_key = i.instance_key) AS events FROM instances i "
            f"WHERE {where} AND {_PRUNABLE}{{only}} ORDER BY {order} LIMIT %(limit)s",
            {"at": at, "limit": None if limit < 0 else limit}, "workflow_instance_id",
            column="i.workflow_instance_id",
        )

    def next_retain_until(self, now: datetime) -> datetime | None:
        """When the next closed instance's retention runs out, after `now`."""
        return self._one(
            "SELECT min(retain_until) AS at FROM instances WHERE retain_until IS NOT NULL "
            "AND retain_until > %s", (now,),
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
            "WHERE workflow_instance_id = %s", (now, instance_id),
        )

    def pruning_instance(self) -> str | None:
        """The instance whose deletion over several transactions is under way, if any."""
        row = self._one("SELECT workflow_instance_id FROM pruning ORDER BY started_at LIMIT 1")
        if row is not None and self._locking:
            self._lock_family(row["workflow_instance_id"])
        return row["workflow_instance_id"] if row else None

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
            # A row's physical address (ctid) picks the first `left` rows of any table.
            count = self._execute(
                f"DELETE FROM {table} WHERE ctid = ANY(ARRAY("
                f"SELECT ctid FROM {table} WHERE {where} LIMIT %(left)s))",
                {**params, "left": left},
            ).rowcount
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
        ids = list(instance_ids)
        # History is keyed by the instance's integer key, read before the instance row goes.
        keys = [row["instance_key"] for row in self._all(
            "SELECT instance_key FROM instances WHERE workflow_instance_id = ANY(%s)", (ids,))]
        params = {"ids": ids, "keys": keys}
        return [(table, where.format(runs=_RUNS_OF), params) for table, where in _OWNED_ROWS]

    def ready_activity_counts(self, now: datetime) -> list[Row]:
        """Per queue, the activities a worker may claim at `now` and the oldest available_at."""
        return self._all(
            "SELECT queue, count(*) AS count, min(available_at) AS oldest FROM activities "
            f"WHERE status IN {_PENDING_ACTIVITY} AND available_at <= %s GROUP BY queue", (now,),
        )

    def ready_workflow_task_count(self, now: datetime) -> Row:
        return self._one(
            "SELECT count(*) AS count, min(available_at) AS oldest FROM workflow_tasks "
            "WHERE status = 'scheduled' AND available_at <= %s", (now,),
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
        return self._one(
            "SELECT (SELECT min(execution_deadline_at) FROM runs WHERE closed_at IS NULL"
            " AND execution_deadline_at IS NOT NULL) AS execution_timeout,"
            " (SELECT min(run_deadline_at) FROM runs WHERE closed_at IS NULL"
            " AND run_deadline_at IS NOT NULL) AS run_timeout,"
            " (SELECT min(deadline_at) FROM runs WHERE status = 'running'"
            " AND deadline_at IS NOT NULL AND deadline_claimed_at IS NULL) AS deadline,"
            " (SELECT min(timeout_at) FROM workflow_tasks WHERE status = 'started'"
            " AND timeout_at IS NOT NULL) AS workflow_task_timeout,"
            " (SELECT min(schedule_deadline_at) FROM activities"
            f" WHERE status IN {_PENDING_ACTIVITY} AND schedule_deadline_at IS NOT NULL)"
            " AS schedule_to_start,"
            " (SELECT min(close_deadline_at) FROM activities WHERE status = 'started'"
            " AND close_deadline_at IS NOT NULL) AS start_to_close,"
            " (SELECT min(heartbeat_deadline_at) FROM activities WHERE status = 'started'"
            " AND heartbeat_deadline_at IS NOT NULL) AS heartbeat,"
            " (SELECT min(schedule_to_close_deadline_at) FROM activities"
            f" WHERE status IN {_OPEN_ACTIVITY} AND schedule_to_close_deadline_at IS NOT NULL)"
            " AS schedule_to_close,"
            " (SELECT min(fire_at) FROM timers WHERE status = 'scheduled'"
            " AND kind = 'signal_timeout') AS signal_wait"
        )
