"""Activity steps per second: N workflows of 3 no-op activities drained by `wfctl work` processes.

Each configuration gets a fresh database: N workflows are started through `wfctl.Client`, then
W real `wfctl work` subprocesses drain them (long-running workers stopped with SIGTERM once every
workflow completed, or `--once` workers that exit when nothing is ready). Two rates are printed:

  engine  3N / (last WorkflowCompleted.at - first WorkflowTaskStarted.at), from history: the
          rate once a worker runs, every workflow task included, process start-up excluded;
  wall    3N / (time from spawning the workers until every workflow completed), start-up
          (imports, migrations check, registration) included.

A bare SQLite claim+complete loop on the same disk is printed first, as the machine's yardstick.
Each configuration runs `--repeat` times; the median is reported (the machine is shared).

`--profile` instead drives one worker slot in process (`Worker.step` in a loop, what a
`--concurrency 1` worker does) and prints where an activity step's time goes: statements and
transactions per step, cProfile cumulative time per engine operation, and the share of WAL
checkpoints (the same loop again with `PRAGMA wal_autocheckpoint=0`).
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchlib import Scratch, header, load, wfctl_command, worker_env

from wfctl import clock, log
from wfctl.worker import WorkerOptions

STEPS_PER_WORKFLOW = 3
TARGET = 1_000.0


@dataclass
class Result:
    workers: int
    concurrency: int
    mode: str
    workflows: int
    start_seconds: float
    wall_seconds: float
    engine_seconds: float
    activity_started: int
    retries: int
    shares: list[int]

    @property
    def steps(self) -> int:
        return self.workflows * STEPS_PER_WORKFLOW

    def line(self) -> str:
        return (f"  workers={self.workers} concurrency={self.concurrency} mode={self.mode:<4} "
                f"steps={self.steps:>6}  engine {self.steps / self.engine_seconds:7.0f} steps/s "
                f"({self.engine_seconds:6.2f} s)  wall {self.steps / self.wall_seconds:7.0f} "
                f"steps/s ({self.wall_seconds:6.2f} s)"
                + (f"  split {'/'.join(str(n) for n in self.shares)}" if self.workers > 1
                   else ""))


def bare_sqlite_pairs(folder: Path, seconds: float = 1.0) -> float:
    """Claim+complete pairs per second on a bare table: two BEGIN IMMEDIATE transactions each."""
    path = folder / "bare.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, status TEXT NOT NULL, "
                 "owner TEXT, available_at TEXT NOT NULL)")
    conn.execute("CREATE INDEX tasks_ready ON tasks(available_at) WHERE status = 'ready'")
    conn.executemany("INSERT INTO tasks (status, available_at) VALUES ('ready', ?)",
                     ((f"{n:09d}",) for n in range(200_000)))
    pairs = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        conn.execute("BEGIN IMMEDIATE")
        (task_id,) = conn.execute("SELECT id FROM tasks WHERE status = 'ready' "
                                  "ORDER BY available_at LIMIT 1").fetchone()
        conn.execute("UPDATE tasks SET status = 'started', owner = 'w' WHERE id = ?", (task_id,))
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE tasks SET status = 'done' WHERE id = ?", (task_id,))
        conn.execute("COMMIT")
        pairs += 1
    rate = pairs / (time.perf_counter() - started)
    conn.close()
    return rate


def completed_count(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM instances WHERE status = 'completed'").fetchone()[0]


def run_config(workflows: int, workers: int, concurrency: int, mode: str, log_level: str,
               timeout: float) -> Result:
    with Scratch() as scratch:
        client = scratch.client()
        started = time.perf_counter()
        for n in range(workflows):
            client.start("three_noops", f"bench-{n:06d}")
        start_seconds = time.perf_counter() - started
        client.close()

        args = ["work", "--concurrency", str(concurrency), "--log-level", log_level]
        if mode == "once":
            args.append("--once")
        log_path = scratch.folder / "workers.log"
        watch = sqlite3.connect(scratch.db, isolation_level=None)
        with open(log_path, "w") as log:
            spawned = time.perf_counter()
            procs = [subprocess.Popen(wfctl_command(scratch, *args), env=worker_env(),
                                      stdout=subprocess.DEVNULL, stderr=log)
                     for _ in range(workers)]
            try:
                while completed_count(watch) < workflows:
                    if time.perf_counter() - spawned > timeout:
                        raise SystemExit(f"timed out after {timeout} s; see {log_path}")
                    if mode == "once" and all(p.poll() is not None for p in procs):
                        break
                    time.sleep(0.02)
                wall_seconds = time.perf_counter() - spawned
            finally:
                for proc in procs:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                for proc in procs:
                    proc.wait(timeout=60)
        done = completed_count(watch)
        if done != workflows:
            raise SystemExit(f"only {done} of {workflows} workflows completed; "
                             f"exit codes {[p.returncode for p in procs]}")
        first, last = watch.execute(
            "SELECT (SELECT min(at) FROM events WHERE event_type = 'WorkflowTaskStarted'), "
            "(SELECT max(at) FROM events WHERE event_type = 'WorkflowCompleted')").fetchone()
        attempts, retries = watch.execute(
            "SELECT (SELECT count(*) FROM events WHERE event_type = 'ActivityStarted'), "
            "(SELECT count(*) FROM events WHERE event_type = 'ActivityRetryScheduled')"
        ).fetchone()
        # How the steps were shared between the worker processes (starvation shows here).
        shares = sorted((count for (count,) in watch.execute(
            "SELECT count(*) FROM events WHERE event_type = 'ActivityStarted' "
            "GROUP BY json_extract(attributes, '$.worker_id')")), reverse=True)
        watch.close()
    engine_seconds = _seconds_between(first, last)
    return Result(workers, concurrency, mode, workflows, start_seconds, wall_seconds,
                  engine_seconds, attempts, retries, shares)


def _seconds_between(first: str, last: str) -> float:
    return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()


def median_result(results: list[Result]) -> Result:
    """The run with the median engine rate."""
    ordered = sorted(results, key=lambda r: r.steps / r.engine_seconds)
    return ordered[len(ordered) // 2]


# --profile

OPERATIONS = (
    ("process.py", "step", "Worker.step (everything)"),
    ("decide.py", "claim_workflow_task", "  claim_workflow_task"),
    ("decide.py", "complete_workflow_task", "  complete_workflow_task"),
    ("decide.py", "decide", "    of which decide()"),
    ("activities.py", "claim_activity", "  claim_activity"),
    ("activities.py", "complete_activity", "  complete_activity"),
    ("handlers.py", "call", "  the handler (no-op)"),
    ("sqlite.py", "write", "  Store.write's own part: lock, BEGIN IMMEDIATE, COMMIT"),
)


def _drain(workflows: int, *, trace: bool = False, profile: bool = False,
           autocheckpoint: int | None = None) -> tuple[float, Counter[str], pstats.Stats | None]:
    """Start `workflows` and drain them with Worker.step in this thread; returns seconds."""
    with Scratch() as scratch:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"prof-{n:06d}")
        worker = client.worker(WorkerOptions(concurrency=1))
        worker.register(clock.now())
        conn = client.engine.store.conn
        statements: Counter[str] = Counter()
        if autocheckpoint is not None:
            conn.execute(f"PRAGMA wal_autocheckpoint={autocheckpoint}")
        if trace:
            conn.set_trace_callback(lambda sql: statements.update([_kind(sql)]))
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        while worker.step(clock.now()):
            pass
        if profiler:
            profiler.disable()
        seconds = time.perf_counter() - started
        conn.set_trace_callback(None)
        worker.unregister(clock.now())
        client.close()
    return seconds, statements, pstats.Stats(profiler) if profiler else None


def _threads(workflows: int, concurrency: int) -> tuple[float, int, float, float]:
    """Worker.run(once=True) in process: seconds, write transactions, time waiting for the
    process's write lock and time holding it (summed over threads)."""
    with Scratch() as scratch:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"prof-{n:06d}")
        store = client.engine.store
        write = store.write
        totals = {"transactions": 0, "waiting": 0.0, "holding": 0.0}

        @contextmanager
        def timed_write() -> Iterator[Any]:
            asked = time.perf_counter()
            with write() as tx:
                entered = time.perf_counter()
                yield tx
            totals["transactions"] += 1
            totals["waiting"] += entered - asked
            totals["holding"] += time.perf_counter() - entered

        store.write = timed_write  # type: ignore[method-assign]
        worker = client.worker(WorkerOptions(concurrency=concurrency))
        level = log.LOGGER.level
        log.LOGGER.setLevel(logging.ERROR)
        started = time.perf_counter()
        try:
            worker.run(once=True)
        finally:
            log.LOGGER.setLevel(level)
        seconds = time.perf_counter() - started
        client.close()
    return seconds, int(totals["transactions"]), totals["waiting"], totals["holding"]


