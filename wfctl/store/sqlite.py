"""The SQLite store: connections, transactions and every query wfctl runs."""

from __future__ import annotations

import operator
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from wfctl import clock, jsonvalue
from wfctl.errors import (
    DatabaseError,
    DatabaseNotFound,
    DatabaseTooNew,
    StoreUnavailable,
    TransientConflict,
)
from wfctl.store import codec, columns
from wfctl.store.schema import MIGRATION_SET, MIGRATIONS_TABLE, migrations
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
_BUSY_TIMEOUT_MS = 30_000
# A WAL longer than this (in pages, 4 KiB each: what SQLite lets one grow to by default) is
# started over: copied to its end with writers held back, and written again from its beginning
# once no reader needs what it holds.
_WAL_RESTART_PAGES = 1_000
# How long starting the WAL over waits for readers still reading from it, writers held back
# meanwhile. While readers outlast it, the next tries come later and later (from 1 s up to 30 s
# apart), so that a reader that never ends does not hold writers back again and again.
_WAL_RESTART_WAIT_MS = 50
_WAL_RESTART_RETRY = (1.0, 30.0)
# A WAL file that grew past this many bytes is cut back to it when the WAL starts over.
_WAL_FILE_LIMIT = 64 * 1024 * 1024
# SQLite's default: a commit that leaves more pages than this in the WAL copies them to the file.
_WAL_AUTOCHECKPOINT = 1_000
# With checkpoints deferred to `checkpoint`, the commit that leaves more pages than this copies
# them itself: a backstop for writers that outrun the checkpointer, whatever the machine's speed.
# Copying to the end with the write lock held lets the next commit start the WAL over, so the
# log never holds much more than this (16 MiB of pages); the checkpointer has normally copied
# most of it already, so the backstop copies the rest.
_WAL_BACKSTOP_PAGES = 4 * _WAL_RESTART_PAGES


def _sql_list(words: Iterable[str]) -> str:
    """Vocabulary words as an SQL list, `('a', 'b')`: they are plain words, never input."""
    return "(" + ", ".join(f"'{word}'" for word in words) + ")"


# The status lists queries filter on. The partial indexes (schema.py) spell the same lists in the
# same order, which SQLite needs before it will use such an index for a query.
_OPEN_WORKFLOW_TASK = _sql_list(OPEN_WORKFLOW_TASK)
_PENDING_ACTIVITY = _sql_list(PENDING_ACTIVITY)
_OPEN_ACTIVITY = _sql_list(OPEN_ACTIVITY)
_UNSUCCESSFUL_RUN = _sql_list(UNSUCCESSFUL_RUN)
_TIMEOUT_EVENTS = frozenset(TIMEOUT_EVENTS)
# Indexes from m004 on spell a list as ORs (see schema.py), and so do the queries that use them.
_ANY_OPEN_ACTIVITY = " OR ".join(f"status = '{status}'" for status in OPEN_ACTIVITY)
_CLOSED_INSTANCE = _sql_list(CLOSED_INSTANCE)
_OPEN_RUN = _sql_list(OPEN_RUN)
# A closed instance may be deleted unless it is the child of an instance still open: the parent
# may yet read it (its retry supersedes a failed child, its describe lists it). The status is
# checked row by row (`+`): the index on it would cost a sort of every closed instance.
_PRUNABLE = (
    f"+i.status IN {_CLOSED_INSTANCE} AND NOT EXISTS (SELECT 1 FROM instances p "
    f"WHERE p.workflow_instance_id = i.parent_instance_id AND p.status IN {_OPEN_RUN})"
)
# What an instance owns, table by table, in an order its rows can be deleted in with the
# references checked: what points at a run or the instance first, the instance row, and its
# history last (the history trigger lets it go only once the instance row is gone).
_OWNED = (
    ("children", "parent_run_id IN ({runs})"),
    ("children", "child_instance_id IN ({ids})"),
    ("workflow_tasks", "workflow_run_id IN ({runs})"),
    ("activities", "workflow_run_id IN ({runs})"),
    ("timers", "workflow_run_id IN ({runs})"),
    ("failures", "workflow_run_id IN ({runs})"),
    ("signals", "workflow_instance_id IN ({ids})"),
    ("runs", "workflow_instance_id IN ({ids})"),
    ("instances", "workflow_instance_id IN ({ids})"),
    ("events", "instance_key IN ({keys})"),
)
# A run past its execution or run deadline needs the watchdog only while nothing else will decide
# it: an open workflow task will, and so will a claimed expiry of its `deadline`.
_RUN_NEEDS_WAKING = (
    "AND runs.deadline_claimed_at IS NULL AND NOT EXISTS (SELECT 1 FROM workflow_tasks t "
    f"WHERE t.workflow_run_id = runs.workflow_run_id AND t.status IN {_OPEN_WORKFLOW_TASK})"
)


