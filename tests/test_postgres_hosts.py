"""Several hosts on one PostgreSQL database: each transaction that leaves work ready notifies the
workers that listen, in any process on any host (one that leaves nothing ready, or a process's
own commits, wake no listener); workers record their host."""

from __future__ import annotations

import dataclasses
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from wfctl import Client, clock
from wfctl.engine.time.workers import HOSTNAME, worker_alive
from wfctl.errors import StoreUnavailable
from wfctl.store import open_store
from wfctl.store import postgres_schema as schema
from wfctl.store.postgres import PostgresStore, ReadyListener

ETL = """
version: 1
workflows:
  etl:
    steps:
      - activity: wfh:mark
        name: extract
      - activity: wfh:mark
        name: transform
"""
# Long enough for a notification sent to arrive, short enough to keep the tests quick.
QUIET = 0.3


@pytest.fixture
def client(tmp_path: Path, pg_url: str) -> Iterator[Client]:
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(ETL))
    client = Client(pg_url, workflows)
    yield client
    client.close()


@pytest.fixture
def listener(pg_url: str) -> Iterator[ReadyListener]:
    """A listener of another process's store: it hears the client's commits."""
    store = PostgresStore(pg_url)
    listener = store.listen()
    assert listener.wait(0) is True, "a fresh listener asks for a look"
    yield listener
    listener.close()
    store.close()


def test_a_start_elsewhere_is_heard_at_once(client, listener):
    began = time.monotonic()
    client.start("etl", "e1")

    assert listener.wait(5) is True
    assert time.monotonic() - began < 1
    assert listener.wait(QUIET) is False


def test_a_transaction_that_leaves_nothing_ready_is_not_heard(client, listener):
    client.start("etl", "e1")
    assert listener.wait(5) is True, "its workflow task is ready"
    # The instant the start was stamped with is the server's: act at that clock, not this host's.
    engine, now = client.engine, client.now()

    decision = engine.claim_workflow_task("w1", now)
    assert listener.wait(QUIET) is False, "a claim readies nothing"
    engine.complete_workflow_task(decision, now)
    assert listener.wait(5) is True, "the first step is ready"

    task = engine.claim_activity("w1", ["default"], now)
    assert listener.wait(QUIET) is False, "a claim readies nothing"
    engine.complete_activity(task, {}, now, decide=True)
    assert listener.wait(5) is True, "the next step is ready"

    engine.complete_activity(engine.claim_activity("w1", ["default"], now), {}, now,
                             decide=True)
    assert listener.wait(QUIET) is False, "the workflow completed: nothing is ready"
    assert client.describe("e1")["status"] == "completed"


def test_a_processs_own_commits_wake_its_slots_not_its_listener(client):
    own = client.engine.store.listen()
    try:
        assert own.wait(0) is True
        client.start("etl", "e1")
        assert own.wait(QUIET) is False
    finally:
        own.close()


def test_a_terminated_listening_session_is_unavailable_then_listens_again(client, listener,
                                                                          pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid(),))

    with pytest.raises(StoreUnavailable) as lost:
        listener.wait(5)
    assert lost.value.reason == "unreachable"

    assert listener.wait(5) is True, "listening again asks for a look"
    client.start("etl", "e1")
    assert listener.wait(5) is True


def test_workers_of_a_database_from_before_hosts_keep_their_rows_and_are_known_by_hostname(
        pg_server):
    url = pg_server.create(migrated=False)
    before = [name for name, _ in schema.MIGRATIONS].index("p006_worker_host_id")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema.MIGRATIONS_TABLE} (version integer PRIMARY KEY, "
                     "name text NOT NULL UNIQUE, applied_at timestamptz NOT NULL "
                     "DEFAULT clock_timestamp())")
        for version, (name, function) in enumerate(schema.MIGRATIONS[:before], 1):
            function(conn)
            conn.execute(f"INSERT INTO {schema.MIGRATIONS_TABLE} (version, name) "
                         "VALUES (%s, %s)", (version, name))
        conn.execute(
            "INSERT INTO workers (worker_id, kind, hostname, pid, queues, started_at, "
            "heartbeat_at, lease_expires_at) VALUES ('old', 'worker', %s, 2147483646, "
            "'default', now(), now(), now() + interval '1 hour')", (HOSTNAME,))

    store = open_store(url)
    try:
        [old] = store.peek().live_workers()
        at = clock.now()
        assert old.host_id is None
        assert worker_alive(old, at) is False, "this hostname's: its pid is looked at"
        assert worker_alive(dataclasses.replace(old, hostname="elsewhere"), at) is True
    finally:
        store.close()
    pg_server.drop(url)
