"""The SQLite store: connections, transactions, the write-ahead log's upkeep, and what its SQL
spells its own way (the queries themselves are queries.py's)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import operator
import os
import re
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
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
from wfctl.store import columns, kept, records
from wfctl.store.queries import (
    GET_RUN,
    PENDING_ACTIVITY_SQL,
    TASK_COLUMNS,
    WAITING_DEADLINES_HOLD,
    RunRead,
    SQLTx,
    _update_statement,
    insert_statement,
    keep_run_extras,
)
from wfctl.store.records import Activity, Run, WorkflowTask
from wfctl.store.schema import MIGRATION_SET, MIGRATIONS_TABLE, migrations

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


# Python's sqlite3 binds an int, float or str parameter as it is, but looks for an adapter for
# any other, None included: the protocol's `__adapt__` is looked up and missed, an AttributeError
# made and discarded, about 0.4 µs a NULL (a step binds dozens). An adapter registered for None
# is found by one lookup; `{}.get` gives None back with no Python frame. Process-wide, and the
# same value bound: what any other sqlite3 user in the process binds is unchanged.
sqlite3.register_adapter(type(None), {}.get)

_NAME = operator.itemgetter(0)


def _rows_as_dicts(cursor: sqlite3.Cursor, row: tuple) -> Row:
    return dict(zip(map(_NAME, cursor.description), row, strict=True))


def text(instant: datetime) -> str:
    """An instant as the file stores it: ISO 8601 UTC text with milliseconds, and three more
    digits only when it has microseconds within its millisecond (`2026-04-12T12:00:00.123+00:00`,
    `…00.123456+00:00`). One instant has one text, and text order is time order: the digits of
    the longer form sort after the `+` of the shorter. Files of 0.1 hold the first form only."""
    return _texts[instant]


class _Texts(dict[datetime, str]):
    """The texts of the instants `text` made last, by instant (equal instants have one text):
    most of a transaction's instants are its `now` and the deadlines it sets, equal again for
    each step of a batch (each step's next attempt gets a `close_deadline_at`, an equal datetime
    made anew), and finding one here is a lookup (`_texts[instant]`, no Python call), where
    formatting it takes several times as long."""

    def __missing__(self, instant: datetime) -> str:
        moment = instant if instant.tzinfo is UTC else instant.astimezone(UTC)
        made = moment.isoformat(
            timespec="milliseconds" if moment.microsecond % 1000 == 0 else "microseconds")
        if len(self) >= _TEXTS_KEPT:
            self.clear()
        self[instant] = made
        return made


_texts = _Texts()
_TEXTS_KEPT = 256


def instant(stored: str | None) -> datetime | None:
    """An instant stored by `text` (or by 0.1), as an aware UTC datetime."""
    return None if stored is None else datetime.fromisoformat(stored)


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
    """Whether this process may write the file at `path` (True when there is none yet).

    Asked of the file's modes, never by opening it: on POSIX, closing any descriptor of a file
    drops every lock the process holds on it, those of its SQLite connections included, and a
    process that holds none may be taken by another for the file's last user, which then
    deletes the write-ahead log that this one still writes to."""
    if not os.path.lexists(path):
        return True
    return os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)


def _put_in_place(made: str, target: str) -> None:
    """Give the file `made` the name `target`, unless something has that name by now."""
    try:
        os.link(made, target)
    except FileExistsError:
        raise DatabaseError(f"{target} exists: a backup is written to a new file only") from None
    except OSError as exc:
        raise DatabaseError(f"cannot write {target}: {exc.strerror or exc}") from None


class SQLiteStore:
    """One SQLite file, shared by every thread and process of wfctl.

    Each thread gets its own connection. Writes in one process go through one lock, so that
    threads of a process queue here instead of in SQLite's sleeping busy handler; processes
    are serialized by `BEGIN IMMEDIATE`.
    """

    # A write transaction holds the whole database: nothing announced would change it.
    takes_announcements = False

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
        self._writer: kept.WriteConnection | None = None
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

    def _open(self, *, check_same_thread: bool = True,
              factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
        return sqlite3.connect(self._uri, uri=True, isolation_level=None,
                               check_same_thread=check_same_thread,
                               cached_statements=_CACHED_STATEMENTS,
                               timeout=_BUSY_TIMEOUT_MS / 1000, factory=factory)

    def _connect(self, factory: type[sqlite3.Connection] = sqlite3.Connection) -> \
            sqlite3.Connection:
        try:
            conn = self._open(check_same_thread=False, factory=factory)
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

    def write(self) -> _Write:
        """A write transaction: BEGIN IMMEDIATE takes the write lock up front.

        SQLite's errors leave as wfctl's (`StoreUnavailable` for busy, full, read-only).
        """
        return _Write(self)

    def _write_failed(self, exc: sqlite3.Error) -> DatabaseError:
        """The error a write that SQLite refused raises."""
        error = translate(exc, self.path)
        if isinstance(error, StoreUnavailable) and error.reason == "readonly" \
                and self._writer is not None:
            # SQLite opened the file read-only, for good: the next write opens it anew.
            self._writer.close()
            self._writer = None
        return error

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

    def _writer_connection(self) -> kept.WriteConnection:
        """The process's write connection (the write lock held), opened on first use."""
        if self._writer is not None and self._writer_generation != self._generation:
            self._writer.close()
            self._writer = None
        if self._writer is None:
            self._writer_generation = self._generation
            writer = self._connect(kept.WriteConnection)
            assert isinstance(writer, kept.WriteConnection)
            try:
                kept.keeping(writer)
            except sqlite3.Error as exc:
                writer.close()
                raise translate(exc, self.path) from None
            self._writer = writer
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

    def backup(self, target: str | Path) -> int:
        """Copy the database, as one consistent snapshot, into a new file at `target` with
        SQLite's online backup, while workers go on writing; returns the copy's size.

        An existing `target` is never overwritten: the copy is made beside it under a
        temporary name and linked into place only where nothing is. A copy made any other
        way (`cp` of the file while its -wal holds commits) can miss them or be inconsistent.
        """
        target = os.path.abspath(os.fspath(target))
        folder = os.path.dirname(target)
        if os.path.lexists(target):
            raise DatabaseError(f"{target} exists: a backup is written to a new file only")
        if not os.path.isdir(folder):
            raise DatabaseError(f"cannot write {target}: {folder}: no such folder")
        try:
            handle, partial = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.",
                                               suffix=".partial", dir=folder)
        except OSError as exc:
            raise DatabaseError(f"cannot write {target}: {exc.strerror or exc}") from None
        os.close(handle)
        try:
            # Readable by whom the database is, not only by its owner (mkstemp's mode).
            os.chmod(partial, stat.S_IMODE(os.stat(self.path).st_mode))
            copy = sqlite3.connect(partial, isolation_level=None)
            try:
                # One step: the whole snapshot under one read transaction of the source.
                self.conn.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")
            finally:
                copy.close()
            _put_in_place(partial, target)
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from None
        finally:
            for leftover in (partial, *(f"{partial}-{end}" for end in ("journal", "wal", "shm"))):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
        return os.path.getsize(target)

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



