"""The floors under the throughput goals: what the database work of a step costs with no Python.

Goals: 5,000 activity steps/s on SQLite (one `wfctl work`), 2,000 on PostgreSQL. This script
measures, on this machine, how fast the database alone can go, so that a rate can be read
against what is possible here rather than against a number.

  replay  A worker slot drains N `three_noops` workflows in process (`run_once` in a loop: its
          quick handlers' steps up to 16 a transaction) while every statement of every connection of
          the store is recorded with its parameters. The same statements then run again, in
          the same order and on as many bare sqlite3 connections, on a copy of the database as
          it was before the drain: wfctl's own SQL, transactions and checkpoints, without the
          engine's Python. (Statements fetch their rows, as the store does; the wfctl
          rate is taken while recording, a few µs a step slower than without.) Then again
          with K = 4 and 16 of the drain's transactions joined into one (each COMMIT but every
          K-th left out, with the BEGIN after it): wfctl's SQL at a group commit of K slots.
  least   wfctl's own statements, in the drain's order, on a copy of the same database, with
          the least Python that makes them: each step's parameters (its ids, its instants'
          texts, its history row's JSON) made from what the step knows, a no-op handler called
          and one log line written a step, as the worker does at `--log-level info`. K = 1, 4,
          16 steps a transaction (the drain's own batches hold up to 16). Everything else the
          engine does — the checks of deadlines, timeouts, limits and the run's state, the
          attempts' records, listeners — is what its CPU a step may add above this one.
  lean    A hand-written step on a minimal schema: the least any engine that keeps an event
          history per step does. Per step: the activity completed, its run moved on, the next
          activity inserted, two history rows; per transaction: the next K activities claimed
          with one `UPDATE … RETURNING`. Three indexes on activities (ready, deadline, run)
          where wfctl has nine, and two history rows where wfctl writes six. K = 1, 4 (a
          transaction per slot of the default `--concurrency 4`), 16.
  --postgres / --db URL
          The lean step on PostgreSQL with psycopg (`FOR UPDATE SKIP LOCKED`, the family's
          advisory lock per step, fsync and synchronous_commit on), one connection; with the
          client's and (throwaway cluster) the server's CPU per step, and the ceiling those
          give on this machine's cores: no number of workers does more steps a second than
          cores / CPU per step.

Each wfctl figure printed beside a floor is from the same run. `replay` reaches into the
store's connections and moves with them.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pglib
from benchlib import Scratch, checkpoint, header, load, noop, remove_database

from wfctl import clock
from wfctl.ops import log
from wfctl.store import kept
from wfctl.store import sqlite as sqlite_store
from wfctl.worker import WorkerOptions

STEPS_PER_WORKFLOW = 3
TARGET = 5_000.0
POSTGRES_TARGET = 2_000.0
BATCHES = (1, 4, 16)

Statement = tuple[int, str, str, Any]


def _kept(parameters: Any) -> Any:
    """A statement's parameters as recorded: named ones stay a dict (a tuple of it would be its
    names, bound in their place)."""
    return dict(parameters) if isinstance(parameters, dict) else tuple(parameters)


class _Logging:
    """Logs each statement a connection runs, with its parameters, before running it."""

    log: list[Statement] | None = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if _Logging.log is not None:
            _Logging.log.append((id(self), "one", sql, _kept(parameters)))
        return super().execute(sql, parameters)  # type: ignore[misc]

    def executemany(self, sql: str, rows: Any, /) -> sqlite3.Cursor:
        rows = [_kept(row) for row in rows]
        if _Logging.log is not None:
            _Logging.log.append((id(self), "many", sql, rows))
        return super().executemany(sql, rows)  # type: ignore[misc]


class _Recording(_Logging, sqlite3.Connection):
    """A connection that logs its statements."""


class _RecordingWrites(_Logging, kept.WriteConnection):
    """The write connection, logging its statements, those it patches for too."""

    def patched(self, sql: str, parameters: Any) -> sqlite3.Cursor:
        if _Logging.log is not None:
            _Logging.log.append((id(self), "one", sql, _kept(parameters)))
        return super().patched(sql, parameters)


@contextmanager
def recording_connections() -> Iterator[list[Statement]]:
    """Connections the store opens meanwhile record what they run into the yielded list."""
    original = sqlite3.connect

    def connect(*args: Any, factory: type = sqlite3.Connection, **kwargs: Any) -> \
            sqlite3.Connection:
        recording = _RecordingWrites if issubclass(factory, kept.WriteConnection) else _Recording
        return original(*args, **kwargs, factory=recording)

    statements: list[Statement] = []
    sqlite_store.sqlite3.connect = connect  # type: ignore[attr-defined]
    _Logging.log = statements
    try:
        yield statements
    finally:
        sqlite_store.sqlite3.connect = original  # type: ignore[attr-defined]
        _Logging.log = None


def replay(workflows: int, folder: Path) -> \
        tuple[tuple[float, float], dict[int, float], int, dict[int, tuple[float, float]]]:
    """Drain with one slot while recording, then replay at each of BATCHES steps per
    transaction, and drain with the least Python at each; (wfctl (s, CPU s), replay s by
    steps per transaction, statements, least-Python (s, CPU s) by steps per transaction)."""
    snapshot = folder / "snapshot.db"
    with recording_connections() as statements, Scratch() as scratch:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"floor-{n:06d}")
        worker = client.worker(WorkerOptions(concurrency=1))
        worker.register(clock.now())
        checkpoint(scratch.db)
        remove_database(snapshot)
        shutil.copy(scratch.db, snapshot)
        settings = list(statements)
        statements.clear()
        started, cpu = time.perf_counter(), time.process_time()
        while worker.slots[0].run_once(clock.now(), check_deadlines=False):
            pass
        drained = time.perf_counter() - started, time.process_time() - cpu
        recorded = list(statements)
        outcome = _outcome(scratch.db)
        worker.unregister(clock.now())
        client.close()
    # Connections keep their settings (synchronous, foreign_keys, checkpoints): the replay's
    # make them as the store's were made before the drain.
    drained_on = {conn_id for conn_id, *_ in recorded}
    settings = [statement for statement in settings
                if statement[0] in drained_on and statement[2].startswith("PRAGMA")]
    replayed = {k: _replay(snapshot, folder / "replay.db", settings + recorded, k, outcome)
                for k in BATCHES}
    texts = _least_texts(recorded)
    least = {k: _least(snapshot, folder / "least.db", texts, k, outcome) for k in BATCHES}
    remove_database(snapshot)
    return drained, replayed, len(recorded), least


def _outcome(path: Path) -> list[tuple[Any, ...]]:
    """What a drain leaves in the database: its activities and instances by status, its
    events, and the history rows that hold them (a replay must leave the same)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT 'activity', status, count(*) FROM activities GROUP BY status UNION ALL "
            "SELECT 'instance', status, count(*) FROM instances GROUP BY status UNION ALL "
            "SELECT 'events', '', sum(seq) FROM (SELECT max(seq) AS seq FROM events "
            "GROUP BY instance_key) UNION ALL "
            "SELECT 'history rows', '', count(*) FROM events ORDER BY 1, 2").fetchall()


