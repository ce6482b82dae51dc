"""systemd: the notify protocol over a real datagram socket, and the unit `systemd-unit` prints."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.ops import systemd
from wfctl.worker import Worker, WorkerOptions

TESTS = Path(__file__).parent
DEFINITIONS = """
version: 1
workflows:
  etl:
    steps:
      - activity: wfh:mark
        name: extract
      - activity: wfh:mark
        name: load
"""


class NotifySocket:
    """What systemd listens on: an AF_UNIX datagram socket; collects what the service sends."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.messages: list[str] = []

    def receive(self, timeout: float = 10.0) -> str:
        self.sock.settimeout(timeout)
        message = self.sock.recv(4096).decode()
        self.messages.append(message)
        return message

    def wait_for(self, field: str, timeout: float = 10.0) -> str:
        """The next datagram with this field (e.g. "READY=1"); earlier ones are kept too."""
        end = time.monotonic() + timeout
        while True:
            message = self.receive(max(0.01, end - time.monotonic()))
            if field in message.split("\n"):
                return message

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def notify_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[NotifySocket]:
    # A short folder: a socket path must fit in 108 bytes, which pytest's tmp_path may not.
    folder = tempfile.mkdtemp(prefix="wfctl-")
    listener = NotifySocket(os.path.join(folder, "notify"))
    monkeypatch.setenv("NOTIFY_SOCKET", listener.address)
    yield listener
    listener.close()
    os.unlink(listener.address)
    os.rmdir(folder)


def test_notify_sends_one_datagram_to_notify_socket(notify_socket):
    assert systemd.notify("READY=1\nSTATUS=serving") is True
    assert notify_socket.receive() == "READY=1\nSTATUS=serving"


def test_notify_reaches_an_abstract_socket(monkeypatch):
    listener = NotifySocket(f"@wfctl-test-{os.getpid()}")
    monkeypatch.setenv("NOTIFY_SOCKET", listener.address)
    try:
        assert systemd.notify("WATCHDOG=1") is True
        assert listener.receive() == "WATCHDOG=1"
    finally:
        listener.close()


def test_notify_is_a_no_op_outside_systemd(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert systemd.notify("READY=1") is False


def test_notify_does_not_fail_when_nobody_listens(monkeypatch, tmp_path):
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "gone"))
    assert systemd.notify("READY=1") is False


def test_the_watchdog_is_pinged_at_half_of_watchdog_usec(monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    assert systemd.watchdog_interval() == 15.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert systemd.watchdog_interval() == 15.0
    monkeypatch.setenv("WATCHDOG_PID", "1")             # meant for another process
    assert systemd.watchdog_interval() is None
    monkeypatch.delenv("WATCHDOG_USEC")
    assert systemd.watchdog_interval() is None


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(DEFINITIONS))
    return workflows


