"""The systemd notify protocol (READY, STOPPING, WATCHDOG, STATUS): a datagram, no dependency."""

from __future__ import annotations

import math
import os
import socket

from wfctl.store import POSTGRES_SCHEMES


def notify(message: str) -> bool:
    """Send `message` (e.g. "READY=1") to $NOTIFY_SOCKET; False when not run by systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


def watchdog_interval() -> float | None:
    """Half of $WATCHDOG_USEC in seconds, when the watchdog is meant for this process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid.isdigit() and int(pid) != os.getpid():
        return None
    return int(usec) / 1_000_000 / 2


# Where a unit for a PostgreSQL database reads WFCTL_DB from, unless told otherwise.
ENVIRONMENT_FILE = "/etc/wfctl/wfctl.env"


def unit(*, executable: str, db: str, workflows: str, user: str | None, grace: float,
         watchdog: int = 30, environment_file: str = ENVIRONMENT_FILE) -> str:
    """A systemd service unit for `wfctl work` on these files.

    The worker drains for `grace` seconds on SIGTERM, so systemd waits longer than that before
    it kills; the watchdog is pinged at half of `watchdog`. A PostgreSQL URL may hold a
    password, and a unit is readable by every user: the unit reads WFCTL_DB from
    `environment_file` instead, and the URL appears nowhere in it.
    """
    user_line = f"User={user}\n" if user else ""
    workdir = os.path.dirname(os.path.abspath(workflows))
    grace_seconds = math.ceil(grace)
    on_postgres = db.startswith(POSTGRES_SCHEMES)
    database = [] if on_postgres else ["--db", _quoted(os.path.abspath(db))]
    command = " ".join([executable, *database,
                        "--workflows", _quoted(os.path.abspath(workflows)),
                        "work", "--grace", f"{grace_seconds}s"])
    environment = (
        f"# The database URL is read from {environment_file}: one line\n"
        "#   WFCTL_DB=postgresql://USER:PASSWORD@HOST:5432/DBNAME\n"
        "# owned by root and readable by root alone (systemd reads it before it drops to User=):\n"
        f"#   install -m 600 -o root -g root /dev/null {environment_file}\n"
        f"EnvironmentFile={environment_file.replace('%', '%%')}\n"
    ) if on_postgres else ""
    # A server elsewhere is reached once the network is up, not merely configured.
    network = ("After=network-online.target\nWants=network-online.target\n" if on_postgres
               else "After=network.target\n")
    return (
        "[Unit]\n"
        "Description=wfctl worker\n"
        f"{network}"
        "\n"
        "[Service]\n"
        "Type=notify\n"
        f"{user_line}"
        f"{environment}"
        f"WorkingDirectory={workdir.replace('%', '%%')}\n"
        f"ExecStart={command}\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        f"WatchdogSec={watchdog}\n"
        "NotifyAccess=main\n"
        "KillSignal=SIGTERM\n"
        f"TimeoutStopSec={grace_seconds + 15}\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _quoted(path: str) -> str:
    """A path as one ExecStart= argument: % escaped, in double quotes when it has a space."""
    path = path.replace("%", "%%")
    if not any(char in path for char in ' "\\'):
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
