"""The cost of a metrics scrape on a database of 100,000 instances and more.

Goal: a scrape of `/metrics` (what `wfctl work --metrics-port` serves and `wfctl metrics` prints)
costs at most 20 ms with 100,000 instances in the database (the verdict takes the p95).

Setup: scale.py's database of N completed `three_noops` workflows (built once in minutes and
kept with `--dir`, as scale.py keeps it), copied; on the copy, work of every kind the metrics
read, created through the engine in transactions of 5,000 at instants two hours back:
`--waiting` workflows whose activity waits on a queue no worker serves (a ready backlog with
schedule_to_start, schedule_to_close, execution, run and must-complete-within deadlines pending;
100 of them claimed, so started with start_to_close and heartbeat deadlines), `--timing-out`
workflows whose activity misses schedule_to_start on each of its 3 attempts and fails (3
timeout events and a failed run each, in history), `--signals` workflows waiting on a signal with
a timeout, and one live worker.

Measured, `--repeat` times each after a warm-up: the collector and the text format in this
process (what each scrape runs); an HTTP GET of `/metrics` from the server `work --metrics-port`
starts, in this process; each store read the collector makes; and, as a yardstick, counting
instances by type and status with a GROUP BY over the instances table (what the counts kept by
triggers replace). Then a few whole `wfctl metrics` processes, start-up and imports included.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import textwrap
import time
import urllib.request
from datetime import timedelta

from benchlib import Scratch, header, load, percentile, timed_ms, wfctl_command, worker_env
from prometheus_client import CollectorRegistry, generate_latest
from scale import kept_database

import wfctl
from wfctl import clock
from wfctl.engine.start import create_instance
from wfctl.ops import metrics
from wfctl.worker import Worker, WorkerOptions

TARGET_MS = 20.0
BATCH = 5_000
CLAIMED = 100

WORKLOAD = """
version: 1
defaults:
  activity:
    start_to_close: 5m
workflows:
  waiting_work:
    execution_timeout: 1d
    run_timeout: 12h
    deadline: 2d
    steps:
      - activity: benchlib:noop
        queue: backlog
        schedule_to_start: 1d
        schedule_to_close: 2d
        heartbeat: 1h
  timing_out:
    steps:
      - activity: benchlib:noop
        queue: nobody
        schedule_to_start: 1s
        max_attempts: 3
        backoff: [1s]
  waiting_signal:
    steps:
      - wait_for_signal: approved
        timeout: 7d