@pytest.mark.process
def test_wfctl_work_speaks_the_notify_protocol(notify_socket, definitions, tmp_path):
    env = {**os.environ, "NOTIFY_SOCKET": notify_socket.address, "WATCHDOG_USEC": "200000",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("WATCHDOG_PID", None)
    worker = subprocess.Popen(
        [sys.executable, "-m", "wfctl", "--db", str(tmp_path / "wfctl.db"), "-w",
         str(definitions), "work", "--poll-interval", "20ms"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ready = notify_socket.wait_for("READY=1")
        assert re.search(r"^STATUS=serving default; 0 handlers running, 0 tasks done$", ready,
                         re.MULTILINE)
        with Client(tmp_path / "wfctl.db", definitions) as client:
            client.start("etl", "e1")
        counted = notify_socket.wait_for("STATUS=serving default; 0 handlers running, "
                                         "2 tasks done")
        assert counted
        ping = notify_socket.wait_for("WATCHDOG=1")
        assert ping.startswith("WATCHDOG=1\nSTATUS=")
        worker.send_signal(signal.SIGTERM)
        stopping = notify_socket.wait_for("STOPPING=1")
        assert "STATUS=stopping; 0 handlers running, 2 tasks done" in stopping
        assert worker.wait(10) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        worker.stderr.close()
    fields = [message.split("\n")[0] for message in notify_socket.messages]
    assert fields.index("READY=1") < fields.index("STOPPING=1")
    assert fields.count("READY=1") == 1


def test_an_in_process_worker_reports_status_and_stopping(notify_socket, definitions, tmp_path):
    client = Client(tmp_path / "wfctl.db", definitions)
    worker = Worker(client.engine, WorkerOptions(poll_interval=0.01))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        notify_socket.wait_for("READY=1")
        client.start("etl", "e1")
        notify_socket.wait_for("STATUS=serving default; 0 handlers running, 2 tasks done")
    finally:
        worker.request_stop()
        thread.join(10)
        client.close()
    assert notify_socket.wait_for("STOPPING=1")


# the unit

def test_systemd_unit_prints_a_notify_unit_for_the_given_files(tmp_path):
    db, workflows = tmp_path / "data" / "wfctl.db", tmp_path / "app" / "workflows.yaml"

    result = CliRunner().invoke(app, ["--db", str(db), "-w", str(workflows), "systemd-unit",
                                      "--user", "app"])

    assert result.exit_code == 0, result.output
    unit = result.stdout
    assert unit.startswith("[Unit]\n")
    lines = unit.splitlines()
    for line in ("Type=notify", "Restart=on-failure", "KillSignal=SIGTERM", "User=app",
                 "NotifyAccess=main", f"WorkingDirectory={tmp_path / 'app'}",
                 "WantedBy=multi-user.target"):
        assert line in lines
    exec_start = next(line for line in lines if line.startswith("ExecStart="))
    assert exec_start.endswith(f" --db {db} --workflows {workflows} work --grace 30s")
    watchdog = int(next(line for line in lines if line.startswith("WatchdogSec="))[12:])
    stop = int(next(line for line in lines if line.startswith("TimeoutStopSec="))[15:])
    assert watchdog > 0
    assert stop > 30
    assert not db.exists()


def test_the_unit_gives_the_worker_its_grace_and_systemd_waits_longer():
    result = CliRunner().invoke(app, ["--db", "/srv/w f/wfctl.db", "-w", "/srv/w f/wf.yaml",
                                      "systemd-unit", "--grace", "2m"])

    lines = result.stdout.splitlines()
    assert 'ExecStart=' in result.stdout
    assert result.stdout.count('"/srv/w f/wfctl.db"') == 1     # quoted: the path has a space
    assert next(line for line in lines if line.startswith("ExecStart=")).endswith(
        "work --grace 120s")
    assert "TimeoutStopSec=135" in lines
    assert "User=" not in result.stdout


def test_a_unit_for_postgresql_reads_the_url_from_an_environment_file_never_the_password(
        tmp_path):
    url = "postgresql://app:s3cr%40t-pw@db.example.com:5432/wf?sslmode=require"
    workflows = tmp_path / "app" / "workflows.yaml"

    result = CliRunner().invoke(app, ["--db", url, "-w", str(workflows), "systemd-unit",
                                      "--user", "app", "--environment-file",
                                      "/etc/wfctl/orders.env"])

    assert result.exit_code == 0, result.output
    unit = result.stdout
    for secret in ("s3cr", "%40t-pw", "s3cr@t-pw", "db.example.com", "postgresql://app"):
        assert secret not in unit
    lines = unit.splitlines()
    assert "EnvironmentFile=/etc/wfctl/orders.env" in lines
    exec_start = next(line for line in lines if line.startswith("ExecStart="))
    assert "--db" not in exec_start
    assert exec_start.endswith(f" --workflows {workflows} work --grace 30s")
    assert "After=network-online.target" in lines
    # Said in the unit itself: what the file holds and who may read it.
    assert "#   install -m 600 -o root -g root /dev/null /etc/wfctl/orders.env" in lines
    verify(unit, tmp_path)


def verify(unit: str, folder: Path) -> None:
    """systemd's own check of a unit file: no unknown key, no bad setting."""
    unit_file = folder / "wfctl.service"
    unit_file.write_text(unit)
    verified = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit_file)],
                              capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    assert not re.search(r"(?i)unknown key|missing '='|bad-setting|invalid", verified.stderr), \
        verified.stderr


@pytest.fixture
def host_folder() -> Iterator[Path]:
    """A folder the unit sees as the host does, unlike pytest's tmp_path under /tmp (the unit
    would share /tmp and say so): in /dev/shm, a memory file system every Linux host has."""
    folder = Path(tempfile.mkdtemp(prefix="wfctl-test-", dir="/dev/shm"))
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def files(host_folder: Path) -> tuple[Path, Path]:
    """A database folder and a definitions file that exist, as on a host ready for the unit."""
    (host_folder / "data").mkdir()
    (host_folder / "app").mkdir()
    workflows = host_folder / "app" / "workflows.yaml"
    workflows.write_text(textwrap.dedent(DEFINITIONS))
    return host_folder / "data" / "wfctl.db", workflows


def me() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def test_the_unit_passes_the_worker_options_on_to_its_exec_start(files, tmp_path):
    db, workflows = files

    result = CliRunner().invoke(app, [
        "--db", str(db), "-w", str(workflows), "systemd-unit", "--user", me(),
        "--queue", "orders", "-q", "bulk mail", "--queue", "orders", "--concurrency", "8",
        "--isolation", "process", "--metrics-port", "9464", "--log-format", "json",
        "--grace", "1m"])

    assert (result.exit_code, result.stderr) == (0, "")
    exec_start = next(line for line in result.stdout.splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith(
        f' --db {db} --workflows {workflows} work --queue orders --queue "bulk mail" '
        "--concurrency 8 --isolation process --metrics-port 9464 --log-format json --grace 60s")
    assert "TimeoutStopSec=75" in result.stdout.splitlines()
    verify(result.stdout, tmp_path)


def test_the_worker_options_are_checked_as_wfctl_work_checks_them(files):
    db, workflows = files
    runner = CliRunner()
    base = ["--db", str(db), "-w", str(workflows), "systemd-unit"]

    isolation = runner.invoke(app, [*base, "--isolation", "fork"])
    concurrency = runner.invoke(app, [*base, "--concurrency", "0"])

    assert (isolation.exit_code, isolation.stderr, isolation.stdout) == \
        (2, "Error: --isolation: 'fork' is not one of thread, process\n", "")
    assert concurrency.exit_code == 2 and concurrency.stdout == ""


def test_the_unit_is_hardened_and_may_write_only_the_database_folder(files, tmp_path):
    db, workflows = files

    result = CliRunner().invoke(app, ["--db", str(db), "-w", str(workflows), "systemd-unit"])

    lines = result.stdout.splitlines()
    for line in ("NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectSystem=strict",
                 f"ReadWritePaths={db.parent}", "ProtectHome=read-only"):
        assert line in lines
    verify(result.stdout, tmp_path)


def test_files_under_home_leave_home_folders_as_they_are():
    result = CliRunner().invoke(app, ["--db", "/home/app/wfctl.db", "-w", "/srv/app/wf.yaml",
                                      "systemd-unit"])

    assert "ReadWritePaths=/home/app" in result.stdout.splitlines()
    assert "ProtectHome" not in result.stdout
    definitions_at_home = CliRunner().invoke(app, ["--db", "/var/lib/wfctl/wfctl.db",
                                                   "-w", "/home/app/wf.yaml", "systemd-unit"])
    assert "ProtectHome" not in definitions_at_home.stdout


def test_a_unit_for_postgresql_writes_nothing_locally_and_waits_for_the_network(files, tmp_path):
    _, workflows = files

    result = CliRunner().invoke(app, ["--db", "postgresql://app@db.example.com/wf", "-w",
                                      str(workflows), "systemd-unit", "--queue", "orders"])

    assert (result.exit_code, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert {"After=network-online.target", "Wants=network-online.target",
            "ProtectSystem=strict", "NoNewPrivileges=yes"} <= set(lines)
    assert not any(line.startswith("ReadWritePaths=") for line in lines)
    assert next(line for line in lines if line.startswith("ExecStart=")).endswith(
        f" --workflows {workflows} work --queue orders --grace 30s")
    verify(result.stdout, tmp_path)


def test_the_unit_warns_about_missing_files_and_unknown_users(host_folder):
    result = CliRunner().invoke(app, ["--db", str(host_folder / "data" / "wfctl.db"),
                                      "-w", str(host_folder / "workflows.yaml"), "systemd-unit",
                                      "--user", "no-such-user-here"])

    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f"Warning: the definitions file {host_folder / 'workflows.yaml'} does not exist",
        f"Warning: the database's folder {host_folder / 'data'} does not exist",
        "Warning: there is no user no-such-user-here on this host",
    ]
    assert result.stdout.startswith("[Unit]\n")
    assert not (host_folder / "data").exists()


@pytest.mark.parametrize("folder", ["/tmp", "/var/tmp"])
def test_files_under_tmp_share_the_hosts_tmp_and_say_so(files, tmp_path, folder):
    db = f"{folder}/wfctl-orders/wfctl.db"
    _, workflows = files

    result = CliRunner().invoke(app, ["--db", db, "-w", str(workflows), "systemd-unit"])

    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f"Warning: the database's folder {folder}/wfctl-orders does not exist",
        f"Warning: the database {db} is under {folder}, which the host may empty at boot; the "
        f"unit shares {folder} with the host (no PrivateTmp=yes) so that the worker finds it "
        "there",
    ]
    lines = result.stdout.splitlines()
    # PrivateTmp=yes would give the worker an empty /tmp and /var/tmp of its own.
    assert not any(line.startswith("PrivateTmp=") for line in lines)
    assert {f"ReadWritePaths={folder}/wfctl-orders", "ProtectSystem=strict"} <= set(lines)
    verify(result.stdout, tmp_path)


def test_a_definitions_file_under_tmp_shares_the_hosts_tmp_and_says_so(files):
    db, _ = files
    workflows = "/tmp/wfctl-app/workflows.yaml"

    result = CliRunner().invoke(app, ["--db", str(db), "-w", workflows, "systemd-unit"])

    assert result.stderr.splitlines() == [
        f"Warning: the definitions file {workflows} does not exist",
        f"Warning: the definitions file {workflows} is under /tmp, which the host may empty at "
        "boot; the unit shares /tmp with the host (no PrivateTmp=yes) so that the worker finds "
        "it there",
    ]
    assert "PrivateTmp" not in result.stdout
