"""The systemd notify protocol (READY, STOPPING, WATCHDOG, STATUS): a datagram, no dependency."""

from __future__ import annotations

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
    """A systemd service unit for `wfctl work` on these files."""
    user_line = f"User={user}\n" if user else ""
    workdir = os.path.dirname(os.path.abspath(workflows))
    return (
        "[Unit]\n"
        "Description=wfctl worker\n"
        "After=network.target\n"
        "\n"
        "[Service]\n"
        "Type=notify\n"
        f"{user_line}"
        f"WorkingDirectory={workdir}\n"
        f"ExecStart={executable} --db {os.path.abspath(db)} "
        f"--workflows {os.path.abspath(workflows)} work\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        f"WatchdogSec={watchdog}\n"
        "NotifyAccess=main\n"
        "KillSignal=SIGTERM\n"
        f"TimeoutStopSec={int(grace) + 15}\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )
