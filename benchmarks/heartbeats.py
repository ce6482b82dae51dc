"""The cost of `ctx.heartbeat()`: 10,000 calls from one handler must cost under 1 s in total.

A real worker (`Client.worker().run(once=True)`, in process) runs one activity whose handler
calls `ctx.heartbeat({"done": n})` in a loop and times it. Printed per scenario: the loop's wall
time and the time spent inside the calls, the cost per call, the write transactions the
heartbeats caused (counted on `engine.record_heartbeat`, and as all write transactions minus a
run with no heartbeats), the `ActivityHeartbeatRecorded` events in history, and whether the
latest details reached the database.

Scenarios: back to back (the target; heartbeat timeout 30 s), and the same calls spread over a
few seconds with a 3 s heartbeat timeout, where the throttles show: a write at most every
timeout/3 (at most 1 s), an event at most once per heartbeat timeout.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from benchlib import Scratch, header

from wfctl.worker import WorkerOptions

TARGET_SECONDS = 1.0


@dataclass
class Outcome:
    beats: int
    loop_seconds: float
    call_seconds: float
    worker_seconds: float
    heartbeat_writes: int
    transactions: int
    events: int
    details_stored: Any


def run(workflow_type: str, beats: int, spread: float) -> Outcome:
    with Scratch() as scratch:
        client = scratch.client()
        client.start(workflow_type, "hb", input={"beats": beats, "spread": spread})
        engine = client.engine
        counters = {"heartbeat_writes": 0, "transactions": 0}
        record_heartbeat = engine.record_heartbeat
        write = engine.store.write

        def counted_heartbeat(*args: Any, **kwargs: Any) -> bool:
            counters["heartbeat_writes"] += 1
            return record_heartbeat(*args, **kwargs)

        def counted_write() -> AbstractContextManager[Any]:
            counters["transactions"] += 1
            return write()

        # Instance attributes shadow the methods: the worker calls them through these objects.
        engine.record_heartbeat = counted_heartbeat  # type: ignore[method-assign]
        engine.store.write = counted_write  # type: ignore[method-assign]
        worker = client.worker(WorkerOptions(concurrency=1))
        started = time.perf_counter()
        with quiet_logs():
            worker.run(once=True)
        worker_seconds = time.perf_counter() - started
        described = client.describe("hb")
        if described["status"] != "completed":
            raise SystemExit(f"workflow ended {described['status']}: {described['failure']}")
        history = client.history("hb")
        state = described["state"]
        activity = described["activities"][0]
        client.close()
    return Outcome(
        beats=beats,
        loop_seconds=state.get("loop_seconds", float("nan")),
        call_seconds=state.get("call_seconds", float("nan")),
        worker_seconds=worker_seconds,
        heartbeat_writes=counters["heartbeat_writes"],
        transactions=counters["transactions"],
        events=sum(1 for e in history if e["event_type"] == "ActivityHeartbeatRecorded"),
        details_stored=activity.get("last_heartbeat_details"),
    )


@contextmanager
def quiet_logs() -> Iterator[None]:
    """The worker's log lines are not what is measured."""
    import logging

    from wfctl.ops import log

    level = log.LOGGER.level
    log.LOGGER.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.LOGGER.setLevel(level)


def scenario(title: str, workflow_type: str, beats: int, spread: float,
             baseline: int, check: Callable[[Outcome], str] | None = None) -> Outcome:
    outcome = run(workflow_type, beats, spread)
    print(f"\n-- {title}")
    print(f"   loop wall time          {outcome.loop_seconds * 1000:9.1f} ms "
          f"({outcome.loop_seconds / beats * 1e6:.2f} us per call, sleeps included)")
    print(f"   inside heartbeat()      {outcome.call_seconds * 1000:9.1f} ms "
          f"({outcome.call_seconds / beats * 1e6:.2f} us per call)")
    print(f"   heartbeat DB writes     {outcome.heartbeat_writes:9d}   "
          f"(engine.record_heartbeat calls, one write transaction each)")
    print(f"   extra write txns        {outcome.transactions - baseline:9d}   "
          f"({outcome.transactions} in the whole run, {baseline} with no heartbeats)")
    print(f"   ActivityHeartbeatRecorded events {outcome.events:2d}")
    print(f"   last details stored     {outcome.details_stored}  "
          f"({'latest kept' if outcome.details_stored == {'done': beats} else 'NOT the latest'})")
    if check is not None:
        print(f"   {check(outcome)}")
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beats", type=int, default=10_000, help="heartbeat calls (10000)")
    parser.add_argument("--spread", type=float, default=3.0,
                        help="seconds over which the second scenario spreads its calls (3)")
    parser.add_argument("--quick", action="store_true", help="skip the spread scenario")
    args = parser.parse_args()

    header(f"heartbeats: {args.beats:,} ctx.heartbeat() calls from one handler")
    baseline = run("heartbeats", 0, 0.0).transactions
    scenario(
        f"{args.beats:,} calls back to back, heartbeat timeout 30 s", "heartbeats", args.beats,
        0.0, baseline,
        lambda o: (f"target: {args.beats:,} calls < {TARGET_SECONDS:.0f} s -> "
                   f"{'MET' if o.loop_seconds < TARGET_SECONDS else 'MISSED'} "
                   f"({o.loop_seconds:.3f} s)"),
    )
    if not args.quick:
        scenario(f"{args.beats:,} calls spread over {args.spread:g} s, heartbeat timeout 3 s "
                 "(writes <= 1/s, events <= 1 per 3 s)", "heartbeats_3s", args.beats,
                 args.spread, baseline)


if __name__ == "__main__":
    main()
