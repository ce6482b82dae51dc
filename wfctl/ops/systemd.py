"""systemd: the notify protocol (READY, STOPPING, WATCHDOG, STATUS) as a datagram, no dependency;
and the service unit `wfctl systemd-unit` prints, with what would keep it from running."""

from __future__ import annotations

import math
import os
import pwd
import socket
from dataclasses import dataclass

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


@dataclass(frozen=True)
class WorkerArgs:
    """The options of `wfctl work` a unit passes on (None or empty: the worker's default)."""

    grace: float = 30.0
    queues: tuple[str, ...] = ()
    concurrency: int | None = None
    isolation: str | None = None
    metrics_port: int | None = None
    log_format: str | None = None

    def words(self) -> list[str]:
        words = [word for queue in self.queues for word in ("--queue", _quoted(queue))]
        for option, value in (("--concurrency", self.concurrency),
                              ("--isolation", self.isolation),
                              ("--metrics-port", self.metrics_port),
                              ("--log-format", self.log_format)):
            if value is not None:
                words += [option, str(value)]
        return [*words, "--grace", f"{math.ceil(self.grace)}s"]


# Where a home folder may be: ProtectHome= hides or freezes all of them.
HOMES = ("/home", "/root", "/run/user")
# What PrivateTmp= gives the service a folder of its own for, empty, instead of the host's.
TEMPORARY = ("/tmp", "/var/tmp")


def unit(*, executable: str, db: str, workflows: str, user: str | None,
         worker: WorkerArgs | None = None, watchdog: int = 30,
         environment_file: str = ENVIRONMENT_FILE) -> str:
    """A systemd service unit for `wfctl work` on these files, with the worker's options.

    The worker drains for its grace period on SIGTERM, so systemd waits longer than that before
    it kills; the watchdog is pinged at half of `watchdog`. A PostgreSQL URL may hold a
    password, and a unit is readable by every user: the unit reads WFCTL_DB from
    `environment_file` instead, and the URL appears nowhere in it. The worker gets no new
    privileges and sees the file system read-only but for an SQLite database's folder (its
    journal and write-ahead log live beside it), home folders read-only unless its files are
    there, and a /tmp of its own unless its files are in the host's (`unit_warnings` says so).
    """
    worker = worker or WorkerArgs()
    user_line = f"User={user}\n" if user else ""
    workdir = os.path.dirname(os.path.abspath(workflows))
    grace_seconds = math.ceil(worker.grace)
    on_postgres = db.startswith(POSTGRES_SCHEMES)
    database = [] if on_postgres else ["--db", _quoted(os.path.abspath(db))]
    command = " ".join([executable, *database,
                        "--workflows", _quoted(os.path.abspath(workflows)),
                        "work", *worker.words()])
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
    files = [os.path.abspath(workflows)] + ([] if on_postgres else [os.path.abspath(db)])
    writable = "" if on_postgres else \
        f"ReadWritePaths={_quoted(os.path.dirname(os.path.abspath(db)))}\n"
    home = "" if any(_under(path, HOMES) for path in files) else "ProtectHome=read-only\n"
    private_tmp = "" if any(_under(path, TEMPORARY) for path in files) else "PrivateTmp=yes\n"
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
        "NoNewPrivileges=yes\n"
        f"{private_tmp}"
        "ProtectSystem=strict\n"
        f"{writable}"
        f"{home}"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def unit_warnings(*, db: str, workflows: str, user: str | None) -> list[str]:
    """What would keep the unit from running on this host: a definitions file or an SQLite
    database's folder that does not exist, a user unknown here; and files in the host's /tmp,
    which the unit shares (no PrivateTmp=) and the host may empty at boot."""
    warnings = []
    files = [("definitions file", os.path.abspath(workflows))]
    if not os.path.isfile(workflows):
        warnings.append(f"the definitions file {os.path.abspath(workflows)} does not exist")
    if not db.startswith(POSTGRES_SCHEMES):
        files.append(("database", os.path.abspath(db)))
        folder = os.path.dirname(os.path.abspath(db))
        if not os.path.isdir(folder):
            warnings.append(f"the database's folder {folder} does not exist")
    for what, path in files:
        for folder in TEMPORARY:
            if _under(path, (folder,)):
                warnings.append(f"the {what} {path} is under {folder}, which the host may empty "
                                f"at boot; the unit shares {folder} with the host (no "
                                "PrivateTmp=yes) so that the worker finds it there")
    if user is not None:
        try:
            pwd.getpwnam(user)
        except KeyError:
            warnings.append(f"there is no user {user} on this host")
    return warnings


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == folder or path.startswith(folder + "/") for folder in folders)


def _quoted(path: str) -> str:
    """A path as one ExecStart= argument: % escaped, in double quotes when it has a space."""
    path = path.replace("%", "%%")
    if not any(char in path for char in ' "\\'):
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
