"""Activity steps per second: N workflows of 3 no-op activities drained by `wfctl work` processes.

Goal: at least 5,000 activity steps/s with one `wfctl work` at default options (`--concurrency
4`); `--concurrency 4` not slower than `--concurrency 1`.

Each configuration gets a fresh database: N workflows are started through `wfctl.Client`, then
W real `wfctl work` subprocesses drain them (long-running workers stopped with SIGTERM once every
workflow completed, or `--once` workers that exit when nothing is ready). Figures per row:

  engine  3N / (last workflow closed - first WorkflowTaskStarted), from `Client.list` and
          `Client.history`: the rate once a worker runs, every workflow task included, process
          start-up excluded;
  wall    3N / (time from spawning the workers until every workflow completed), start-up
          (imports, migrations check, registration) included;
  CPU     the workers' CPU time (user + system) per step, less the CPU of starting and stopping
          an idle `wfctl work --once` (measured once per run).

Only wfctl's public surface is used (the CLI, `Client.start/list/history`), so the figures stay
comparable while the store underneath changes.

Yardsticks from the same run: a bare SQLite claim+complete loop on the same disk (two BEGIN
IMMEDIATE transactions per step), and with `--huey` a huey consumer (`huey_chain.py`: one
SqliteHuey worker thread, N pipelines of 3 no-op tasks) at huey's default synchronous=FULL and
at NORMAL, wfctl's durability. huey is not a wfctl dependency: `pip install huey` first.
A closing comparison gives each figure as a share of the bare loop, concurrency 4 against 1,
and wfctl against huey at the same durability.
Each configuration runs `--repeat` times; the median is reported (the machine is shared).

`--profile` instead drives one worker slot in process (`Worker.step` in a loop, what a
`--concurrency 1` worker does) and prints where an activity step's time goes: statements and
transactions per step, cProfile cumulative time per engine operation, and the share of WAL
checkpoints (the same loop again with `PRAGMA wal_autocheckpoint=0`). It reaches into today's
engine and store, and follows them as they change.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import logging
import pstats
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from benchlib import HERE, Scratch, bare_sqlite_pairs, header, load, wfctl_command, worker_env

import wfctl
from wfctl.vocabulary import OPEN_RUN
from wfctl.worker import WorkerOptions

STEPS_PER_WORKFLOW = 3
TARGET = 5_000.0


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

    @property
    def steps(self) -> int:
        return self.workflows * STEPS_PER_WORKFLOW

    @property
    def rate(self) -> float:
        return self.steps / self.engine_seconds

    @property
    def cpu_us_per_step(self) -> float:
        return self.cpu_seconds / self.steps * 1e6

    def line(self) -> str:
        return (f"  workers={self.workers} concurrency={self.concurrency} mode={self.mode:<4} "
                f"steps={self.steps:>6}  engine {self.rate:7.0f} steps/s "
                f"({self.engine_seconds:6.2f} s)  wall {self.steps / self.wall_seconds:7.0f} "
                f"steps/s ({self.wall_seconds:6.2f} s)  CPU {self.cpu_us_per_step:5.0f} us/step"
                + (f"  split {'/'.join(str(n) for n in self.shares)}" if self.workers > 1
                   else ""))


def children_cpu() -> float:
    """User + system seconds of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def idle_worker_cpu(log_level: str) -> float:
    """The CPU seconds a `wfctl work --once` spends starting and stopping with nothing to do."""
    with Scratch() as scratch:
        before = children_cpu()
        subprocess.run(wfctl_command(scratch, "work", "--once", "--log-level", log_level),
                       env=worker_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        return children_cpu() - before


def anything_open(client: wfctl.Client) -> bool:
    return any(client.list(status=status, limit=1) for status in OPEN_RUN)


def run_config(workflows: int, workers: int, concurrency: int, mode: str, log_level: str,
               timeout: float, idle_cpu: float) -> Result:
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
        watch = wfctl.Client(scratch.db, scratch.workflows, create=False)
        cpu_before = children_cpu()
        with open(log_path, "w") as log:
            spawned = time.perf_counter()
            procs = [subprocess.Popen(wfctl_command(scratch, *args), env=worker_env(),
                                      stdout=subprocess.DEVNULL, stderr=log)
                     for _ in range(workers)]
            try:
                while anything_open(watch):
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
        cpu_seconds = max(0.0, children_cpu() - cpu_before - idle_cpu * workers)
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
                  _seconds_between(first, last), cpu_seconds, attempts, retries, shares)


