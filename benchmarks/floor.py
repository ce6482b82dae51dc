"""The floors under the throughput goals: what the database work of a step costs with no Python.

Goals: 5,000 activity steps/s on SQLite (one `wfctl work`), 2,000 on PostgreSQL. This script
measures, on this machine, how fast the database alone can go, so that a rate can be read
against what is possible here rather than against a number.

  replay  A worker slot drains N `three_noops` workflows in process (`Worker.step` in a loop,
          what a `--concurrency 1` worker does) while every statement of every connection of
          the store is recorded with its parameters. The same statements then run again, in
          the same order and on as many bare sqlite3 connections, on a copy of the database as
          it was before the drain: wfctl's own SQL, transactions and checkpoints, without the
          engine's Python. (Statements fetch their rows, as the store does; the wfctl
          rate is taken while recording, a few µs a step slower than without.) Then again
          with K = 4 and 16 of the drain's transactions joined into one (each COMMIT but every
          K-th left out, with the BEGIN after it): wfctl's SQL at a group commit of K slots.
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
import json
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pglib
from benchlib import Scratch, checkpoint, header, load, remove_database

from wfctl import clock, log
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


def replay(workflows: int, folder: Path) -> tuple[float, dict[int, float], int]:
    """Drain with one slot while recording, then replay at each of BATCHES steps per
    transaction; (wfctl s, replay s by steps per transaction, statements)."""
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
        started = time.perf_counter()
        while worker.slots[0].run_once(clock.now(), check_deadlines=False):
            pass
        drained = time.perf_counter() - started
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
    remove_database(snapshot)
    return drained, replayed, len(recorded)


def _outcome(path: Path) -> list[tuple[Any, ...]]:
    """What a drain leaves in the database: its activities and instances by status, and its
    history rows (a replay must leave the same)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT 'activity', status, count(*) FROM activities GROUP BY status UNION ALL "
            "SELECT 'instance', status, count(*) FROM instances GROUP BY status UNION ALL "
            "SELECT 'history', '', count(*) FROM events ORDER BY 1, 2").fetchall()


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
        drains, replays = [], []
        for _ in range(repeat):
            drained, replayed, statements = replay(workflows, scratch.folder)
            drains.append(drained)
            replays.append(replayed)
        drained = min(drains)
        replayed_at = {k: min(seconds[k] for seconds in replays) for k in BATCHES}
        replayed = replayed_at[1]
        print(f"   wfctl, one slot in process:            {steps / drained:7,.0f} steps/s "
              f"({drained / steps * 1e6:5.0f} us per step)")
        print(f"   its statements replayed, no Python:    {steps / replayed:7,.0f} steps/s "
              f"({replayed / steps * 1e6:5.0f} us per step; {statements / steps:.1f} "
              "statements per step)")
        for k in BATCHES[1:]:
            print(f"     the same, {k:2d} steps per transaction: "
                  f"{steps / replayed_at[k]:7,.0f} steps/s "
                  f"({replayed_at[k] / steps * 1e6:5.0f} us per step)")
        leans = {k: max(lean_sqlite(scratch.folder, workflows, k) for _ in range(repeat))
                 for k in BATCHES}
        for k, rate in leans.items():
            print(f"   lean step, {k:2d} per transaction:       {rate:7,.0f} steps/s "
                  f"({1e6 / rate:5.0f} us per step)")
    print(f"   verdict: {TARGET:,.0f} steps/s leaves {budget:.0f} us a step for the database "
          f"and the engine; wfctl's SQL alone takes {replayed / steps * 1e6:.0f} us "
          f"({replayed_at[4] / steps * 1e6:.0f} us at 4 per transaction), the lean "
          f"step {1e6 / leans[4]:.0f} us at 4 per transaction, "
          f"{max(0.0, budget - 1e6 / leans[4]):.0f} us left for the engine's Python")


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
