"""Make tests/data/v02.db: a database written by wfctl 0.2, with workflows in every state.

Run it with the released 0.2 code (commit 7f7eb3b) first on PYTHONPATH:

    mkdir /tmp/wfctl-0.2 && git archive 7f7eb3b | tar -x -C /tmp/wfctl-0.2
    PYTHONPATH=/tmp/wfctl-0.2 python3 tests/data/make_v02_db.py

and again with `--postgres URL`, the URL of an empty PostgreSQL database (its server's
`pg_dump` on PATH): the same instances are written there, and the database is dumped as SQL to
tests/data/v02-postgres.sql (0.2 showed the same of them on both backends).

It refuses any other code, because the file's whole point is to hold what 0.2 wrote. The
instances are those of tests/data/v01.db (make_v01_db.py: the same names, instants and states,
driven through 0.2's interface), and three of what 0.2 added: a run failed and waiting for its
workflow retry policy, a closed instance with a retention, and a parallel step whose branches
are scheduled. tests/test_upgrade.py opens the file with the current code and checks that every
workflow goes on. Besides the database it writes tests/data/v02/expected.json: `list --json
--limit 100`, and `describe --json` and `history --all-runs --json` of every instance, as 0.2
showed them.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import make_v01_db as v01

HERE = Path(__file__).resolve().parent
V02 = HERE / "v02"
DATABASE = HERE / "v02.db"
EXPECTED = V02 / "expected.json"
DUMP = HERE / "v02-postgres.sql"
# Modules that appeared after 0.2: finding one means newer code is on the path.
NEWER_THAN_02 = ("store/records.py", "store/queries.py", "engine/tasks.py", "engine/time", "ui")
# 0.2 kept the version number of 0.1.
VERSION = "0.1.0"
# What each instance 0.2 added is left as.
STATES = {
    **v01.STATES,
    "retried": "running",
    "kept": "completed",
    "fanout": "running",
}


def refuse_newer_code() -> None:
    import wfctl

    package = Path(wfctl.__file__).parent
    newer = [name for name in NEWER_THAN_02 if (package / name).exists()]
    if wfctl.__version__ != VERSION or newer or not (package / "store" / "base.py").exists():
        found = f"wfctl {wfctl.__version__} at {package}"
        if newer:
            found += f" (with {', '.join(newer)}, newer than 0.2)"
        sys.exit(f"Error: run this with wfctl 0.2 (commit 7f7eb3b) first on PYTHONPATH; "
                 f"found {found}")


def seed_ids() -> None:
    """Ids come from uuid4 (instances, workers) and os.urandom (runs, activities, timers): both
    drawn from seeded generators, so the file is reproducible."""
    v01.seed_ids()
    generator = random.Random(20)
    os.urandom = generator.randbytes


def make(path: Path | str) -> dict[str, Any]:
    """Write the database at `path` (a file, or a PostgreSQL URL); returns what 0.2 shows of
    each instance."""
    import v02_handlers

    from wfctl import Client
    from wfctl.worker import WorkerOptions

    at = v01.at
    now = v01.Clock()
    client = Client(path, "workflows.yaml", clock_now=now)
    engine = client.engine
    # 0.2's worker reads the client's clock: each call below sets it first.
    worker = client.worker(WorkerOptions(queues=("default",)))
    worker.worker_id = v01.WORKER

    def start(workflow_type: str, instance_id: str, when: Any, **options: Any) -> None:
        now.now = when
        client.start(workflow_type, instance_id, **options)

    def decide(when: Any) -> None:
        now.now = when
        engine.process_workflow_tasks(v01.WORKER, when)

    def work(when: Any) -> None:
        now.now = when
        worker.run_once(when)

    def control(action: str, instance_id: str, when: Any, *args: Any) -> None:
        now.now = when
        getattr(client, action)(instance_id, *args)

    def claim(instance_id: str, when: Any) -> Any:
        """The oldest ready activity, claimed: the instance's."""
        now.now = when
        task = engine.claim_activity(v01.WORKER, ("default",), when)
        assert task is not None and task.workflow_instance_id == instance_id
        return task

    def complete(instance_id: str, when: Any, handler: Any) -> None:
        """The instance's ready activity claimed, and completed with `handler`'s result."""
        task = claim(instance_id, when)
        engine.complete_activity(task, handler(task.state), when, decide=True)

    def fail(instance_id: str, when: Any) -> None:
        """The instance's ready activity claimed, and failed as the worker records an exception."""
        task = claim(instance_id, when)
        engine.fail_activity(task, "ConnectionError", "warehouse unreachable", when,
                             exception_classes=[c.__name__ for c in ConnectionError.__mro__],
                             decide=True)

    # The order matters, as in make_v01_db.py: each instance is driven before the next one
    # starts, and those that leave work ready come last.
    start("ingest", "completed", at(0), input={"rows": 7})
    work(at(0, 1))

    start("ingest", "cancelled", at(1))
    decide(at(1, 1))
    control("cancel", "cancelled", at(1, 2), "no longer needed")
    decide(at(1, 3))

    start("approval", "terminated", at(2))
    decide(at(2, 1))
    control("terminate", "terminated", at(2, 2), "operator stopped it")

    start("loader", "failed", at(3))
    decide(at(3, 1))
    fail("failed", at(3, 2))

    start("report", "timed-out", at(4))
    decide(at(4, 1))
    work(at(5))

    start("approval", "waiting-signal", at(6))
    decide(at(6, 1))
    start("approval_timed", "signal-timeout", at(7))
    decide(at(7, 1))
    start("nightly", "timer", at(8))
    work(at(8, 1))
    start("nightly", "far-deadline", at(9), deadline="300d")
    work(at(9, 1))
    start("escalation", "on-deadline", at(10), input={"ticket": "T-7"})
    work(at(10, 1))

    # Paused while its first activity ran: the result is kept, the next step waits.
    start("ingest", "paused", at(11))
    decide(at(11, 1))
    now.now = at(11, 2)
    task = engine.claim_activity(v01.WORKER, ("default",), at(11, 2))
    control("pause", "paused", at(11, 3))
    now.now = at(11, 4)
    result = v02_handlers.fetch(task.state, SimpleNamespace(
        last_heartbeat_details=task.last_heartbeat_details, attempt=task.attempt))
    engine.complete_activity(task, result, at(11, 4), decide=True)

    start("flaky", "backoff", at(12))
    work(at(12, 1))

    # A worker claims an attempt (and heartbeats) and a workflow task, then vanishes.
    with engine.store.write() as tx:
        tx.register_worker({
            "worker_id": v01.LOST, "kind": "worker", "hostname": v01.LOST_HOST,
            "pid": v01.LOST_PID, "pid_started": None, "queues": "default",
            "started_at": at(13), "heartbeat_at": at(13),
            "lease_expires_at": at(13) + v01.WORKER_LEASE,
        })
    start("ingest", "lost-attempt", at(13), input={"rows": 250})
    decide(at(13, 1))
    now.now = at(13, 2)
    task = engine.claim_activity(v01.LOST, ("default",), at(13, 2))
    now.now = at(13, 5)
    engine.record_heartbeat(task, {"fetched": 120}, at(13, 5))
    start("ingest", "lost-decision", at(13, 6))
    now.now = at(13, 7)
    engine.claim_workflow_task(v01.LOST, at(13, 7))

    # What 0.2 added. A run failed on its activity: its retry policy starts it again in 1h.
    start("retried", "retried", at(14))
    decide(at(14, 1))
    fail("retried", at(14, 2))
    # Completed with a 30-day retention.
    start("kept", "kept", at(14, 20))
    decide(at(14, 21))
    complete("kept", at(14, 22), v02_handlers.store)

    # Run 1 polled and continued as new; run 2's poll is scheduled.
    start("poller", "continued", at(15), input={"until": 2})
    decide(at(15, 1))
    complete("continued", at(15, 2), v02_handlers.poll)
    decide(at(15, 3))

    # From here on each instance leaves an activity ready: only workflow tasks are decided.
    start("ingest", "queued", at(16))
    decide(at(16, 1))
    start("batch", "parent", at(17))
    decide(at(17, 1))
    start("review", "buffered", at(18))
    decide(at(18, 1))
    now.now = at(18, 2)
    client.signal("buffered", "go", {"approved_by": "ops"})
    # A parallel step's two branches, scheduled.
    start("fanout", "fanout", at(18, 30))
    decide(at(18, 31))
    start("ingest", "fresh", at(19))

    shown = v01.shown_by(client)
    client.close()
    check(shown["instances"])
    return shown


