"""PostgreSQL for the benchmarks: a throwaway cluster, a fresh database per configuration, the
bare claim+complete yardstick, and the CPU time the server spends.

The throwaway cluster (`--postgres`) is made with `initdb` in a temporary folder on disk (not in
memory) and keeps PostgreSQL's durability: `fsync=on`, `full_page_writes=on`, and
`synchronous_commit` as asked: `on` (PostgreSQL's default: a commit returns once its WAL is
flushed to disk) or `off` (the WAL is flushed within about 200 ms; a crash of the machine may
lose the last commits, never corrupt anything: what SQLite's `synchronous=NORMAL` in WAL mode,
wfctl's setting, gives). `pg_stat_statements` is loaded so that `--profile` can say how long the
server spent on each statement.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg


def _binaries() -> Path:
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    if folders:
        return Path(folders[-1])
    initdb = shutil.which("initdb")
    if initdb is None:
        raise SystemExit("Error: --postgres needs the PostgreSQL server binaries "
                         "(apt-get install postgresql); or give --db postgresql://…")
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """A PostgreSQL cluster of its own, on this machine, removed by `stop`."""

    def __init__(self, synchronous_commit: str = "on") -> None:
        self.binaries = _binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="wfctl-bench-pg-"))
        self.data = self.folder / "data"
        self.synchronous_commit = synchronous_commit
        # The server refuses to run as root: as root, the cluster belongs to `postgres`.
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-instructions")
        self.port = _free_port()
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.folder} -c fsync=on "
                   f"-c full_page_writes=on -c synchronous_commit={synchronous_commit} "
                   "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on "
                   "-c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-o", options,
                  "-w", "-t", "30", "start")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*self._as, str(self.binaries / program), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise SystemExit(f"Error: {program} failed: {done.stdout.strip()}")

    def describe(self) -> str:
        return (f"throwaway PostgreSQL cluster on 127.0.0.1:{self.port} in {self.folder} "
                f"(fsync=on, full_page_writes=on, synchronous_commit={self.synchronous_commit})")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the server so far: the postmaster, the processes it
        runs now, and those it has waited for."""
        try:
            postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat, encoding="ascii", errors="replace") as source:
                    fields = source.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, parent = int(Path(stat).parent.name), int(fields[1])
            if pid == postmaster:
                total += sum(int(value) for value in fields[11:15]) / tick
            elif parent == postmaster:
                total += (int(fields[11]) + int(fields[12])) / tick
        return total

    def cpu_by_process(self) -> dict[int, tuple[str, float, float]]:
        """Each server process running now: its kind (`backend`, a connection's, or `other`:
        the WAL writer, checkpointer, autovacuum and the like) and its user and system CPU
        seconds so far."""
        try:
            postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return {}
        tick = os.sysconf("SC_CLK_TCK")
        found = {}
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat, encoding="ascii", errors="replace") as source:
                    fields = source.read().rsplit(")", 1)[1].split()
                if int(fields[1]) != postmaster:
                    continue
                pid = int(Path(stat).parent.name)
                command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except (OSError, ValueError):
                continue
            # A backend names its user, database and client: "postgres: USER DB HOST(PORT) …".
            kind = "backend" if "(" in command else "other"
            found[pid] = (kind, int(fields[11]) / tick, int(fields[12]) / tick)
        return found

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


class Server:
    """Databases on one server (the user of `url` may create them): a fresh one per run."""

    def __init__(self, url: str, cluster: Cluster | None = None) -> None:
        self.url = url
        self.cluster = cluster
        try:
            self._admin = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise SystemExit(f"Error: cannot connect to the server: {exc}") from None
        self.version = self._admin.execute("SHOW server_version").fetchone()[0]

    def database_url(self, name: str) -> str:
        head, _, tail = self.url.partition("://")
        authority, _, path = tail.partition("/")
        query = path.partition("?")[2]
        return f"{head}://{authority}/{name}" + (f"?{query}" if query else "")

    @contextmanager
    def database(self) -> Iterator[str]:
        """A new empty database for one run, dropped after it; yields its URL."""
        name = f"wfctl_bench_{uuid.uuid4().hex[:10]}"
        self._admin.execute(f"CREATE DATABASE {name}")
        try:
            yield self.database_url(name)
        finally:
            self._admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def cpu_seconds(self) -> float:
        """The server's CPU seconds so far, when it is the throwaway cluster (else 0)."""
        return self.cluster.cpu_seconds() if self.cluster else 0.0

    def describe(self) -> str:
        where = self.cluster.describe() if self.cluster else "the server of --db"
        return f"PostgreSQL {self.version}: {where}"

    def close(self) -> None:
        self._admin.close()
        if self.cluster is not None:
            self.cluster.stop()


def bare_postgres_pairs(url: str, seconds: float = 1.0, rows: int = 200_000) -> float:
    """Claim+complete pairs per second from one process on one connection: a bare indexed
    table, two transactions per pair (SELECT … FOR UPDATE SKIP LOCKED then UPDATE; UPDATE)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE tasks (id bigint PRIMARY KEY, status text NOT NULL, "
                     "owner text, available_at bigint NOT NULL)")
        conn.execute("CREATE INDEX tasks_ready ON tasks (available_at) WHERE status = 'ready'")
        conn.execute("INSERT INTO tasks SELECT n, 'ready', NULL, n FROM generate_series(1, %s) n",
                     (rows,))
        conn.execute("VACUUM ANALYZE tasks")
        pairs = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            with conn.transaction():
                (task_id,) = conn.execute(
                    "SELECT id FROM tasks WHERE status = 'ready' ORDER BY available_at "
                    "LIMIT 1 FOR UPDATE SKIP LOCKED").fetchone()
                conn.execute("UPDATE tasks SET status = 'started', owner = 'w' WHERE id = %s",
                             (task_id,))
            with conn.transaction():
                conn.execute("UPDATE tasks SET status = 'done' WHERE id = %s", (task_id,))
            pairs += 1
        rate = pairs / (time.perf_counter() - started)
        conn.execute("DROP TABLE tasks")
    return rate


def round_trip_us(url: str, count: int = 2_000) -> float:
    """The median time of one `SELECT 1` on an open connection: the floor of a round trip."""
    with psycopg.connect(url, autocommit=True) as conn:
        times = []
        for _ in range(count):
            before = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - before)
    return sorted(times)[len(times) // 2] * 1e6