def _seconds_between(first: str, last: str) -> float:
    return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()


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
    from wfctl import log

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
    parser.add_argument("--huey", action="store_true",
                        help="also run the huey yardstick (needs `pip install huey`)")
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
    if args.huey and not huey_installed():
        parser.exit(2, "Error: --huey needs huey, which is not a wfctl dependency: "
                       "`pip install huey` first\n")

    header(f"throughput: {workflows} workflows x {STEPS_PER_WORKFLOW} no-op activities")
    with Scratch() as scratch:
        bare_rates = [bare_sqlite_pairs(scratch.folder)]
    print(f"   bare SQLite claim+complete pairs: {bare_rates[0]:,.0f}/s")
    idle_cpu = idle_worker_cpu(args.log_level)
    print(f"   workers' --log-level {args.log_level}; {repeat} round(s) of every row; "
          "engine = first workflow task to last completion, wall = with process start-up; "
          f"CPU less {idle_cpu * 1000:.0f} ms per worker (an idle `wfctl work --once`)")
    # Rounds go through every configuration in turn, so that a change in the machine's load
    # between rounds touches every row alike.
    configs = [(mode, workers, concurrency) for mode in modes for workers in worker_counts
               for concurrency in concurrencies]
    runs: dict[tuple[str, int, int], list[Result]] = {config: [] for config in configs}
    huey_runs: dict[str, list[HueyResult]] = {}
    if args.huey:
        huey_runs = {"default": [], "normal": []}
    for round_ in range(repeat):
        for mode, workers, concurrency in configs:
            result = run_config(workflows, workers, concurrency, mode, args.log_level,
                                args.timeout, idle_cpu)
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
    with Scratch() as scratch:
        bare_rates.append(bare_sqlite_pairs(scratch.folder))
    print(f"   bare SQLite claim+complete pairs again: {bare_rates[1]:,.0f}/s")
    starts = [r.workflows / r.start_seconds for r in every]
    print(f"   Client.start: median {statistics.median(starts):,.0f} workflows/s "
          f"(one Client, one process, one transaction per start); {load()} at the end")
    compare(results, hueys, statistics.mean(bare_rates))
    for r in every:
        if r.activity_started != r.steps or r.retries:
            print(f"   WARNING: {r.activity_started} attempts for {r.steps} steps, "
                  f"{r.retries} retries (workers={r.workers} concurrency={r.concurrency})")
            sys.exit(1)


def spread(runs: list[Result] | list[HueyResult]) -> str:
    if len(runs) < 2:
        return ""
    return f"  [runs: {', '.join(f'{rate:,.0f}' for rate in sorted(r.rate for r in runs))}]"


def compare(results: list[Result], hueys: list[HueyResult], bare: float) -> None:
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
        print(f"   {label:<56} {rate:7,.0f}  {rate / bare:6.3f}  CPU {cpu:5,.0f} us/step")
    print("   verdicts:")
    for mode in dict.fromkeys(r.mode for r in results):
        for workers in dict.fromkeys(r.workers for r in results):
            by_concurrency = {r.concurrency: r for r in results
                              if r.mode == mode and r.workers == workers}
            if 1 in by_concurrency and 4 in by_concurrency:
                one, four = by_concurrency[1], by_concurrency[4]
                # On a loaded machine a process with more threads gets a larger share of the
                # cores, so the CPU per step is shown beside the rates.
                print(f"     {workers} worker(s), mode={mode}: --concurrency 4 / 1 = "
                      f"{four.rate:,.0f} / {one.rate:,.0f} = {four.rate / one.rate:.2f} "
                      f"(CPU per step {four.cpu_us_per_step / one.cpu_us_per_step:.2f}); target "
                      f"4 not slower than 1: {'MET' if four.rate >= one.rate else 'MISSED'}")
    defaults = [r for r in results if r.workers == 1 and r.mode == "long"
                and r.concurrency == WorkerOptions().concurrency]
    if defaults:
        rate = defaults[0].rate
        print(f"     one `wfctl work` at default options: {rate:,.0f} steps/s; target >= "
              f"{TARGET:,.0f}: {'MET' if rate >= TARGET else 'MISSED'}")
        for h in hueys:
            print(f"     wfctl at default options / huey at synchronous={h.synchronous}: "
                  f"{rate / h.rate:.2f}")


if __name__ == "__main__":
    main()