def _replay(snapshot: Path, path: Path, statements: list[Statement], k: int,
            outcome: list[tuple[Any, ...]]) -> float:
    """Seconds to run `statements` on a copy of `snapshot`, with k of the drain's write
    transactions in each (a COMMIT and the BEGIN after it left out, but every k-th): the same
    statements at the group commit of k slots. It must leave the drain's `outcome`."""
    remove_database(path)
    shutil.copy(snapshot, path)
    bare: dict[int, sqlite3.Connection] = {}
    # Per connection: its commits so far, and whether its last COMMIT was left out.
    commits: dict[int, int] = {}
    joined: set[int] = set()
    started = time.perf_counter()
    for conn_id, kind, sql, parameters in statements:
        conn = bare.get(conn_id)
        if conn is None:
            conn = bare[conn_id] = sqlite3.connect(path, isolation_level=None,
                                                   check_same_thread=False)
        if sql == "COMMIT":
            commits[conn_id] = commits.get(conn_id, 0) + 1
            if commits[conn_id] % k:
                joined.add(conn_id)
                continue
        elif sql.startswith("BEGIN IMMEDIATE") and conn_id in joined:
            joined.discard(conn_id)
            continue
        if kind == "one":
            conn.execute(sql, parameters).fetchall()
        else:
            conn.executemany(sql, parameters)
    for conn_id in joined:
        bare[conn_id].execute("COMMIT")
    seconds = time.perf_counter() - started
    for conn in bare.values():
        conn.close()
    replayed = _outcome(path)
    remove_database(path)
    if replayed != outcome:
        raise SystemExit(f"the replay left {replayed}, the drain {outcome}")
    return seconds


