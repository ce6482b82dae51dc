"""Pruning 100,000 closed workflows: how fast, how long one batch holds the write lock, and what
the long-running worker's pruning costs the steps it runs meanwhile.

Goals: no prune batch holds the write lock more than about 50 ms; the workers' activity step
rate while housekeeping prunes within 10% of the rate without.

The database: `--template` workflows of 3 no-op activities (type `retained`, `retention: 1s`)
are run to completion by an in-process worker, then their rows are copied, under new ids, until
the file holds `--total` completed workflows past their retention, all alike. Copying reads and
writes wfctl's tables by name (it is the one part of this script that follows the schema);
building by running 100,000 workflows would take minutes more. `--dir DIR` keeps the built
database there and reuses it on the next run.

1. Prune throughput: a copy of the database, one instance of which is given `--long-runs` runs
   (the long history a continue-as-new loop leaves, deleted a part at a time), is pruned whole,
   batch after batch, as `wfctl prune` does (`Engine.prune_batch` in a loop, with its
   checkpoints) but without pausing between batches (nobody else writes); instances/s over the
   whole, and each batch's write-lock hold (from BEGIN IMMEDIATE to the end of COMMIT).

2. Step rate with and without pruning: on a copy where the 100,000 are past their retention, and
   on one where none is (the same file with retention cleared), N fresh `three_noops` workflows
   are started, then one `wfctl work` (default options, its pruner running beside the slots) is
   spawned and the rate taken as in throughput.py: 3N / (last workflow closed - first workflow
   task started). The two alternate, `--repeat` times each; medians compared. How many retained
   workflows the worker pruned meanwhile is printed too.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sqlite3
import statistics
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from benchlib import (
    Scratch,
    checkpoint,
    drain,
    header,
    load,
    percentile,
    remove_database,
    start_workflows,
    wfctl_command,
    worker_env,
)

import wfctl
from wfctl.engine.prune import Pacer
from wfctl.vocabulary import OPEN_RUN
from wfctl.worker import WorkerOptions

STEPS_PER_WORKFLOW = 3
LOCK_TARGET_MS = 50.0
RATE_TARGET = 0.90
RETAINED = """
  retained:
    retention: 1s
    steps:
      - activity: benchlib:noop
        name: first
      - activity: benchlib:noop
        name: second
      - activity: benchlib:noop
        name: third
