"""Runs kept between the write transactions of one process, on SQLite.

A step's outcome is recorded in a transaction that begins by reading the step's run (`GET_RUN`,
the costliest statement of a step), though this process wrote that row itself a transaction
before. The write connection keeps each run as `GET_RUN` last gave it, patched with what the
connection wrote to it since, and a transaction takes the run from there instead of reading it
again, wherever that is sure to be what the read would give:

- no other connection committed since the last transaction (`PRAGMA data_version`, read once a
  transaction with the write lock held: other processes, and the other connections of this one,
  write through connections of their own): otherwise everything kept is forgotten;
- every statement of the connection that could change a kept row went through the transaction's
  own patching (a run's UPDATE, a new run, a workflow task, the history rows); any other one (a
  prune, a deadline's claim) is noticed by its text (`WriteConnection`), and from then on the
  transaction reads, and forgets everything kept at its end;
- the transaction committed: a rollback forgets everything.

A run is kept only while it is open and has no open workflow task (what `GET_RUN` says of that is
then known without a read), and its instance's last history seq and that event's instant are kept
beside it, by instance, since any run of the instance may append to it.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from wfctl.store.queries import RunRead
from wfctl.vocabulary import CLOSED_RUN

# Open runs, and instances, kept at most (a worker holds this many workflows open at once rarely).
KEPT_RUNS = 10_000

_READ_ONLY = re.compile(r"\s*(?:SELECT|PRAGMA|BEGIN|COMMIT|END|SAVEPOINT|RELEASE|EXPLAIN)\b",
                        re.IGNORECASE)
_TARGET = re.compile(
    r"\s*(INSERT|UPDATE|DELETE)(?:\s+OR\s+(\w+))?\s+(?:INTO\s+|FROM\s+)?(?:main\.)?[\"`\[]?(\w+)",
    re.IGNORECASE)
# What `GET_RUN` reads of a run's instance: columns no statement of wfctl changes.
_INSTANCE_COLUMNS = ("instance_key", "definitions_digest", "workflow_type", "child_depth",
                     "child_policy")
# Statement texts found `harmless`.
_HARMLESS: set[str] = set()


def harmless(sql: str) -> bool:
    """Whether a statement the transaction does not patch for leaves every kept row as `GET_RUN`
    would read it: a read, or a write to a table `GET_RUN` does not read (or a new instance, or
    an instance's status), with no conflict clause that could change another row."""
    if sql in _HARMLESS:
        return True
    verdict = _judge(sql)
    if verdict and len(_HARMLESS) < 2_000:
        _HARMLESS.add(sql)
    return verdict


def _judge(sql: str) -> bool:
    if _READ_ONLY.match(sql):
        return True
    target = _TARGET.match(sql)
    if target is None:
        return False
    verb, resolution, table = target.group(1).upper(), target.group(2), target.group(3).lower()
    if table not in ("runs", "events", "workflow_tasks", "instances"):
        return True
    if table in ("runs", "events") or resolution is not None or "CONFLICT" in sql.upper():
        return False
    # A workflow task's row goes when it ends: a run kept has none, and a delete gives it none.
    if table == "workflow_tasks":
        return verb == "DELETE" or (verb == "UPDATE" and "workflow_run_id" not in _sets(sql))
    return verb == "INSERT" or (
        verb == "UPDATE" and not any(column in _sets(sql) for column in _INSTANCE_COLUMNS))


def _sets(sql: str) -> str:
    """An UPDATE's text before its WHERE: what it sets."""
    return re.split(r"\bWHERE\b", sql, maxsplit=1, flags=re.IGNORECASE)[0]


class Kept:
    """What the write connection keeps: each run as `GET_RUN` reads it (stored values), and each
    instance's last history seq with its event's instant; `doubt` is set by a statement that
    may have changed them."""

    __slots__ = ("columns", "doubt", "plans", "rows", "seqs", "version")

    def __init__(self, columns: dict[str, tuple[int, str]]) -> None:
        # Each column of `runs`: its place in `GET_RUN`'s row, and its affinity (`affinity`).
        self.columns = columns
        # For each set of columns an UPDATE writes: where each goes, and how it reads back.
        self.plans: dict[tuple[str, ...], tuple[tuple[int, Any], ...] | None] = {}
        self.rows: dict[str, tuple[Any, ...]] = {}
        self.seqs: dict[str, tuple[int, int | None]] = {}
        self.version: int | None = None
        self.doubt = False

    def begin(self, version: int) -> None:
        """A write transaction begins, the write lock held; `version` is `PRAGMA data_version`."""
        if version != self.version:
            self.forget()
            self.version = version
        self.doubt = False

    def forget(self) -> None:
        self.rows.clear()
        self.seqs.clear()

    def patch(self, row: list[Any], names: tuple[str, ...], values: Sequence[Any]) -> bool:
        """Write stored `values` of the columns `names` into a kept run's row as a read would
        give them back; False when that is not certain (the row is then let go)."""
        plan = self.plans.get(names)
        if plan is None:
            if names in self.plans or len(self.plans) >= 256:
                return False
            plan = self.plans[names] = self._plan(names)
            if plan is None:
                return False
        for (place, settle), value in zip(plan, values, strict=True):
            if value is not None and type(value) is not settle:
                value = _READ_BACK[settle](value)
                if value is _UNSURE:
                    return False
            row[place] = value
        return True

    def _plan(self, names: tuple[str, ...]) -> tuple[tuple[int, Any], ...] | None:
        """Where each column goes in the row, and the type it reads back as (None for a name
        that is not a column, or a column whose values SQLite may change otherwise)."""
        plan = []
        for name in names:
            column = self.columns.get(name)
            if column is None or column[1] not in _AFFINITY_TYPES:
                return None
            plan.append((column[0], _AFFINITY_TYPES[column[1]]))
        return tuple(plan)

    def keep(self, rows: dict[str, list[Any]], without_task: set[str],
             seqs: dict[str, int], ats: dict[str, int | None]) -> None:
        """After a commit: the transaction's runs (`rows`, as it wrote them) that are open and
        have no open workflow task, and the last seq and its instant (`seqs`, `ats`) of the
        instances it knows (but those whose run closed). Past `KEPT_RUNS` of either, everything
        is let go."""
        if self.doubt:
            self.forget()
            return
        kept, known = self.rows, self.seqs
        known.update((instance_id, (seq, ats.get(instance_id)))
                     for instance_id, seq in seqs.items())
        for run_id, row in rows.items():
            if row[STATUS] in CLOSED_RUN:
                kept.pop(run_id, None)
                known.pop(row[INSTANCE], None)
            elif run_id in without_task:
                row[OPEN_TASK] = None
                kept[run_id] = tuple(row)
            else:
                kept.pop(run_id, None)
        if len(kept) > KEPT_RUNS or len(known) > KEPT_RUNS:
            self.forget()


class WriteConnection(sqlite3.Connection):
    """The process's write connection: a statement run through `execute` or `executemany` that
    is not `harmless` puts what is kept in doubt; `patched` runs one the transaction patches the
    kept rows for itself."""

    kept: Kept

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql not in _HARMLESS and not harmless(sql):
            self.kept.doubt = True
        return _EXECUTE(self, sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        if not harmless(sql):
            self.kept.doubt = True
        return sqlite3.Connection.executemany(self, sql, parameters)

    def patched(self, sql: str, parameters: Sequence[Any]) -> sqlite3.Cursor:
        return _EXECUTE(self, sql, parameters)


_EXECUTE = sqlite3.Connection.execute


def keeping(conn: WriteConnection) -> None:
    """Start keeping runs on a write connection just opened (the file's tables exist)."""
    cursor = sqlite3.Connection.execute(conn, "PRAGMA table_info(runs)")
    cursor.row_factory = None
    places = {name: place for place, name in enumerate(_RUN_COLUMNS)}
    conn.kept = Kept({name: (places[name], affinity(declared))
                      for _, name, declared, *_ in cursor.fetchall() if name in places})


def affinity(declared: str) -> str:
    """The affinity SQLite gives a column declared `declared` (INTEGER, TEXT, REAL; any other
    as `other`)."""
    declared = declared.upper()
    if "INT" in declared:
        return "INTEGER"
    if any(kind in declared for kind in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if any(kind in declared for kind in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "other"


# What a value not None reads back as from a column of each affinity: the type it is then
# (`Kept.patch` keeps a value of that type as it is), and how another one turns into it.
_AFFINITY_TYPES = {"TEXT": str, "INTEGER": int, "REAL": float}
_UNSURE = object()


def _as_text(value: Any) -> Any:
    # SQLite writes a number into a TEXT column as text of its own spelling.
    return _UNSURE


def _as_integer(value: Any) -> Any:
    kind = type(value)
    if kind is bool:
        return int(value)
    if kind is float:
        # An INTEGER column keeps a float with no fraction (within 2**53) as an integer.
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    return _UNSURE


def _as_real(value: Any) -> Any:
    if (type(value) is int or type(value) is bool) and abs(value) < 2**53:
        return float(value)
    return _UNSURE


_READ_BACK = {str: _as_text, int: _as_integer, float: _as_real}


_RUN_COLUMNS = [field.name for field in dataclasses.fields(RunRead)]
# Where `GET_RUN`'s row has the run's id, status and instance, its open workflow task and the
# instance's last seq and its instant.
RUN = _RUN_COLUMNS.index("workflow_run_id")
STATUS = _RUN_COLUMNS.index("status")
INSTANCE = _RUN_COLUMNS.index("workflow_instance_id")
OPEN_TASK = _RUN_COLUMNS.index("read_open_task")
LAST_SEQ = _RUN_COLUMNS.index("read_last_seq")
LAST_AT = _RUN_COLUMNS.index("read_last_at")
