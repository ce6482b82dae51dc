"""Shared fixtures: a database in tmp_path (or on PostgreSQL), definitions from text, and a
hand-driven clock."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sqlite3
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from wfctl import Client, jsonvalue
from wfctl.engine import Engine
from wfctl.engine.tasks import ActivityTask
from wfctl.engine.time.sweep import SweepReport, sweep
from wfctl.lang.context import ActivityContext, HeartbeatBuffer
from wfctl.lang.handlers import HandlerCall
from wfctl.worker import Worker, WorkerOptions

TESTS = Path(__file__).parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

T0 = datetime(2026, 4, 12, 12, 0, tzinfo=UTC)


@dataclasses.dataclass
class Held:
    """An attempt as an executor runs it (`worker.attempts.Running`), made of a handler call,
    its heartbeat buffer and its abandon flag."""

    handler_call: HandlerCall
    heartbeats: HeartbeatBuffer
    abandon: Any

    @property
    def task(self) -> Any:
        call = self.handler_call
        return argparse.Namespace(handler=call.spec, step=call.step, state=call.state)

    def call(self) -> HandlerCall:
        return self.handler_call

    def context(self) -> ActivityContext:
        return ActivityContext(**self.handler_call.context, heartbeats=self.heartbeats)


# What ends the statements the tests' own checks run on a store's connections.
CHECKED = " /* checked by the tests */"


@pytest.fixture(autouse=True)
def kept_runs_are_what_the_file_holds(monkeypatch):
    """Every run a write transaction takes from what the write connection kept (store/kept.py),
    in every test, is checked against the file: its fields (values and types), that it has no
    open workflow task when it is said to have none, and its instance's last seq."""
    from wfctl.store import kept, sqlite
    from wfctl.store.queries import GET_RUN, RunRead
    from wfctl.store.records import Run

    get_run = sqlite.SQLiteTx.get_run
    names = [field.name for field in dataclasses.fields(Run)]

    def checked(tx: sqlite.SQLiteTx, run_id: str) -> Run | None:
        run = get_run(tx, run_id)
        if tx._kept is None or tx._kept.doubt:
            return run
        # Marked, for the tests that count the statements a transaction runs.
        cursor = sqlite3.Connection.execute(tx.conn, sqlite.native(GET_RUN) + CHECKED,
                                            (run_id,))
        cursor.row_factory = None
        rows = cursor.fetchall()
        if run is None:
            assert rows == []
            return run
        read = tx._readers[RunRead](rows[0])
        assert [(type(getattr(run, name)), getattr(run, name)) for name in names] == \
            [(type(getattr(read, name)), getattr(read, name)) for name in names], run_id
        if run_id in (tx._without_task or ()):
            assert read.read_open_task is None, run_id
        key = rows[0][kept.INSTANCE]
        appended = [row[1] for row in tx._closed_rows if row[0] == read.read_instance_key]
        if key in tx._open_rows:
            appended.append(tx._open_rows[key][0])
        assert tx._seq[key] == max([read.read_last_seq, *appended]), run_id
        return run

    monkeypatch.setattr(sqlite.SQLiteTx, "get_run", checked)


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server for the session: `WFCTL_TEST_PG` (a server URL whose user may create
    databases), else a throwaway cluster. One that cannot start fails the tests that need it."""
    import pg

    cluster = None
    try:
        url = os.environ.get("WFCTL_TEST_PG")
        if not url:
            cluster = pg.Cluster()
            url = cluster.url
        server = pg.Server(url)
    except BaseException as exc:
        if cluster is not None:
            cluster.stop()
        if not isinstance(exc, pg.ServerUnavailable):
            raise
        pytest.fail(f"no PostgreSQL server for the tests: {exc}", pytrace=False)
    yield server
    server.close()
    if cluster is not None:
        cluster.stop()


@pytest.fixture
def pg_url(pg_server):
    """The URL of a fresh database with wfctl's schema, dropped after the test."""
    url = pg_server.create()
    yield url
    pg_server.drop(url)


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Wait for another process to make `predicate` true (real-process tests only)."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(0.02)


def printed(document: Any) -> Any:
    """A read model (a Client's document) as `--json` prints it, read back: its instants are
    ISO text there."""
    return json.loads(jsonvalue.text(document, indent=None))


def at(seconds: float) -> datetime:
    """The instant `seconds` after T0, the start of every engine test."""
    return T0 + timedelta(seconds=seconds)


class Clock:
    """A clock the test moves by hand; Client calls read it, nothing sleeps."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def set(self, seconds: float) -> datetime:
        self.now = at(seconds)
        return self.now


class Env:
    """A workflows.yaml, a database and a Client over them, with engine shortcuts."""

    def __init__(self, folder: Path, client: Client, clock: Clock) -> None:
        self.folder = folder
        self.client = client
        # The database as --db names it: a file path, or a PostgreSQL URL.
        self.db = client.db_path
        self.clock = clock
        # The worker's own clock: each pass happens at the instant the test gives it. One slot,
        # so that a pass runs its tasks one after another in the test's thread.
        self.worker_clock = Clock()
        self.worker = Worker(client.engine, WorkerOptions(queues=("default",), concurrency=1),
                             clock=self.worker_clock)
        # Whether `decide` checks deadlines, as the long-running worker's decisions do.
        self.check_deadlines = False

    @property
    def engine(self) -> Engine:
        return self.client.engine

    def start(self, workflow_type: str, instance_id: str, *, now: float = 0,
              **options: Any) -> dict[str, Any]:
        self.clock.set(now)
        return self.client.start(workflow_type, instance_id, **options)

    def run(self, now: float) -> bool:
        """One worker pass at T0 + now: timeouts, then every ready task."""
        return self.worker.run_once(self.worker_clock.set(now))

    def decide(self, now: float) -> int:
        """Process every ready workflow task at T0 + now."""
        return self.engine.process_workflow_tasks(self.worker.worker_id, at(now),
                                                  check_deadlines=self.check_deadlines)

    def claim(self, now: float, queues: tuple[str, ...] = ("default",),
              worker_id: str | None = None) -> ActivityTask | None:
        return self.engine.claim_activity(worker_id or self.worker.worker_id, queues, at(now))

    def sweep(self, now: float) -> SweepReport:
        return sweep(self.engine, at(now))

    def describe(self, instance_id: str, run: int | None = None) -> dict[str, Any]:
        return self.client.describe(instance_id, run)

    def history(self, instance_id: str, **options: Any) -> list[dict[str, Any]]:
        return self.client.history(instance_id, **options)

    def event_types(self, instance_id: str, **options: Any) -> list[str]:
        return [event["event_type"] for event in self.history(instance_id, **options)]

    def events(self, instance_id: str, event_type: str, **options: Any) -> list[dict[str, Any]]:
        return [event for event in self.history(instance_id, **options)
                if event["event_type"] == event_type]


BACKENDS = ("sqlite", "postgres")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", choices=(*BACKENDS, "both"), default=None,
                     help="Run the engine and CLI tests (those on make_env or db) on this database "
                          "backend; by default SQLite, and both for modules marked both_backends.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_backends: run the module's make_env and db tests "
                                       "on SQLite and on PostgreSQL")
    config.addinivalue_line("markers", "sqlite_only: the test looks into SQLite itself (its "
                                       "file, its query plans, VACUUM)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames or \
            metafunc.definition.get_closest_marker("sqlite_only") is not None:
        return
    chosen = metafunc.config.getoption("backend")
    if chosen is None:
        both = metafunc.definition.get_closest_marker("both_backends") is not None
        chosen = "both" if both else "sqlite"
    if chosen != "sqlite":
        metafunc.parametrize("backend", BACKENDS if chosen == "both" else (chosen,),
                             indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The database backend of the test's Env: SQLite unless parametrized (see --backend)."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def db(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> str:
    """The database as `--db` names it: `wfctl.db` in tmp_path (not created yet), or the URL of
    a fresh PostgreSQL database (`backend`)."""
    if backend == "postgres":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "wfctl.db")


@pytest.fixture
def nothing_written(db: str, backend: str) -> Callable[[], bool]:
    """nothing_written() says whether the test's database is as it was made: no SQLite file at
    all, or every PostgreSQL table holding the rows it held when the test began."""
    if backend == "postgres":
        import pg

        fresh = pg.contents(db)
        return lambda: pg.contents(db) == fresh
    return lambda: not Path(db).exists()


@pytest.fixture
def make_env(tmp_path: Path, db: str) -> Callable[[str], Env]:
    """make_env(yaml_text) -> Env; handlers come from tests/wfh.py as `wfh:function`. The
    database is `db`: a file in tmp_path, or a fresh PostgreSQL database (`backend`)."""
    created: list[Env] = []

    def make(definitions: str) -> Env:
        workflows = tmp_path / "workflows.yaml"
        workflows.write_text(textwrap.dedent(definitions))
        clock = Clock()
        env = Env(tmp_path, Client(db, workflows, clock_now=clock), clock)
        created.append(env)
        return env

    yield make
    for env in created:
        env.client.close()


@pytest.fixture
def wfctl(monkeypatch, capsys) -> Callable[..., tuple[int, str, str]]:
    """wfctl(env, *args) -> (exit code, stdout, stderr), through the console script's main()."""
    from wfctl.cli import main

    def run(env, *args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["wfctl", "--db", env.db,
                                          "-w", str(env.folder / "workflows.yaml"), *args])
        with pytest.raises(SystemExit) as exited:
            main()
        out, err = capsys.readouterr()
        return exited.value.code, out, err

    return run


@contextmanager
def round_trips() -> Iterator[list[str]]:
    """The round trips this thread's statements take meanwhile, each named by its last
    statement's first words (a pipeline's end waits for all of its statements)."""
    import psycopg

    taken: list[str] = []
    piped: list[str] = []
    execute, pipeline_exit = psycopg.Cursor.execute, psycopg.Pipeline.__exit__
    me = threading.get_ident()

    def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == me:
            words = " ".join(str(query).split()[:2])
            if cursor.connection.info.pipeline_status != psycopg.pq.PipelineStatus.OFF:
                piped.append(words)
            else:
                taken.append(words)
        return execute(cursor, query, *args, **kwargs)

    def sent(pipeline: Any, *args: Any) -> Any:
        if threading.get_ident() == me:
            taken.append(piped[-1] if piped else "?")
            piped.clear()
        return pipeline_exit(pipeline, *args)

    psycopg.Cursor.execute, psycopg.Pipeline.__exit__ = counted, sent
    try:
        yield taken
    finally:
        psycopg.Cursor.execute, psycopg.Pipeline.__exit__ = execute, pipeline_exit
