"""Writes on PostgreSQL lock one workflow family, not the database: two threads writing to two
families go on side by side, two writing to one family take turns.

Each thread runs `--transactions` write transactions that read an instance (taking its family's
lock), hold the transaction open `--hold` ms (a stand-in for a long decision) and change the
instance. Measured for two families (one each) and for one family (a parent and its child, one
each), then engine signals from two threads to two instances against one.

    python3 benchmarks/family_locks.py --db postgresql://user@host/db   # an empty database
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

from benchlib import Scratch, header

import wfctl

DEFINITIONS = """
version: 1
workflows:
  parent:
    steps:
      - workflow: child
        name: sub
  child:
    steps:
      - wait_for_signal: go
  solo:
    steps:
      - wait_for_signal: go
"""


def two_threads(first: Callable[[], None], second: Callable[[], None]) -> float:
    """Seconds until both have returned, started together."""
    barrier = threading.Barrier(3)

    def run(action: Callable[[], None]) -> None:
        barrier.wait()
        action()

    threads = [threading.Thread(target=run, args=(action,)) for action in (first, second)]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, metavar="URL", help="an empty postgresql:// db")
    parser.add_argument("--transactions", type=int, default=50)
    parser.add_argument("--hold", type=float, default=20.0, help="ms each transaction is held")
    parser.add_argument("--signals", type=int, default=200)
    args = parser.parse_args()
    header("family locks on PostgreSQL: two families side by side, one family in turns")
    with Scratch() as scratch:
        scratch.workflows.write_text(DEFINITIONS.lstrip())
        client = wfctl.Client(args.db, scratch.workflows)
        engine, store = client.engine, client.store
        for instance_id, workflow_type in (("p1", "parent"), ("s1", "solo"), ("s2", "solo")):
            client.start(workflow_type, instance_id)
        engine.process_workflow_tasks("bench", store.now(), limit=100)
        child = client.describe("p1")["children"][0]["workflow_instance_id"]
        hold = args.hold / 1000

        def writes(instance_id: str) -> Callable[[], None]:
            def run() -> None:
                for _ in range(args.transactions):
                    with store.write() as tx:
                        tx.get_instance(instance_id)
                        time.sleep(hold)
                        tx.update_instance(instance_id, updated_at=store.now())
            return run

        alone = args.transactions * hold
        print(f"\n-- {args.transactions} transactions a thread, each held {args.hold:g} ms "
              f"(one thread alone: {alone:.2f} s of holding)")
        apart = two_threads(writes("s1"), writes("s2"))
        print(f"   two families (s1, s2)          {apart:6.2f} s  ({apart / alone:.2f} x one "
              "thread's holding)")
        together = two_threads(writes("p1"), writes(child))
        print(f"   one family (parent, its child) {together:6.2f} s  ({together / alone:.2f} x)")

        def signals(instance_id: str) -> Callable[[], None]:
            def run() -> None:
                for n in range(args.signals):
                    engine.signal(instance_id, f"other-{n}", None, store.now())
            return run

        print(f"\n-- {args.signals} engine signals a thread (no hold)")
        apart = two_threads(signals("s1"), signals("s2"))
        print(f"   two instances, two families    {apart:6.2f} s  "
              f"({2 * args.signals / apart:,.0f} signals/s)")
        together = two_threads(signals("p1"), signals(child))
        print(f"   parent and child, one family   {together:6.2f} s  "
              f"({2 * args.signals / together:,.0f} signals/s)")
        client.close()


if __name__ == "__main__":
    main()
