"""Acting on many: `Client.start_many` beside `Client.start`, and how long each transaction of
a batch action holds the write lock.

Goals: at least 20,000 starts/s on SQLite and 3,000/s on PostgreSQL (fsync on) from one
process, through `start_many` (what `wfctl start TYPE --from FILE` runs); and no transaction of
a batch action (`Client.batch`, what `wfctl pause --status running --yes` runs) holding the
write lock longer than 50 ms, so that no worker waits longer than that for it.

    python benchmarks/batches.py                 # SQLite, 20,000 starts (--quick: 2,000)
    python benchmarks/batches.py --postgres      # the same on a throwaway cluster (fsync on)
    python benchmarks/batches.py --db postgresql://…   # on a server of yours
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchlib import Scratch, header, load, percentile

START_GOALS = {"sqlite": 20_000, "postgres": 3_000}
LOCK_GOAL_MS = 50.0


def measure(scratch: Scratch, backend: str, count: int) -> bool:
    client = scratch.client()
    singles = max(100, count // 20)
    started = time.perf_counter()
    for n in range(singles):
        client.start("three_noops", f"single-{n:06d}")
    single_rate = singles / (time.perf_counter() - started)

    started = time.perf_counter()
    outcomes = client.start_many("three_noops", ({"id": f"many-{n:06d}"} for n in range(count)))
    many_rate = count / (time.perf_counter() - started)
    assert all(outcome["started"] for outcome in outcomes)
    print(f"   {backend}: Client.start      {single_rate:9,.0f} starts/s ({singles:,} starts)")
    print(f"   {backend}: Client.start_many {many_rate:9,.0f} starts/s ({count:,} starts, "
          f"{load()})")

    held: list[float] = []
    write = client.store.write

    @contextmanager
    def timed_write() -> Iterator[Any]:
        began = time.perf_counter()
        with write() as tx:
            yield tx
        held.append((time.perf_counter() - began) * 1000)

    client.store.write = timed_write  # type: ignore[method-assign]
    started = time.perf_counter()
    report = client.batch("pause", status="running", workflow_type="three_noops")
    seconds = time.perf_counter() - started
    print(f"   {backend}: Client.batch pause {report['done']:,} instances in {seconds:.1f} s, "
          f"{len(held)} transactions; write lock held p50 {percentile(held, 0.5):.1f} ms, "
          f"p99 {percentile(held, 0.99):.1f} ms, max {max(held):.1f} ms")
    client.close()
    starts_met = many_rate >= START_GOALS[backend]
    lock_met = max(held) <= LOCK_GOAL_MS
    print(f"   verdict: starts {'met' if starts_met else 'NOT met'} "
          f"(goal {START_GOALS[backend]:,}/s); lock {'met' if lock_met else 'NOT met'} "
          f"(goal {LOCK_GOAL_MS:.0f} ms)")
    return starts_met and lock_met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--count", type=int, default=20_000, help="starts to time")
    parser.add_argument("--quick", action="store_true", help="2,000 starts")
    parser.add_argument("--postgres", action="store_true", help="on a throwaway cluster")
    parser.add_argument("--db", help="a PostgreSQL URL whose user may create databases")
    options = parser.parse_args()
    count = 2_000 if options.quick else options.count
    header("batches: start_many beside start; a batch action's write lock")
    if not options.postgres and not options.db:
        with Scratch() as scratch:
            measure(scratch, "sqlite", count)
        return
    import pglib

    cluster = pglib.Cluster() if options.postgres else None
    server = pglib.Server(options.db or cluster.url, cluster)  # type: ignore[union-attr]
    print(f"   {server.describe()}")
    try:
        with server.database() as url, Scratch(db=url) as scratch:
            measure(scratch, "postgres", count)
    finally:
        server.close()


if __name__ == "__main__":
    main()
