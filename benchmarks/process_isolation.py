"""What `wfctl work --isolation process` costs: per attempt, per child start, per child in memory.

Per attempt: a no-op handler run as a thread slot runs it (its ActivityContext and heartbeat
buffer built, then `handlers.run`), and through a `ProcessPool` of 1 process (one caller) and
of 4 (four threads calling at once): µs per call and calls/s. Child start: the fork server's
start-up (a fresh interpreter importing wfctl, once per pool), one fork (each child, and each
replacement after a kill), and beside them what a fresh interpreter per child would cost.
Memory: RSS, PSS and USS (the pages a child has to itself: what one more child really costs)
of each child and of the fork server, from /proc/PID/smaps_rollup.

The handlers are this module's own (`process_isolation:noop`); the children import it from
this folder, given to the pool as a search path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchlib import header

from wfctl.lang import handlers
from wfctl.lang.context import ActivityContext, HeartbeatBuffer
from wfctl.worker.executor import HandlerCall
from wfctl.worker.isolation import ProcessPool

HERE = Path(__file__).resolve().parent

CONTEXT: dict[str, Any] = {
    "workflow_id": "bench-1", "run_id": "run-1", "activity_id": "act-1", "step": "noop",
    "attempt": 1, "max_attempts": 3, "last_heartbeat_details": None,
    "schedule_to_close_deadline_at": None, "close_deadline_at": None,
    "heartbeat_deadline_at": None, "heartbeat_timeout": None,
}


def noop(state: dict[str, Any]) -> None:
    return None


def pid(state: dict[str, Any]) -> dict[str, Any]:
    return {"pid": os.getpid()}


def in_thread_mode(calls: int, state: dict[str, Any]) -> tuple[float, float]:
    """Seconds (wall, CPU) for `calls` no-op attempts run as a thread slot runs them."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        buffer = HeartbeatBuffer(lambda details: True, None)
        ctx = ActivityContext(**CONTEXT, heartbeats=buffer)
        handlers.run("process_isolation:noop", "noop", state, ctx)
    return time.perf_counter() - started, time.process_time() - cpu