# The statements of the drain the least-Python step runs, by what each does: how its text
# starts, and a part of it that tells it from another so starting.
_LEAST_STATEMENTS = {
    "take": ("DELETE FROM workflow_tasks", ""),
    "run": ("SELECT r.workflow_run_id", ""),
    "insert": ("INSERT INTO activities", "last_heartbeat_event_at"),
    "close": ("UPDATE activities SET status = :status", ""),
    "started": ("UPDATE runs SET step_started = ?", ""),
    "next": ("UPDATE runs SET step_index = ?, step_started = ? WHERE", ""),
    "end": ("UPDATE runs SET step_index = ?, step_started = ?, status", ""),
    "instance": ("UPDATE instances SET status", ""),
}
# `three_noops`: its steps, handler, and retry policy (as history and `activities` store it).
_STEPS = ("first", "second", "third")
_HANDLER = "benchlib:noop"
_POLICY = [3, [1, 2], None, 300, None, None, []]
_POLICY_TEXT = json.dumps(_POLICY, separators=(",", ":"))
_CLOSE_SECONDS = 300
_WORKER = "floor:1:least"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _least_texts(recorded: list[Statement]) -> dict[str, str]:
    """The texts of the drain's statements the least-Python step runs."""
    found: dict[str, str] = {}
    for _, _, sql, _ in recorded:
        for name, (start, part) in _LEAST_STATEMENTS.items():
            if name not in found and sql.startswith(start) and part in sql:
                found[name] = sql
    missing = sorted(set(_LEAST_STATEMENTS) - set(found))
    if missing:
        raise SystemExit(f"the drain ran none of the statements {missing}: the least-Python "
                         "step no longer matches wfctl's")
    return found


class _Flow:
    """A workflow as the least-Python step knows it."""

    __slots__ = ("activity", "instance", "key", "run", "scheduled", "seq", "state", "step")