def _kind(sql: str) -> str:
    words = sql.split()
    verb = words[0].upper()
    if verb in ("BEGIN", "COMMIT", "ROLLBACK"):
        return " ".join(words[:2]) if verb == "BEGIN" else verb
    match = re.search(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", sql, re.IGNORECASE)
    return f"{verb} {match.group(1) if match else '?'}"


def profile(workflows: int) -> None:
    steps = workflows * STEPS_PER_WORKFLOW
    print(f"\n-- profile: one slot in process, {workflows} workflows = {steps} activity steps")
    # Alternate plain runs with runs without automatic WAL checkpoints; medians of three.
    plains, no_checkpoints = [], []
    for _ in range(3):
        plains.append(_drain(workflows)[0])
        no_checkpoints.append(_drain(workflows, autocheckpoint=0)[0])
    plain, no_checkpoint = statistics.median(plains), statistics.median(no_checkpoints)
    print(f"   plain loop: {steps / plain:,.0f} steps/s ({plain / steps * 1e6:,.0f} us per step; "
          f"runs {', '.join(f'{steps / x:,.0f}' for x in sorted(plains, reverse=True))})")
    _, statements, _ = _drain(workflows, trace=True)
    total = sum(statements.values())
    print(f"   statements per activity step: {total / steps:.1f}")
    for kind, count in statements.most_common():
        if count / steps >= 0.3:
            print(f"     {count / steps:5.2f}  {kind}")
    seconds, _, stats = _drain(workflows, profile=True)
    assert stats is not None
    print(f"   cProfile (inflates Python time; {seconds / steps * 1e6:,.0f} us per step under it),"
          " cumulative us per activity step:")
    for suffix, name, label in OPERATIONS:
        cumulative = sum(ct for (path, _, func), (_, _, _, ct, _) in stats.stats.items()  # type: ignore[attr-defined]
                         if func == name and path.endswith(suffix))
        print(f"     {cumulative / steps * 1e6:7.0f}  {label}")
    execute = sum(tt for (_, _, func), (_, _, tt, _, _) in stats.stats.items()  # type: ignore[attr-defined]
                  if func == "<method 'execute' of 'sqlite3.Connection' objects>")
    print(f"     {execute / steps * 1e6:7.0f}  inside sqlite3 execute() (all statements, "
          "COMMIT included)")
    print("   Worker.run(once=True) in process, by --concurrency (no logging):")
    for concurrency in (1, 4):
        seconds, transactions, waiting, holding = _threads(workflows, concurrency)
        print(f"     concurrency {concurrency}: {steps / seconds:6,.0f} steps/s, "
              f"{transactions / steps:.2f} write transactions per step, "
              f"write lock held {holding / steps * 1e6:4.0f} us per step, "
              f"waited for {waiting / steps * 1e6:5.0f} us per step (summed over threads)")
    print(f"   without automatic WAL checkpoints: {steps / no_checkpoint:,.0f} steps/s "
          f"({no_checkpoint / steps * 1e6:,.0f} us per step; runs "
          f"{', '.join(f'{steps / x:,.0f}' for x in sorted(no_checkpoints, reverse=True))}): "
          f"{plain / no_checkpoint - 1:+.0%} against the plain loop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--workflows", type=int, default=1_500,
                        help="workflows per configuration (default 1500 = 4500 steps)")
    parser.add_argument("--quick", action="store_true",
                        help="300 workflows per configuration, one run each")
    parser.add_argument("--workers", default="1,2", help="worker process counts (default 1,2)")
    parser.add_argument("--concurrency", default="1,4",
                        help="--concurrency values for each worker (default 1,4)")
    parser.add_argument("--mode", choices=("long", "once", "both"), default="long",
                        help="long-running workers stopped by SIGTERM, --once workers, or both")
    parser.add_argument("--log-level", default="info",
                        help="the workers' --log-level (default info, as a user runs it)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per configuration; the median is reported (default 3)")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this long")
    parser.add_argument("--profile", action="store_true",
                        help="profile one in-process worker slot instead (see above)")
    args = parser.parse_args()
    workflows = 300 if args.quick else args.workflows
    repeat = 1 if args.quick else args.repeat
    if args.profile:
        header(f"throughput profile: {workflows} workflows x {STEPS_PER_WORKFLOW} activities")
        profile(workflows)
        return
    worker_counts = [int(x) for x in args.workers.split(",")]
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    modes = ("long", "once") if args.mode == "both" else (args.mode,)

    header(f"throughput: {workflows} workflows x {STEPS_PER_WORKFLOW} no-op activities")
    with Scratch() as scratch:
        print(f"   bare SQLite claim+complete pairs: {bare_sqlite_pairs(scratch.folder):,.0f}/s")
    print(f"   workers' --log-level {args.log_level}; median of {repeat} run(s) per row; "
          "engine = first workflow task to last completion, wall = with process start-up")
    results, every = [], []
    for mode in modes:
        for workers in worker_counts:
            for concurrency in concurrencies:
                runs = [run_config(workflows, workers, concurrency, mode, args.log_level,
                                   args.timeout) for _ in range(repeat)]
                every.extend(runs)
                result = median_result(runs)
                results.append(result)
                spread = ""
                if repeat > 1:
                    rates = sorted(r.steps / r.engine_seconds for r in runs)
                    spread = f"  [runs: {', '.join(f'{rate:,.0f}' for rate in rates)}]"
                print(result.line() + spread, flush=True)
    starts = [r.workflows / r.start_seconds for r in every]
    print(f"   Client.start: median {statistics.median(starts):,.0f} workflows/s "
          f"(one Client, one process, one transaction per start); {load()} at the end")
    single = [r for r in results if r.workers == 1]
    if single:
        best = max(r.steps / r.engine_seconds for r in single)
        worst = min(r.steps / r.engine_seconds for r in single)
        verdict = "MET" if worst >= TARGET else ("MET (best config)" if best >= TARGET
                                                 else "MISSED")
        print(f"   target >= {TARGET:,.0f} steps/s with one worker process: {verdict} "
              f"(engine rate {worst:,.0f}-{best:,.0f} steps/s)")
    for r in every:
        if r.activity_started != r.steps or r.retries:
            print(f"   WARNING: {r.activity_started} attempts for {r.steps} steps, "
                  f"{r.retries} retries (workers={r.workers} concurrency={r.concurrency})")
            sys.exit(1)


if __name__ == "__main__":
    main()