def native(sql: str) -> str:
    """A statement of queries.py in SQLite's placeholders: `?` for `%s`, `:name` for
    `%(name)s`, and nothing where a backend that locks families may add a condition."""
    return _NAMED.sub(r":\1", sql).replace("%s", "?").replace("{only}", "")


_NAMED = re.compile(r"%\((\w+)\)s")
# Each statement's text in SQLite's placeholders, and the conversions of its results (made at
# its first row): a statement's columns never change.
_STATEMENTS: dict[str, list[Any]] = {}


def _statement(sql: str) -> list[Any]:
    entry = [native(sql), None]
    if len(_STATEMENTS) < 1_000:
        _STATEMENTS[sql] = entry
    return entry


# Prepared statements a connection keeps: the store's queries, and an events INSERT per row count.
_CACHED_STATEMENTS = 512
# History rows one INSERT writes at most (six values each, far below SQLite's limit of 32,766).
_EVENTS_PER_INSERT = 64


@functools.cache
def _events_insert(rows: int) -> str:
    return "INSERT INTO events VALUES " + ", ".join(("(?, ?, ?, ?, ?, ?)",) * rows)


class _Write:
    """`SQLiteStore.write`, as a context manager: a class, since the step path enters one for
    each batch."""

    __slots__ = ("conn", "store", "tx")

    conn: kept.WriteConnection

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def __enter__(self) -> SQLiteTx:
        store = self.store
        store._write_lock.acquire()
        try:
            store._reopen_if_writable()
            self.conn = conn = store._writer_connection()
            conn.execute("BEGIN IMMEDIATE")
            runs = conn.kept
            runs.begin(conn.patched("PRAGMA data_version", ()).fetchone()["data_version"])
            self.tx = SQLiteTx(conn, writing=True, runs=runs)
            return self.tx
        except sqlite3.Error as exc:
            store._write_lock.release()
            raise store._write_failed(exc) from exc
        except BaseException:
            store._write_lock.release()
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        store, conn = self.store, self.conn
        try:
            if kind is None:
                try:
                    self.tx.flush()
                    conn.execute("COMMIT")
                except BaseException:
                    conn.kept.forget()
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                self.tx.keep()
                return
            conn.kept.forget()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(error, sqlite3.Error):
                raise store._write_failed(error) from error
        except sqlite3.Error as exc:
            raise store._write_failed(exc) from exc
        finally:
            store._write_lock.release()