def _least(snapshot: Path, path: Path, texts: dict[str, str], k: int,
           outcome: list[tuple[Any, ...]]) -> tuple[float, float]:
    """(seconds, CPU seconds) of the drain done by the least Python on a copy of `snapshot`,
    k steps a transaction: first decisions taken for the free places of a batch, each
    outcome recorded with what it schedules started at once, as the step path does. It must
    leave the drain's `outcome`."""
    remove_database(path)
    shutil.copy(snapshot, path)
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON",
                   "busy_timeout=30000"):
        conn.execute(f"PRAGMA {pragma}")
    take, read_run, insert, close = texts["take"], texts["run"], texts["insert"], texts["close"]
    prefix, count = os.urandom(4).hex(), itertools.count()
    inserts: dict[int, str] = {}
    held: list[_Flow] = []
    with open(path.with_suffix(".log"), "w") as lines:
        started, cpu = time.perf_counter(), time.process_time()
        while True:
            now = datetime.now(UTC)
            now_text = now.isoformat(timespec="milliseconds")
            close_text = (now + timedelta(seconds=_CLOSE_SECONDS)).isoformat(
                timespec="milliseconds")
            at = (now - _EPOCH) // timedelta(microseconds=1)
            conn.execute("BEGIN IMMEDIATE")
            history: list[Any] = []
            pool: list[_Flow] = []
            for flow in held:
                result = noop(flow.state)
                if result is not None and type(result) is not dict:
                    raise SystemExit("a handler's result must be a dict")
                # The close returns nothing: the step knows what it closes, as the worker does.
                if conn.execute(close, {
                        "status": "completed", "closed_at": now_text, "owner": None,
                        "activity_id": flow.activity, "attempt": 1, "worker_id": _WORKER,
                        "now": now_text}).rowcount != 1:
                    raise SystemExit("the least-Python step's close changed no attempt")
                seq, step = flow.seq, _STEPS[flow.step]
                items: list[Any] = [
                    9, [-7, flow.activity, step, 1, flow.scheduled, flow.scheduled + 1, result],
                    2, [-1, "activity_completed"], 3, [-2, seq + 2, _WORKER, [10_000_000]],
                    4, [-3, seq + 2, seq + 3]]
                lines.write(f"{now_text} INFO    activity_completed instance={flow.instance} "
                            f"run=1 step={step} attempt=1\n")
                if flow.step + 1 < len(_STEPS):
                    flow.step += 1
                    flow.seq = seq + 6
                    items += _schedule(conn, insert, flow, f"{prefix}{next(count):08x}",
                                       now_text, close_text, seq + 4)
                    conn.execute(texts["next"], (flow.step, 1, flow.run))
                    pool.append(flow)
                else:
                    flow.seq = seq + 5
                    items += [29, [-8, sorted(flow.state)]]
                    conn.execute(texts["end"], (len(_STEPS), 0, "completed", now_text,
                                                "completed", None, None, flow.run))
                    conn.execute(texts["instance"], ("completed", now_text, now_text, None,
                                                     flow.instance))
                history += (flow.key, flow.seq, 1, 0, at, json.dumps(items, separators=(",", ":")))
            while len(pool) < k:
                task = conn.execute(take, (now_text,)).fetchone()
                if task is None:
                    break
                run = conn.execute(read_run, (task[1],)).fetchone()
                flow = _Flow()
                flow.run, flow.instance, flow.key, flow.step = run[0], run[1], run[24], 0
                flow.state = json.loads(run[16])
                seq = run[25]
                flow.seq = seq + 4
                items = [3, [-2, task[6], _WORKER, [10_000_000]], 4, [-3, task[6], seq + 1],
                         *_schedule(conn, insert, flow, f"{prefix}{next(count):08x}", now_text,
                                    close_text, seq + 2)]
                conn.execute(texts["started"], (1, flow.run))
                history += (flow.key, flow.seq, 1, 0, at, json.dumps(items, separators=(",", ":")))
                pool.append(flow)
            if history:
                rows = len(history) // 6
                sql = inserts.get(rows) or inserts.setdefault(
                    rows, "INSERT INTO events VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?)"] * rows))
                conn.execute(sql, history)
            conn.execute("COMMIT")
            if not pool and not held:
                break
            held = pool
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    # Its transactions are not the drain's: its events go in rows of their own.
    left, outcome = ([row for row in rows if row[0] != "history rows"]
                     for rows in (_outcome(path), outcome))
    remove_database(path)
    path.with_suffix(".log").unlink()
    if left != outcome:
        raise SystemExit(f"the least-Python drain left {left}, wfctl's {outcome}")
    return seconds, cpu