"""


def create(client: wfctl.Client, workflow_type: str, count: int, now) -> None:
    engine, definitions = client.engine, client.definitions()
    workflow = definitions.types[workflow_type]
    for first in range(0, count, BATCH):
        with engine.transaction(now) as c:
            engine.save_definitions(c, definitions)
            for n in range(first, min(count, first + BATCH)):
                create_instance(c, definitions, workflow, f"{workflow_type}-{n:06d}", {}, {})


def add_workload(scratch: Scratch, waiting: int, timing_out: int, signals: int) -> None:
    """The open work, timeouts and live worker the metrics read, on top of the completed."""
    started = time.perf_counter()
    path = scratch.folder / "workload.yaml"
    path.write_text(textwrap.dedent(WORKLOAD).lstrip())
    client = wfctl.Client(scratch.db, path)
    engine = client.engine
    then = clock.now() - timedelta(hours=2)
    for workflow_type, count in (("waiting_work", waiting), ("timing_out", timing_out),
                                 ("waiting_signal", signals)):
        create(client, workflow_type, count, then)
    engine.process_workflow_tasks("bench-setup", then, limit=waiting + timing_out + signals)
    # Each attempt of timing_out misses its schedule_to_start (1 s), waits out its backoff (1 s).
    instant = [then]
    worker = Worker(engine, WorkerOptions(queues=("default",), concurrency=1),
                    clock=lambda: instant[0])
    for seconds in (2, 5, 8, 9):
        instant[0] = then + timedelta(seconds=seconds)
        while worker.run_once(instant[0]):
            pass
    for _ in range(CLAIMED):
        engine.claim_activity("bench-claimer", ("backlog",), clock.now())
    worker.register(clock.now())
    client.close()
    print(f"   setup: {waiting:,} waiting on a backlog ({CLAIMED} claimed), {timing_out:,} timed "
          f"out thrice and failed, {signals:,} waiting on a signal, 1 live worker: "
          f"{time.perf_counter() - started:.0f} s")


def show(name: str, times: list[float]) -> None:
    print(f"   {name:<52} p50 {percentile(times, 0.5):7.3f}  p95 {percentile(times, 0.95):7.3f}  "
          f"max {max(times):7.3f} ms  (n={len(times)})")


def measure(scratch: Scratch, repeat: int, processes: int) -> tuple[list[float], list[float]]:
    store = wfctl.Client(scratch.db, create=False).store
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics.StoreCollector(store))
    text = generate_latest(registry).decode()
    print(f"   the exposition: {len(text.splitlines())} lines, {len(text):,} B")
    for line in text.splitlines():
        if line.startswith(("wfctl_instances", "wfctl_timeouts_total", "wfctl_live_workers ",
                            "wfctl_ready_tasks")):
            print(f"     {line}")

    print(f"\n-- a scrape, {repeat} times after 10 warm-up scrapes")
    timed_ms(lambda: generate_latest(registry), 10)
    in_process = timed_ms(lambda: generate_latest(registry), repeat)
    show("collector + text format, in this process", in_process)

    server = metrics.MetricsServer(0, registry, host="127.0.0.1")
    server.start()
    url = f"http://127.0.0.1:{server.port}/metrics"

    def get() -> bytes:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read()

    timed_ms(get, 10)
    over_http = timed_ms(get, repeat)
    server.close()
    show("GET /metrics over HTTP (the work --metrics-port server)", over_http)

    print("\n-- each store read of a scrape (one read transaction holds them all)")
    now = clock.now()
    with store.read() as tx:
        for name, args in (("instance_counts", ()), ("open_activity_counts", ()),
                           ("ready_activity_counts", (now,)),
                           ("ready_workflow_task_count", (now,)),
                           ("timeout_event_counts", ()), ("next_deadlines", ()),
                           ("live_workers", ())):
            read = getattr(tx, name)
            show(f"Tx.{name}", timed_ms(lambda read=read, args=args: read(*args), repeat))
        group_by = "SELECT workflow_type, status, count(*) FROM instances GROUP BY 1, 2"
        show("yardstick: GROUP BY over the instances table",
             timed_ms(lambda: tx.conn.execute(group_by).fetchall(), max(10, repeat // 10)))
    store.close()

    print(f"\n-- `wfctl metrics`, a whole process, {processes} times")
    command = wfctl_command(scratch, "metrics")
    env = worker_env()
    walls = []
    for _ in range(processes):
        started = time.perf_counter()
        subprocess.run(command, env=env, capture_output=True, check=True)
        walls.append((time.perf_counter() - started) * 1000)
    show("wfctl metrics (start-up and imports included)", walls)
    return in_process, over_http


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--completed", type=int, default=100_000,
                        help="completed workflows underneath (default 100000)")
    parser.add_argument("--waiting", type=int, default=5_000,
                        help="workflows waiting on a backlog (default 5000)")
    parser.add_argument("--timing-out", type=int, default=5_000,
                        help="workflows whose attempts all time out (default 5000)")
    parser.add_argument("--signals", type=int, default=1_000,
                        help="workflows waiting on a signal (default 1000)")
    parser.add_argument("--repeat", type=int, default=200, help="scrapes timed (default 200)")
    parser.add_argument("--processes", type=int, default=5,
                        help="whole `wfctl metrics` processes timed (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="10,000 completed workflows and a tenth of the open work")
    parser.add_argument("--dir", help="keep the completed workflows' database in this folder and "
                                      "reuse it while it fits (as scale.py --dir)")
    args = parser.parse_args()
    completed = 10_000 if args.quick else args.completed
    waiting, timing_out, signals = ((args.waiting // 10, args.timing_out // 10, args.signals // 10)
                                    if args.quick else
                                    (args.waiting, args.timing_out, args.signals))
    instances = completed + waiting + timing_out + signals
    header(f"metrics scrape: {instances:,} instances ({completed:,} completed, "
           f"{waiting + timing_out + signals:,} more)")
    kept = kept_database(args.dir, completed)
    scratch = Scratch()
    try:
        shutil.copyfile(kept.db, scratch.db)
        add_workload(scratch, waiting, timing_out, signals)
        in_process, over_http = measure(scratch, args.repeat, args.processes)
    finally:
        scratch.close()
        kept.close()

    worst = max(percentile(in_process, 0.95), percentile(over_http, 0.95))
    print(f"\n-- verdict ({load()} at the end)")
    print(f"   a scrape at {instances:,} instances: p50 {statistics.median(in_process):.2f} ms "
          f"in process, {statistics.median(over_http):.2f} ms over HTTP (p95 "
          f"{percentile(in_process, 0.95):.2f} and {percentile(over_http, 0.95):.2f}); "
          f"target p95 <= {TARGET_MS:.0f} ms: {'MET' if worst <= TARGET_MS else 'MISSED'}")


if __name__ == "__main__":
    main()
