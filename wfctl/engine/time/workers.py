"""Whether a worker is alive: its process on this host, its lease elsewhere; a lost one's work is retried."""

from __future__ import annotations

import functools
import os
import socket
from datetime import datetime

from wfctl.store import Row

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

