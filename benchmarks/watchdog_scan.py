"""The watchdog's and the deadline loop's scans over 100,000 open runs of which none expired.

Goal: one `wfctl.engine.time.sweep.sweep(engine, now)` pass costs under 10 ms.
Goal: the deadline check (`engine.earliest_deadline()`, `engine.claim_expired_deadlines(...)`,
`wfctl.engine.time.deadlines.sweep_deadlines(...)`) over 100,000 running workflows must cost under 10 ms.

Setup: N instances of `long_timer` (execution, run and must-complete-within deadlines 30 days out,
a 30-day delay step) are created through the engine in transactions of 5,000, then their first
workflow tasks are decided through `engine.process_workflow_tasks`, so each run is `running` with
a pending timer: every partial deadline index holds N rows. The setup time is printed.

Then each call is timed (first call on a fresh connection, then `--repeat` warm calls), every
statement those calls ran is captured with `set_trace_callback` and shown with EXPLAIN QUERY PLAN,
and the statements of the expiry path (what a sweep runs once something is due) are captured on a
small side database and explained against the big one.

With `--db postgresql://…` the runs are built in that database (kept, and reused when it holds
as many open runs): 1,000 through the engine as above, then copied by SQL (their instance, run
and timer rows, each id suffixed; not their history, which no scan reads) until there are N,
and ANALYZEd. The same calls are timed, and every statement they ran is shown with PostgreSQL's
EXPLAIN (ANALYZE). tests/pg.py shows how to start a throwaway server.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import time
from collections.abc import Callable
from datetime import timedelta

from benchlib import Scratch, header, percentile, summary, timed_ms

import wfctl
from wfctl import clock
from wfctl.engine import Engine
from wfctl.engine.start import create_instance
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.engine.time.sweep import sweep
from wfctl.engine.time.workers import worker_alive
from wfctl.store import open_store
from wfctl.worker import Worker, WorkerOptions

TARGET_MS = 10.0
BATCH = 5_000
TABLES = ("runs", "instances", "activities", "workflow_tasks", "timers", "events", "signals",
          "children", "failures")


def build(client: wfctl.Client, runs: int) -> None:
    """N running workflows waiting on a 30-day timer, deadlines 30 days out."""
    engine, definitions = client.engine, client.definitions()
    workflow = definitions.types["long_timer"]
    now = clock.now()
    started = time.perf_counter()
    for first in range(0, runs, BATCH):
        with engine.transaction(now) as c:
            engine.save_definitions(c, definitions)
            for n in range(first, min(runs, first + BATCH)):
                create_instance(c, definitions, workflow, f"scan-{n:06d}", {}, {})
    created = time.perf_counter() - started
    print(f"   setup: {runs:,} instances created in {created:.1f} s "
          f"({runs / created:,.0f}/s, engine transactions of {BATCH:,})")
    started = time.perf_counter()
    decided = 0
    while decided < runs:
        # A thousand decisions a transaction, as a worker's step path groups them.
        with engine.batch():
            done = engine.process_workflow_tasks("bench-setup", clock.now(), limit=1000)
        decided += done
        if done == 0:
            break
    elapsed = time.perf_counter() - started
    print(f"   setup: {decided:,} first workflow tasks decided in {elapsed:.1f} s "
          f"({decided / elapsed:,.0f}/s, engine.process_workflow_tasks)")


def counts(path: str) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return dict(zip(
            ("open runs", "running with deadline_at", "scheduled timers", "ready workflow tasks"),
            conn.execute(
                "SELECT (SELECT count(*) FROM runs WHERE closed_at IS NULL), "
                "(SELECT count(*) FROM runs WHERE status = 'running' AND deadline_at IS NOT NULL), "
                "(SELECT count(*) FROM timers WHERE status = 'scheduled'), "
                "(SELECT count(*) FROM workflow_tasks WHERE status = 'scheduled')").fetchone(),
            strict=True,
        ))
    finally:
        conn.close()


class Capture:
    """Every statement run on the calling thread's connection while active."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.statements: list[str] = []

    def __enter__(self) -> Capture:
        self.engine.store.conn.set_trace_callback(self.statements.append)
        return self

    def __exit__(self, *exc: object) -> None:
        self.engine.store.conn.set_trace_callback(None)


def shape(sql: str) -> str:
    """A statement with its literals replaced, to group repeated statements."""
    return re.sub(r"'[^']*'|\b\d+\b", "?", sql)


