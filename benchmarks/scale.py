"""Cost flat with size: steps/s and instance id completion on top of 100,000 completed workflows.

Goal: a fresh 1,000 workflows on top of 100,000 completed ones run within 10% of the rate on an
empty file.
Goal: completing instance ids at 100,000 instances (`Client.instance_ids(prefix)`, what shell
completion calls) takes at most 5 ms.

Setup: N `three_noops` workflows started through `wfctl.Client` and drained by an in-process
worker in batches of 5,000, as fast as the public API goes (minutes for 100,000). With `--dir`
the database is kept and reused by later runs as long as it holds N workflows and has the schema
a fresh database gets today (`scale.json` beside it records that; a changed schema is built
afresh). The measurements then run on a copy, so that the kept database stays as built.

Rates: `--repeat` rounds, each starting 1,000 fresh workflows on an empty file and then on the
big one (which grows by 1,000 a round), after 10 warm-up workflows on each, and draining them
with an in-process worker (`Client.worker(WorkerOptions()).run_once(now)` until a pass finds
nothing). Printed: the `Client.start` rate, the drain's steps/s, and this process's CPU per step
(which other load on the machine disturbs less than the rate); medians over the rounds, and the
ratio big / empty.

Completion: `Client.instance_ids(prefix)` for `--prefixes` prefixes cut at random lengths from
random existing ids (the empty prefix and prefixes that match nothing among them), on one open
client, and with a new client per call (what a completion process does after its imports); then
a few whole shell-completion round trips (`_WFCTL_COMPLETE=complete_bash wfctl describe PREFIX`),
process start-up included.

Yardsticks from the same run: a bare SQLite claim+complete loop on an empty table and on one
holding 3N finished rows; an indexed prefix lookup over the same N ids in a bare table, and a
full scan of it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchlib import (
    Scratch,
    bare_sqlite_pairs,
    checkpoint,
    drain,
    header,
    load,
    newest_not_completed,
    percentile,
    start_workflows,
    timed_ms,
    worker_env,
)

import wfctl
from wfctl.worker import WorkerOptions

TARGET_RATIO = 0.90
TARGET_MS = 5.0
BATCH = 5_000
FRESH = 1_000
WARM_UP = 10
STEPS_PER_WORKFLOW = 3
LIMIT = 200  # what Client.instance_ids returns at most by default


# the kept database


def fingerprint(db: Path) -> str:
    """The schema of a database file (every table, index and trigger, and its version)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                               "ORDER BY type, name").fetchall()
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    finally:
        conn.close()
    return hashlib.sha256(repr((version, objects)).encode()).hexdigest()[:16]


def fresh_fingerprint() -> str:
    """The schema wfctl gives a new database today."""
    with Scratch() as scratch:
        client = scratch.client()
        client.instance_ids("")
        client.close()
        return fingerprint(scratch.db)


def build(scratch: Scratch, completed: int) -> float:
    """`completed` workflows started and drained in batches; returns the seconds it took."""
    client = scratch.client()
    started = time.perf_counter()
    for first in range(0, completed, BATCH):
        count = min(BATCH, completed - first)
        start_workflows(client, "done", count, first)
        drain(client)
        left = newest_not_completed(client, count)
        if left:
            raise SystemExit(f"setup: {len(left)} workflows did not complete, e.g. {left[0]}")
        done = first + count
        if done % (BATCH * 4) == 0 or done == completed:
            elapsed = time.perf_counter() - started
            print(f"   setup: {done:,} completed in {elapsed:.0f} s ({done / elapsed:,.0f} "
                  "workflows/s)", flush=True)
    client.close()
    checkpoint(scratch.db)
    return time.perf_counter() - started


def kept_database(folder: str | None, completed: int) -> Scratch:
    """The database with `completed` workflows: reused from `folder` when it still fits."""
    schema = fresh_fingerprint()
    scratch = Scratch(folder, reuse=bool(folder))
    record = scratch.folder / "scale.json"
    if folder and scratch.db.exists() and record.exists():
        kept = json.loads(record.read_text())
        if kept.get("completed") == completed and kept.get("schema") == schema \
                and fingerprint(scratch.db) == schema:
            print(f"   setup: reusing {scratch.db} (built in {kept['build_seconds']:.0f} s)")
            return scratch
        print(f"   setup: {scratch.db} holds {kept.get('completed')} workflows of schema "
              f"{kept.get('schema')}; building {completed:,} of schema {schema} afresh")
    if folder:
        record.unlink(missing_ok=True)
        scratch = Scratch(folder, reuse=False)
    seconds = build(scratch, completed)
    record.write_text(json.dumps({"completed": completed, "schema": schema,
                                  "build_seconds": round(seconds, 1)}))
    return scratch


# rates


