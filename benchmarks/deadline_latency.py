"""How late deadlines fire: from each `deadline_at` to its `WorkflowDeadlineExceeded` event.

One long-running `wfctl work` subprocess (default options: --concurrency 4, --deadline-interval
60s) watches a fresh database. Once it has registered, N `short_deadline` workflows (an
on_deadline handler, then a 1-hour delay so they stay `running`) are started through
`wfctl.Client` with deadlines that fall within the next 10 s:

  spread  deadlines evenly between +2 s and +10 s (the scenario the goal is set for);
  burst   every deadline at the same instant, +3 s (how fast a backlog drains).

Latency is read from history: `WorkflowDeadlineExceeded.at - deadline_at` (also the claim,
`claimed_at - deadline_at`). Goal: p99 under 1 s.
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from datetime import timedelta

from benchlib import Scratch, header, percentile, summary, wfctl_command, worker_env

from wfctl import clock

GOAL_SECONDS = 1.0


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def scalar(conn: sqlite3.Connection, sql: str) -> int:
    try:
        return conn.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # the worker has not created the schema yet
        return 0


def run(workflows: int, burst: bool, log_level: str) -> tuple[list[float], list[float], float]:
    with Scratch() as scratch:
        log_path = scratch.folder / "worker.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(wfctl_command(scratch, "work", "--log-level", log_level),
                                    env=worker_env(), stdout=subprocess.DEVNULL, stderr=log)
            watch = sqlite3.connect(scratch.db, isolation_level=None)
            try:
                wait_for(lambda: scalar(watch, "SELECT count(*) FROM workers "
                                               "WHERE stopped_at IS NULL") > 0,
                         30, "the worker to register")
                client = scratch.client()
                first = clock.now() + timedelta(seconds=3 if burst else 2)
                started = time.perf_counter()
                for n in range(workflows):
                    target = first if burst else first + timedelta(seconds=8 * n / workflows)
                    client.start("short_deadline", f"dl-{n:05d}",
                                 deadline=(target - clock.now()).total_seconds())
                start_seconds = time.perf_counter() - started
                wait_for(lambda: scalar(watch, "SELECT count(*) FROM instances "
                                               "WHERE status = 'failed'") >= workflows,
                         60, f"{workflows} deadlines to fire (see {log_path})")
                failed = scalar(watch, "SELECT count(*) FROM instances WHERE status = 'failed'")
                events = [event for n in range(workflows) for event in client.history(
                    f"dl-{n:05d}", event_types=("WorkflowDeadlineExceeded",))]
                client.close()
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
                watch.close()
    if failed != workflows:
        raise SystemExit(f"{failed} of {workflows} workflows failed")
    fired, claimed = [], []
    for event in events:
        attributes = event["attributes"]
        deadline_at = attributes["deadline_at"]
        fired.append((event["at"] - deadline_at).total_seconds())
        claimed.append((attributes["claimed_at"] - deadline_at).total_seconds())
    return fired, claimed, start_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--workflows", type=int, default=1_000,
                        help="workflows per scenario (default 1000)")
    parser.add_argument("--quick", action="store_true", help="200 workflows, spread only")
    parser.add_argument("--scenario", choices=("spread", "burst", "both"), default="both")
    parser.add_argument("--log-level", default="info", help="the worker's --log-level (info)")
    args = parser.parse_args()
    workflows = 200 if args.quick else args.workflows
    scenarios = ["spread"] if args.quick else (
        ["spread", "burst"] if args.scenario == "both" else [args.scenario])

    header(f"deadline latency: {workflows:,} workflows, one long-running wfctl work")
    for name in scenarios:
        fired, claimed, start_seconds = run(workflows, name == "burst", args.log_level)
        when = ("all at +3 s" if name == "burst" else "spread over +2..+10 s")
        print(f"\n-- {name}: {workflows:,} deadlines {when} "
              f"(started in {start_seconds:.2f} s through Client)")
        print(f"   deadline_at -> claimed_at                s: {summary(claimed, 3)}")
        print(f"   deadline_at -> WorkflowDeadlineExceeded  s: {summary(fired, 3)}")
        p99 = percentile(fired, 0.99)
        print(f"   goal p99 < {GOAL_SECONDS:g} s: {'MET' if p99 < GOAL_SECONDS else 'MISSED'} "
              f"(p50 {percentile(fired, 0.5):.3f} s, p99 {p99:.3f} s)")
        if min(fired) < 0:
            print("   WARNING: a deadline fired before its deadline_at")


if __name__ == "__main__":
    main()