def explain(conn: sqlite3.Connection, statements: list[str], title: str) -> list[str]:
    """Print the plan of each distinct SELECT; returns the full table scans found."""
    print(f"\n-- EXPLAIN QUERY PLAN: {title}")
    seen: set[str] = set()
    scans = []
    for sql in statements:
        if not sql.lstrip().upper().startswith("SELECT") or shape(sql) in seen:
            continue
        seen.add(shape(sql))
        print(f"   {shape(sql)}")
        for _, _, _, detail in conn.execute(f"EXPLAIN QUERY PLAN {sql}"):
            print(f"       {detail}")
            match = re.match(r"SCAN (\w+)", detail)
            if match and match.group(1) in TABLES and "INDEX" not in detail:
                scans.append(f"{detail} in {shape(sql)[:100]}")
    return scans


def expiry_path_statements() -> list[str]:
    """The statements a sweep and a deadline check run once things are due, from a side DB."""
    with Scratch() as side:
        client = side.client()
        for n in range(20):
            client.start("long_timer", f"side-timer-{n}")
            client.start("short_deadline", f"side-deadline-{n}")
            client.start("three_noops", f"side-noops-{n}")
        engine = client.engine
        engine.process_workflow_tasks("side", clock.now())
        for _ in range(5):
            engine.claim_activity("side", ("default",), clock.now())
        later = clock.now() + timedelta(days=400)
        with Capture(engine) as capture:
            sweep(engine, later)
            sweep_deadlines(engine, "side", later, lambda spec, state: None)
        client.close()
    return capture.statements


def expired_backlog(runs: int, repeat: int) -> list[float]:
    """Sweeps when every run is past its deadlines but already has an open workflow task.

    That is the state after a mass expiry while workers work through the backlog: nothing is
    actionable, yet the `<= now AND NOT EXISTS (open task)` branches visit every such run.
    """
    with Scratch() as side:
        client = side.client()
        definitions = client.definitions()
        engine = client.engine
        now = clock.now()
        with engine.transaction(now) as c:
            engine.save_definitions(c, definitions)
            for n in range(runs):
                # Not decided: each run keeps the open workflow task its start scheduled.
                create_instance(c, definitions, definitions.types["long_timer"],
                                f"backlog-{n:06d}", {}, {})
        later = now + timedelta(days=31)
        times = timed_ms(lambda: sweep(engine, later), repeat)
        client.close()
    return times


def measure(name: str, action: Callable[[], object], repeat: int) -> tuple[str, list[float]]:
    first = timed_ms(action, 1)[0]
    warm = timed_ms(action, repeat)
    print(f"   {name:<34} first {first:7.3f} ms | warm x{repeat}: {summary(warm, 3)} ms")
    return name, [first, *warm]


def pg_counts(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM runs WHERE closed_at IS NULL), "
            "(SELECT count(*) FROM runs WHERE status = 'running' AND deadline_at IS NOT NULL), "
            "(SELECT count(*) FROM timers WHERE status = 'scheduled'), "
            "(SELECT count(*) FROM workflow_tasks WHERE status = 'scheduled')").fetchone()
    return dict(zip(("open runs", "running with deadline_at", "scheduled timers",
                     "ready workflow tasks"), row, strict=True))


class PgCapture:
    """Every statement (with its parameters) the PostgreSQL store ran while active."""

    def __enter__(self) -> PgCapture:
        from wfctl.store import postgres

        self.statements: list[tuple[str, object]] = []
        self._real = real = postgres.PostgresTx._execute
        statements = self.statements

        def capture(tx: object, sql: str, params: object = None) -> object:
            statements.append((sql, params))
            return real(tx, sql, params)

        postgres.PostgresTx._execute = capture  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from wfctl.store import postgres

        postgres.PostgresTx._execute = self._real  # type: ignore[method-assign]


def pg_explain(url: str, statements: list[tuple[str, object]]) -> list[str]:
    """Print EXPLAIN (ANALYZE) of each distinct SELECT; returns the sequential scans of a
    large table found."""
    import psycopg

    print("\n-- EXPLAIN (ANALYZE): what the timed calls ran")
    scans, seen = [], set()
    with psycopg.connect(url) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        for sql, params in statements:
            if not sql.lstrip().upper().startswith("SELECT") or sql in seen:
                continue
            seen.add(sql)
            print(f"   {' '.join(sql.split())[:150]}")
            for (line,) in conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}", params):
                print(f"       {line}")
                match = re.search(r"Seq Scan on (\w+)", line)
                if match and match.group(1) in TABLES:
                    scans.append(f"{line.strip()} in {' '.join(sql.split())[:100]}")
            conn.rollback()
    return scans


