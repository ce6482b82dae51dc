"""Make tests/data/v01.db: a database written by wfctl 0.1, with workflows in every state.

Run it with the released 0.1 code (commit 565b749) first on PYTHONPATH:

    mkdir /tmp/wfctl-0.1 && git archive 565b749 | tar -x -C /tmp/wfctl-0.1
    PYTHONPATH=/tmp/wfctl-0.1 python3 tests/data/make_v01_db.py

It refuses any other code (`wfctl.__version__` must be 0.1.0 and no module newer than 0.1 may
exist), because the file's whole point is to hold what 0.1 wrote. tests/test_upgrade.py opens the
file with the current code and checks that every workflow goes on as it would have on 0.1.

Every instant is fixed (the engine takes `now`, the Client a clock) and ids come from a seeded
generator, so a second run writes the same rows. Besides the database it writes
tests/data/v01/expected.json: `list --json --limit 100`, and `describe --json` and
`history --all-runs --json` of every instance, as 0.1 showed them.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
V01 = HERE / "v01"
DATABASE = HERE / "v01.db"
EXPECTED = V01 / "expected.json"
# Modules that appeared after 0.1: finding one means newer code is on the path.
NEWER_THAN_01 = ("jsonvalue.py", "vocabulary.py", "model.py", "store/base.py", "worker")

# The file is written between 11:00 and 11:20 on this day; the test drives it from 12:00 on.
F0 = datetime(2026, 4, 12, 11, 0, tzinfo=UTC)
# The worker of this script; it is never registered, as in the engine tests, so it never dies.
WORKER = "v01-host:1001:worker"
# A worker that claims an attempt and a workflow task, then vanishes without stopping.
LOST_HOST, LOST_PID = "v01-gone", 2002
LOST = f"{LOST_HOST}:{LOST_PID}:lost"
WORKER_LEASE = timedelta(seconds=30)

# What each instance is left as (its status), checked before anything is written out.
STATES = {
    "completed": "completed",
    "cancelled": "cancelled",
    "terminated": "terminated",
    "failed": "failed",
    "timed-out": "timed_out",
    "waiting-signal": "waiting",
    "signal-timeout": "waiting",
    "timer": "running",
    "far-deadline": "running",
    "on-deadline": "running",
    "paused": "paused",
    "backoff": "running",
    "lost-attempt": "running",
    "lost-decision": "running",
    "continued": "running",
    "queued": "running",
    "parent": "waiting",
    "buffered": "running",
    "fresh": "running",
}


def at(minute: int, second: float = 0) -> datetime:
    return F0 + timedelta(minutes=minute, seconds=second)


def refuse_newer_code() -> None:
    import wfctl

    package = Path(wfctl.__file__).parent
    newer = [name for name in NEWER_THAN_01 if (package / name).exists()]
    if wfctl.__version__ != "0.1.0" or newer:
        found = f"wfctl {wfctl.__version__} at {package}"
        if newer:
            found += f" (with {', '.join(newer)}, newer than 0.1)"
        sys.exit(f"Error: run this with wfctl 0.1 (commit 565b749) first on PYTHONPATH; "
                 f"found {found}")


def seed_ids() -> None:
    """Ids come from uuid4: draw them from a seeded generator, so the file is reproducible."""
    generator = random.Random(10)
    uuid.uuid4 = lambda: uuid.UUID(int=generator.getrandbits(128), version=4)


class Clock:
    """The Client's clock: set by hand before each call."""

    def __init__(self) -> None:
        self.now = F0

    def __call__(self) -> datetime:
        return self.now


