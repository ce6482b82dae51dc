"""A PostgreSQL server for the tests: a throwaway cluster, or the one `WFCTL_TEST_PG` names.

The throwaway cluster is made with `initdb` (trust auth, fsync off) in a temporary folder and
started on a free port; it lives for the test session. Each test gets a database of its own,
copied from a template that already holds wfctl's schema (`CREATE DATABASE … TEMPLATE …` takes
a few tens of milliseconds). A server that cannot start fails the tests that need it: they are
never skipped.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

TEMPLATE = "wfctl_template"
_BIN_GLOB = "/usr/lib/postgresql/*/bin"


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be found or started for the tests."""


def _binaries() -> Path | None:
    """The folder of the newest installed server binaries (Debian's layout, then PATH)."""
    folders = sorted(glob.glob(_BIN_GLOB), key=lambda path: int(Path(path).parent.name))
    if folders:
        return Path(folders[-1])
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _install() -> Path:
    """Install the server from Debian's packages (a clean CI machine has none)."""
    if os.geteuid() != 0:
        raise ServerUnavailable(
            "the PostgreSQL server binaries are missing: install them (apt-get install "
            "postgresql) or set WFCTL_TEST_PG to a server URL")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True,
             "env": {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}}
    install = ["apt-get", "install", "-y", "--no-upgrade", "postgresql"]
    if subprocess.run(install, **quiet).returncode != 0:
        subprocess.run(["apt-get", "update"], **quiet)
        done = subprocess.run(install, **quiet)
        if done.returncode != 0:
            raise ServerUnavailable(f"apt-get install postgresql failed: {done.stderr.strip()}")
    found = _binaries()
    if found is None:
        raise ServerUnavailable("apt-get installed postgresql but no initdb was found")
    return found


def _scratch() -> str | None:
    """A folder in memory when there is one: creating a database copies its template's files."""
    try:
        memory = os.statvfs("/dev/shm")
    except OSError:
        return None
    roomy = memory.f_bavail * memory.f_frsize > 1 << 30
    return "/dev/shm" if roomy and os.access("/dev/shm", os.W_OK) else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """A PostgreSQL cluster started for the test session, stopped and removed at its end."""

    def __init__(self) -> None:
        self.binaries = _binaries() or _install()
        self.folder = Path(tempfile.mkdtemp(prefix="wfctl-pg-", dir=_scratch()))
        self.data = self.folder / "data"
        # The server refuses to run as root: as root, the cluster belongs to `postgres`.
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "--encoding=UTF8", "--no-instructions")
        for attempt in range(3):
            self.port = _free_port()
            options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                       f"-c unix_socket_directories={self.folder} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off")
            started = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"),
                                "-o", options, "-w", "-t", "20", "start", check=False)
            if started.returncode == 0:
                break
            if attempt == 2:
                log = (self.folder / "log").read_text(errors="replace")[-2000:]
                self.remove()
                raise ServerUnavailable(f"pg_ctl start failed: {started.stdout}{log}")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([*self._as, str(self.binaries / program), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and done.returncode != 0:
            raise ServerUnavailable(f"{program} failed: {done.stdout.strip()}")
        return done

    def restart(self) -> None:
        """Stop the server (ending every session, as a real restart does) and start it again
        on the same port."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-m", "fast",
                  "-w", "-t", "20", "restart")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class Server:
    """Databases on one server: a migrated template, and a fresh copy of it per test."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self._admin = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise ServerUnavailable(f"cannot connect to WFCTL_TEST_PG: {exc}") from None
        self._template = f"{TEMPLATE}_{uuid.uuid4().hex[:8]}"
        self._execute(f"CREATE DATABASE {self._template} TEMPLATE template0 ENCODING 'UTF8'")
        from wfctl.store.postgres import PostgresStore

        PostgresStore(self.database_url(self._template)).close()

    def _execute(self, sql: str) -> None:
        self._admin.execute(sql)

    def database_url(self, name: str) -> str:
        """The URL of database `name` on this server (the same user, host and options)."""
        head, _, tail = self.url.partition("://")
        authority, _, path = tail.partition("/")
        query = path.partition("?")[2]
        return f"{head}://{authority}/{name}" + (f"?{query}" if query else "")

    def create(self, *, migrated: bool = True) -> str:
        """A new database, with wfctl's schema (`migrated`) or empty; returns its URL."""
        name = f"wfctl_test_{uuid.uuid4().hex[:12]}"
        template = self._template if migrated else "template0"
        self._execute(f"CREATE DATABASE {name} TEMPLATE {template} ENCODING 'UTF8'")
        return self.database_url(name)

    def drop(self, url: str) -> None:
        name = url.rpartition("/")[2].partition("?")[0]
        self._execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        self._execute(f"DROP DATABASE IF EXISTS {self._template} WITH (FORCE)")
        self._admin.close()


def contents(url: str) -> dict[str, str]:
    """What a database holds: each table of wfctl's schema and a digest of its rows, in an order
    of their own (so that a read that writes nothing leaves the same digests)."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [name for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() ORDER BY table_name")]
        return {name: conn.execute(
            f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {name} t"
        ).fetchone()[0] for name in tables}