# Built through the engine on PostgreSQL before the rest are copied.
PG_SEED = 1_000
# The copied rows of these tables, and their columns that hold an id to make unique.
PG_COPIED = {"instances": ("workflow_instance_id", "current_run_id"),
             "runs": ("workflow_run_id", "workflow_instance_id"),
             "timers": ("timer_id", "workflow_run_id", "workflow_instance_id")}


def pg_copy(url: str, copies: int) -> None:
    """Copy every instance, run and timer `copies` times, ids suffixed `-cN`. The rows go in
    with triggers off (the count trigger would rewrite one row per instance, each time walking
    every version of it this transaction left); each copy is then made a family of its own
    and the instance counts are made again."""
    import psycopg

    from wfctl.store.postgres_schema import COUNT_SLOTS

    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        conn.execute("SET session_replication_role = replica")
        for table, ids in PG_COPIED.items():
            columns = [row[0] for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "AND is_identity = 'NO' ORDER BY ordinal_position", (table,))]
            values = [f"{c} || '-c' || g" if c in ids else c for c in columns]
            conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) "
                         f"SELECT {', '.join(values)} FROM {table} "
                         "CROSS JOIN generate_series(1, %s) AS g", (copies,))
        conn.execute("UPDATE instances SET family_key = instance_key "
                     "WHERE workflow_instance_id LIKE '%%-c%%'")
        conn.execute("DELETE FROM instance_counts")
        conn.execute("INSERT INTO instance_counts (workflow_type, status, slot, count) "
                     f"SELECT workflow_type, status, family_key % {COUNT_SLOTS}, count(*) "
                     "FROM instances GROUP BY 1, 2, 3")
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
    print(f"   setup: copied {copies:,} times by SQL in {time.perf_counter() - started:.1f} s")


