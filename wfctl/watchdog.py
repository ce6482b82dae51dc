"""Finds what time made due (lost workers, timeouts, timers, deadlines) and hands it to the engine."""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wfctl import clock
from wfctl.engine import Engine
from wfctl.engine.deadlines import DeadlineClaim
from wfctl.store import Row

BATCH = 500
HOSTNAME = socket.gethostname()
# Where a machine's id is kept (systemd's, then D-Bus's for systems without systemd).
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


@dataclass
class SweepReport:
    """What one watchdog pass did, and when the next one has work."""

    activities_timed_out: int = 0
    workflow_tasks_timed_out: int = 0
    timers_fired: int = 0
    runs_woken: int = 0
    workers_lost: list[str] = field(default_factory=list)
    next_due: datetime | None = None

    @property
    def acted(self) -> bool:
        return bool(self.activities_timed_out or self.workflow_tasks_timed_out
                    or self.timers_fired or self.runs_woken or self.workers_lost)


def process_started(pid: int) -> str | None:
    """When the process started (Linux), so that a reused pid is not taken for the old one."""
    fields = _stat(pid)
    return fields[19] if fields else None


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (Linux): the state first."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


@functools.cache
def _machine_id() -> str | None:
    for path in MACHINE_ID_FILES:
        try:
            with open(path, encoding="ascii") as file:
                found = file.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if found:
            return found
    return None


def host_id() -> str:
    """This host, as workers record it: `WFCTL_HOST_ID` when set (for hosts whose hostnames are
    not unique, or containers that share a machine id), else the machine id and hostname."""
    given = os.environ.get("WFCTL_HOST_ID", "").strip()
    if given:
        return given
    machine = _machine_id()
    return f"{machine}:{HOSTNAME}" if machine else HOSTNAME


def same_host(worker: Row) -> bool:
    """Whether a worker runs on this host, so that its process can be looked at; a worker
    registered before hosts were recorded is known by its hostname."""
    recorded = worker.get("host_id")
    if recorded is None:
        return worker["hostname"] == HOSTNAME
    return recorded == host_id()


def worker_alive(worker: Row | None, at: datetime, *, leases_tell: bool = True) -> bool:
    """A worker on this host is alive while its process runs, whatever its lease says: a lease
    lapses too while the database refuses every writer (another process holding SQLite's write
    lock longer than the lease), which is no evidence of death. A worker on another host is
    judged by its lease only, and taken for alive while leases tell nothing (`leases_tell`
    false: the judge's own lease could not be renewed lately)."""
    if worker is None or worker["stopped_at"] is not None:
        return False
    if not same_host(worker):
        return worker["lease_expires_at"] > at or not leases_tell
    try:
        os.kill(worker["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat(worker["pid"])
    if fields is None:
        return True
    # A process that ended and was not yet waited for by its parent is no worker.
    return fields[0] not in ("Z", "X") and (worker["pid_started"] is None
                                            or fields[19] == worker["pid_started"])


def sweep(engine: Engine, now: datetime, *, alive: Collection[str] = (),
          clock_now: Callable[[], datetime] | None = None,
          leases_tell: bool = True) -> SweepReport:
    """One pass: lost workers, activity and workflow-task timeouts, timers, run deadlines.

    `alive` names workers known to be alive whatever their lease says: the sweeping worker
    itself, whose lease may have lapsed while the database was unavailable. With `leases_tell`
    false, no worker is found lost by its lease alone (see `worker_alive`). With `clock_now`,
    what is found due at `now` is enforced instance by instance at the instant the clock
    reads then (see `Engine.expire`).
    """
    report = SweepReport()
    with engine.store.read() as tx:
        lost = [w for w in tx.live_workers()
                if w["worker_id"] not in alive
                and not worker_alive(w, now, leases_tell=leases_tell)]
        due = tx.next_due(now)
    if lost:
        ids = [w["worker_id"] for w in lost]
        engine.lose_workers(ids, now)
        report.workers_lost.extend(ids)
    if due is not None and due <= now:
        expired = engine.expire(now, BATCH, clock_now)
        report.activities_timed_out += expired.activities_timed_out
        report.workflow_tasks_timed_out += expired.workflow_tasks_timed_out
        report.timers_fired += expired.timers_fired
        report.runs_woken += expired.runs_woken
    with engine.store.read() as tx:
        report.next_due = tx.next_due(now)
    return report


HandlerRunner = Callable[[str, dict[str, Any]], object]


HandlerError = dict[str, str] | None


def sweep_deadlines(engine: Engine, worker_id: str, now: datetime, run_handler: HandlerRunner,
                    *, clock: Callable[[], datetime] | None = None,
                    keep_alive: Callable[[Callable[[], HandlerError]], HandlerError] | None = None,
                    ) -> list[dict[str, Any]]:
    """One deadline check: claim each expiry, run its on_deadline handler, record the failure.

    The handlers run one after another, each through `keep_alive` when given (which keeps the
    claims alive while it runs); `clock` reads the time after each (the caller's clock;
    without it everything is recorded at `now`).
    """
    failed = []
    for claim in engine.claim_expired_deadlines(worker_id, now, worker_alive):
        def call(claim: DeadlineClaim = claim) -> HandlerError:
            return run_on_deadline(run_handler, claim)

        handler_error = keep_alive(call) if keep_alive else call()
        recorded = record_deadline(engine, claim, handler_error, clock() if clock else now)
        if recorded is not None:
            failed.append(recorded)
    return failed


def run_on_deadline(run_handler: HandlerRunner, claim: DeadlineClaim) -> HandlerError:
    """Call a claim's on_deadline handler; what it raised, as WorkflowDeadlineExceeded records it.

    Whatever it raises is recorded, never dropped (SystemExit and KeyboardInterrupt too: they
    are the handler's, the worker stops on signals, not exceptions). Its return value is
    ignored.
    """
    if not claim.on_deadline:
        return None
    try:
        run_handler(claim.on_deadline, claim.state)
    except BaseException as exc:
        return {"exception_class": type(exc).__name__, "message": str(exc)}
    return None


def record_deadline(engine: Engine, claim: DeadlineClaim, handler_error: HandlerError,
                    now: datetime) -> dict[str, Any] | None:
    """Record a claimed expiry (WorkflowDeadlineExceeded, WorkflowFailed); what `deadlines
    check` reports of it, or None when the run was closed or claimed by another meanwhile."""
    if not engine.record_deadline_exceeded(claim, handler_error, now):
        return None
    return {
        "workflow_instance_id": claim.workflow_instance_id,
        "workflow_run_id": claim.workflow_run_id,
        "deadline_at": clock.iso(claim.deadline_at),
        "on_deadline": claim.on_deadline,
        "handler_error": handler_error,
        "reclaimed": claim.reclaimed,
    }