"""
# Columns that hold an id of the instance, its runs, activities or timers: renamed in a copy.
ID_COLUMNS = ("workflow_instance_id", "workflow_run_id", "current_run_id", "activity_id",
              "timer_id", "child_instance_id", "parent_instance_id", "parent_run_id",
              "consumed_run_id", "continued_to_run_id")
# Row ids a copy gets afresh.
ROWID_COLUMNS = ("task_id", "signal_id", "failure_id")
# An instance's instants a copy moves back by an hour per copy still to come: the copies closed
# one after another, oldest first, as a real database's workflows do, and are pruned in that
# order (identical instants would have every batch take one instance from each of many copies,
# their rows spread over the whole file).
SHIFTED_COLUMNS = ("created_at", "updated_at", "closed_at", "retain_until")
TABLES = ("instances", "runs", "workflow_tasks", "activities", "timers", "signals", "failures",
          "events")


def scratch_for(folder: Path | None, reuse: bool) -> Scratch:
    scratch = Scratch(str(folder) if folder else None, reuse=reuse)
    if "  retained:" not in scratch.workflows.read_text():
        scratch.workflows.write_text(scratch.workflows.read_text() + RETAINED)
    return scratch


def build(scratch: Scratch, total: int, template: int) -> None:
    """`total` completed `retained` workflows past their retention: `template` run, the rest
    copied from them."""
    client = scratch.client()
    started = time.perf_counter()
    start_workflows(client, "prune", template, workflow_type="retained")
    drain(client, WorkerOptions())
    left = [row for row in client.list(limit=template) if row["status"] != "completed"]
    client.close()
    if left:
        raise SystemExit(f"{len(left)} template workflows did not complete")
    print(f"   ran {template:,} template workflows in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    conn = sqlite3.connect(scratch.db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # Each copy reads the template's rows alone: by rowid, or (events, keyed by instance key) by
    # key; a copy's instance keys follow on from the template's.
    (keys,) = conn.execute("SELECT max(instance_key) FROM instances").fetchone()
    statements = []
    for table in TABLES:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        values = ["NULL" if c in ROWID_COLUMNS else f"{c} || :suffix" if c in ID_COLUMNS
                  else "instance_key + :keys" if c == "instance_key"
                  else f"strftime('%Y-%m-%dT%H:%M:%f', {c}, :shift) || '+00:00'"
                  if table == "instances" and c in SHIFTED_COLUMNS else c
                  for c in columns]
        if table == "events":
            where = f"instance_key <= {keys}"
        else:
            (last,) = conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()
            where = f"rowid <= {last}"
        statements.append(f"INSERT INTO {table} ({', '.join(columns)}) "
                          f"SELECT {', '.join(values)} FROM {table} WHERE {where}")
    copies = -(-total // template) - 1
    for copy in range(1, copies + 1):
        if copy % 20 == 1:
            conn.execute("BEGIN")
        for statement in statements:
            conn.execute(statement, {"suffix": f"~{copy:05d}", "keys": copy * keys,
                                     "shift": f"-{copies + 1 - copy} hours"})
        if copy % 20 == 0 or copy == copies:
            conn.execute("COMMIT")
    (count,) = conn.execute("SELECT count(*) FROM instances").fetchone()
    conn.close()
    checkpoint(scratch.db)
    print(f"   copied them to {count:,} completed workflows in "
          f"{time.perf_counter() - started:.1f} s; file {scratch.db.stat().st_size / 2**20:,.0f} MiB")


def lengthen(db: Path, runs: int) -> tuple[str, int]:
    """Give the first instance due `runs` runs in all, copies of its own (as a loop of
    continue-as-new would leave it): (its id, its events)."""
    conn = sqlite3.connect(db, isolation_level=None)
    (instance_id, key) = conn.execute(
        "SELECT workflow_instance_id, instance_key FROM instances ORDER BY retain_until LIMIT 1"
    ).fetchone()
    (span,) = conn.execute("SELECT max(seq) FROM events WHERE instance_key = ?",
                           (key,)).fetchone()
    renamed = {"workflow_run_id": "workflow_run_id || :suffix",
               "activity_id": "activity_id || :suffix", "timer_id": "timer_id || :suffix",
               "run_number": "run_number + :copy", "first_seq": "first_seq + :offset",
               "seq": "seq + :offset", "task_id": "NULL", "failure_id": "NULL"}
    statements = []
    for table in ("runs", "workflow_tasks", "activities", "timers", "failures", "events"):
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        # Each copy reads the first run's rows alone.
        if table == "events":
            first = f"seq <= {span}"
        else:
            (last,) = conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}").fetchone()
            first = f"rowid <= {last}"
        statements.append(
            f"INSERT INTO {table} ({', '.join(columns)}) "
            f"SELECT {', '.join(renamed.get(c, c) for c in columns)} FROM {table} "
            f"WHERE {'instance_key = :key' if table == 'events' else 'workflow_instance_id = :instance'} "
            f"AND {first}")
    conn.execute("BEGIN")
    for copy in range(1, runs):
        for statement in statements:
            conn.execute(statement, {"suffix": f"~r{copy:05d}", "copy": copy,
                                     "offset": copy * span, "instance": instance_id, "key": key})
    conn.execute("COMMIT")
    (events,) = conn.execute("SELECT count(*) FROM events WHERE instance_key = ?",
                             (key,)).fetchone()
    conn.close()
    return instance_id, events


def copy_database(source: Scratch, target: Scratch, *, retained: bool) -> None:
    remove_database(target.db)
    shutil.copyfile(source.db, target.db)
    shutil.copyfile(source.workflows, target.workflows)
    if not retained:
        conn = sqlite3.connect(target.db, isolation_level=None)
        conn.execute("UPDATE instances SET retain_until = NULL")
        conn.close()
        checkpoint(target.db)


def prune_throughput(built: Scratch, work: Scratch,
                     long_runs: int) -> tuple[float, list[float], list[float]]:
    """Instances/s over the whole prune, each batch's write-lock hold in ms, and those of the
    batches that deleted the instance with a long history a part at a time."""
    copy_database(built, work, retained=True)
    long_id, long_events = lengthen(work.db, long_runs)
    print(f"   one of them, {long_id}, given {long_runs:,} runs: {long_events:,} events")
    client = work.client()
    engine = client.engine
    pacer = Pacer(engine.store)
    held: list[float] = []
    long_held: list[float] = []
    pruned = 0
    now = datetime.now(UTC)
    started = time.perf_counter()
    while True:
        batch = engine.prune_batch(now)
        if batch.empty:
            pacer.flush()
            break
        pruned += len(batch.instance_ids)
        held.append(batch.held_seconds * 1000)
        if batch.instance_ids in ([], [long_id]):
            long_held.append(held[-1])
        pacer.after(batch)
    seconds = time.perf_counter() - started
    remaining = len(client.list(limit=10))
    client.close()
    if remaining:
        raise SystemExit(f"{remaining} instances were left after pruning")
    print(f"   pruned {pruned:,} workflows in {len(held):,} batches, {seconds:.1f} s: "
          f"{pruned / seconds:,.0f} instances/s")
    print(f"   the long one went in {len(long_held):,} batches of its own")
    return pruned / seconds, held, long_held


def step_rate(built: Scratch, work: Scratch, workflows: int, *, retained: bool,
              timeout: float) -> tuple[float, int]:
    """The worker's steps/s over N fresh workflows, and how many retained ones it pruned."""
    copy_database(built, work, retained=retained)
    client = work.client()
    before = _instances(work.db)
    start_workflows(client, "fresh", workflows)
    client.close()
    watch = wfctl.Client(work.db, work.workflows, create=False)
    log_path = work.folder / "worker.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(wfctl_command(work, "work", "--log-level", "warning"),
                                env=worker_env(), stdout=subprocess.DEVNULL, stderr=log)
        spawned = time.perf_counter()
        try:
            while any(watch.list(status=status, limit=1) for status in OPEN_RUN):
                if time.perf_counter() - spawned > timeout:
                    raise SystemExit(f"timed out after {timeout} s; see {log_path}")
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    first = last = None
    for n in range(workflows):
        instance_id = f"fresh-{n:06d}"
        events = watch.history(instance_id)
        started = next(e["at"] for e in events if e["event_type"] == "WorkflowTaskStarted")
        closed = events[-1]["at"]
        first = started if first is None or started < first else first
        last = closed if last is None or closed > last else last
    watch.close()
    pruned = before + workflows - _instances(work.db)
    assert first is not None and last is not None
    seconds = (last - first).total_seconds()
    return workflows * STEPS_PER_WORKFLOW / seconds, pruned