def main_postgres(url: str, runs: int, repeat: int) -> None:
    """The same scans on PostgreSQL (see the module's text)."""
    with Scratch() as scratch:
        header(f"watchdog and deadline scans over {runs:,} open runs on PostgreSQL, none expired")
        open_store(url).close()     # applies the migrations to an empty database
        client = wfctl.Client(url, scratch.workflows)
        existing = pg_counts(url)["open runs"]
        if existing == 0:
            seed = min(runs, PG_SEED)
            build(client, seed)
            if runs > seed:
                if runs % seed:
                    raise SystemExit(f"--runs must be a multiple of {seed:,} on PostgreSQL")
                pg_copy(url, runs // seed - 1)
        elif existing != runs:
            raise SystemExit(f"{existing:,} open runs in that database, not {runs:,}: "
                             "give an empty one")
        else:
            print("   setup: reusing the runs in the database")
        client.close()
        for name, value in pg_counts(url).items():
            print(f"   {name}: {value:,}")

        client = wfctl.Client(url, scratch.workflows)
        engine = client.engine
        worker = Worker(engine, WorkerOptions())
        worker.register(engine.store.now())
        now = engine.store.now()
        print("\n-- timings (first call includes opening the pool's connection)")
        results = [
            measure("watchdog.sweep(engine, now)", lambda: sweep(engine, now), repeat),
            measure("engine.earliest_deadline()", engine.earliest_deadline, repeat),
            measure("engine.claim_expired_deadlines()",
                    lambda: engine.claim_expired_deadlines(worker.worker_id, now, worker_alive),
                    repeat),
            measure("watchdog.sweep_deadlines()",
                    lambda: sweep_deadlines(engine, worker.worker_id, now,
                                            lambda spec, state: None), repeat),
        ]
        with PgCapture() as capture:
            sweep(engine, now)
            engine.earliest_deadline()
            engine.claim_expired_deadlines(worker.worker_id, now, worker_alive)
        scans = pg_explain(url, capture.statements)
        worker.unregister(engine.store.now())
        client.close()
    # A process's first call also opens a connection and plans the statements it prepares
    # (once per connection): the target is for every pass after it.
    verdict(results, scans, first_counts=False)


def verdict(results: list[tuple[str, list[float]]], scans: list[str], *,
            first_counts: bool = True) -> None:
    print("\n-- verdict")
    verdicts = {"watchdog.sweep(engine, now)": "watchdog sweep",
                "engine.earliest_deadline()": "earliest deadline",
                "engine.claim_expired_deadlines()": "deadline claim (write txn)",
                "watchdog.sweep_deadlines()": "full deadline check"}
    for name, times in results:
        p99 = percentile(times[1:], 0.99)
        met = p99 < TARGET_MS and (times[0] < TARGET_MS or not first_counts)
        print(f"   {verdicts[name]:<28} p99 {p99:.3f} ms, first {times[0]:.3f} ms: "
              f"{'MET' if met else 'MISSED'} (< {TARGET_MS} ms"
              f"{'' if first_counts else ', warm calls'})")
    print(f"   full table scans of a large table: {len(scans)}")
    for scan in scans:
        print(f"     {scan}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000, help="open runs (default 100000)")
    parser.add_argument("--quick", action="store_true", help="10,000 runs")
    parser.add_argument("--repeat", type=int, default=200, help="warm calls timed per query")
    parser.add_argument("--backlog-runs", type=int, default=20_000,
                        help="runs in the expired-backlog stress case (default 20000)")
    parser.add_argument("--dir", help="keep the database in this folder (and reuse it if it "
                                      "already holds the runs), instead of a temporary one")
    parser.add_argument("--db", metavar="URL",
                        help="a postgresql:// database to build the runs in (or reuse them)")
    args = parser.parse_args()
    runs = 10_000 if args.quick else args.runs
    if args.db:
        main_postgres(args.db, runs, args.repeat)
        return

    header(f"watchdog and deadline scans over {runs:,} open runs, none expired")
    scratch = Scratch(args.dir, reuse=bool(args.dir))
    try:
        client = scratch.client()
        existing = counts(str(scratch.db))["open runs"] if scratch.db.exists() else 0
        if existing != runs:
            if existing:
                scratch = Scratch(args.dir, reuse=False)
            client = scratch.client()
            build(client, runs)
        else:
            print(f"   setup: reusing {scratch.db}")
        client.close()
        for name, value in counts(str(scratch.db)).items():
            print(f"   {name}: {value:,}")

        # A fresh client, as a worker process would have: the first call opens the connection.
        client = scratch.client()
        engine = client.engine
        worker = Worker(engine, WorkerOptions())
        worker.register(clock.now())
        now = clock.now()
        print("\n-- timings (first call includes opening the connection)")
        results = [
            measure("watchdog.sweep(engine, now)", lambda: sweep(engine, now), args.repeat),
            measure("engine.earliest_deadline()", engine.earliest_deadline, args.repeat),
            measure("engine.claim_expired_deadlines()",
                    lambda: engine.claim_expired_deadlines(worker.worker_id, now, worker_alive),
                    args.repeat),
            measure("watchdog.sweep_deadlines()",
                    lambda: sweep_deadlines(engine, worker.worker_id, now,
                                            lambda spec, state: None),
                    args.repeat),
        ]
        with engine.store.read() as tx:
            at = clock.iso(now)
            full_scan = timed_ms(lambda: tx.conn.execute(
                "SELECT min(execution_deadline_at) FROM runs NOT INDEXED WHERE closed_at IS NULL "
                "AND execution_deadline_at > ?", (at,)).fetchone(), 5)
        print(f"   {'(reference) one full scan of runs':<34} "
              f"p50 {percentile(full_scan, 0.5):7.3f} ms, what an unindexed check would cost")

        with Capture(engine) as capture:
            sweep(engine, now)
            engine.earliest_deadline()
            engine.claim_expired_deadlines(worker.worker_id, now, worker_alive)
            sweep_deadlines(engine, worker.worker_id, now, lambda spec, state: None)
        conn = sqlite3.connect(scratch.db)
        scans = explain(conn, capture.statements, "what the timed calls ran")
        scans += explain(conn, expiry_path_statements(),
                         "expiry path (sweep and deadline check once things are due)")
        conn.close()
        worker.unregister(clock.now())
        client.close()
    finally:
        scratch.close()

    backlog_runs = 5_000 if args.quick else args.backlog_runs
    backlog = expired_backlog(backlog_runs, 20)
    print(f"\n-- stress (not a target): {backlog_runs:,} runs past their deadlines, each already "
          "holding an open workflow task")
    print(f"   watchdog.sweep(engine, now)        {summary(backlog, 1)} ms")

    verdict(results, scans)


if __name__ == "__main__":
    main()