class SQLiteTx(SQLTx):
    """The queries of one transaction on the file."""

    _MARK = "?"
    _IS = "IS"
    _IS_NOT = "IS NOT"
    _INSERTION = "i.rowid"
    # The status of a prunable instance is checked row by row: the index on it would cost a
    # sort of every closed instance.
    _NO_INDEX = "+"
    _NO_LIMIT = -1
    _IN_ORDER = ""
    _at = staticmethod(text)
    _instant = staticmethod(instant)
    # A row's values as the file stores them, and records made from them.
    _stored = columns.Writer(_texts.__getitem__).values
    # Readers convert only what is not NULL: the parse itself, with no call around it.
    _readers = records.Readers(datetime.fromisoformat)

    def __init__(self, conn: sqlite3.Connection | _Translating, *, writing: bool = False,
                 runs: kept.Kept | None = None) -> None:
        super().__init__(writing=writing)
        self.conn = conn
        # In a write transaction, the runs kept since the last one (store/kept.py), and the
        # runs this one read or took from there, each as `GET_RUN` would read it now.
        self._kept = runs
        self._run_rows: dict[str, list[Any]] = {}

    def _execute(self, sql: str, params: Sequence[Any] | Row = ()) -> Any:
        return self.conn.execute((_STATEMENTS.get(sql) or _statement(sql))[0], params)

    def _run(self, sql: str, params: Sequence[Any]) -> Any:
        return self.conn.execute(sql, params)

    def _one(self, sql: str, params: Sequence[Any] | Row = ()) -> Row | None:
        entry = _STATEMENTS.get(sql) or _statement(sql)
        row = self.conn.execute(entry[0], params).fetchone()
        return None if row is None else self._typed(entry, [row])[0]

    def _all(self, sql: str, params: Sequence[Any] | Row = ()) -> list[Row]:
        entry = _STATEMENTS.get(sql) or _statement(sql)
        rows = self.conn.execute(entry[0], params).fetchall()
        return self._typed(entry, rows) if rows else rows

    def _tuples(self, sql: str, params: Sequence[Any] | Row = ()) -> list[Sequence[Any]]:
        cursor = self._execute(sql, params)
        # The values as stored: each record reads them by its fields' declared kinds.
        cursor.row_factory = None
        return cursor.fetchall()

    @staticmethod
    def _typed(entry: list[Any], rows: list[Row]) -> list[Row]:
        """Rows of stored values as Python values (store/columns.py)."""
        plan = entry[1]
        if plan is None:
            plan = entry[1] = columns.read_plan(rows[0], instant)
        if plan:
            for row in rows:
                columns.read(row, plan)
        return rows

    def _insert(self, table: str, row: Row, returning: str | None = None, *,
                patched: bool = False) -> int:
        """`patched`: the caller patches what is kept for this insert (`WriteConnection`)."""
        run = self.conn.patched if patched else self.conn.execute  # type: ignore[union-attr]
        sql = insert_statement(self._MARK, table, tuple(row))
        return run(sql, self._stored(row)).lastrowid or 0

    # runs kept between write transactions (store/kept.py): the statements that change what
    # `GET_RUN` reads, each patching the rows this transaction holds

    def get_run(self, run_id: str) -> Run | None:
        runs = self._kept
        if runs is None or runs.doubt:
            return super().get_run(run_id)
        row = self._run_rows.get(run_id)
        if row is None:
            stored = runs.rows.get(run_id)
            last = None if stored is None else runs.seqs.get(stored[kept.INSTANCE])
            if last is None:
                found = self._tuples(GET_RUN, (run_id,))
                if not found:
                    return None
                row = list(found[0])
            else:
                row = list(stored)
                row[kept.LAST_SEQ], row[kept.LAST_AT] = last
            self._run_rows[run_id] = row
        return keep_run_extras(self._readers[RunRead](row), self._keys, self._seq,
                               self._last_at, self._without_task, self._instance_fields)

    def update_run(self, run_id: str, /, **fields: Any) -> None:
        runs = self._kept
        if runs is None:
            return super().update_run(run_id, **fields)
        names, values = tuple(fields), self._stored(fields)
        self.conn.patched(_update_statement(self._MARK, "runs", "workflow_run_id", names, ""),
                          (*values, run_id))
        row = self._run_rows.get(run_id)
        if row is not None and not runs.patch(row, names, values):
            del self._run_rows[run_id]
            row = None
        if row is None:
            runs.rows.pop(run_id, None)
        return None

    def insert_run(self, row: Row) -> None:
        if self._kept is None:
            return super().insert_run(row)
        # A new run: nothing kept is of it.
        self._insert("runs", row, patched=True)
        return None

    def insert_workflow_task(self, row: Row) -> int:
        runs = self._kept
        if runs is None:
            return super().insert_workflow_task(row)
        run_id = row["workflow_run_id"]
        if self._without_task is not None:
            self._without_task.discard(run_id)
        task_id = self._insert("workflow_tasks", row, patched=True)
        held = self._run_rows.get(run_id)
        if held is not None:
            held[kept.OPEN_TASK] = task_id
        else:
            runs.rows.pop(run_id, None)
        return task_id

    def keep(self) -> None:
        """After the commit: what this transaction read and wrote of runs is kept."""
        if self._kept is not None and self._without_task is not None:
            self._kept.keep(self._run_rows, self._without_task, self._seq, self._last_at)

    def _any(self, column: str, values: Sequence[Any], name: str | None = None) -> \
            tuple[str, Any]:
        # An empty list is spelled (NULL): SQLite plans `IN ()` as a scan of the whole table.
        if name is None:
            return f"{column} IN ({', '.join('?' for _ in values) or 'NULL'})", tuple(values)
        params = {f"{name}{index}": value for index, value in enumerate(values)}
        return f"{column} IN ({', '.join(':' + key for key in params) or 'NULL'})", params

    def _delete_first(self, table: str, where: str, params: Row, limit: int) -> int:
        # Events are keyed by (instance, seq): the instance's first `limit` of them.
        key, scope = ("seq", f"{where} AND ") if table == "events" else ("rowid", "")
        return self._execute(
            f"DELETE FROM {table} WHERE {scope}{key} IN "
            f"(SELECT {key} FROM {table} WHERE {where} LIMIT %(left)s)", {**params, "left": limit},
        ).rowcount

    def insert_instance(self, row: Row) -> None:
        key = self._one("SELECT coalesce(max(instance_key), 0) + 1 AS key FROM instances")["key"]
        self._insert("instances", {**row, "instance_key": key})
        self._keys[row["workflow_instance_id"]] = key

    def flush(self) -> None:
        """Write the events appended so far (one statement for all of them)."""
        if self._open_rows:
            events = self._history_rows()
            conn = self.conn
            insert = conn.patched if isinstance(conn, kept.WriteConnection) else conn.execute
            # One statement for up to _EVENTS_PER_INSERT rows: a statement's own cost, not a
            # row's, is most of what a history row costs to write.
            for start in range(0, len(events), _EVENTS_PER_INSERT):
                chunk = events[start:start + _EVENTS_PER_INSERT]
                # The instances' last seqs are this transaction's own (`keep`).
                insert(_events_insert(len(chunk)), list(itertools.chain.from_iterable(chunk)))
        if self._timeout_counts:
            counts, self._timeout_counts = self._timeout_counts, {}
            self.conn.executemany(
                "INSERT INTO timeout_event_counts (event_type, timeout_kind, failure_category, "
                "count) VALUES (?, ?, ?, ?) ON CONFLICT (event_type, timeout_kind, "
                "failure_category) DO UPDATE SET count = count + excluded.count",
                [(*key, count) for key, count in counts.items()],
            )

    def next_ready_workflow_task(self, now: datetime) -> WorkflowTask | None:
        return self._record(
            WorkflowTask, f"SELECT {TASK_COLUMNS} FROM workflow_tasks WHERE status = 'scheduled' "
            "AND available_at <= %s ORDER BY available_at LIMIT 1", (text(now),),
        )

    def take_ready_workflow_task(self, now: datetime, ahead: int = 1) -> WorkflowTask | None:
        # One statement: no other writer can come between the look and the take.
        return self._record(
            WorkflowTask, "DELETE FROM workflow_tasks WHERE task_id = (SELECT task_id FROM "
            "workflow_tasks WHERE status = 'scheduled' AND available_at <= %s ORDER BY "
            f"available_at LIMIT 1) RETURNING {TASK_COLUMNS}", (text(now),),
        )

    def next_ready_activity(self, queues: Sequence[str], now: datetime) -> Activity | None:
        """The oldest activity ready on these queues whose schedule deadlines still hold."""
        found = self._oldest_ready(_READY, queues, now)
        return None if found is None else self._readers[Activity](found)

    def next_ready_activity_with_run(self, queues: Sequence[str], now: datetime,
                                     ahead: int = 1) -> tuple[Activity, Run] | None:
        # The run comes in the same statement, with what `get_run` keeps of its read.
        found = self._oldest_ready(_READY_WITH_RUN, queues, now)
        if found is None:
            return None
        runs = self._kept
        if runs is not None and not runs.doubt:
            # As `get_run` would have read it: kept after the commit like a run read.
            self._run_rows.setdefault(found[_ACTIVITY_FIELDS + kept.RUN],
                                      list(found[_ACTIVITY_FIELDS:]))
        run = keep_run_extras(self._readers[RunRead](found[_ACTIVITY_FIELDS:]), self._keys,
                              self._seq, self._last_at, self._without_task,
                              self._instance_fields)
        return self._readers[Activity](found[:_ACTIVITY_FIELDS]), run

    def _oldest_ready(self, sql: str, queues: Sequence[str], now: datetime) -> \
            Sequence[Any] | None:
        """The row `sql` finds first on any of `queues`: each queue is read through its own
        range of the ready index, and the oldest of their heads wins (stored instants sort as
        the instants do)."""
        best, at = None, text(now)
        for queue in queues:
            rows = self._tuples(sql, {"queue": queue, "now": at})
            if rows and (best is None or rows[0][_AVAILABLE_AT] < best[_AVAILABLE_AT]):
                best = rows[0]
        return best


# A ready activity of one queue, the oldest first (through `activities_ready`); and the same
# with its run, as `GET_RUN` reads one, for a claim.
_READY_FROM = (
    "FROM activities a {join}WHERE a.queue = %(queue)s AND a.status IN "
    f"{PENDING_ACTIVITY_SQL} AND a.available_at <= %(now)s {WAITING_DEADLINES_HOLD} "
    "ORDER BY a.available_at LIMIT 1"
)
_READY = f"SELECT {records.select(Activity, 'a')} " + _READY_FROM.format(join="")
_READY_WITH_RUN = (
    f"SELECT {records.select(Activity, 'a')}, {records.select(RunRead, 'r')} "
    + _READY_FROM.format(join="JOIN runs r ON r.workflow_run_id = a.workflow_run_id LEFT JOIN "
                              "instances i ON i.workflow_instance_id = r.workflow_instance_id ")
)
_ACTIVITY_FIELDS = len(dataclasses.fields(Activity))
_AVAILABLE_AT = [f.name for f in dataclasses.fields(Activity)].index("available_at")