def _schedule(conn: sqlite3.Connection, insert: str, flow: _Flow, activity_id: str,
              now_text: str, close_text: str, seq: int) -> list[Any]:
    """The flow's next activity inserted, started for this worker; its two events."""
    step = _STEPS[flow.step]
    flow.activity, flow.scheduled = activity_id, seq + 1
    conn.execute(insert, (activity_id, flow.run, flow.instance, flow.step, 0, step, _HANDLER,
                          "default", "started", 1, 3, _POLICY_TEXT, now_text, now_text, None,
                          None, seq + 1, _WORKER, now_text, seq + 2, close_text, None, None))
    return [6, [-5, activity_id, step, _HANDLER, "default", 1, 3, _POLICY, None, None],
            7, [-6, activity_id, step, 1, _WORKER, seq + 1, [_CLOSE_SECONDS * 1_000_000], None]]


LEAN_SCHEMA = """
CREATE TABLE runs (run_id INTEGER PRIMARY KEY, step_index INTEGER NOT NULL, status TEXT NOT NULL);
CREATE TABLE activities (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL,
    step_index INTEGER NOT NULL, status TEXT NOT NULL, queue TEXT NOT NULL,
    available_at TEXT NOT NULL, deadline_at TEXT, owner TEXT, attempt INTEGER NOT NULL,
    handler TEXT NOT NULL, started_at TEXT, closed_at TEXT);
CREATE INDEX activities_ready ON activities (queue, available_at) WHERE status = 'scheduled';
CREATE INDEX activities_deadline ON activities (deadline_at)
    WHERE status IN ('scheduled', 'started');
CREATE INDEX activities_run ON activities (run_id, step_index);
CREATE TABLE events (instance_key INTEGER NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL,
    attributes TEXT NOT NULL, PRIMARY KEY (instance_key, seq)) {suffix};
"""


class Lean:
    """The minimal step on one connection: `execute(sql, parameters)` and `transaction()`
    given by the backend, the SQL shared (`?` placeholders; psycopg's are mapped)."""

    def __init__(self, execute: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]],
                 executemany: Callable[[str, list[tuple[Any, ...]]], None],
                 transaction: Callable[[], Any], lock: str | None) -> None:
        self.execute, self.executemany = execute, executemany
        self.transaction, self.lock = transaction, lock

    def load(self, workflows: int) -> None:
        with self.transaction():
            for run in range(workflows):
                self.execute("INSERT INTO runs VALUES (?, 0, 'running')", (run,))
                self._schedule(run, 0, f"{run:09d}")
                self.executemany("INSERT INTO events VALUES (?, 1, 0, '[]')", [(run,)])

    def _schedule(self, run: int, step_index: int, at: str) -> None:
        self.execute("INSERT INTO activities (run_id, step_index, status, queue, available_at,"
                     " attempt, handler) VALUES (?, ?, 'scheduled', 'default', ?, 1, 'mod:fn')",
                     (run, step_index, at))

    def _claim(self, k: int, now: str) -> list[tuple[Any, ...]]:
        skip = " FOR UPDATE SKIP LOCKED" if self.lock else ""
        return self.execute(
            "UPDATE activities SET status = 'started', owner = 'w', started_at = ?,"
            " deadline_at = ? WHERE id IN (SELECT id FROM activities WHERE queue = 'default'"
            " AND status = 'scheduled' AND available_at <= ? ORDER BY available_at"
            f" LIMIT ?{skip}) RETURNING id, run_id, step_index", (now, now, now, k))

    def drain(self, k: int) -> int:
        """Run every step, K per transaction; the number of steps."""
        now, steps, seqs = "9", 0, {}
        with self.transaction():
            held = self._claim(k, now)
        while held:
            with self.transaction():
                for activity_id, run, step_index in held:
                    if self.lock:
                        self.execute(self.lock, (run,))
                    self.execute("UPDATE activities SET status = 'completed', closed_at = ?,"
                                 " owner = NULL WHERE id = ? AND status = 'started'",
                                 (now, activity_id))
                    seq = seqs.get(run, 1)
                    events = [(run, seq + 1, json.dumps([7, activity_id, step_index, 1, None]))]
                    if step_index < STEPS_PER_WORKFLOW - 1:
                        self.execute("UPDATE runs SET step_index = ? WHERE run_id = ?",
                                     (step_index + 1, run))
                        self._schedule(run, step_index + 1, f"a{steps:09d}")
                        events.append((run, seq + 2, json.dumps([5, step_index + 1, "mod:fn"])))
                    else:
                        self.execute("UPDATE runs SET status = 'completed' WHERE run_id = ?",
                                     (run,))
                    seqs[run] = seq + len(events)
                    self.executemany("INSERT INTO events VALUES (?, ?, 0, ?)", events)
                    steps += 1
                held = self._claim(k, now)
        return steps