def make(path: Path) -> dict[str, Any]:
    """Write the database at `path`; returns what 0.1 shows of each instance."""
    from wfctl import Client, clock
    from wfctl.worker import WorkerOptions

    now = Clock()
    client = Client(path, "workflows.yaml", clock_now=now)
    engine = client.engine
    worker = client.worker(WorkerOptions(queues=("default",)))
    worker.worker_id = WORKER

    def start(workflow_type: str, instance_id: str, when: datetime, **options: Any) -> None:
        now.now = when
        client.start(workflow_type, instance_id, **options)

    def decide(when: datetime) -> None:
        engine.process_workflow_tasks(WORKER, when)

    def control(action: str, instance_id: str, when: datetime, *args: Any) -> None:
        now.now = when
        getattr(client, action)(instance_id, *args)

    # The order matters: a claim takes the oldest ready task of any instance, so each instance
    # is driven before the next one starts, and those that leave work ready come last.

    # Closed: each one ran as far as it goes.
    start("ingest", "completed", at(0), input={"rows": 7})
    worker.run_once(at(0, 1))

    start("ingest", "cancelled", at(1))
    decide(at(1, 1))
    control("cancel", "cancelled", at(1, 2), "no longer needed")
    decide(at(1, 3))

    start("approval", "terminated", at(2))
    decide(at(2, 1))
    control("terminate", "terminated", at(2, 2), "operator stopped it")

    # An activity that failed for good (max_attempts 1), as the worker records an exception.
    start("loader", "failed", at(3))
    decide(at(3, 1))
    task = engine.claim_activity(WORKER, ("default",), at(3, 2))
    engine.fail_activity(task, "ConnectionError", "warehouse unreachable", at(3, 3),
                         exception_classes=[c.__name__ for c in ConnectionError.__mro__],
                         decide=True)

    # run_timeout 1m passes while the run waits for a signal; the watchdog times it out.
    start("report", "timed-out", at(4))
    decide(at(4, 1))
    worker.run_once(at(5))

    # Open and waiting: on a signal, on a signal with a 2h timeout, on 2h timers.
    start("approval", "waiting-signal", at(6))
    decide(at(6, 1))
    start("approval_timed", "signal-timeout", at(7))
    decide(at(7, 1))
    start("nightly", "timer", at(8))
    worker.run_once(at(8, 1))
    start("nightly", "far-deadline", at(9), deadline="300d")
    worker.run_once(at(9, 1))
    # deadline 2h with on_deadline: it expires at 13:10, before its 1d timer fires.
    start("escalation", "on-deadline", at(10), input={"ticket": "T-7"})
    worker.run_once(at(10, 1))

    # Paused while its first activity ran: the result is kept, the next step waits.
    start("ingest", "paused", at(11))
    decide(at(11, 1))
    task = engine.claim_activity(WORKER, ("default",), at(11, 2))
    control("pause", "paused", at(11, 3))
    # The worker's own way of running a claimed attempt (0.1 is frozen: its private is stable).
    worker._run_activity(task, at(11, 4))

    # The first attempt failed; the second waits for its 1h backoff.
    start("flaky", "backoff", at(12))
    worker.run_once(at(12, 1))

    # A worker claims an attempt (and heartbeats) and a workflow task, then vanishes.
    with engine.store.write() as tx:
        tx.register_worker({
            "worker_id": LOST, "kind": "worker", "hostname": LOST_HOST, "pid": LOST_PID,
            "pid_started": None, "queues": "default", "started_at": clock.iso(at(13)),
            "heartbeat_at": clock.iso(at(13)),
            "lease_expires_at": clock.iso(at(13) + WORKER_LEASE),
        })
    start("ingest", "lost-attempt", at(13), input={"rows": 250})
    decide(at(13, 1))
    task = engine.claim_activity(LOST, ("default",), at(13, 2))
    engine.record_heartbeat(task, {"fetched": 120}, at(13, 5))
    start("ingest", "lost-decision", at(13, 6))
    engine.claim_workflow_task(LOST, at(13, 7))

    # Run 1 polled and continued as new; run 2's poll is scheduled.
    start("poller", "continued", at(15), input={"until": 2})
    for second in (1, 2, 3):
        worker.step(at(15, second), fixed=True)

    # From here on each instance leaves an activity ready, so nothing more is claimed: only
    # workflow tasks are decided, and none of those is left ready until the last instance.
    start("ingest", "queued", at(16))
    decide(at(16, 1))
    # The parent waits on its child, whose first activity is scheduled.
    start("batch", "parent", at(17))
    decide(at(17, 1))
    # A signal that arrives before its wait_for_signal step: buffered.
    start("review", "buffered", at(18))
    decide(at(18, 1))
    now.now = at(18, 2)
    client.signal("buffered", "go", {"approved_by": "ops"})
    # Started, never decided: its first workflow task is scheduled.
    start("ingest", "fresh", at(19))

    shown = shown_by(client)
    client.close()
    check(shown["instances"])
    return shown


def shown_by(client: Any) -> dict[str, Any]:
    """What the release shows: `list`, and `describe` and `history --all-runs` of each
    instance."""
    listed = client.list(limit=100)
    shown: dict[str, Any] = {"list": listed, "instances": {}}
    for instance_id in sorted(row["workflow_instance_id"] for row in listed):
        shown["instances"][instance_id] = {
            "describe": client.describe(instance_id),
            "history": client.history(instance_id, all_runs=True),
        }
    return shown


def check(shown: dict[str, Any]) -> None:
    """Each instance is in the state it was made for; a slip in the script fails here."""
    statuses = {key: value["describe"]["status"] for key, value in shown.items()
                if key in STATES}
    assert statuses == STATES, statuses
    [child] = [key for key in shown if key.startswith("parent.import.")]
    assert shown[child]["describe"]["status"] == "running"
    activities = {key: [(a["step"], a["status"], a["attempt"]) for a in value["describe"]["activities"]]
                  for key, value in shown.items()}
    assert activities["lost-attempt"] == [("fetch", "started", 1)]
    assert activities["queued"] == activities[child] == [("fetch", "scheduled", 1)]
    assert activities["buffered"] == [("prepare", "scheduled", 1)]
    assert activities["backoff"] == [("fail_first", "retry_scheduled", 2)]
    assert activities["paused"] == [("fetch", "completed", 1)]
    assert activities["continued"] == [("poll", "scheduled", 1)]
    assert shown["continued"]["describe"]["run_count"] == 2
    assert shown["fresh"]["describe"]["run"]["current_step"] == "fetch"
    assert activities["fresh"] == activities["lost-decision"] == []


def finish(path: Path) -> None:
    """Small and self-contained: history checkpointed into the file, free pages dropped."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # sqlite-utils stamps migrations with the wall clock; the file gets a fixed instant.
        conn.execute("UPDATE _sqlite_migrations SET applied_at = ?",
                     (F0.isoformat(sep=" ", timespec="microseconds"),))
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def main() -> None:
    refuse_newer_code()
    seed_ids()
    # The definitions' path is stored in the file: relative, so it is the same on every checkout.
    os.chdir(V01)
    building = DATABASE.with_suffix(".db.new")
    for leftover in (building, Path(f"{building}-wal"), Path(f"{building}-shm")):
        leftover.unlink(missing_ok=True)
    shown = make(building)
    finish(building)
    building.replace(DATABASE)
    EXPECTED.write_text(json.dumps(shown, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{DATABASE.relative_to(HERE.parent.parent)}: {DATABASE.stat().st_size} bytes, "
          f"{len(shown['instances'])} instances")


if __name__ == "__main__":
    main()
