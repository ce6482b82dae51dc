"""Where a worker's CPU goes, thread by thread, and how often its threads hand over to each other.

A step's CPU time (`throughput.py`) is the sum over the worker's threads: its handler slots, the
watchdog (which decides ready workflow tasks), the checkpointer, the lease and housekeeping
loops. This script drains N `three_noops` workflows with one long-running worker in this process
(`Worker.run`, what `wfctl work` runs, logging at info to a file, a write a line as on a
worker's stderr, with the history listener `wfctl work` adds), at each `--concurrency`, rounds
alternated, and reads each thread's own CPU time and context switches from /proc/self/task/TID
(the thread's name comes from `threading`), from the poll that first finds a step done to the
one that finds every workflow's last step done.

  slot #1 .. #N  the handler slots, the busiest first (the one that held the engine turn most)
  CPU/step       the thread's user + system time over the steps of the drain
  switches/step  the thread's context switches (voluntary: it waited for a lock, an event, the
                 interpreter lock or a write; involuntary: the kernel took its core) over them

At `--concurrency 1` one slot records each outcome and runs the next attempt itself; at 4 the
slot that holds the engine turn records the outcomes the others handed in and wakes them, so
each of their steps costs a few hand-overs: what this shows, and what they cost here.

  python benchmarks/threads.py [-n 2000] [--concurrency 1,4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from benchlib import Scratch, header, load

from wfctl.ops import log
from wfctl.worker import WorkerOptions

STEPS_PER_WORKFLOW = 3
TICKS = os.sysconf("SC_CLK_TCK")


def thread_counters() -> dict[str, tuple[float, int, int]]:
    """(CPU seconds, voluntary switches, involuntary switches) of each named thread of this
    process but the calling one."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    me = threading.get_native_id()
    found = {}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me or int(tid) not in names:
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/status") as status:
                switches = dict(line.split(":\t") for line in status.read().splitlines()
                                if line.endswith(tuple("0123456789"))
                                and "ctxt_switches" in line)
            found[names[int(tid)]] = ((int(fields[11]) + int(fields[12])) / TICKS,
                                      int(switches["voluntary_ctxt_switches"]),
                                      int(switches["nonvoluntary_ctxt_switches"]))
    return found


@dataclass
class Drain:
    concurrency: int
    steps: int
    seconds: float
    # By thread name: CPU µs, voluntary and involuntary switches, per step.
    threads: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return sum(cpu for cpu, _, _ in self.threads.values())

    @property
    def switches(self) -> float:
        return sum(v + i for _, v, i in self.threads.values())


def drain(workflows: int, concurrency: int) -> Drain:
    steps = workflows * STEPS_PER_WORKFLOW
    # Line-buffered, as a worker's stderr is: each line is a write of its own.
    with Scratch() as scratch, open(scratch.folder / "worker.log", "w", buffering=1) as lines:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"t-{n:06d}")
        stderr, sys.stderr = sys.stderr, lines
        try:
            log.configure("info")
            worker = client.worker(WorkerOptions(concurrency=concurrency))
            worker.engine.add_listener(log.history_events, ignores=log.unlogged_event_types())
            runner = threading.Thread(target=worker.run, name="worker")
            runner.start()
            while worker.tasks_done == 0:
                time.sleep(0.001)
            first, began, done = thread_counters(), time.perf_counter(), worker.tasks_done
            while worker.tasks_done < steps:
                time.sleep(0.005)
            last, seconds = thread_counters(), time.perf_counter() - began
            worker.request_stop()
            runner.join(60)
        finally:
            sys.stderr = stderr
            log.LOGGER.handlers.clear()
        client.close()
    counted = steps - done
    result = Drain(concurrency, counted, seconds)
    for name, (cpu, voluntary, involuntary) in last.items():
        before = first.get(name, (0.0, 0, 0))
        result.threads[name] = ((cpu - before[0]) / counted * 1e6,
                                (voluntary - before[1]) / counted,
                                (involuntary - before[2]) / counted)
    # Which slot holds the engine turn most differs from round to round: slots go by rank.
    slots = sorted((name for name in result.threads if name.startswith("slot-")),
                   key=lambda name: -result.threads[name][0])
    for rank, name in enumerate(slots, 1):
        result.threads[f"slot #{rank}"] = result.threads.pop(name)
    return result


def report(runs: list[Drain]) -> None:
    concurrency = runs[0].concurrency
    rates = [run.steps / run.seconds for run in runs]
    print(f"\n-- --concurrency {concurrency}: medians of {len(runs)} round(s)")
    print(f"   steps/s {statistics.median(rates):,.0f} "
          f"(rounds {', '.join(f'{rate:,.0f}' for rate in rates)}); "
          f"CPU {statistics.median(run.cpu for run in runs):.0f} us a step; "
          f"{statistics.median(run.switches for run in runs):.2f} context switches a step")
    by_thread: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for run in runs:
        for name, counts in run.threads.items():
            by_thread[name].append(counts)
    rows = sorted(by_thread.items(), key=lambda item: -statistics.median(c for c, _, _ in item[1]))
    print(f"   {'thread':<14} {'CPU us/step':>12} {'voluntary/step':>15} {'involuntary/step':>17}")
    for name, counts in rows:
        cpu = statistics.median(c for c, _, _ in counts)
        if cpu < 0.5:
            continue
        print(f"   {name:<14} {cpu:>12.1f} {statistics.median(v for _, v, _ in counts):>15.2f} "
              f"{statistics.median(i for _, _, i in counts):>17.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--workflows", type=int, default=2000)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    header(f"threads: {args.workflows} workflows x {STEPS_PER_WORKFLOW} no-op activities, "
           "one worker in process")
    runs: dict[int, list[Drain]] = defaultdict(list)
    for _ in range(args.rounds):
        for level in levels:
            runs[level].append(drain(args.workflows, level))
    for level in levels:
        report(runs[level])
    print(f"\n   {load()} at the end")


if __name__ == "__main__":
    main()