@dataclass
class Round:
    start_seconds: float
    drain_seconds: float
    cpu_seconds: float

    @property
    def starts_per_second(self) -> float:
        return FRESH / self.start_seconds

    @property
    def steps_per_second(self) -> float:
        return FRESH * STEPS_PER_WORKFLOW / self.drain_seconds

    @property
    def cpu_us_per_step(self) -> float:
        return self.cpu_seconds / (FRESH * STEPS_PER_WORKFLOW) * 1e6

    def text(self) -> str:
        return (f"start {self.starts_per_second:6,.0f}/s  drain {self.steps_per_second:6,.0f} "
                f"steps/s  {self.cpu_us_per_step:5,.0f} us CPU/step")


def fresh_round(scratch: Scratch, tag: str) -> Round:
    """Warm up, then start FRESH workflows and drain them."""
    client = scratch.client()
    try:
        start_workflows(client, f"warm-{tag}", WARM_UP)
        drain(client)
        start_seconds = start_workflows(client, f"fresh-{tag}", FRESH)
        cpu = time.process_time()
        drain_seconds = drain(client, WorkerOptions())
        cpu_seconds = time.process_time() - cpu
        left = newest_not_completed(client, FRESH)
        if left:
            raise SystemExit(f"{len(left)} fresh workflows did not complete, e.g. {left[0]}")
    finally:
        client.close()
    return Round(start_seconds, drain_seconds, cpu_seconds)


def rates(big: Scratch, completed: int, repeat: int) -> tuple[list[Round], list[Round]]:
    print(f"\n-- {FRESH:,} fresh workflows ({FRESH * STEPS_PER_WORKFLOW:,} steps), in-process "
          "worker, empty file vs on top of the completed ones")
    empties, bigs = [], []
    stamp = time.strftime("%H%M%S")
    for n in range(repeat):
        with Scratch() as empty:
            empties.append(fresh_round(empty, f"{stamp}-{n}"))
        bigs.append(fresh_round(big, f"{stamp}-{n}"))
        print(f"   round {n + 1}: empty file    {empties[-1].text()}")
        print(f"            {completed + n * (FRESH + WARM_UP):>7,} done  {bigs[-1].text()}",
              flush=True)
    return empties, bigs


def median_of(rounds: list[Round], figure: str) -> float:
    return statistics.median(getattr(round_, figure) for round_ in rounds)


# completion


def prefixes(completed: int, count: int, seed: int = 10) -> list[str]:
    """The empty prefix, then prefixes of random existing ids cut at random lengths; one in
    ten is made to match nothing."""
    rng = random.Random(seed)
    cases = [""]
    for n in range(count - 1):
        identifier = f"done-{rng.randrange(completed):06d}"
        prefix = identifier[:rng.randint(1, len(identifier))]
        cases.append("z" + prefix[1:] if n % 10 == 9 else prefix)
    return cases


def classify(matches: int) -> str:
    if matches >= LIMIT:
        return f">= {LIMIT} matches (the limit)"
    return "1-199 matches" if matches else "no match"


def show(name: str, times: list[float]) -> None:
    print(f"   {name:<46} p50 {percentile(times, 0.5):7.3f}  p99 {percentile(times, 0.99):7.3f}  "
          f"max {max(times):7.3f} ms  (n={len(times)})")


def completion(scratch: Scratch, completed: int, count: int, cli_calls: int) -> list[float]:
    """Times Client.instance_ids over many prefixes; returns the warm times."""
    cases = prefixes(completed, count)
    print(f"\n-- completing instance ids: {len(cases)} prefixes over {completed:,} instances")
    client = wfctl.Client(scratch.db, scratch.workflows, create=False)
    first = timed_ms(lambda: client.instance_ids("done-0"), 1)[0]
    warm: list[float] = []
    by_class: dict[str, list[float]] = {}
    for prefix in cases:
        started = time.perf_counter()
        matches = len(client.instance_ids(prefix))
        elapsed = (time.perf_counter() - started) * 1000
        warm.append(elapsed)
        by_class.setdefault(classify(matches), []).append(elapsed)
    client.close()
    print(f"   first call on a new Client (opens the database): {first:.3f} ms")
    show("Client.instance_ids, one open Client", warm)
    for name in sorted(by_class):
        show(f"  {name}", by_class[name])

    def new_client(prefix: str) -> None:
        with wfctl.Client(scratch.db, create=False) as each:
            each.instance_ids(prefix)

    cold = [timed_ms(lambda prefix=prefix: new_client(prefix), 1)[0] for prefix in cases[:100]]
    show("a new Client per call (open + query + close)", cold)

    env = worker_env()
    env.update(_WFCTL_COMPLETE="complete_bash", COMP_CWORD="2", WFCTL_DB=str(scratch.db))
    command = [sys.executable, "-c", "from wfctl.cli import main; main()"]
    trips, answered = [], 0
    for prefix in cases[1:cli_calls + 1]:
        env["COMP_WORDS"] = f"wfctl describe {prefix}"
        started = time.perf_counter()
        finished = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        trips.append((time.perf_counter() - started) * 1000)
        answered += bool(finished.stdout.strip())
    if trips:
        show("shell completion round trip (a wfctl process)", trips)
        print(f"     ({answered} of {len(trips)} answered with ids; the rest matched nothing)")

    yardstick(scratch.folder, completed, cases)
    return warm


