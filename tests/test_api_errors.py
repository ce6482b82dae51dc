"""The Python API raises wfctl's own errors, worded for a program, never a bare sqlite3 error,
KeyError or ValueError; `Client(create=False)` opens without creating."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wfctl
from wfctl import (
    Client,
    DatabaseError,
    DatabaseNotFound,
    DatabaseTooNew,
    InvalidInput,
    NotFound,
    WfctlError,
)
from wfctl.store.schema import migrations

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  etl:
    steps:
      - activity: wfh:mark
      - wait_for_signal: go
"""


@pytest.fixture
def env(make_env):
    env = make_env(DEFINITIONS)
    env.start("etl", "a1")
    return env


def message(call) -> str:
    with pytest.raises(WfctlError) as caught:
        call()
    return str(caught.value)


def test_the_database_errors_are_exported():
    for name in ("DatabaseError", "DatabaseNotFound", "DatabaseTooNew", "StoreUnavailable"):
        assert issubclass(getattr(wfctl, name), WfctlError)
        assert name in wfctl.__all__


@pytest.mark.sqlite_only        # a database file that is not there
def test_a_client_that_must_not_create_refuses_a_missing_database(tmp_path):
    client = Client(tmp_path / "w.db", create=False)
    with pytest.raises(DatabaseNotFound) as caught:
        client.list()
    assert str(caught.value) == f"no database at {tmp_path / 'w.db'}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sqlite_only        # the file appears; a PostgreSQL database is made by its server
def test_a_client_creates_on_first_use_by_default(tmp_path):
    with Client(tmp_path / "w.db") as client:
        assert client.list() == []
    assert (tmp_path / "w.db").exists()


@pytest.mark.sqlite_only        # writes into the SQLite file itself
def test_foreign_and_newer_files_are_database_errors(tmp_path):
    foreign = tmp_path / "foreign.db"
    foreign.write_text("hello")
    with pytest.raises(DatabaseError, match="is not a wfctl database"):
        Client(foreign).list()
    newer = tmp_path / "newer.db"
    Client(newer).list()
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {migrations.version + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(DatabaseTooNew) as caught:
        Client(newer).list()
    assert (caught.value.schema, caught.value.known) == (migrations.version + 1,
                                                          migrations.version)


@pytest.mark.parametrize(("call", "expected"), [
    (lambda c: c.start("etl", "b", input={"x": float("nan")}),
     "input at key 'x': nan is not a JSON number"),
    (lambda c: c.start("etl", "b", input={"x": [float("inf")]}),
     "input at key 'x[0]': inf is not a JSON number"),
    (lambda c: c.start("etl", "b", input={1: "x"}), "input: key 1 is not a string"),
    (lambda c: c.start("etl", "b", input={"x": [10**4300]}),
     "input at key 'x[0]': an integer of more than 4300 digits is not accepted"),
    (lambda c: c.start("etl", "b", input={"\udfff": 1}),
     "input: key '\\udfff' is text with a lone surrogate, not valid Unicode"),
    (lambda c: c.start("etl", "b", input=[1]), "input must be a JSON object (got list)"),
    (lambda c: c.start("etl", "b\udcff"),
     "instance id: text with a lone surrogate is not valid Unicode"),
    (lambda c: c.start("etl", 7), "instance id must be text (got int)"),
    (lambda c: c.start("etl", "b", deadline=float("nan")),
     "deadline: expected a duration: seconds (3600), a unit string with each unit once, "
     "largest first (90s, 5m, 2h30m, 1d12h, 250ms), ISO 8601 (PT2H30M, P1D, P1Y), a mapping "
     "({hours: 2, minutes: 30}) or NONE (got nan)"),
    (lambda c: c.signal("a1", "go", {"x": float("-inf")}),
     "signal data at key 'x': -inf is not a JSON number"),
    (lambda c: c.signal("a1", "go", {"x": -(10**4300)}),
     "signal data at key 'x': an integer of more than 4300 digits is not accepted"),
    (lambda c: c.signal("a1", "go", {"x": {"\udfff": 1}}),
     "signal data at key 'x': key '\\udfff' is text with a lone surrogate, not valid Unicode"),
    (lambda c: c.signal("a1", ""), "a signal name must not be empty"),
    (lambda c: c.signal("a1", "go", ["x"]), "signal data must be a JSON object (got list)"),
    (lambda c: c.cancel("a1", "\udcff"), "reason: text with a lone surrogate is not valid Unicode"),
    (lambda c: c.describe("a1", run=10**30), f"a1 has no run {10**30} (it has 1)"),
    (lambda c: c.describe("a1", run=0), "a1 has no run 0 (it has 1)"),
    (lambda c: c.history("a1", run=1, all_runs=True), "run and all_runs exclude each other"),
    (lambda c: c.list(status="bogus"),
     "status must be one of running, waiting, paused, completed, failed, timed_out, "
     "cancelled, terminated (got 'bogus')"),
    (lambda c: c.list(limit=0), "limit must be a whole number of at least 1 (got 0)"),
    (lambda c: c.retry("a1", extend_deadline="1h", clear_deadline=True),
     "extend_deadline and clear_deadline exclude each other"),
    (lambda c: c.retry("a1", extend_deadline="NONE"),
     "extend_deadline: expected a duration, not NONE (pass clear_deadline=True to remove the "
     "deadline)"),
])
def test_bad_calls_raise_wfctl_errors_worded_without_cli_flags(env, call, expected):
    assert message(lambda: call(env.client)) == expected
    assert "--" not in expected


def test_a_huge_limit_asks_for_everything(env):
    assert [row["workflow_instance_id"] for row in env.client.list(limit=10**30)] == ["a1"]


# One database for every example is the point: unknown ids leave it as it is.
@settings(derandomize=True, database=None, deadline=None, max_examples=60,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=30).filter(lambda text: text != "a1"))
def test_any_unknown_id_is_not_found_or_invalid_input(env, text):
    client = env.client
    for call in (client.describe, client.history, client.pause, client.resume,
                 lambda i: client.signal(i, text or "x"), lambda i: client.cancel(i, text),
                 client.retry):
        with pytest.raises((NotFound, InvalidInput)):
            call(text)
