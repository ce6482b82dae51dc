"""Whether a worker is alive (its process on this host, its lease elsewhere), and a process's own record."""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from wfctl.ops import log
from wfctl.store import Row, Store
from wfctl.store.records import RegisteredWorker

T = TypeVar("T")

HOSTNAME = socket.gethostname()

# Where a machine's id is kept (systemd's, then D-Bus's for systems without systemd).
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")

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


def same_host(worker: RegisteredWorker) -> bool:
    """Whether a worker runs on this host, so that its process can be looked at; a worker
    registered before hosts were recorded is known by its hostname."""
    if worker.host_id is None:
        return worker.hostname == HOSTNAME
    return worker.host_id == host_id()


def worker_alive(worker: RegisteredWorker | None, at: datetime, *,
                 leases_tell: bool = True) -> bool:
    """A worker on this host is alive while its process runs, whatever its lease says: a lease
    lapses too while the database refuses every writer (another process holding SQLite's write
    lock longer than the lease), which is no evidence of death. A worker on another host is
    judged by its lease only, and taken for alive while leases tell nothing (`leases_tell`
    false: the judge's own lease could not be renewed lately)."""
    if worker is None or worker.stopped_at is not None:
        return False
    if not same_host(worker):
        return worker.lease_expires_at > at or not leases_tell
    try:
        os.kill(worker.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat(worker.pid)
    if fields is None:
        return True
    # A process that ended and was not yet waited for by its parent is no worker.
    return fields[0] not in ("Z", "X") and (worker.pid_started is None
                                            or fields[19] == worker.pid_started)



class WorkerRecord:
    """This process's row in `workers`: its id, kind and queues, and its liveness lease,
    registered, renewed and ended. Whatever the process claims is recorded under the id; a
    watchdog takes it back once the process is dead (this host) or its lease lapsed."""

    # The host recorded: None for this one (`host_id()`).
    host: str | None = None

    def __init__(self, store: Store, *, kind: str = "worker", queues: Sequence[str] = (),
                 lease_seconds: float = 30.0) -> None:
        self.store = store
        self.worker_id = f"{HOSTNAME}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.kind = kind
        self.queues = tuple(queues)
        self.lease_seconds = lease_seconds
        self.registered = False

    @property
    def renew_every(self) -> float:
        """How often the lease is renewed: a third of it, at most 5 s."""
        return min(5.0, self.lease_seconds / 3)

    def register(self, now: datetime) -> None:
        with self.store.write() as tx:
            tx.register_worker(self._row(now))
        self.registered = True

    def _row(self, now: datetime) -> Row:
        return {
            "worker_id": self.worker_id,
            "kind": self.kind,
            "hostname": HOSTNAME,
            "host_id": self.host or host_id(),
            "pid": os.getpid(),
            "pid_started": process_started(os.getpid()),
            "queues": ",".join(self.queues),
            "started_at": now,
            "heartbeat_at": now,
            "lease_expires_at": now + timedelta(seconds=self.lease_seconds),
        }

    def renew(self, now: datetime, *, stopping: bool = False) -> None:
        """Extend the lease from `now`. A record gone from the database, or declared lost,
        is registered or revived (unless `stopping`)."""
        lease_expires_at = now + timedelta(seconds=self.lease_seconds)
        gone = False
        with self.store.write() as tx:
            renewed = tx.renew_worker(self.worker_id, now, lease_expires_at)
            if not renewed and not stopping:
                gone = tx.get_worker(self.worker_id) is None
                if gone:
                    # The database lost this worker's record (restored from a backup, or
                    # dropped and created again): what it holds and claims is recorded under
                    # its id, so it registers again under the same one, orphaning nothing.
                    tx.register_worker(self._row(now))
                else:
                    # Another watchdog saw the lease lapse (this worker on another host went
                    # silent) and retried our attempts; what this worker claims from now on
                    # must be watched again.
                    tx.revive_worker(self.worker_id, now, lease_expires_at)
        if gone:
            log.event("worker_registered_again", logging.WARNING, worker_id=self.worker_id,
                      message="its record was gone from the database (restored from a backup, "
                              "or created anew?); registered again")
        elif not renewed and not stopping:
            log.event("worker_lease_lapsed", logging.WARNING, worker_id=self.worker_id,
                      message="declared lost while stalled; its attempts were retried")

    def unregister(self, now: datetime) -> None:
        if self.registered:
            with self.store.write() as tx:
                tx.stop_worker(self.worker_id, now)
            self.registered = False


def keeping_lease(record: WorkerRecord, clock: Callable[[], datetime], call: Callable[[], T],
                  renew_every: float | None = None) -> T:
    """`call()` in a thread of its own while this thread renews `record`'s lease (before it,
    and every `renew_every` seconds while it runs), so that a slow handler never lets the
    claims of a one-off deadline check lapse to another worker. What `call` raises is raised
    here."""
    every = record.renew_every if renew_every is None else renew_every
    result: dict[str, object] = {}

    def target() -> None:
        try:
            result["value"] = call()
        except BaseException as exc:
            result["error"] = exc

    record.renew(clock())
    thread = threading.Thread(target=target, name="on_deadline", daemon=True)
    thread.start()
    while True:
        thread.join(every)
        if not thread.is_alive():
            break
        record.renew(clock())
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["value"]  # type: ignore[return-value]