def lean_sqlite(folder: Path, workflows: int, k: int) -> float:
    """Steps/s of the lean step on a fresh SQLite file (WAL, synchronous=NORMAL, automatic
    checkpoints: wfctl's settings)."""
    path = folder / "lean.db"
    remove_database(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(LEAN_SCHEMA.format(suffix="WITHOUT ROWID"))

    @contextmanager
    def transaction() -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("COMMIT")

    def execute(sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return conn.execute(sql, parameters).fetchall()

    def executemany(sql: str, rows: list[tuple[Any, ...]]) -> None:
        conn.executemany(sql, rows)

    lean = Lean(execute, executemany, transaction, None)
    lean.load(workflows)
    started = time.perf_counter()
    steps = lean.drain(k)
    rate = steps / (time.perf_counter() - started)
    conn.close()
    remove_database(path)
    return rate


def lean_postgres(server: pglib.Server, workflows: int, k: int) -> tuple[float, float, float]:
    """Steps/s, client CPU s/step and server CPU s/step of the lean step on a fresh database."""
    import psycopg

    with server.database() as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(LEAN_SCHEMA.format(suffix="").replace(
            "id INTEGER PRIMARY KEY, run_id", "id bigserial PRIMARY KEY, run_id"))

        def execute(sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
            cursor = conn.execute(sql.replace("?", "%s"), parameters)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

        def executemany(sql: str, rows: list[tuple[Any, ...]]) -> None:
            with conn.cursor() as cursor:
                cursor.executemany(sql.replace("?", "%s"), rows)  # type: ignore[arg-type]

        lean = Lean(execute, executemany, conn.transaction, "SELECT pg_advisory_xact_lock(?)")
        lean.load(workflows)
        conn.execute("ANALYZE")
        cpu, server_cpu = time.process_time(), server.cpu_seconds()
        started = time.perf_counter()
        steps = lean.drain(k)
        seconds = time.perf_counter() - started
        return (steps / seconds, (time.process_time() - cpu) / steps,
                (server.cpu_seconds() - server_cpu) / steps)


def sqlite_floors(workflows: int, repeat: int) -> None:
    steps = workflows * STEPS_PER_WORKFLOW
    print(f"\n-- SQLite: {workflows} three_noops workflows = {steps} activity steps, "
          f"{repeat} round(s), best of each")
    budget = 1e6 / TARGET
    with Scratch() as scratch:
        drains, replays, leasts = [], [], []
        for _ in range(repeat):
            drained, replayed, statements, least = replay(workflows, scratch.folder)
            drains.append(drained)
            replays.append(replayed)
            leasts.append(least)
        (drained, drained_cpu) = min(drains)
        replayed_at = {k: min(seconds[k] for seconds in replays) for k in BATCHES}
        least_at = {k: min(least[k] for least in leasts) for k in BATCHES}
        replayed = replayed_at[1]
        print(f"   wfctl, one slot in process:            {steps / drained:7,.0f} steps/s "
              f"({drained / steps * 1e6:5.0f} us per step, CPU {drained_cpu / steps * 1e6:.0f} "
              "us)")
        print(f"   its statements replayed, no Python:    {steps / replayed:7,.0f} steps/s "
              f"({replayed / steps * 1e6:5.0f} us per step; {statements / steps:.1f} "
              "statements per step)")
        for k in BATCHES[1:]:
            print(f"     the same, {k:2d} steps per transaction: "
                  f"{steps / replayed_at[k]:7,.0f} steps/s "
                  f"({replayed_at[k] / steps * 1e6:5.0f} us per step)")
        print("   the same statements and history by the least Python (a handler call and a "
              "log line a step):")
        for k, (seconds, cpu) in least_at.items():
            print(f"     {k:2d} steps per transaction:           {steps / seconds:7,.0f} "
                  f"steps/s ({seconds / steps * 1e6:5.0f} us per step, CPU "
                  f"{cpu / steps * 1e6:.0f} us)")
        leans = {k: max(lean_sqlite(scratch.folder, workflows, k) for _ in range(repeat))
                 for k in BATCHES}
        for k, rate in leans.items():
            print(f"   lean step, {k:2d} per transaction:       {rate:7,.0f} steps/s "
                  f"({1e6 / rate:5.0f} us per step)")
    least_cpu = least_at[16][1] / steps * 1e6
    print(f"   verdict: {TARGET:,.0f} steps/s leaves {budget:.0f} us a step for the database "
          f"and the engine; wfctl's SQL alone takes {replayed / steps * 1e6:.0f} us "
          f"({replayed_at[4] / steps * 1e6:.0f} us at 4 per transaction), the lean "
          f"step {1e6 / leans[4]:.0f} us at 4 per transaction, "
          f"{max(0.0, budget - 1e6 / leans[4]):.0f} us left for the engine's Python. wfctl's "
          f"statements and history made by the least Python take {least_cpu:.0f} us of CPU a "
          f"step at 16 a transaction (wfctl's drain {drained_cpu / steps * 1e6:.0f} us): "
          f"{max(0.0, budget - least_cpu):.0f} us a step for everything else the engine does")


def postgres_floors(server: pglib.Server, workflows: int, repeat: int) -> None:
    cores = os.cpu_count() or 1
    print(f"\n-- {server.describe()}: lean step, {workflows} workflows, "
          f"{repeat} round(s), best of each, one connection")
    best = 0.0
    for k in BATCHES:
        rate, client, server_cpu = max((lean_postgres(server, workflows, k)
                                        for _ in range(repeat)), key=lambda r: r[0])
        ceiling = cores / (client + server_cpu) if server_cpu else float("nan")
        best = max(best, ceiling)
        print(f"   {k:2d} per transaction: {rate:6,.0f} steps/s; CPU per step: client "
              f"{client * 1e3:.2f} ms, server {server_cpu * 1e3:.2f} ms: at most "
              f"{ceiling:,.0f} steps/s on {cores} cores")
    print(f"   verdict: {POSTGRES_TARGET:,.0f} steps/s needs at most "
          f"{cores / POSTGRES_TARGET * 1e3:.2f} ms of CPU a step (client and server) on "
          f"{cores} cores; the lean step's best ceiling here: {best:,.0f} steps/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--workflows", type=int, default=1_000,
                        help="workflows per measurement (default 1,000)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--quick", action="store_true", help="300 workflows, one round")
    parser.add_argument("--postgres", action="store_true",
                        help="also on a throwaway PostgreSQL cluster (fsync on)")
    parser.add_argument("--db", metavar="URL", help="also on this PostgreSQL server")
    args = parser.parse_args()
    workflows, repeat = (300, 1) if args.quick else (args.workflows, args.repeat)
    log.LOGGER.setLevel(logging.ERROR)
    header("floors under the throughput goals")
    sqlite_floors(workflows, repeat)
    if args.postgres or args.db:
        cluster = None if args.db else pglib.Cluster()
        server = pglib.Server(args.db or cluster.url, cluster)  # type: ignore[union-attr]
        try:
            postgres_floors(server, min(workflows, 600), repeat)
        finally:
            server.close()
    print(f"   {load()} at the end")


if __name__ == "__main__":
    main()