def yardstick(folder: Path, completed: int, cases: list[str]) -> None:
    """The same prefixes on a bare table of the same ids: indexed range lookup, full scan."""
    path = folder / "bare-ids.db"
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE ids (instance_id TEXT PRIMARY KEY) WITHOUT ROWID")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO ids VALUES (?)", ((f"done-{n:06d}",) for n in range(completed)))
    conn.execute("COMMIT")
    ranged = [timed_ms(lambda prefix=prefix: conn.execute(
        "SELECT instance_id FROM ids WHERE instance_id >= ? AND instance_id < ? LIMIT ?",
        (prefix, prefix + "\U0010ffff", LIMIT)).fetchall(), 1)[0] for prefix in cases]
    scans = [timed_ms(lambda prefix=prefix: conn.execute(
        "SELECT instance_id FROM ids NOT INDEXED WHERE instance_id LIKE ? LIMIT ?",
        (prefix.replace("_", "\\_") + "%", LIMIT)).fetchall(), 1)[0] for prefix in cases[:50]]
    conn.close()
    path.unlink()
    show("yardstick: bare table, indexed prefix range", ranged)
    show("yardstick: bare table, full scan (LIKE)", scans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--completed", type=int, default=100_000,
                        help="completed workflows underneath (default 100000)")
    parser.add_argument("--quick", action="store_true",
                        help="10,000 completed workflows, 2 rounds, fewer prefixes")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of fresh workflows, empty and big (default 3)")
    parser.add_argument("--prefixes", type=int, default=1_000,
                        help="prefixes to complete (default 1000)")
    parser.add_argument("--cli-calls", type=int, default=10,
                        help="whole shell-completion round trips (default 10)")
    parser.add_argument("--dir", help="keep the database in this folder and reuse it while it "
                                      "fits, instead of building it in a temporary one")
    args = parser.parse_args()
    completed = 10_000 if args.quick else args.completed
    repeat = 2 if args.quick else args.repeat
    count = 200 if args.quick else args.prefixes
    if completed % BATCH:
        parser.error(f"--completed must be a multiple of {BATCH:,}")

    header(f"cost with size: {FRESH:,} fresh workflows and id completion over {completed:,} "
           "completed workflows")
    kept = kept_database(args.dir, completed)
    size = kept.db.stat().st_size
    print(f"   the database: {size:,} B ({size / completed:,.0f} B per completed workflow, "
          "not VACUUMed)")
    # Measured on a copy when the database is kept, so that it stays as built.
    big = Scratch() if args.dir else kept
    try:
        if args.dir:
            shutil.copyfile(kept.db, big.db)
        warm = completion(big, completed, count, 3 if args.quick else args.cli_calls)
        empties, bigs = rates(big, completed, repeat)
    finally:
        big.close()
        kept.close()

    finished_rows = completed * STEPS_PER_WORKFLOW
    print(f"\n-- yardstick: bare SQLite claim+complete pairs (two transactions each), "
          f"empty table vs {finished_rows:,} finished rows, 1 s each, {repeat} rounds")
    bare_empties, bare_bigs = [], []
    with Scratch() as scratch:
        for _ in range(repeat):
            bare_empties.append(bare_sqlite_pairs(scratch.folder))
            bare_bigs.append(bare_sqlite_pairs(scratch.folder, done_rows=finished_rows))
    bare_empty, bare_big = statistics.median(bare_empties), statistics.median(bare_bigs)
    print(f"   empty {bare_empty:,.0f}/s, big {bare_big:,.0f}/s: ratio {bare_big / bare_empty:.2f} "
          f"(runs: {', '.join(f'{e:,.0f}/{b:,.0f}' for e, b in zip(bare_empties, bare_bigs, strict=True))})")

    rate_empty = median_of(empties, "steps_per_second")
    rate_big = median_of(bigs, "steps_per_second")
    cpu_empty = median_of(empties, "cpu_us_per_step")
    cpu_big = median_of(bigs, "cpu_us_per_step")
    start_empty = median_of(empties, "starts_per_second")
    start_big = median_of(bigs, "starts_per_second")
    ratio = rate_big / rate_empty
    p50, p99 = percentile(warm, 0.5), percentile(warm, 0.99)
    print(f"\n-- verdict ({load()} at the end; medians of {repeat} rounds)")
    print(f"   steps/s: empty {rate_empty:,.0f}, on {completed:,} completed {rate_big:,.0f}: "
          f"ratio {ratio:.2f}, target >= {TARGET_RATIO:.2f}: "
          f"{'MET' if ratio >= TARGET_RATIO else 'MISSED'}")
    print(f"   CPU per step: empty {cpu_empty:,.0f} us, big {cpu_big:,.0f} us "
          f"(ratio {cpu_empty / cpu_big:.2f}); Client.start: empty {start_empty:,.0f}/s, big "
          f"{start_big:,.0f}/s (ratio {start_big / start_empty:.2f})")
    print(f"   completing ids at {completed:,} instances: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
          f"target p99 <= {TARGET_MS:.0f} ms: {'MET' if p99 <= TARGET_MS else 'MISSED'}")


if __name__ == "__main__":
    main()
