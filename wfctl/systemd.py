"""The systemd notify protocol (READY, STOPPING, WATCHDOG, STATUS): a datagram, no dependency."""

from __future__ import annotations

import math
import os
import socket


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


def unit(*, executable: str, db: str, workflows: str, user: str | None, grace: float,
         watchdog: int = 30) -> str:
    """A systemd service unit for `wfctl work` on these files.

    The worker drains for `grace` seconds on SIGTERM, so systemd waits longer than that before
    it kills; the watchdog is pinged at half of `watchdog`.
    """
    user_line = f"User={user}\n" if user else ""
    workdir = os.path.dirname(os.path.abspath(workflows))
    grace_seconds = math.ceil(grace)
    command = " ".join([executable, "--db", _quoted(os.path.abspath(db)),
                        "--workflows", _quoted(os.path.abspath(workflows)),
                        "work", "--grace", f"{grace_seconds}s"])
    return (
        "[Unit]\n"
        "Description=wfctl worker\n"
        "After=network.target\n"
        "\n"
        "[Service]\n"
        "Type=notify\n"
        f"{user_line}"
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