def check(shown: dict[str, Any]) -> None:
    """Each instance is in the state it was made for; a slip in the script fails here."""
    v01.check(shown)
    statuses = {key: value["describe"]["status"] for key, value in shown.items()
                if key in STATES}
    assert statuses == STATES, statuses
    activities = {key: [(a["step"], a["status"], a["attempt"])
                        for a in value["describe"]["activities"]]
                  for key, value in shown.items()}
    assert activities["retried"] == [("load", "failed", 1)]
    assert shown["retried"]["describe"]["workflow_retry"]["next_attempt_at"] is not None
    assert sorted(activities["fanout"]) == [("fetch", "scheduled", 1), ("store", "scheduled", 1)]


def dump(url: str) -> None:
    """The PostgreSQL database as SQL a fresh database can run, with its migrations stamped at
    a fixed instant; no owners or grants, rows as INSERTs."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE wfctl_migrations SET applied_at = %s", (v01.F0,))
    # A fixed key for psql's `\restrict` line (a restore outside psql leaves it out), and each
    # table's rows sorted (pg_dump writes them in the order they lie on disk), so that a second
    # run writes the same file.
    done = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "--column-inserts",
                           "--restrict-key=wfctl02", "--dbname", url],
                          check=True, stdout=subprocess.PIPE, text=True)
    lines, block = [], []
    for line in done.stdout.splitlines():
        if line.startswith("INSERT INTO ") and (not block or line.split(" (", 1)[0]
                                                == block[0].split(" (", 1)[0]):
            block.append(line)
            continue
        lines += sorted(block)
        block = [line] if line.startswith("INSERT INTO ") else []
        if not block:
            lines.append(line)
    DUMP.write_text("\n".join(lines + sorted(block)) + "\n")


def main() -> None:
    refuse_newer_code()
    seed_ids()
    # The definitions' path is stored in the file: relative, so it is the same on every checkout.
    os.chdir(V02)
    sys.path.insert(0, str(V02))
    if sys.argv[1:2] == ["--postgres"]:
        shown = make(sys.argv[2])
        dump(sys.argv[2])
        # 0.2 showed the same of every instance on both backends: one expected.json.
        assert json.loads(json.dumps(shown)) == json.loads(EXPECTED.read_text())
        print(f"{DUMP.relative_to(HERE.parent.parent)}: {len(shown['instances'])} instances")
        return
    building = DATABASE.with_suffix(".db.new")
    for leftover in (building, Path(f"{building}-wal"), Path(f"{building}-shm")):
        leftover.unlink(missing_ok=True)
    shown = make(building)
    v01.finish(building)
    building.replace(DATABASE)
    EXPECTED.write_text(json.dumps(shown, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{DATABASE.relative_to(HERE.parent.parent)}: {DATABASE.stat().st_size} bytes, "
          f"{len(shown['instances'])} instances")


if __name__ == "__main__":
    main()
