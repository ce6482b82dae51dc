"""Activity steps per second: N workflows of 3 no-op activities drained by `wfctl work` processes.

Goals (0.3): one `wfctl work` at default options (`--concurrency 4`) does at least 5,000 activity
steps/s at no more than 200 µs of CPU a step, and at least 0.45 of huey's steps/s at the same
durability; `--concurrency 4` is not slower than `--concurrency 1`.

Each configuration gets a fresh database: N workflows are started through `wfctl.Client`, then
W real `wfctl work` subprocesses drain them (long-running workers stopped with SIGTERM once every
workflow completed, or `--once` workers that exit when nothing is ready). Figures per row:

  engine  3N / (last workflow closed - first WorkflowTaskStarted), from `Client.list` and
          `Client.history`: the rate once a worker runs, every workflow task included, process
          start-up excluded;
  wall    3N / (time from spawning the workers until every workflow completed), start-up
          (imports, migrations check, registration) included;
  CPU     the workers' CPU time (user + system) per step. Long-running workers: their own
          (/proc/PID/stat) from the first poll after it logged `worker_started` to the one
          that finds no workflow open: no step runs before a worker starts, so start-up and
          shutdown are left out. `--once` workers, which exit by themselves, and workers
          below `--log-level info`, which log no `worker_started`: all of their CPU, less that
          of starting and stopping an idle `wfctl work --once` (measured once per run), marked
          "run less idle".

Only wfctl's public surface is used (the CLI, `Client.start/list/history`), so the figures stay
comparable while the store underneath changes.

Yardsticks from the same run: a bare SQLite claim+complete loop on the same disk (two BEGIN
IMMEDIATE transactions per step), and with `--huey` a huey consumer (`huey_chain.py`: one
SqliteHuey worker thread, N pipelines of 3 no-op tasks) at huey's default synchronous=FULL and
at NORMAL, wfctl's durability. huey is not a wfctl dependency: `pip install huey` first.
A closing comparison gives each figure as a share of the bare loop, concurrency 4 against 1,
and wfctl against huey at the same durability.
Each configuration runs `--repeat` times, the rounds going through the configurations in
alternating order; the median is reported (the machine is shared).

On PostgreSQL (`--db postgresql://…`, a server whose user may create databases, or
`--postgres`, a throwaway cluster on this machine with fsync on: see pglib.py) each run gets a
fresh database on the server; the yardstick is a bare claim+complete loop from one process
(SELECT … FOR UPDATE SKIP LOCKED and UPDATE in one transaction, UPDATE in a second), the rows
add the server's CPU per step (throwaway cluster only), and the verdicts are PostgreSQL's goals: two
workers at default options do at least 1,400 steps/s at no more than 600 µs of their CPU and 500 µs
of the server's a step, and more workers are never slower than one.

`--profile` instead drives one worker slot in process (`Worker.step` in a loop, what a
`--concurrency 1` worker does) and prints where an activity step's time goes: statements and
transactions per step, cProfile cumulative time per engine operation, and the share of WAL
checkpoints (the same loop again with `PRAGMA wal_autocheckpoint=0`). It reaches into today's
engine and store, and follows them as they change.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib.util
import json
import logging
import os
import pstats
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pglib
from benchlib import HERE, Scratch, bare_sqlite_pairs, header, load, wfctl_command, worker_env

import wfctl
from wfctl.vocabulary import OPEN_RUN
from wfctl.worker import WorkerOptions

STEPS_PER_WORKFLOW = 3
TARGET = 5_000.0
TARGET_CPU_US = 200.0
TARGET_HUEY_SHARE = 0.45
POSTGRES_TARGET = 1_400.0
POSTGRES_TARGET_CPU_US = 600.0
POSTGRES_TARGET_SERVER_US = 500.0


class Where:
    """Where each run's database lives: a fresh SQLite file in a scratch folder, or a fresh
    database on a PostgreSQL server."""

    def __init__(self, server: pglib.Server | None = None) -> None:
        self.server = server
        self.name = "PostgreSQL" if server else "SQLite"

    @contextmanager
    def scratch(self) -> Iterator[Scratch]:
        if self.server is None:
            with Scratch() as scratch:
                yield scratch
        else:
            with self.server.database() as url, Scratch(db=url) as scratch:
                yield scratch

    def bare_pairs(self) -> float:
        """The yardstick: bare claim+complete pairs per second on this backend."""
        if self.server is None:
            with Scratch() as scratch:
                return bare_sqlite_pairs(scratch.folder)
        with self.server.database() as url:
            return pglib.bare_postgres_pairs(url)

    def server_cpu(self) -> float:
        return self.server.cpu_seconds() if self.server else 0.0


@dataclass
class Result:
    workers: int
    concurrency: int
    mode: str
    workflows: int
    start_seconds: float
    wall_seconds: float
    engine_seconds: float
    cpu_seconds: float
    activity_started: int
    retries: int
    shares: list[int] = field(default_factory=list)
    # The database server's CPU seconds over the run (PostgreSQL's throwaway cluster only).
    server_cpu_seconds: float = 0.0
    # Whether `cpu_seconds` is the whole run's less an idle worker's (`--once`, or a log level
    # that hides `worker_started`) rather than the workers' own while they drained.
    cpu_less_idle: bool = False

    @property
    def steps(self) -> int:
        return self.workflows * STEPS_PER_WORKFLOW

    @property
    def rate(self) -> float:
        return self.steps / self.engine_seconds

    @property
    def cpu_us_per_step(self) -> float:
        return self.cpu_seconds / self.steps * 1e6

    @property
    def server_us_per_step(self) -> float:
        return self.server_cpu_seconds / self.steps * 1e6

    def line(self) -> str:
        return (f"  workers={self.workers} concurrency={self.concurrency} mode={self.mode:<4} "
                f"steps={self.steps:>6}  engine {self.rate:7.0f} steps/s "
                f"({self.engine_seconds:6.2f} s)  wall {self.steps / self.wall_seconds:7.0f} "
                f"steps/s ({self.wall_seconds:6.2f} s)  CPU {cpu_text(self.cpu_us_per_step)}"
                + (" (run less idle)" if self.cpu_less_idle else "")
                + (f" + server {self.server_us_per_step:4.0f}"
                   if self.server_cpu_seconds else "")
                + (f"  split {'/'.join(str(n) for n in self.shares)}" if self.workers > 1
                   else ""))


def cpu_text(us_per_step: float) -> str:
    """CPU a step as the rows show it: none counted (a drain over before the first poll, or
    one that cost no more than an idle worker's start and stop) is not a step for free."""
    return f"{us_per_step:5,.0f} us/step" if us_per_step > 0 else "not measured"


def children_cpu() -> float:
    """User + system seconds of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float | None:
    """User + system seconds a running process has spent (from /proc/PID/stat); None once it
    has exited."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


class DrainWindow:
    """The long-running workers' own CPU while they drain: each one's from the first poll
    after it logged `worker_started` (its id names its pid) to the one that finds no workflow
    open, before they are stopped. A worker runs no step before it starts, so the sum is the
    CPU of every step (less what a worker did in the poll interval after it started: a few of
    the hundreds), with start-up and shutdown left out and no idle worker subtracted, which a
    short run cannot afford. Below `--log-level info` there is no such line, and no figure."""

    def __init__(self, pids: list[int], log_path: Path) -> None:
        self.pids, self.log_path = pids, log_path
        self.starts: dict[int, float] = {}
        self.cpu: float | None = None

    def poll(self) -> None:
        if len(self.starts) == len(self.pids):
            return
        log = self.log_path.read_text(errors="replace")
        for pid in self.pids:
            if pid not in self.starts and re.search(rf" worker_started worker_id=\S*:{pid}:", log):
                cpu = process_cpu(pid)
                if cpu is not None:
                    self.starts[pid] = cpu

    def end(self) -> None:
        if len(self.starts) < len(self.pids):
            return
        total = 0.0
        for pid, start in self.starts.items():
            cpu = process_cpu(pid)
            if cpu is None:
                return
            total += cpu - start
        self.cpu = total


def idle_worker_cpu(log_level: str, where: Where) -> float:
    """The CPU seconds a `wfctl work --once` spends starting and stopping with nothing to do."""
    with where.scratch() as scratch:
        before = children_cpu()
        subprocess.run(wfctl_command(scratch, "work", "--once", "--log-level", log_level),
                       env=worker_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        return children_cpu() - before


def anything_open(client: wfctl.Client) -> bool:
    return any(client.list(status=status, limit=1) for status in OPEN_RUN)


def run_config(workflows: int, workers: int, concurrency: int, mode: str, log_level: str,
               timeout: float, idle_cpu: float, where: Where) -> Result:
    with where.scratch() as scratch:
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
        watch = wfctl.Client(scratch.db, scratch.workflows, create=False)
        cpu_before = children_cpu()
        server_before = where.server_cpu()
        with open(log_path, "w") as log:
            spawned = time.perf_counter()
            procs = [subprocess.Popen(wfctl_command(scratch, *args), env=worker_env(),
                                      stdout=subprocess.DEVNULL, stderr=log)
                     for _ in range(workers)]
            window = DrainWindow([proc.pid for proc in procs], log_path)
            try:
                while anything_open(watch):
                    if time.perf_counter() - spawned > timeout:
                        raise SystemExit(f"timed out after {timeout} s; see {log_path}")
                    if mode == "once" and all(p.poll() is not None for p in procs):
                        break
                    if mode == "long":
                        window.poll()
                    time.sleep(0.02)
                wall_seconds = time.perf_counter() - spawned
                server_cpu = where.server_cpu() - server_before
                if mode == "long":
                    window.end()
            finally:
                for proc in procs:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                for proc in procs:
                    proc.wait(timeout=60)
        cpu_seconds = max(0.0, children_cpu() - cpu_before - idle_cpu * workers)
        less_idle = window.cpu is None
        if not less_idle:
            cpu_seconds = window.cpu
        completed = watch.list(status="completed", limit=workflows + 1)
        if len(completed) != workflows:
            raise SystemExit(f"only {len(completed)} of {workflows} workflows completed; "
                             f"exit codes {[p.returncode for p in procs]}")
        last = max(row["closed_at"] for row in completed)
        first, attempts, retries, by_worker = None, 0, 0, Counter[str]()
        for row in completed:
            for event in watch.history(row["workflow_instance_id"]):
                kind = event["event_type"]
                if kind == "WorkflowTaskStarted" and (first is None or event["at"] < first):
                    first = event["at"]
                elif kind == "ActivityStarted":
                    attempts += 1
                    by_worker[event["attributes"].get("worker_id")] += 1
                elif kind == "ActivityRetryScheduled":
                    retries += 1
        watch.close()
    assert first is not None
    # How the steps were shared between the worker processes (starvation shows here).
    shares = sorted(by_worker.values(), reverse=True)
    return Result(workers, concurrency, mode, workflows, start_seconds, wall_seconds,
                  _seconds_between(first, last), cpu_seconds, attempts, retries, shares,
                  server_cpu, less_idle)


def _seconds_between(first: datetime, last: datetime) -> float:
    return (last - first).total_seconds()


# --huey


@dataclass
class HueyResult:
    synchronous: str
    steps: int
    engine_seconds: float
    wall_seconds: float
    cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.steps / self.engine_seconds

    def line(self) -> str:
        return (f"  huey 1 thread, synchronous={self.synchronous:<6} steps={self.steps:>6}  "
                f"engine {self.rate:7.0f} steps/s ({self.engine_seconds:6.2f} s)  CPU "
                f"{self.cpu_seconds / self.steps * 1e6:5.0f} us/step")


Run = TypeVar("Run", Result, HueyResult)


def huey_installed() -> bool:
    return importlib.util.find_spec("huey") is not None


def run_huey(workflows: int, synchronous: str, log_level: str, timeout: float) -> HueyResult:
    with Scratch() as scratch:
        finished = subprocess.run(
            [sys.executable, str(HERE / "huey_chain.py"), str(scratch.folder / "huey.db"),
             "-n", str(workflows), "--synchronous", synchronous, "--log-level", log_level,
             "--timeout", str(timeout)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False)
    if finished.returncode != 0:
        raise SystemExit(f"huey_chain.py exited {finished.returncode}")
    outcome = json.loads(finished.stdout)
    if outcome["completed"] != outcome["steps"]:
        raise SystemExit(f"huey completed {outcome['completed']} of {outcome['steps']} tasks")
    return HueyResult(outcome["synchronous"], outcome["steps"], outcome["engine_seconds"],
                      outcome["wall_seconds"], outcome["cpu_seconds"])


def median_result(results: list[Run]) -> Run:
    """The run with the median engine rate."""
    ordered = sorted(results, key=lambda r: r.rate)
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
    from wfctl import clock

    with Scratch() as scratch:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"prof-{n:06d}")
        worker = client.worker(WorkerOptions(concurrency=1))
        worker.register(clock.now())
        # The write connection: every write statement of the step path goes through it.
        conn = client.engine.store._writer_connection()
        statements: Counter[str] = Counter()
        if autocheckpoint is not None:
            conn.execute(f"PRAGMA wal_autocheckpoint={autocheckpoint}")
        if trace:
            conn.set_trace_callback(lambda sql: statements.update([_kind(sql)]))
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        while worker.slots[0].run_once(clock.now(), check_deadlines=False):
            pass
        if profiler:
            profiler.disable()
        seconds = time.perf_counter() - started
        conn.set_trace_callback(None)
        worker.unregister(clock.now())
        client.close()
    return seconds, statements, pstats.Stats(profiler) if profiler else None


def _threads(workflows: int, concurrency: int, where: Where | None = None, *,
             trace: bool = False,
             around: Callable[[], AbstractContextManager[Any]] = nullcontext) -> \
        tuple[float, int, float, float, int]:
    """Worker.run(once=True) in process: seconds, write transactions, time waiting for the
    process's write lock and time holding it (summed over threads), and with `trace` the
    statements run on the SQLite write connection (triggers' included, as its trace counts
    them); `around` is entered for the run alone (what measures it on PostgreSQL)."""
    from wfctl.ops import log

    with (where or Where()).scratch() as scratch:
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
        statements = [0]
        if trace:
            store._writer_connection().set_trace_callback(
                lambda _: statements.__setitem__(0, statements[0] + 1))
        worker = client.worker(WorkerOptions(concurrency=concurrency))
        level = log.LOGGER.level
        log.LOGGER.setLevel(logging.ERROR)
        started = time.perf_counter()
        try:
            with around():
                worker.run(once=True)
        finally:
            log.LOGGER.setLevel(level)
        seconds = time.perf_counter() - started
        client.close()
    return (seconds, int(totals["transactions"]), totals["waiting"], totals["holding"],
            statements[0])


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
    print("   Worker.run(once=True) in process, by --concurrency (no logging; statements "
          "traced on the write connection, the default options' figure):")
    for concurrency in (1, 4):
        seconds, transactions, waiting, holding, traced = _threads(workflows, concurrency,
                                                                   trace=True)
        print(f"     concurrency {concurrency}: {steps / seconds:6,.0f} steps/s, "
              f"{traced / steps:.2f} statements and "
              f"{transactions / steps:.2f} write transactions per step, "
              f"write lock held {holding / steps * 1e6:4.0f} us per step, "
              f"waited for {waiting / steps * 1e6:5.0f} us per step (summed over threads)")
    print(f"   without automatic WAL checkpoints: {steps / no_checkpoint:,.0f} steps/s "
          f"({no_checkpoint / steps * 1e6:,.0f} us per step; runs "
          f"{', '.join(f'{steps / x:,.0f}' for x in sorted(no_checkpoints, reverse=True))}): "
          f"{plain / no_checkpoint - 1:+.0%} against the plain loop")


@dataclass
class Traced:
    """What the statements of a PostgreSQL drain cost, from this side and from the server's."""

    statements: Counter[str] = field(default_factory=Counter)
    # Seconds inside execute by the round trip's first statement (COMMIT waits for the WAL flush).
    seconds_by_kind: Counter[str] = field(default_factory=Counter)
    # Round trips by the same name.
    trips_by_kind: Counter[str] = field(default_factory=Counter)
    round_trips: int = 0
    client_seconds: float = 0.0         # inside psycopg's execute: the wire and the server
    server_seconds: float | None = None   # pg_stat_statements' execution time, when loaded
    plan_seconds: float = 0.0           # and its planning time (when track_planning is on)


@contextmanager
def _counting(traced: Traced) -> Iterator[None]:
    """Count into `traced` the statements psycopg sends meanwhile, from every thread, and the
    round trips they take, with the time each thread waited inside them."""
    import psycopg

    # Every statement goes through a cursor (Connection.execute makes one): the store's
    # transactions keep cursors of their own. In pipeline mode a statement is only queued: the
    # round trip is the pipeline's end, which waits for all of them.
    execute = psycopg.Cursor.execute
    pipeline_exit = psycopg.Pipeline.__exit__
    lock = threading.Lock()
    queues = threading.local()

    def counted(cursor: psycopg.Cursor, query: Any, params: Any = None, **kwargs: Any) -> Any:
        queued = cursor.connection.info.pipeline_status != psycopg.pq.PipelineStatus.OFF
        before = time.perf_counter()
        try:
            return execute(cursor, query, params, **kwargs)
        finally:
            took = time.perf_counter() - before
            kinds = [_kind(statement.strip()) for statement in str(query).split(";")
                     if statement.strip()]
            with lock:
                traced.client_seconds += took
                traced.statements.update(kinds)
                if queued:
                    queues.__dict__.setdefault("piped", []).extend(kinds)
                else:
                    traced.round_trips += 1
                    traced.seconds_by_kind[kinds[0]] += took
                    traced.trips_by_kind[kinds[0]] += 1

    def sent(pipeline: psycopg.Pipeline, *args: Any) -> Any:
        before = time.perf_counter()
        try:
            return pipeline_exit(pipeline, *args)
        finally:
            took = time.perf_counter() - before
            piped = queues.__dict__.setdefault("piped", [])
            with lock:
                traced.client_seconds += took
                traced.round_trips += 1
                # Named by the statement whose result was awaited (the last one).
                kind = f"{piped[-1]} (pipelined)" if piped else "?"
                traced.seconds_by_kind[kind] += took
                traced.trips_by_kind[kind] += 1
            piped.clear()

    psycopg.Cursor.execute = counted  # type: ignore[method-assign]
    psycopg.Pipeline.__exit__ = sent  # type: ignore[method-assign]
    try:
        yield
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Pipeline.__exit__ = pipeline_exit  # type: ignore[method-assign]


@contextmanager
def _measured(server: pglib.Server, traced: Traced, cpu: Counter[str]) -> Iterator[None]:
    """`_counting` and `_server_cpu` at once."""
    with _counting(traced), _server_cpu(server, cpu):
        yield


@contextmanager
def _server_cpu(server: pglib.Server, into: Counter[str]) -> Iterator[None]:
    """Add to `into` the CPU seconds the throwaway cluster's processes spend meanwhile, by
    kind: `backend user`, `backend system`, `other` (nothing for a server of --db)."""
    cluster = server.cluster
    before = cluster.cpu_by_process() if cluster else {}
    try:
        yield
    finally:
        for pid, (kind, user, system) in (cluster.cpu_by_process() if cluster else {}).items():
            _, user_before, system_before = before.get(pid, (kind, 0.0, 0.0))
            if kind == "backend":
                into["backend user"] += user - user_before
                into["backend system"] += system - system_before
            else:
                into["other"] += user + system - user_before - system_before


def _drain_postgres(workflows: int, server: pglib.Server, *, trace: bool = False,
                    profile: bool = False) -> tuple[float, Traced, pstats.Stats | None]:
    """Start `workflows` on a fresh database and drain them with Worker.step in this thread;
    returns the seconds it took and, with `trace`, what its statements cost."""
    import psycopg

    traced = Traced()
    with server.database() as url, Scratch(db=url) as scratch:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"prof-{n:06d}")
        worker = client.worker(WorkerOptions(concurrency=1))
        worker.register(client.now())
        with psycopg.connect(url, autocommit=True) as stats_conn:
            try:
                stats_conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                stats_conn.execute("SELECT pg_stat_statements_reset()")
                stats = True
            except psycopg.Error:
                stats = False
            profiler = cProfile.Profile() if profile else None
            started = time.perf_counter()
            with _counting(traced) if trace else nullcontext():
                if profiler:
                    profiler.enable()
                while worker.slots[0].run_once(client.now(), check_deadlines=False):
                    pass
                if profiler:
                    profiler.disable()
            seconds = time.perf_counter() - started
            if trace and stats:
                traced.server_seconds, traced.plan_seconds = stats_conn.execute(
                    "SELECT coalesce(sum(total_exec_time), 0) / 1000, "
                    "coalesce(sum(total_plan_time), 0) / 1000 FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = "
                    "current_database()) AND query NOT LIKE '%%pg_stat_statements%%'"
                ).fetchone()
        worker.unregister(client.now())
        client.close()
    return seconds, traced, pstats.Stats(profiler) if profiler else None


def profile_postgres(workflows: int, server: pglib.Server) -> None:
    """Where a PostgreSQL activity step's time goes: one slot in process, as `_drain` does on
    SQLite; the statements and round trips per step, and the time in the server, on the wire
    and in Python."""
    steps = workflows * STEPS_PER_WORKFLOW
    print(f"\n-- profile: one slot in process, {workflows} workflows = {steps} activity steps")
    with server.database() as url:
        print(f"   one round trip (SELECT 1, median): {pglib.round_trip_us(url):,.0f} us; "
              f"bare claim+complete pairs: {pglib.bare_postgres_pairs(url):,.0f}/s")
    plains = sorted(_drain_postgres(workflows, server)[0] for _ in range(3))
    plain = plains[1]
    print(f"   plain loop: {steps / plain:,.0f} steps/s ({plain / steps * 1e6:,.0f} us per step; "
          f"runs {', '.join(f'{steps / x:,.0f}' for x in reversed(plains))})")
    seconds, traced, _ = _drain_postgres(workflows, server, trace=True)
    total = sum(traced.statements.values())
    print(f"   statements per activity step: {total / steps:.1f} in {traced.round_trips / steps:.1f}"
          f" round trips ({traced.statements['COMMIT'] / steps:.2f} commits)")
    for kind, count in traced.statements.most_common():
        if count / steps >= 0.3:
            print(f"     {count / steps:5.2f}  {kind}")
    per_step = seconds / steps * 1e6
    wire = traced.client_seconds / steps * 1e6
    print(f"   time per step (traced run, {per_step:,.0f} us): waiting on psycopg's execute "
          f"{wire:,.0f} us ({wire / per_step:.0%}), Python around it {per_step - wire:,.0f} us "
          f"({1 - wire / per_step:.0%})")
    print("     execute time by the round trip's first statement, us per step (round trips "
          "per step):")
    for kind, spent in traced.seconds_by_kind.most_common(6):
        print(f"     {spent / steps * 1e6:7,.0f}  {kind} ({traced.trips_by_kind[kind] / steps:.2f})")
    if traced.server_seconds is not None:
        inside = traced.server_seconds / steps * 1e6
        planning = traced.plan_seconds / steps * 1e6
        print(f"     of the execute time: executing in the server {inside:,.0f} us, planning "
              f"{planning:,.0f} us (pg_stat_statements), the rest "
              f"({wire - inside - planning:,.0f} us) the commits' WAL flush, the wire, "
              "waiting to be scheduled, libpq and psycopg")
    else:
        print("     (no pg_stat_statements on this server: the server's share is not known)")
    seconds, _, stats = _drain_postgres(workflows, server, profile=True)
    assert stats is not None
    print(f"   cProfile (inflates Python time; {seconds / steps * 1e6:,.0f} us per step under it),"
          " cumulative us per activity step:")
    operations = [*OPERATIONS[:-1],
                  ("postgres.py", "write", "  Store.write's own part: BEGIN + lock, COMMIT")]
    for suffix, name, label in operations:
        cumulative = sum(ct for (path, _, func), (_, _, _, ct, _) in stats.stats.items()  # type: ignore[attr-defined]
                         if func == name and path.endswith(suffix))
        print(f"     {cumulative / steps * 1e6:7.0f}  {label}")
    print("   Worker.run(once=True) in process, by --concurrency (no logging):")
    for concurrency in (1, 4):
        seconds, transactions, waiting, holding, _ = _threads(workflows, concurrency,
                                                              Where(server))
        print(f"     concurrency {concurrency}: {steps / seconds:6,.0f} steps/s, "
              f"{transactions / steps:.2f} write transactions per step, "
              f"write transaction open {holding / steps * 1e6:4.0f} us per step, "
              f"waited for a connection {waiting / steps * 1e6:5.0f} us per step "
              "(summed over threads)")
        traced, cpu = Traced(), Counter[str]()
        _threads(workflows, concurrency, Where(server),
                 around=functools.partial(_measured, server, traced, cpu))
        print(f"       traced again: {sum(traced.statements.values()) / steps:.1f} statements "
              f"in {traced.round_trips / steps:.1f} round trips per step; the server's CPU "
              f"{cpu['backend user'] / steps * 1e6:,.0f} us user + "
              f"{cpu['backend system'] / steps * 1e6:,.0f} us system per step in the "
              f"connections' backends, {cpu['other'] / steps * 1e6:,.0f} us in its other "
              "processes")
        print("       round trips per step by their first statement: " + ", ".join(
            f"{kind} {count / steps:.2f}" for kind, count in traced.trips_by_kind.most_common(8)))


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
    parser.add_argument("--huey", action="store_true",
                        help="also run the huey yardstick (needs `pip install huey`)")
    parser.add_argument("--profile", action="store_true",
                        help="profile one in-process worker slot instead (see above)")
    parser.add_argument("--db", metavar="URL",
                        help="run on this PostgreSQL server (postgresql://…; its user creates a "
                             "database per run)")
    parser.add_argument("--postgres", action="store_true",
                        help="run on a throwaway PostgreSQL cluster on this machine (fsync on)")
    parser.add_argument("--synchronous-commit", choices=("on", "off"), default="on",
                        help="the throwaway cluster's synchronous_commit (default on)")
    args = parser.parse_args()
    workflows = 300 if args.quick else args.workflows
    repeat = 1 if args.quick else args.repeat
    if args.db and args.postgres:
        parser.exit(2, "Error: --db and --postgres exclude each other\n")
    server = None
    # Stopped with SIGTERM, it still stops its throwaway cluster (the `finally` below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.postgres:
        server = pglib.Server((cluster := pglib.Cluster(args.synchronous_commit)).url, cluster)
    elif args.db:
        server = pglib.Server(args.db)
    try:
        run(args, workflows, repeat, Where(server), parser)
    finally:
        if server is not None:
            server.close()


def run(args: argparse.Namespace, workflows: int, repeat: int, where: Where,
        parser: argparse.ArgumentParser) -> None:
    if args.profile:
        header(f"throughput profile: {workflows} workflows x {STEPS_PER_WORKFLOW} activities")
        if where.server is not None:
            print(f"   {where.server.describe()}")
            profile_postgres(workflows, where.server)
        else:
            profile(workflows)
        return
    worker_counts = [int(x) for x in args.workers.split(",")]
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    modes = ("long", "once") if args.mode == "both" else (args.mode,)
    if args.huey and not huey_installed():
        parser.exit(2, "Error: --huey needs huey, which is not a wfctl dependency: "
                       "`pip install huey` first\n")

    header(f"throughput: {workflows} workflows x {STEPS_PER_WORKFLOW} no-op activities")
    if where.server is not None:
        print(f"   {where.server.describe()}")
    bare_rates = [where.bare_pairs()]
    print(f"   bare {where.name} claim+complete pairs: {bare_rates[0]:,.0f}/s")
    idle_cpu = idle_worker_cpu(args.log_level, where)
    print(f"   workers' --log-level {args.log_level}; {repeat} round(s) of every row; "
          "engine = first workflow task to last completion, wall = with process start-up; "
          "CPU = long-running workers' own while they drained (/proc), --once workers' "
          f"less {idle_cpu * 1000:.0f} ms each (an idle `wfctl work --once`)")
    # Rounds go through every configuration in turn, so that a change in the machine's load
    # between rounds touches every row alike; every other round in the reverse order, so that
    # no row gains from its place in a round (the first of a round ran a few per cent faster
    # than the second, whichever it was).
    configs = [(mode, workers, concurrency) for mode in modes for workers in worker_counts
               for concurrency in concurrencies]
    runs: dict[tuple[str, int, int], list[Result]] = {config: [] for config in configs}
    huey_runs: dict[str, list[HueyResult]] = {}
    if args.huey:
        huey_runs = {"default": [], "normal": []}
    for round_ in range(repeat):
        for mode, workers, concurrency in configs[::-1] if round_ % 2 else configs:
            result = run_config(workflows, workers, concurrency, mode, args.log_level,
                                args.timeout, idle_cpu, where)
            runs[mode, workers, concurrency].append(result)
            if repeat > 1:
                print(f"   round {round_ + 1}:{result.line()}", flush=True)
        for synchronous, each in huey_runs.items():
            each.append(run_huey(workflows, synchronous, args.log_level, args.timeout))
            if repeat > 1:
                print(f"   round {round_ + 1}:{each[-1].line()}", flush=True)
    print(f"   medians of {repeat} round(s):")
    results = [median_result(runs[config]) for config in configs]
    every = [result for each in runs.values() for result in each]
    for config, result in zip(configs, results, strict=True):
        print(result.line() + spread(runs[config]))
    hueys = [median_result(each) for each in huey_runs.values()]
    for huey, each in zip(hueys, huey_runs.values(), strict=True):
        print(huey.line() + spread(each))
    bare_rates.append(where.bare_pairs())
    print(f"   bare {where.name} claim+complete pairs again: {bare_rates[1]:,.0f}/s")
    starts = [r.workflows / r.start_seconds for r in every]
    print(f"   Client.start: median {statistics.median(starts):,.0f} workflows/s "
          f"(one Client, one process, one transaction per start); {load()} at the end")
    compare(results, hueys, statistics.mean(bare_rates), where)
    for r in every:
        if r.activity_started != r.steps or r.retries:
            print(f"   WARNING: {r.activity_started} attempts for {r.steps} steps, "
                  f"{r.retries} retries (workers={r.workers} concurrency={r.concurrency})")
            sys.exit(1)


def spread(runs: list[Result] | list[HueyResult]) -> str:
    if len(runs) < 2:
        return ""
    return f"  [runs: {', '.join(f'{rate:,.0f}' for rate in sorted(r.rate for r in runs))}]"


def compare(results: list[Result], hueys: list[HueyResult], bare: float, where: Where) -> None:
    """Every median beside the bare loop, then the verdicts."""
    print(f"\n-- comparison: engine steps/s (medians) and their share of the bare loop "
          f"({bare:,.0f}/s, the mean of the two runs)")
    rows = []
    for r in results:
        default = ", default" if r.concurrency == WorkerOptions().concurrency else ""
        rows.append((f"wfctl {r.workers} x --concurrency {r.concurrency} ({r.mode}{default})",
                     r.rate, r.cpu_us_per_step))
    for h in hueys:
        durability = "huey's default" if h.synchronous == "FULL" else "wfctl's durability"
        rows.append((f"huey 1 thread, synchronous={h.synchronous} ({durability})", h.rate,
                     h.cpu_seconds / h.steps * 1e6))
    for label, rate, cpu in rows:
        print(f"   {label:<56} {rate:7,.0f}  {rate / bare:6.3f}  CPU {cpu_text(cpu)}")
    print("   verdicts:")
    for mode in dict.fromkeys(r.mode for r in results):
        for workers in dict.fromkeys(r.workers for r in results):
            by_concurrency = {r.concurrency: r for r in results
                              if r.mode == mode and r.workers == workers}
            if 1 in by_concurrency and 4 in by_concurrency:
                one, four = by_concurrency[1], by_concurrency[4]
                # On a loaded machine a process with more threads gets a larger share of the
                # cores, so the CPU per step is shown beside the rates (where both are above
                # zero: a short run may cost no more than an idle worker's start and stop).
                cpu = f"{four.cpu_us_per_step / one.cpu_us_per_step:.2f}" \
                    if one.cpu_us_per_step and four.cpu_us_per_step else "not measured"
                print(f"     {workers} worker(s), mode={mode}: --concurrency 4 / 1 = "
                      f"{four.rate:,.0f} / {one.rate:,.0f} = {four.rate / one.rate:.2f} "
                      f"(CPU per step {cpu}); target "
                      f"4 not slower than 1: {met(four.rate >= one.rate)}")
    if where.server is not None:
        postgres_verdicts(results)
        return
    defaults = [r for r in results if r.workers == 1 and r.mode == "long"
                and r.concurrency == WorkerOptions().concurrency]
    if defaults:
        rate, cpu = defaults[0].rate, defaults[0].cpu_us_per_step
        print(f"     one `wfctl work` at default options: {rate:,.0f} steps/s; target >= "
              f"{TARGET:,.0f}: {met(rate >= TARGET)}")
        print(f"     one `wfctl work` at default options: CPU {cpu_text(cpu).strip()}; "
              f"target <= {TARGET_CPU_US:,.0f}"
              + (f": {met(cpu <= TARGET_CPU_US)}" if cpu > 0 else ""))
        for h in hueys:
            share = rate / h.rate
            goal = f"; target >= {TARGET_HUEY_SHARE}: {met(share >= TARGET_HUEY_SHARE)}" \
                if h.synchronous == "NORMAL" else ""
            print(f"     wfctl at default options / huey at synchronous={h.synchronous}: "
                  f"{share:.2f}{goal}")


def met(held: bool) -> str:
    return "MET" if held else "MISSED"


def postgres_verdicts(results: list[Result]) -> None:
    """The PostgreSQL goals: two workers at default options >= 1,400 steps/s, their CPU <= 600
    µs and the server's <= 500 µs a step; more workers never slower than one (at each
    concurrency and mode)."""
    for two in results:
        if two.workers != 2 or two.mode != "long" \
                or two.concurrency != WorkerOptions().concurrency:
            continue
        print(f"     2 workers at default options: {two.rate:,.0f} steps/s; target >= "
              f"{POSTGRES_TARGET:,.0f}: {met(two.rate >= POSTGRES_TARGET)}")
        cpu = two.cpu_us_per_step
        print(f"     2 workers at default options: CPU {cpu_text(cpu).strip()}; "
              f"target <= {POSTGRES_TARGET_CPU_US:,.0f}"
              + (f": {met(cpu <= POSTGRES_TARGET_CPU_US)}" if cpu > 0 else ""))
        if two.server_cpu_seconds:
            print(f"     2 workers at default options: server CPU {two.server_us_per_step:,.0f} "
                  f"us/step; target <= {POSTGRES_TARGET_SERVER_US:,.0f}: "
                  f"{met(two.server_us_per_step <= POSTGRES_TARGET_SERVER_US)}")
    for mode in dict.fromkeys(r.mode for r in results):
        for concurrency in dict.fromkeys(r.concurrency for r in results):
            by_workers = {r.workers: r for r in results
                          if r.mode == mode and r.concurrency == concurrency}
            one = by_workers.get(1)
            for workers, more in sorted(by_workers.items()):
                if one is None or workers == 1:
                    continue
                print(f"     --concurrency {concurrency}, mode={mode}: {workers} workers / 1 = "
                      f"{more.rate:,.0f} / {one.rate:,.0f} = {more.rate / one.rate:.2f}; target "
                      f"not slower: {met(more.rate >= one.rate)}")


if __name__ == "__main__":
    main()
