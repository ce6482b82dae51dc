"""Bytes of database per completed 3-step no-op workflow, beside a bare table of the same results.

Goal: at most 3.5 KB of database per completed `three_noops` workflow.

N workflows are started through `wfctl.Client` and drained by a worker: in process
(`Client.worker(WorkerOptions()).run_once(now)` until a pass finds nothing to do), or with
`--cli` by one `wfctl work --once` subprocess. Every one of them must have completed. The WAL is
then checkpointed into the file (`PRAGMA wal_checkpoint(TRUNCATE)`) and the database copied with
`VACUUM INTO`; the figure is the copy's size / N. The file as it lies (checkpointed, not
VACUUMed) is printed too, and so is the marginal cost, (size - size of a database holding no
workflow) / N, which leaves out the pages every table and index takes however empty it is.

Where the bytes go: SQLite's `dbstat` table (when SQLite was built with it) gives the pages of
each table and index of the VACUUMed copy, printed as bytes per workflow with the rows per
workflow of each table. Only plain reads of the file are used, so the breakdown follows the
schema whatever it becomes.

The yardstick, the floor: a bare SQLite table holding the same 3 results per workflow
(instance id, step, result), WAL, VACUUMed the same way.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
from pathlib import Path

from benchlib import (
    Scratch,
    checkpoint,
    drain,
    header,
    load,
    newest_not_completed,
    start_workflows,
    vacuum_into,
    wfctl_command,
    worker_env,
)

from wfctl.worker import WorkerOptions

TARGET_BYTES = 3_500
STEPS_PER_WORKFLOW = 3


def empty_database_bytes(scratch: Scratch) -> int:
    """The VACUUMed size of a database holding the schema and nothing else."""
    client = scratch.client()
    client.instance_ids("")
    client.close()
    checkpoint(scratch.db)
    return vacuum_into(scratch.db, scratch.folder / "empty-vacuumed.db")


def fill(scratch: Scratch, workflows: int, cli: bool) -> None:
    client = scratch.client()
    seconds = start_workflows(client, "size", workflows)
    print(f"   started {workflows:,} workflows in {seconds:.1f} s")
    if cli:
        finished = subprocess.run(wfctl_command(scratch, "work", "--once", "--log-level", "error"),
                                  env=worker_env(), capture_output=True, text=True, check=False)
        if finished.returncode != 0:
            raise SystemExit(f"wfctl work --once exited {finished.returncode}: "
                             f"{finished.stderr.strip()}")
        how = "one `wfctl work --once` subprocess"
    else:
        seconds = drain(client, WorkerOptions())
        how = f"an in-process worker in {seconds:.1f} s"
    left = newest_not_completed(client, workflows)
    client.close()
    if left:
        raise SystemExit(f"{len(left)} of {workflows} workflows did not complete, e.g. {left[0]}")
    print(f"   drained by {how}: all {workflows:,} completed")


def breakdown(path: Path, workflows: int) -> None:
    """Bytes per workflow of each table and index, from dbstat, with rows per workflow."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        try:
            pages = {name: (size, payload) for name, size, payload in conn.execute(
                "SELECT name, sum(pgsize), sum(payload) FROM dbstat GROUP BY name")}
        except sqlite3.OperationalError as exc:
            print(f"   (no per-table breakdown: {exc}; SQLite built without dbstat)")
            return
        objects = conn.execute("SELECT type, name, tbl_name FROM sqlite_master "
                               "WHERE type IN ('table', 'index')").fetchall()
        tables = sorted((name for kind, name, _ in objects if kind == "table"),
                        key=lambda name: -pages.get(name, (0, 0))[0])
        indexes: dict[str, list[str]] = {}
        for kind, name, table in objects:
            if kind == "index":
                indexes.setdefault(table, []).append(name)
        print(f"   {'table / index':<46} {'B/workflow':>10} {'rows/workflow':>14} "
              f"{'payload B/row':>14}")
        for table in tables:
            size, payload = pages.get(table, (0, 0))
            (rows,) = conn.execute(f'SELECT count(*) FROM "{table.replace(chr(34), chr(34) * 2)}"'
                                   ).fetchone()
            per_row = f"{payload / rows:14.0f}" if rows else f"{'':14}"
            print(f"   {table:<46} {size / workflows:10.0f} {rows / workflows:14.2f} {per_row}")
            for index in sorted(indexes.get(table, []), key=lambda name: -pages.get(name, (0, 0))[0]):
                print(f"     {index:<44} {pages.get(index, (0, 0))[0] / workflows:10.0f}")
        schema = pages.get("sqlite_schema", pages.get("sqlite_master", (0, 0)))[0]
        print(f"   {'(the schema itself)':<46} {schema / workflows:10.0f}")
    finally:
        conn.close()


def bare_results(folder: Path, workflows: int) -> int:
    """The VACUUMed size of a bare table holding 3 results per workflow."""
    path = folder / "bare-results.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE results (instance_id TEXT NOT NULL, step INTEGER NOT NULL, "
                 "result TEXT, PRIMARY KEY (instance_id, step)) WITHOUT ROWID")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO results VALUES (?, ?, 'null')",
                     ((f"size-{n:06d}", step) for n in range(workflows)
                      for step in range(STEPS_PER_WORKFLOW)))
    conn.execute("COMMIT")
    conn.close()
    checkpoint(path)
    return vacuum_into(path, folder / "bare-results-vacuumed.db")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--workflows", type=int, default=1_000,
                        help="completed workflows to measure (default 1000)")
    parser.add_argument("--quick", action="store_true", help="300 workflows")
    parser.add_argument("--cli", action="store_true",
                        help="drain with a `wfctl work --once` subprocess instead of in process")
    args = parser.parse_args()
    workflows = 300 if args.quick else args.workflows

    header(f"database size: {workflows:,} completed 3-step no-op workflows")
    with Scratch() as empty:
        empty_bytes = empty_database_bytes(empty)
    with Scratch() as scratch:
        fill(scratch, workflows, args.cli)
        checkpoint(scratch.db)
        as_is = scratch.db.stat().st_size
        vacuumed_path = scratch.folder / "vacuumed.db"
        vacuumed = vacuum_into(scratch.db, vacuumed_path)
        bare = bare_results(scratch.folder, workflows)

        print("\n-- bytes per completed workflow")
        print(f"   wfctl, checkpointed file           {as_is / workflows:8,.0f} B "
              f"({as_is:,} B)")
        print(f"   wfctl, VACUUMed copy               {vacuumed / workflows:8,.0f} B "
              f"({vacuumed:,} B)")
        print(f"   wfctl, VACUUMed, marginal          {(vacuumed - empty_bytes) / workflows:8,.0f} B "
              f"(a database with no workflow: {empty_bytes:,} B)")
        print(f"   yardstick: bare table of results   {bare / workflows:8,.0f} B "
              f"({bare:,} B; instance id, step, result; 3 rows per workflow)")

        print("\n-- where the bytes go (VACUUMed copy, dbstat pages)")
        breakdown(vacuumed_path, workflows)

    per_workflow = vacuumed / workflows
    print(f"\n-- verdict ({load()} at the end)")
    print(f"   target <= {TARGET_BYTES:,} B per completed workflow: "
          f"{'MET' if per_workflow <= TARGET_BYTES else 'MISSED'} ({per_workflow:,.0f} B, "
          f"{per_workflow / (bare / workflows):.1f}x the bare results table)")


if __name__ == "__main__":
    main()