def _prefix_upper_bound(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix`; None if there is none.

    SQLite compares TEXT as UTF-8 bytes, which orders like code points, so incrementing the last
    code point that can grow gives the bound. Surrogates cannot be stored, so the step skips them.
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code <= 0x10FFFF:
            return "".join(chars) + chr(0xE000 if 0xD800 <= code <= 0xDFFF else code)
    return None


_NAME = operator.itemgetter(0)


def _rows_as_dicts(cursor: sqlite3.Cursor, row: tuple) -> Row:
    return dict(zip(map(_NAME, cursor.description), row, strict=True))


def text(instant: datetime) -> str:
    """An instant as the file stores it: ISO 8601 UTC text with milliseconds, and three more
    digits only when it has microseconds within its millisecond (`2026-04-12T12:00:00.123+00:00`,
    `…00.123456+00:00`). One instant has one text, and text order is time order: the digits of
    the longer form sort after the `+` of the shorter. Files of 0.1 hold the first form only."""
    global _last_text
    last, stored = _last_text
    if instant is last:
        return stored
    moment = instant if instant.tzinfo is UTC else instant.astimezone(UTC)
    stored = moment.isoformat(
        timespec="milliseconds" if moment.microsecond % 1000 == 0 else "microseconds")
    _last_text = (instant, stored)
    return stored


# The last instant `text` wrote and its text: most of a transaction's instants are its `now`,
# one datetime written again and again (formatting one takes microseconds).
_last_text: tuple[datetime | None, str] = (None, "")


def instant(stored: str | None) -> datetime | None:
    """An instant stored by `text` (or by 0.1), as an aware UTC datetime."""
    return None if stored is None else datetime.fromisoformat(stored)


# A row's values as the file stores them.
_stored = columns.Writer(text).values


# Conversions of query results, by the query's text: a query's columns never change.
_PLANS: dict[str, tuple[tuple[str, Any], ...]] = {}


# SQLite's primary result codes that mean "not now": the write may succeed later.
_UNAVAILABLE = {
    sqlite3.SQLITE_BUSY: ("busy", "the database is busy (another process holds the write lock)"),
    sqlite3.SQLITE_LOCKED: ("busy", "the database is locked"),
    sqlite3.SQLITE_FULL: ("full", "the disk is full"),
    sqlite3.SQLITE_READONLY: ("readonly", "the database is read-only"),
    sqlite3.SQLITE_IOERR: ("io", "disk I/O error"),
}


def translate(exc: sqlite3.Error, path: str) -> DatabaseError:
    """A sqlite3 error as wfctl's own: `StoreUnavailable` when a later try may succeed."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code == _BUSY_SNAPSHOT:
        return TransientConflict(f"{path}: {exc}")
    primary = code & 0xFF if code is not None else None
    if primary in _UNAVAILABLE:
        reason, message = _UNAVAILABLE[primary]
        return StoreUnavailable(reason, f"{path}: {message}")
    if primary == sqlite3.SQLITE_NOTADB:
        return DatabaseError(f"{path} is not a wfctl database")
    return DatabaseError(f"database {path}: {exc}")


def dumps(value: Any) -> str:
    """Strict JSON for what the store writes: NaN or Infinity never reaches the file."""
    return jsonvalue.dumps(value)


# A read snapshot that cannot become a write one: another connection wrote meanwhile.
_BUSY_SNAPSHOT = sqlite3.SQLITE_BUSY | (2 << 8)
# Extended result codes for a WAL database SQLite cannot read because it cannot create the -shm.
_READONLY_CANTINIT = sqlite3.SQLITE_READONLY | (5 << 8)
_READONLY_DIRECTORY = sqlite3.SQLITE_READONLY | (6 << 8)


class _CannotCreateShm(DatabaseError):
    """A WAL database in a read-only folder, whose -shm file SQLite cannot create."""


def _check_path(path: str, create: bool) -> None:
    """Refuse, before SQLite sees it, a path that cannot be a database file."""
    if not path:
        raise DatabaseError("no database path given")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if not create:
            raise DatabaseNotFound(f"no database at {path}") from None
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            reason = "not a folder" if os.path.exists(folder) else "no such folder"
            raise DatabaseError(f"cannot create {path}: {folder}: {reason}") from None
        return
    except NotADirectoryError:
        raise DatabaseError(f"cannot open {path}: a part of the path is not a folder") from None
    except OSError as exc:
        raise DatabaseError(f"cannot open {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise DatabaseError(f"{path} is a folder, not a database file")
    if not stat.S_ISREG(mode):
        raise DatabaseError(f"{path} is not a regular file")


def _writable(path: str) -> bool:
    """Whether this process may write the file at `path` (True when there is none yet)."""
    try:
        os.close(os.open(path, os.O_RDWR))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class SQLiteStore:
    """One SQLite file, shared by every thread and process of wfctl.

    Each thread gets its own connection. Writes in one process go through one lock, so that
    threads of a process queue here instead of in SQLite's sleeping busy handler; processes
    are serialized by `BEGIN IMMEDIATE`.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        """Open (and with `create`, make) the database at `path`, migrating it if needed.

        Raises DatabaseNotFound when there is none and `create` is false (nothing is created),
        DatabaseTooNew for a file of a newer wfctl, DatabaseError for anything that is not a
        wfctl database; the file is not written to in any of these cases.
        """
        self.path = str(path)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        # Every write transaction of this process runs on one connection (the lock above takes
        # them in turn): its page cache stays warm, where per-thread writers each lost theirs to
        # the others' commits.
        self._writer: sqlite3.Connection | None = None
        self._writer_generation = 0
        # What `wal_autocheckpoint` is set to on the write connection outside `bulk_write`.
        self._autocheckpoint = _WAL_AUTOCHECKPOINT
        # When `checkpoint` may next try to start the WAL over (time.monotonic()), and the
        # wait before the try after that, should readers outlast this one too.
        self._restart_at = 0.0
        self._restart_retry = _WAL_RESTART_RETRY[0]
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._connections_lock = threading.Lock()
        _check_path(self.path, create)
        # A URI with mode=rw never creates the file, whatever happens to it meanwhile.
        self._file = f"file:{quote(os.fsencode(os.path.abspath(self.path)))}"
        self._writable_uri = f"{self._file}?mode={'rwc' if create else 'rw'}"
        # Connections opened before the URI last changed are opened again (see `conn`).
        self._generation = 0
        # Reading a file that has no -wal beside it makes SQLite create its -wal and -shm, and
        # when this process may not write the file, SQLite leaves them behind, read-only, so
        # that no one can write the file even once it is writable again. Without a -wal file
        # the main file holds every commit and no process is writing: it is read as it is, and
        # opened anew once it is writable (`_reopen_if_writable`).
        self._uri = self._writable_uri
        self._read_until_writable = (not _writable(self.path)
                                     and not os.path.exists(f"{self.path}-wal"))
        if self._read_until_writable:
            self._uri = self._immutable_uri
        try:
            self._migrate(create)
        except _CannotCreateShm:
            if os.path.exists(f"{self.path}-wal"):
                raise DatabaseError(
                    f"cannot read {self.path}: it is read-only and so is its folder, where "
                    f"SQLite must create {os.path.basename(self.path)}-shm to read its -wal file"
                ) from None
            # No process can be writing either (it would need the -wal and -shm in this
            # read-only folder).
            self._uri = self._immutable_uri
            self._read_until_writable = False
            self._migrate(create)

    @property
    def _immutable_uri(self) -> str:
        return f"{self._file}?mode=ro&immutable=1"

    def _open(self, *, check_same_thread: bool = True) -> sqlite3.Connection:
        return sqlite3.connect(self._uri, uri=True, isolation_level=None,
                               check_same_thread=check_same_thread,
                               timeout=_BUSY_TIMEOUT_MS / 1000)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = self._open(check_same_thread=False)
            conn.row_factory = _rows_as_dicts
            # WAL: readers (describe, list) never block the writer, nor the writer them.
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is safe against crashes of any process in WAL mode; only an OS crash or
            # power loss can drop the last commits, and the file stays consistent either way.
            conn.execute("PRAGMA synchronous=NORMAL")
            # Several workers share the file: wait for the write lock rather than fail.
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            # References between runs, tasks and instances are checked, not assumed.
            conn.execute("PRAGMA foreign_keys=ON")
            # The WAL file keeps the size it grew to; one that grew large gives the space back.
            conn.execute(f"PRAGMA journal_size_limit={_WAL_FILE_LIMIT}")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from None
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.generation != self._generation:
            with self._connections_lock:
                self._connections = [(thread, other) for thread, other in self._connections
                                     if other is not conn]
            conn.close()
            conn = None
        if conn is None:
            self._local.generation = self._generation
            conn = self._local.conn = self._connect()
            with self._connections_lock:
                self._connections.append((threading.current_thread(), conn))
        return conn

    def _migrate(self, create: bool) -> None:
        """Check what the file holds and apply pending migrations; an up-to-date file costs one
        pragma. Nothing is written unless the file is (or will be) a wfctl database this wfctl
        knows how to upgrade."""
        conn = None
        try:
            conn = self._open()
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == migrations.version:
                return
            if version > migrations.version:
                raise DatabaseTooNew(self.path, version, migrations.version)
            applied = self._applied(conn)
            unknown = [name for name in applied if name not in migrations.names]
            if unknown:
                raise DatabaseTooNew(self.path, max(version, len(applied)), migrations.version)
            if not applied:
                if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise DatabaseError(f"{self.path} is not a wfctl database "
                                        "(an SQLite database with other tables)")
                if not create:
                    raise DatabaseNotFound(f"no database at {self.path} (the file is empty)")
            if set(migrations.names) <= set(applied):
                return
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                migrations.apply(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._open_error(exc) from None
        finally:
            if conn is not None:
                conn.close()

    def _applied(self, conn: sqlite3.Connection) -> list[str]:
        """The wfctl migrations recorded in the file, in the order they were applied."""
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (MIGRATIONS_TABLE,)).fetchone() is None:
            return []
        try:
            rows = conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} WHERE migration_set = ? "
                                "ORDER BY rowid", (MIGRATION_SET,)).fetchall()
        except sqlite3.OperationalError:
            raise DatabaseError(f"{self.path} is not a wfctl database "
                                f"(its {MIGRATIONS_TABLE} table is not sqlite-utils')") from None
        return [row[0] for row in rows]

    def _open_error(self, exc: sqlite3.Error) -> DatabaseError:
        """What opening the file ran into, said for a person."""
        code = getattr(exc, "sqlite_errorcode", None) or 0
        if code in (_READONLY_DIRECTORY, _READONLY_CANTINIT):
            return _CannotCreateShm(self.path)
        if code & 0xFF == sqlite3.SQLITE_READONLY:
            return StoreUnavailable("readonly", f"{self.path} is read-only and needs its schema "
                                                f"upgraded to version {migrations.version}")
        if code & 0xFF == sqlite3.SQLITE_CANTOPEN:
            verb = "open" if os.path.exists(self.path) else "create"
            return DatabaseError(f"cannot {verb} {self.path}: permission denied")
        if code & 0xFF == sqlite3.SQLITE_NOTADB:
            return DatabaseError(f"{self.path} is not a wfctl database (not an SQLite file)")
        return translate(exc, self.path)

    def close(self) -> None:
        """Close this thread's connection and those of threads that have ended.

        A connection still in use by a live thread is left to that thread: closing it under
        a running query would crash the query.
        """
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        current = threading.current_thread()
        with self._connections_lock:
            keep = []
            for thread, conn in self._connections:
                if thread is current or not thread.is_alive():
                    conn.close()
                else:
                    keep.append((thread, conn))
            self._connections = keep
        self._local = threading.local()

    @contextmanager
    def write(self) -> Iterator[SQLiteTx]:
        """A write transaction: BEGIN IMMEDIATE takes the write lock up front.

        SQLite's errors leave as wfctl's (`StoreUnavailable` for busy, full, read-only).
        """
        with self._write_lock:
            self._reopen_if_writable()
            try:
                conn = self._writer_connection()
                conn.execute("BEGIN IMMEDIATE")
                tx = SQLiteTx(conn, writing=True)
                try:
                    yield tx
                    tx.flush()
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                error = translate(exc, self.path)
                if isinstance(error, StoreUnavailable) and error.reason == "readonly" \
                        and self._writer is not None:
                    # SQLite opened the file read-only, for good: the next write opens it anew.
                    self._writer.close()
                    self._writer = None
                raise error from exc

    def _reopen_if_writable(self) -> None:
        """Once a file read as it was (it was read-only) may be written, every connection is
        opened anew, so as to write it and to see what others write (the write lock held)."""
        if self._read_until_writable and _writable(self.path) \
                and os.access(os.path.dirname(os.path.abspath(self.path)), os.W_OK):
            self._uri = self._writable_uri
            self._read_until_writable = False
            self._generation += 1

    @contextmanager
    def read(self) -> Iterator[SQLiteTx]:
        """A read transaction: one consistent snapshot across several queries."""
        conn = self.conn
        try:
            conn.execute("BEGIN")
            try:
                yield SQLiteTx(conn)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc

    def _writer_connection(self) -> sqlite3.Connection:
        """The process's write connection (the write lock held), opened on first use."""
        if self._writer is not None and self._writer_generation != self._generation:
            self._writer.close()
            self._writer = None
        if self._writer is None:
            self._writer_generation = self._generation
            self._writer = self._connect()
            if self._autocheckpoint != _WAL_AUTOCHECKPOINT:
                self._writer.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")
        return self._writer

    @contextmanager
    def bulk_write(self) -> Iterator[SQLiteTx]:
        """A write transaction for a large change (a prune batch) whose commit does not copy the
        write-ahead log into the file: call `checkpoint` once the write lock is let go, so that
        the lock is held for the change alone."""
        try:
            with self.write() as tx:
                tx.conn.execute("PRAGMA wal_autocheckpoint=0")
                yield tx
        finally:
            # Only once the commit is done: a commit copies the log as the setting is when it
            # runs, so this transaction's own must not see it restored.
            with self._write_lock:
                if self._writer is not None:
                    try:
                        self._writer.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")
                    except sqlite3.Error as exc:
                        raise translate(exc, self.path) from exc

    def defer_checkpoints(self) -> None:
        """Leave copying the WAL into the database to `checkpoint`, called off the write path.

        By default the commit that fills the WAL past 1,000 pages copies it, with the process's
        write lock held: every write waits for the copy and its fsync (tens of milliseconds on
        common disks, seconds on slow ones). The long-running worker calls this and checkpoints
        from a loop of its own; a commit still copies the log itself past
        `_WAL_BACKSTOP_PAGES`, should the writers outrun that loop.
        """
        with self._write_lock:
            self._autocheckpoint = _WAL_BACKSTOP_PAGES
            if self._writer is not None:
                self._writer.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")

    def checkpoint(self) -> int:
        """Copy the WAL into the database, holding writers up briefly at most; returns the
        WAL's pages.

        A passive checkpoint copies what was committed when it began while writers go on; so
        while they never pause, it never reaches the WAL's end, and the WAL is never started
        over: it would grow by every page every commit writes, for as long as the writes go
        on. Once it has grown long, a second pass holds writers back (this process's, and
        other processes' through SQLite's write lock), copies the rest, and waits up to
        `_WAL_RESTART_WAIT_MS` for readers to finish with it, so that the next commit writes
        the WAL from its beginning.
        """
        conn = self.conn
        try:
            row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if row["log"] > _WAL_RESTART_PAGES and time.monotonic() >= self._restart_at:
                row = self._restart(conn)
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return row["log"]

    def _restart(self, conn: sqlite3.Connection) -> Row:
        with self._write_lock:
            conn.execute(f"PRAGMA busy_timeout={_WAL_RESTART_WAIT_MS}")
            try:
                row = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        if row["busy"]:
            self._restart_at = time.monotonic() + self._restart_retry
            self._restart_retry = min(2 * self._restart_retry, _WAL_RESTART_RETRY[1])
        else:
            self._restart_at, self._restart_retry = 0.0, _WAL_RESTART_RETRY[0]
        return row

    def peek(self) -> SQLiteTx:
        """Queries outside a transaction: each one statement, for cheap single reads."""
        return SQLiteTx(_Translating(self.conn, self.path))

    def file_size(self) -> int:
        """Bytes on disk: the database file and its write-ahead log."""
        return sum(os.path.getsize(path) for path in (self.path, f"{self.path}-wal")
                   if os.path.exists(path))

    def vacuum(self) -> None:
        """Rebuild the file without its free pages, and empty the write-ahead log.

        VACUUM holds the write lock while it copies the whole database: writers wait meanwhile.
        """
        with self._write_lock:
            try:
                self.conn.execute("VACUUM")
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
    def now(self) -> datetime:
        """The clock deadlines are compared with: this host's, the only one using the file."""
        return clock.now()

    def fit_connections(self, threads: int) -> None:
        """Each thread opens its own connection when it first reads: nothing to size."""

    def listen(self) -> None:
        """Nothing to listen to: the commits of this process wake its slots in-process, and
        those of other processes on the host are noticed through `data_version`."""
        return None

    def data_version(self) -> int:
        """Changes whenever anything is committed, by this process or another, since this
        thread last asked: a cheap way to notice new work."""
        try:
            return self.conn.execute("PRAGMA data_version").fetchone()["data_version"]
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc


class _Translating:
    """A connection whose errors leave as wfctl's (what `write` and `read` do for a whole
    transaction, done per statement for reads outside one)."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self._path = path

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise translate(exc, self._path) from exc


def keep_run_extras(run: Row | None, keys: dict[str, int], seqs: dict[str, int],
                    without_task: set[str] | None) -> Row | None:
    """The run row read with `_GET_RUN`, less what came with it: its instance's history key and
    last seq go into a transaction's caches (`keys`, `seqs`: what it knew already stays), and,
    in a write transaction (`without_task` given), that the run has no open workflow task, so
    that `open_workflow_task` need not ask (inserting one for the run forgets it)."""
    if run is not None:
        key, seq, task = run.pop("_instance_key"), run.pop("_last_seq"), run.pop("_open_task")
        if key is not None:
            keys.setdefault(run["workflow_instance_id"], key)
            seqs.setdefault(run["workflow_instance_id"], seq)
        if without_task is not None and task is None:
            without_task.add(run["workflow_run_id"])
    return run


def run_with_extras(placeholder: str) -> str:
    """The query of one run row with what `keep_run_extras` keeps, in both SQL dialects (their
    placeholders differ)."""
    return (
        "SELECT r.*, i.instance_key AS _instance_key, (SELECT coalesce(max(seq), 0) FROM events "
        "WHERE instance_key = i.instance_key) AS _last_seq, (SELECT t.task_id FROM "
        f"workflow_tasks t WHERE t.workflow_run_id = r.workflow_run_id AND t.status IN "
        f"{_OPEN_WORKFLOW_TASK} LIMIT 1) AS _open_task FROM runs r "
        "LEFT JOIN instances i ON i.workflow_instance_id = r.workflow_instance_id "
        f"WHERE r.workflow_run_id = {placeholder}"
    )


_GET_RUN = run_with_extras("?")


class SQLiteTx:
    """The queries of one transaction."""

    def __init__(self, conn: sqlite3.Connection | _Translating, *, writing: bool = False) -> None:
        self.conn = conn
        self._seq: dict[str, int] = {}
        self._keys: dict[str, int] = {}
        # In a write transaction: runs read without an open workflow task (`keep_run_extras`).
        self._without_task: set[str] | None = set() if writing else None
        # Events appended in this transaction, written in one executemany before any read of
        # the history and at commit.
        self._events: list[tuple[Any, ...]] = []
        # Timeout and deadline events appended, by (type, timeout kind, failure category), for
        # the counts metrics read (written with the events).
        self._timeout_counts: dict[tuple[str, str, str], int] = {}

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else self._typed(sql, [row])[0]

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        rows = self.conn.execute(sql, params).fetchall()
        return self._typed(sql, rows) if rows else rows

    @staticmethod
    def _typed(sql: str, rows: list[Row]) -> list[Row]:
        """Rows of stored values as Python values (store/columns.py)."""
        plan = _PLANS.get(sql)
        if plan is None:
            plan = columns.read_plan(rows[0], instant)
            if len(_PLANS) < 1_000:
                _PLANS[sql] = plan
        if plan:
            for row in rows:
                columns.read(row, plan)
        return rows

    def _insert(self, table: str, row: Row) -> int:
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cursor = self.conn.execute(
            f"INSERT INTO {table} ({names}) VALUES ({marks})",
            _stored(row),
        )
        return cursor.lastrowid or 0

    def _update(self, table: str, key: str, value: Any, fields: Row,
                where: str = "", params: Sequence[Any] = ()) -> int:
        sets = ", ".join(f"{name} = ?" for name in fields)
        cursor = self.conn.execute(
            f"UPDATE {table} SET {sets} WHERE {key} = ?{where}",
            (*_stored(fields), value, *params),
        )
        return cursor.rowcount

    # definitions

    def put_definitions(self, digest: str, path: str, source: str, now: datetime) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO definitions (digest, path, source, created_at) "
            "VALUES (?, ?, ?, ?)", (digest, path, source, text(now)),
        )

    def get_definitions(self, digest: str) -> Row | None:
        return self._one("SELECT * FROM definitions WHERE digest = ?", (digest,))

    # instances and runs

    def get_instance(self, instance_id: str) -> Row | None:
        return self._one(
            "SELECT * FROM instances WHERE workflow_instance_id = ?", (instance_id,)
        )

    def insert_instance(self, row: Row) -> None:
        key = self._one("SELECT coalesce(max(instance_key), 0) + 1 AS key FROM instances")["key"]
        self._insert("instances", {**row, "instance_key": key})
        self._keys[row["workflow_instance_id"]] = key

    def update_instance(self, instance_id: str, **fields: Any) -> None:
        self._update("instances", "workflow_instance_id", instance_id, fields)

    def _instance_filter(self, status: str | None, workflow_type: str | None,
                         since: datetime | None) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if status:
            clauses.append("i.status = ?")
            params.append(status)
        if workflow_type:
            clauses.append("i.workflow_type = ?")
            params.append(workflow_type)
        if since:
            clauses.append("i.created_at >= ?")
            params.append(text(since))
        return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params

    def list_instances(self, *, status: str | None, workflow_type: str | None,
                       since: datetime | None, limit: int,
                       before: tuple[datetime, str] | None = None) -> list[Row]:
        where, params = self._instance_filter(status, workflow_type, since)
        if before is not None:
            # The rows after (older than) the one named, through the created_at index; one
            # since deleted names its instant alone.
            where += (" AND " if where else "WHERE ") + \
                "(i.created_at, i.rowid) < (?, coalesce((SELECT rowid FROM instances " \
                "WHERE workflow_instance_id = ?), 0))"
            params += [text(before[0]), before[1]]
        return self._all(
            "SELECT i.*, r.run_number, r.execution_deadline_at, r.run_deadline_at, "
            "r.step_index, r.wait_kind FROM instances i "
            f"JOIN runs r ON r.workflow_run_id = i.current_run_id {where} "
            "ORDER BY i.created_at DESC, i.rowid DESC LIMIT ?", (*params, limit),
        )

    def count_instances(self, *, status: str | None, workflow_type: str | None,
                        since: datetime | None) -> int:
        where, params = self._instance_filter(status, workflow_type, since)
        return self._one(f"SELECT count(*) AS n FROM instances i {where}", params)["n"]

    def open_deadlines(self, run_ids: Sequence[str]) -> list[Row]:
        ids = "(" + ", ".join("?" * len(run_ids)) + ")"
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
            (*run_ids,) * 6,
        )

    def instance_ids(self, prefix: str, limit: int) -> list[str]:
        # A range on the primary key reads only the matches; `LIKE` cannot use the index and scanned
        # every instance. Ids come in key order: taking the newest first would need every match.
        upper = _prefix_upper_bound(prefix)
        where, params = "workflow_instance_id >= ?", [prefix]
        if upper is not None:
            where += " AND workflow_instance_id < ?"
            params.append(upper)
        rows = self._all(
            f"SELECT workflow_instance_id FROM instances WHERE {where} "
            "ORDER BY workflow_instance_id LIMIT ?",
            (*params, limit),
        )
        return [row["workflow_instance_id"] for row in rows]

    def hold(self, instance_id: str) -> None:
        """The write transaction holds the whole file already."""

    def get_run(self, run_id: str) -> Row | None:
        """The run row; its instance's history key and last seq come along in the same
        statement, since a transaction that reads a run mostly appends to its history."""
        return keep_run_extras(self._one(_GET_RUN, (run_id,)), self._keys, self._seq,
                               self._without_task)

    def get_run_by_number(self, instance_id: str, run_number: int) -> Row | None:
        return self._one(
            "SELECT * FROM runs WHERE workflow_instance_id = ? AND run_number = ?",
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
            row = self._one("SELECT instance_key FROM instances WHERE workflow_instance_id = ?",
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
                # The key and the last seq in one statement: both are read once per transaction.
                row = self._one(
                    "SELECT i.instance_key, (SELECT coalesce(max(seq), 0) FROM events "
                    "WHERE instance_key = i.instance_key) AS seq FROM instances i "
                    "WHERE i.workflow_instance_id = ?", (instance_id,),
                )
                if row is None:
                    return 0
                self._keys[instance_id] = row["instance_key"]
                seq = row["seq"]
            else:
                seq = self._one(
                    "SELECT coalesce(max(seq), 0) AS seq FROM events WHERE instance_key = ?",
                    (key,),
                )["seq"]
            self._seq[instance_id] = seq
        return seq

    def append_event(self, run: Row, event_type: str, at: datetime, attributes: Row) -> int:
        """Append one event to the instance's history; returns its seq (the event id)."""
        instance_id = run["workflow_instance_id"]
        seq = self._seq[instance_id] = self.last_seq(instance_id) + 1
        stored_at = codec.micros(at)
        self._events.append((self._keys[instance_id], seq, run["run_number"],
                             codec.type_code(event_type), stored_at,
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
            self.conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", events)
        if self._timeout_counts:
            counts, self._timeout_counts = self._timeout_counts, {}
            self.conn.executemany(
                "INSERT INTO timeout_event_counts (event_type, timeout_kind, failure_category, "
                "count) VALUES (?, ?, ?, ?) ON CONFLICT (event_type, timeout_kind, "
                "failure_category) DO UPDATE SET count = count + excluded.count",
                [(*key, count) for key, count in counts.items()],
            )

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
        type's name, its instant and its attributes as a dict."""
        self.flush()
        sql = ("SELECT seq, run_number, event_type, at, attributes FROM events "
               "WHERE instance_key = ? AND seq > ?")
        params: list[Any] = [self.instance_key(instance_id), after_seq]
        if until_seq is not None:
            sql += " AND seq <= ?"
            params.append(until_seq)
        if run_number is not None:
            sql += " AND run_number = ?"
            params.append(run_number)
        if event_types:
            sql += f" AND event_type IN ({', '.join('?' for _ in event_types)})"
            params.extend(codec.type_code(name) for name in event_types)
        return [
            {
                "workflow_instance_id": instance_id,
                "seq": row["seq"],
                "run_number": row["run_number"],
                "event_type": codec.type_name(row["event_type"]),
                "at": codec.instant(row["at"]),
                "attributes": codec.decode_attributes(row["attributes"], row["at"]),
            }
            # History's own encoding (codec.py), not the columns' of other tables.
            for row in self.conn.execute(sql + " ORDER BY seq", params).fetchall()
        ]

    # workflow tasks

    def open_workflow_task(self, run_id: str) -> Row | None:
        if self._without_task is not None and run_id in self._without_task:
            return None
        return self._one(
            "SELECT * FROM workflow_tasks WHERE workflow_run_id = ? "
            f"AND status IN {_OPEN_WORKFLOW_TASK}", (run_id,),
        )

    def insert_workflow_task(self, row: Row) -> int:
        if self._without_task is not None:
            self._without_task.discard(row["workflow_run_id"])
        return self._insert("workflow_tasks", row)

    def get_workflow_task(self, task_id: int) -> Row | None:
        return self._one("SELECT * FROM workflow_tasks WHERE task_id = ?", (task_id,))

    def update_workflow_task(self, task_id: int, *, expect_status: str | None = None,
                             **fields: Any) -> bool:
        where, params = ("", ()) if expect_status is None else (" AND status = ?",
                                                                (expect_status,))
        return self._update("workflow_tasks", "task_id", task_id, fields, where, params) == 1

    def next_ready_workflow_task(self, now: datetime) -> Row | None:
        return self._one(
            "SELECT * FROM workflow_tasks WHERE status = 'scheduled' AND available_at <= ? "
            "ORDER BY available_at LIMIT 1", (text(now),),
        )

    def close_workflow_task(self, task_id: int) -> None:
        """A workflow task ended (completed, timed out or cancelled): its row goes, its story
        stays in history."""
        self.conn.execute("DELETE FROM workflow_tasks WHERE task_id = ?", (task_id,))

    def close_workflow_tasks(self, run_id: str, keep: int | None) -> None:
        """End every open workflow task of the run but `keep`."""
        self.conn.execute(
            f"DELETE FROM workflow_tasks WHERE workflow_run_id = ? AND status IN "
            f"{_OPEN_WORKFLOW_TASK} AND task_id IS NOT ?", (run_id, keep),
        )

    def timed_out_workflow_tasks(self, now: datetime, limit: int) -> list[Row]:
        return self._all(
            "SELECT * FROM workflow_tasks WHERE status = 'started' AND timeout_at IS NOT NULL "
            "AND timeout_at <= ? ORDER BY timeout_at LIMIT ?", (text(now), limit),
        )

    def workflow_tasks_owned_by(self, worker_ids: Sequence[str]) -> list[Row]:
        marks = ", ".join("?" for _ in worker_ids)
        return self._all(
            f"SELECT * FROM workflow_tasks WHERE status = 'started' AND owner IN ({marks})",
            tuple(worker_ids),
        )

    # activities

    def insert_activity(self, row: Row) -> None:
        self._insert("activities", row)

    def get_activity(self, activity_id: str) -> Row | None:
        return self._one("SELECT * FROM activities WHERE activity_id = ?", (activity_id,))

    def update_activity(self, activity_id: str, *, expect_attempt: int | None = None,
                        expect_status: Iterable[str] = (), **fields: Any) -> bool:
        where, params = "", []
        if expect_attempt is not None:
            where += " AND attempt = ?"
            params.append(expect_attempt)
        statuses = tuple(expect_status)
        if statuses:
            where += f" AND status IN ({', '.join('?' for _ in statuses)})"
            params.extend(statuses)
        return self._update("activities", "activity_id", activity_id, fields, where,
                            params) == 1

    def step_activities(self, run_id: str, step_index: int) -> list[Row]:
        return self._all(
            "SELECT * FROM activities WHERE workflow_run_id = ? AND step_index = ? "
            "AND superseded = 0 ORDER BY branch_index", (run_id, step_index),
        )

    def run_activities(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM activities WHERE workflow_run_id = ? ORDER BY scheduled_at, rowid",
            (run_id,),
        )

    def open_activities(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM activities WHERE workflow_run_id = ? "
            f"AND status IN {_OPEN_ACTIVITY}", (run_id,),
        )

    def count_open_activities(self, run_id: str) -> int:
        return self._one(
            "SELECT count(*) AS n FROM activities WHERE workflow_run_id = ? "
            f"AND status IN {_OPEN_ACTIVITY}", (run_id,),
        )["n"]

    def next_ready_activity(self, queues: Sequence[str], now: datetime) -> Row | None:
        """The oldest activity ready on these queues whose schedule deadlines still hold."""
        best, at = None, text(now)
        for queue in queues:
            row = self._one(
                "SELECT * FROM activities WHERE queue = ? "
                f"AND status IN {_PENDING_ACTIVITY} AND available_at <= ? "
                "AND (schedule_deadline_at IS NULL OR schedule_deadline_at > ?) "
                "AND (schedule_to_close_deadline_at IS NULL OR schedule_to_close_deadline_at > ?) "
                "ORDER BY available_at LIMIT 1", (queue, at, at, at),
            )
            if row is not None and (best is None or row["available_at"] < best["available_at"]):
                best = row
        return best

    def next_activity_available_at(self, queues: Sequence[str]) -> datetime | None:
        marks = ", ".join("?" for _ in queues)
        return self._one(
            f"SELECT min(available_at) AS at FROM activities WHERE queue IN ({marks}) "
            f"AND status IN {_PENDING_ACTIVITY}", tuple(queues),
        )["at"]

    def expired_activities(self, now: datetime, limit: int) -> list[Row]:
        """Open activities past any of their four deadlines, found through the partial indexes."""
        return self._all(
            "SELECT * FROM activities WHERE activity_id IN ("
            f"SELECT activity_id FROM activities WHERE status IN {_PENDING_ACTIVITY}"
            " AND schedule_deadline_at IS NOT NULL AND schedule_deadline_at <= ?1"
            " UNION SELECT activity_id FROM activities WHERE status = 'started'"
            " AND close_deadline_at IS NOT NULL AND close_deadline_at <= ?1"
            " UNION SELECT activity_id FROM activities WHERE status = 'started'"
            " AND heartbeat_deadline_at IS NOT NULL AND heartbeat_deadline_at <= ?1"
            " UNION SELECT activity_id FROM activities"
            f" WHERE status IN {_OPEN_ACTIVITY}"
            " AND schedule_to_close_deadline_at IS NOT NULL"
            " AND schedule_to_close_deadline_at <= ?1) LIMIT ?2", (text(now), limit),
        )

    def activities_owned_by(self, worker_ids: Sequence[str]) -> list[Row]:
        marks = ", ".join("?" for _ in worker_ids)
        return self._all(
            f"SELECT * FROM activities WHERE status = 'started' AND owner IN ({marks})",
            tuple(worker_ids),
        )

    # timers

    def insert_timer(self, row: Row) -> None:
        self._insert("timers", row)

    def update_timer(self, timer_id: str, *, expect_status: str | None = None,
                     **fields: Any) -> bool:
        where, params = ("", ()) if expect_status is None else (" AND status = ?",
                                                                (expect_status,))
        return self._update("timers", "timer_id", timer_id, fields, where, params) == 1

    def step_timers(self, run_id: str, step_index: int) -> list[Row]:
        return self._all(
            "SELECT * FROM timers WHERE workflow_run_id = ? AND step_index = ? "
            "AND superseded = 0", (run_id, step_index),
        )

    def run_timers(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM timers WHERE workflow_run_id = ? ORDER BY rowid", (run_id,)
        )

    def open_timers(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT * FROM timers WHERE workflow_run_id = ? AND status = 'scheduled'", (run_id,)
        )

    def due_timers(self, now: datetime, limit: int,
                   after: tuple[datetime, str] | None = None) -> list[Row]:
        if after is None:
            return self._all(
                "SELECT * FROM timers WHERE status = 'scheduled' AND fire_at <= ? "
                "ORDER BY fire_at LIMIT ?", (text(now), limit),
            )
        # The index on fire_at holds its rows in (fire_at, rowid) order: a page goes on from
        # the last timer of the one before.
        return self._all(
            "SELECT * FROM timers WHERE status = 'scheduled' AND fire_at <= ? AND fire_at >= ? "
            "AND (fire_at, rowid) > (?, (SELECT rowid FROM timers WHERE timer_id = ?)) "
            "ORDER BY fire_at LIMIT ?",
            (text(now), text(after[0]), text(after[0]), after[1], limit),
        )

    # signals

    def insert_signal(self, row: Row) -> None:
        self._insert("signals", row)

    def first_pending_signal(self, instance_id: str, name: str) -> Row | None:
        return self._one(
            "SELECT * FROM signals WHERE workflow_instance_id = ? AND name = ? "
            "AND consumed_at IS NULL ORDER BY signal_id LIMIT 1", (instance_id, name),
        )

    def pending_signals(self, instance_id: str) -> list[Row]:
        return self._all(
            "SELECT name, received_at FROM signals WHERE workflow_instance_id = ? "
            "AND consumed_at IS NULL ORDER BY signal_id", (instance_id,),
        )

    def count_pending_signals(self, instance_id: str) -> int:
        return self._one(
            "SELECT count(*) AS n FROM signals WHERE workflow_instance_id = ? "
            "AND consumed_at IS NULL", (instance_id,),
        )["n"]

    def consume_signal(self, signal_id: int, run_id: str, step_index: int, now: datetime) -> None:
        self.conn.execute(
            "UPDATE signals SET consumed_run_id = ?, consumed_step_index = ?, consumed_at = ? "
            "WHERE signal_id = ?", (run_id, step_index, text(now), signal_id),
        )

    def consumed_signal(self, run_id: str, step_index: int) -> Row | None:
        return self._one(
            "SELECT * FROM signals WHERE consumed_run_id = ? AND consumed_step_index = ? "
            "ORDER BY signal_id DESC LIMIT 1", (run_id, step_index),
        )

    # children

    def insert_child(self, row: Row) -> None:
        self._insert("children", row)

    def child_link(self, child_instance_id: str) -> Row | None:
        return self._one(
            "SELECT * FROM children WHERE child_instance_id = ?", (child_instance_id,)
        )

    def step_children(self, run_id: str, step_index: int) -> list[Row]:
        return self._all(
            "SELECT c.*, i.status FROM children c JOIN instances i "
            "ON i.workflow_instance_id = c.child_instance_id "
            "WHERE c.parent_run_id = ? AND c.step_index = ? AND c.superseded = 0 "
            "ORDER BY c.branch_index", (run_id, step_index),
        )

    def run_children(self, run_id: str) -> list[Row]:
        return self._all(
            "SELECT c.*, i.status, i.closed_at FROM children c JOIN instances i "
            "ON i.workflow_instance_id = c.child_instance_id WHERE c.parent_run_id = ? "
            "ORDER BY c.created_at, c.rowid", (run_id,),
        )

    def supersede_child(self, child_instance_id: str) -> None:
        self.conn.execute("UPDATE children SET superseded = 1 WHERE child_instance_id = ?",
                          (child_instance_id,))

    def supersede_children(self, run_id: str, step_index: int) -> None:
        self.conn.execute(
            "UPDATE children SET superseded = 1 WHERE parent_run_id = ? AND step_index = ? "
            "AND child_instance_id IN (SELECT workflow_instance_id FROM instances "
            f"WHERE status IN {_UNSUCCESSFUL_RUN})",
            (run_id, step_index),
        )

    # failures

    def insert_failure(self, row: Row) -> int:
        return self._insert("failures", row)

    def get_failure(self, failure_id: int) -> Row | None:
        return self._one("SELECT * FROM failures WHERE failure_id = ?", (failure_id,))

    def activity_failure(self, activity_id: str) -> Row | None:
        return self._one(
            "SELECT * FROM failures WHERE activity_id = ? ORDER BY failure_id DESC LIMIT 1",
            (activity_id,),
        )

    # deadlines (must complete within)

    def expired_deadlines(self, now: datetime, limit: int) -> list[Row]:
        return self._all(
            "SELECT * FROM runs WHERE status = 'running' AND deadline_at IS NOT NULL "
            "AND deadline_claimed_at IS NULL AND deadline_at <= ? ORDER BY deadline_at LIMIT ?",
            (text(now), limit),
        )

    def earliest_deadline(self) -> datetime | None:
        return self._one(
            "SELECT min(deadline_at) AS at FROM runs WHERE status = 'running' "
            "AND deadline_at IS NOT NULL AND deadline_claimed_at IS NULL"
        )["at"]

    def claimed_deadlines(self) -> list[Row]:
        return self._all(
            "SELECT * FROM runs WHERE deadline_claimed_at IS NOT NULL AND closed_at IS NULL"
        )

    def claim_deadline(self, run_id: str, worker_id: str, now: datetime,
                       previous_owner: str | None) -> bool:
        cursor = self.conn.execute(
            "UPDATE runs SET deadline_claimed_by = ?, deadline_claimed_at = ? "
            "WHERE workflow_run_id = ? AND closed_at IS NULL AND deadline_claimed_by IS ?",
            (worker_id, text(now), run_id, previous_owner),
        )
        return cursor.rowcount == 1

    # workflow timeouts

    def runs_past_deadline_without_task(self, now: datetime, limit: int) -> list[Row]:
        return self._all(
            "SELECT * FROM runs WHERE workflow_run_id IN ("
            "SELECT workflow_run_id FROM runs WHERE closed_at IS NULL"
            " AND execution_deadline_at IS NOT NULL AND execution_deadline_at <= ?1"
            " UNION SELECT workflow_run_id FROM runs WHERE closed_at IS NULL"
            " AND run_deadline_at IS NOT NULL AND run_deadline_at <= ?1) "
            f"{_RUN_NEEDS_WAKING} LIMIT ?2", (text(now), limit),
        )

    def next_due(self, now: datetime) -> datetime | None:
        """The earliest instant at which the watchdog has something to do.

        A run past its deadline counts only while the watchdog can act on it (no open workflow
        task, no claimed deadline); otherwise the watchdog would wake again at once, forever.
        """
        row = self._one(
            "SELECT min(at) AS at FROM ("
            "SELECT min(execution_deadline_at) AS at FROM runs WHERE closed_at IS NULL"
            " AND execution_deadline_at IS NOT NULL AND execution_deadline_at > ?1"
            " UNION ALL SELECT min(run_deadline_at) FROM runs WHERE closed_at IS NULL"
            " AND run_deadline_at IS NOT NULL AND run_deadline_at > ?1"
            " UNION ALL SELECT min(execution_deadline_at) FROM runs WHERE closed_at IS NULL"
            f" AND execution_deadline_at IS NOT NULL AND execution_deadline_at <= ?1 {_RUN_NEEDS_WAKING}"
            " UNION ALL SELECT min(run_deadline_at) FROM runs WHERE closed_at IS NULL"
            f" AND run_deadline_at IS NOT NULL AND run_deadline_at <= ?1 {_RUN_NEEDS_WAKING}"
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
            " AND schedule_to_close_deadline_at IS NOT NULL)", (text(now),),
        )
        return row["at"]

    # retention

    def prunable_instances(self, now: datetime, *, closed_before: datetime | None,
                           limit: int) -> list[Row]:
        """Closed instances past their retention (with `closed_before`: closed before it,
        whatever their retention), first due first, each with how many events its history
        holds; none whose parent is still open."""
        if closed_before is None:
            where, params = "i.retain_until IS NOT NULL AND i.retain_until <= ?", [text(now)]
            order = "i.retain_until"
        else:
            where, params = "i.closed_at IS NOT NULL AND i.closed_at <= ?", [text(closed_before)]
            order = "i.closed_at"
        return self._all(
            "SELECT i.workflow_instance_id, (SELECT coalesce(max(e.seq), 0) FROM events e "
            "WHERE e.instance_key = i.instance_key) AS events FROM instances i "
            f"WHERE {where} AND {_PRUNABLE} ORDER BY {order} LIMIT ?", (*params, limit),
        )

    def next_retain_until(self, now: datetime) -> datetime | None:
        """When the next closed instance's retention runs out, after `now`."""
        return self._one(
            "SELECT min(retain_until) AS at FROM instances WHERE retain_until IS NOT NULL "
            "AND retain_until > ?", (text(now),),
        )["at"]

    def delete_instances(self, instance_ids: Sequence[str]) -> dict[str, int]:
        """Delete these instances with every row they own; how many rows, by table."""
        deleted: dict[str, int] = {}
        for table, where, params in self._owned(instance_ids):
            cursor = self.conn.execute(f"DELETE FROM {table} WHERE {where}", params)
            deleted[table] = deleted.get(table, 0) + cursor.rowcount
        return deleted

    def mark_pruning(self, instance_id: str, now: datetime) -> None:
        """Mark an instance as being deleted over several transactions (`delete_instance_part`):
        from now on its history may be deleted, and readers see it no more."""
        self.conn.execute(
            "INSERT INTO pruning (workflow_instance_id, instance_key, started_at) "
            "SELECT workflow_instance_id, instance_key, ? FROM instances "
            "WHERE workflow_instance_id = ?", (text(now), instance_id),
        )

    def pruning_instance(self) -> str | None:
        """The instance whose deletion over several transactions is under way, if any."""
        row = self._one("SELECT workflow_instance_id FROM pruning ORDER BY started_at LIMIT 1")
        return row["workflow_instance_id"] if row else None

    def is_pruning(self, instance_id: str) -> bool:
        return self._one("SELECT 1 AS marked FROM pruning WHERE workflow_instance_id = ?",
                         (instance_id,)) is not None

    def delete_instance_part(self, instance_id: str, limit: int) -> dict[str, int]:
        """Delete up to `limit` rows a marked instance owns, table by table in the order
        `delete_instances` keeps; once nothing else is left, its mark and the instance itself
        (then `instances` is 1). How many rows, by table."""
        deleted: dict[str, int] = {}
        left = limit
        for table, where, params in self._owned([instance_id]):
            if table == "instances":
                continue
            key = "seq" if table == "events" else "rowid"
            # Events are keyed by (instance, seq): the instance's first `left` of them.
            scope = f"{where} AND " if table == "events" else ""
            cursor = self.conn.execute(
                f"DELETE FROM {table} WHERE {scope}{key} IN "
                f"(SELECT {key} FROM {table} WHERE {where} LIMIT ?)",
                (*(params if scope else ()), *params, left),
            )
            deleted[table] = deleted.get(table, 0) + cursor.rowcount
            left -= cursor.rowcount
            if left <= 0:
                return deleted
        self.conn.execute("DELETE FROM pruning WHERE workflow_instance_id = ?", (instance_id,))
        deleted["instances"] = self.conn.execute(
            "DELETE FROM instances WHERE workflow_instance_id = ?", (instance_id,)).rowcount
        return deleted

    def count_owned_rows(self, instance_ids: Sequence[str]) -> dict[str, int]:
        """How many rows `delete_instances` would delete, by table."""
        counted: dict[str, int] = {}
        owned = self._owned(instance_ids)
        for table, where, params in owned:
            if table == "children":
                continue
            counted[table] = self._one(f"SELECT count(*) AS n FROM {table} WHERE {where}",
                                       params)["n"]
        # A link between two instances both deleted is one row, counted once.
        (_, parents, runs), (_, children, ids) = owned[0], owned[1]
        counted["children"] = self._one(
            f"SELECT count(*) AS n FROM children WHERE {parents} OR {children}", (*runs, *ids)
        )["n"]
        return counted

    def _owned(self, instance_ids: Sequence[str]) -> list[tuple[str, str, tuple[Any, ...]]]:
        ids = ", ".join("?" for _ in instance_ids)
        runs = f"SELECT workflow_run_id FROM runs WHERE workflow_instance_id IN ({ids})"
        # History is keyed by the instance's integer key, read before the instance row goes.
        keys = tuple(row["instance_key"] for row in self._all(
            f"SELECT instance_key FROM instances WHERE workflow_instance_id IN ({ids})",
            tuple(instance_ids)))
        owned = []
        for table, where in _OWNED:
            if "{keys}" in where:
                owned.append((table, where.format(keys=", ".join("?" for _ in keys) or "NULL"),
                               keys))
            else:
                owned.append((table, where.format(ids=ids, runs=runs), tuple(instance_ids)))
        return owned

    # workers

    def register_worker(self, row: Row) -> None:
        self._insert("workers", row)

    def renew_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> bool:
        cursor = self.conn.execute(
            "UPDATE workers SET heartbeat_at = ?, lease_expires_at = ? "
            "WHERE worker_id = ? AND stopped_at IS NULL",
            (text(now), text(lease_expires_at), worker_id),
        )
        return cursor.rowcount == 1

    def revive_worker(self, worker_id: str, now: datetime, lease_expires_at: datetime) -> None:
        self.conn.execute(
            "UPDATE workers SET heartbeat_at = ?, lease_expires_at = ?, stopped_at = NULL "
            "WHERE worker_id = ?", (text(now), text(lease_expires_at), worker_id),
        )

    def stop_worker(self, worker_id: str, now: datetime) -> None:
        self.conn.execute(
            "UPDATE workers SET stopped_at = ? WHERE worker_id = ? AND stopped_at IS NULL",
            (text(now), worker_id),
        )

    def live_workers(self) -> list[Row]:
        return self._all("SELECT * FROM workers WHERE stopped_at IS NULL")

    def get_worker(self, worker_id: str) -> Row | None:
        return self._one("SELECT * FROM workers WHERE worker_id = ?", (worker_id,))

    # metrics (SPEC §10): each read is a count the triggers keep, an index range or an index's
    # minimum

    def instance_counts(self) -> list[Row]:
        """Instances by type and status, as the triggers on `instances` keep them."""
        return self._all("SELECT workflow_type, status, count FROM instance_counts "
                         "ORDER BY workflow_type, status")

    def open_activity_counts(self) -> list[Row]:
        return self._all(
            f"SELECT queue, status, count(*) AS count FROM activities WHERE {_ANY_OPEN_ACTIVITY} "
            "GROUP BY queue, status"
        )

    def ready_activity_counts(self, now: datetime) -> list[Row]:
        """Per queue, the activities a worker may claim at `now` and the oldest available_at."""
        return self._all(
            "SELECT queue, count(*) AS count, min(available_at) AS oldest FROM activities "
            f"WHERE status IN {_PENDING_ACTIVITY} AND available_at <= ? GROUP BY queue",
            (text(now),),
        )

    def ready_workflow_task_count(self, now: datetime) -> Row:
        return self._one(
            "SELECT count(*) AS count, min(available_at) AS oldest FROM workflow_tasks "
            "WHERE status = 'scheduled' AND available_at <= ?", (text(now),),
        )

    def timeout_event_counts(self) -> list[Row]:
        """The history events that may record a timeout or a deadline expiry (TIMEOUT_EVENTS),
        by type, timeout kind and failure category (None where the event has none), as the
        trigger on `events` counts them."""
        return self._all(
            "SELECT event_type, nullif(timeout_kind, '') AS timeout_kind, "
            "nullif(failure_category, '') AS failure_category, count FROM timeout_event_counts"
        )

    def next_deadlines(self) -> Row:
        """The earliest pending deadline of each kind (None where none is pending): what the
        watchdog and the deadline runner act on next."""
        row = self._one(
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
        return {kind: instant(at) for kind, at in row.items()}