def in_process_mode(pool: ProcessPool, callers: int, calls: int,
                    state: dict[str, Any]) -> tuple[float, float]:
    """Seconds (wall, CPU of this process and of the children) for `calls` no-op attempts
    through the pool, from `callers` threads at once."""
    call = HandlerCall("process_isolation:noop", "noop", state, CONTEXT)

    def caller() -> None:
        abandon = threading.Event()
        for _ in range(calls // callers):
            pool.run(call, HeartbeatBuffer(lambda details: True, None), abandon)

    children = [child.pid for child in pool._idle]
    threads = [threading.Thread(target=caller) for _ in range(callers)]
    started, cpu, child_cpu = time.perf_counter(), time.process_time(), cpu_of(children)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = time.process_time() - cpu + cpu_of(children) - child_cpu
    return time.perf_counter() - started, cpu


def cpu_of(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def memory(pid: int) -> dict[str, int]:
    """RSS, PSS and USS of a process, in KiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    return {"rss": fields["Rss"], "pss": fields["Pss"],
            "uss": fields["Private_Clean"] + fields["Private_Dirty"]}


def per_attempt(calls: int, repeat: int) -> None:
    rows = [{"id": n, "name": f"item {n}", "tags": ["new", "blue"], "price": n * 1.5}
            for n in range(150)]
    states = {"empty state": {}, "state of 10 KB (150 small dicts)": {"rows": rows}}
    for label, state in states.items():
        print(f"\n-- per attempt, no-op handler, {label} ({calls:,} calls, best of {repeat})")
        print(f"   {'':34}{'wall µs/call':>14}{'calls/s':>10}{'CPU µs/call':>14}")
        direct, direct_cpu = min(in_thread_mode(calls, state) for _ in range(repeat))
        print(f"   {'thread slot (handlers.run)':34}{direct / calls * 1e6:14.1f}"
              f"{calls / direct:10,.0f}{direct_cpu / calls * 1e6:14.1f}")
        for size in (1, 4):
            pool = ProcessPool(size, [str(HERE)])
            try:
                in_process_mode(pool, size, 200 * size, state)  # each child imports the handler
                took, cpu = min(in_process_mode(pool, size, calls, state) for _ in range(repeat))
            finally:
                pool.close()
            name = f"process pool of {size}, {size} caller{'s' if size > 1 else ''}"
            print(f"   {name:34}{took / calls * 1e6:14.1f}{calls / took:10,.0f}"
                  f"{cpu / calls * 1e6:14.1f}")


def child_start(repeat: int) -> None:
    print(f"\n-- starting children (median of {repeat})")
    boots: dict[int, list[float]] = {1: [], 4: []}
    forks, firsts = [], []
    call = HandlerCall("process_isolation:noop", "noop", {}, CONTEXT)
    for _ in range(repeat):
        for size, times in boots.items():
            started = time.perf_counter()
            pool = ProcessPool(size, [str(HERE)])
            times.append(time.perf_counter() - started)
            if size == 1:
                started = time.perf_counter()
                pool.run(call, HeartbeatBuffer(lambda details: True, None), threading.Event())
                firsts.append(time.perf_counter() - started)
                for _ in range(20):
                    started = time.perf_counter()
                    child = pool._server.fork()
                    forks.append(time.perf_counter() - started)
                    child.end()
            pool.close()
    fresh = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import wfctl.lang.handlers, wfctl.lang.context"], check=True)
        fresh.append(time.perf_counter() - started)
    for size, times in boots.items():
        print(f"   ProcessPool({size}): fork server start + {size} fork{'s' if size > 1 else ' '}"
              f"{statistics.median(times) * 1e3:12.1f} ms")
    print(f"   one fork (a child, or a replacement){statistics.median(forks) * 1e3:14.1f} ms "
          f"(p90 {sorted(forks)[int(len(forks) * 0.9)] * 1e3:.1f} ms)")
    print(f"   first call on a new child (imports the handler's module) "
          f"{statistics.median(firsts) * 1e3:.1f} ms")
    print(f"   for comparison, a fresh interpreter importing wfctl "
          f"{statistics.median(fresh) * 1e3:.1f} ms")


def child_memory(size: int) -> None:
    print(f"\n-- memory, a pool of {size} after 200 no-op calls per child (KiB)")
    pool = ProcessPool(size, [str(HERE)])
    try:
        in_process_mode(pool, size, 200 * size, {})
        server = pool._server._process
        assert server is not None
        rows = [("fork server", memory(server.pid))]
        rows += [(f"child {child.pid}", memory(child.pid)) for child in pool._idle]
    finally:
        pool.close()
    # What a child started as a fresh interpreter (spawn) would hold, for comparison.
    fresh = subprocess.Popen([sys.executable, "-c", "import sys, wfctl.lang.handlers, wfctl.lang.context; "
                              "print(flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert fresh.stdout is not None
    fresh.stdout.readline()
    rows.append(("a fresh interpreter importing wfctl", memory(fresh.pid)))
    fresh.communicate(b"")
    rows.append(("this process (a worker has about this)", memory(os.getpid())))
    for label, figures in rows:
        print(f"   {label:40} RSS {figures['rss']:7,}  PSS {figures['pss']:7,}  "
              f"USS {figures['uss']:7,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 calls, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.repeat = 2_000, 1
    header("--isolation process: cost per attempt, per child start, per child in memory")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("   PYTHONDONTWRITEBYTECODE is set: without .pyc files, every fresh interpreter "
              "compiles wfctl from source (the fork server's start is slower than it would be)")
    per_attempt(args.calls, args.repeat)
    child_start(5 if args.quick else 10)
    child_memory(4)


if __name__ == "__main__":
    main()