def _instances(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM instances").fetchone()[0]
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total", type=int, default=100_000,
                        help="completed workflows to prune (default 100000)")
    parser.add_argument("--template", type=int, default=500,
                        help="workflows run for real and copied (default 500)")
    parser.add_argument("-n", "--workflows", type=int, default=2_000,
                        help="fresh workflows the worker runs in the step-rate runs (default 2000)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="step-rate runs with and without pruning, each (default 3)")
    parser.add_argument("--long-runs", type=int, default=2_000,
                        help="runs given to one of them, for a long history (default 2000)")
    parser.add_argument("--quick", action="store_true",
                        help="10,000 to prune, 600 fresh workflows, one run each")
    parser.add_argument("--dir", type=Path,
                        help="keep the built database in DIR and reuse it when there")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    if args.quick:
        args.total, args.workflows, args.repeat = 10_000, 600, 1

    header(f"prune: {args.total:,} closed workflows; step rate while the worker prunes")
    built_db = args.dir / "wfctl.db" if args.dir else None
    reuse = bool(built_db and built_db.exists() and _instances(built_db) >= args.total)
    built = scratch_for(args.dir, reuse)
    work = scratch_for(None, False)
    try:
        if reuse:
            print(f"   reusing {built.db} ({_instances(built.db):,} workflows)")
        else:
            build(built, args.total, args.template)

        print("\n1. wfctl prune of every one")
        rate, held, long_held = prune_throughput(built, work, args.long_runs)
        for what, values in (("per batch", held), ("the long one's batches", long_held)):
            print(f"   write-lock hold {what}, ms: min {min(values):.1f}  p50 "
                  f"{percentile(values, 0.5):.1f}  p99 {percentile(values, 0.99):.1f}  "
                  f"max {max(values):.1f}")
        longest = max(held)

        print(f"\n2. steps/s of one `wfctl work` over {args.workflows:,} fresh workflows "
              f"({args.workflows * STEPS_PER_WORKFLOW:,} steps)")
        without: list[float] = []
        pruning: list[float] = []
        for round_number in range(1, args.repeat + 1):
            for retained, rates in ((False, without), (True, pruning)):
                steps, pruned = step_rate(built, work, args.workflows, retained=retained,
                                          timeout=args.timeout)
                rates.append(steps)
                what = f"pruning ({pruned:,} pruned meanwhile)" if retained else "no pruning"
                print(f"   round {round_number}: {what:<34} {steps:7.0f} steps/s   {load()}")
        ratio = statistics.median(pruning) / statistics.median(without)

        print("\nverdict")
        print(f"   prune: {rate:,.0f} instances/s; longest batch held the write lock "
              f"{longest:.1f} ms (goal <= ~{LOCK_TARGET_MS:.0f} ms): "
              f"{'met' if longest <= LOCK_TARGET_MS else 'NOT met'}")
        print(f"   steps/s while pruning / without: {statistics.median(pruning):.0f} / "
              f"{statistics.median(without):.0f} = {ratio:.2f} (goal >= {RATE_TARGET:.2f}): "
              f"{'met' if ratio >= RATE_TARGET else 'NOT met'}")
    finally:
        work.close()
        built.close()


if __name__ == "__main__":
    main()
