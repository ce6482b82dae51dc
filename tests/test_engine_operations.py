"""Engine operations act only on what they won, and run again whole when the store asks."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from conftest import at

from wfctl.errors import TransientConflict

pytestmark = pytest.mark.both_backends

ONE_STEP = """
version: 1
workflows:
  one:
    steps:
      - activity: wfh:mark
        name: only
"""


def conflict_on_first_commits(store, times: int):
    """Make the store's next `times` write transactions fail at commit, as a server database
    does on a serialization failure: the transaction rolls back and nothing is kept."""
    write = store.write
    left = {"n": times}

    @contextmanager
    def flaky():
        with write() as tx:
            yield tx
            if left["n"]:
                left["n"] -= 1
                raise TransientConflict("could not serialize access")

    store.write = flaky
    return left


def test_a_conflicted_operation_runs_again_whole_and_commits_once(make_env):
    env = make_env(ONE_STEP)
    heard = []
    env.engine.add_listener(lambda events: heard.append([e["event_type"] for e in events]))
    left = conflict_on_first_commits(env.engine.store, 2)

    env.start("one", "o1")

    assert left["n"] == 0
    assert env.event_types("o1") == ["WorkflowStarted", "WorkflowTaskScheduled"]
    assert heard == [["WorkflowStarted", "WorkflowTaskScheduled"]]


def test_listeners_hear_every_event_type_one_of_them_does_not_ignore(make_env):
    env = make_env(ONE_STEP)
    quiet, all_of_them = [], []
    env.engine.add_listener(lambda events: quiet.extend(e["event_type"] for e in events),
                            ignores={"WorkflowTaskScheduled", "WorkflowStarted"})
    env.start("one", "o1")
    env.engine.add_listener(lambda events: all_of_them.extend(e["event_type"] for e in events),
                            ignores={"WorkflowStarted"})
    env.start("one", "o2")

    # Alone, the first heard nothing it ignores; beside the second, what both ignore only.
    assert quiet == ["WorkflowTaskScheduled"]
    assert all_of_them == ["WorkflowTaskScheduled"]


def test_a_step_path_batch_that_conflicts_is_recorded_once(make_env):
    env = make_env(ONE_STEP)
    env.start("one", "o1")
    conflict_on_first_commits(env.engine.store, 3)

    assert env.run(1) is True

    assert env.describe("o1")["status"] == "completed"
    types = env.event_types("o1")
    assert types.count("ActivityStarted") == 1 and types.count("ActivityCompleted") == 1
    assert types[-1] == "WorkflowCompleted"


# It writes with SQLite's own transaction class.
@pytest.mark.sqlite_only
def test_a_claim_lost_to_another_writer_is_not_acted_on(make_env):
    env = make_env(ONE_STEP)
    env.start("one", "o1")
    env.decide(0)
    with env.engine.store.read() as tx:
        stale = tx.next_ready_activity(("default",), datetime(9999, 1, 1, tzinfo=UTC))
    assert env.claim(1, worker_id="first") is not None

    # A writer that still sees the activity as ready (its snapshot predates the claim) tries
    # to claim it: the conditional update matches no row, and nothing is recorded for it.
    from wfctl.store.sqlite import SQLiteTx as Tx

    offered = iter([stale, None])
    original = Tx.next_ready_activity
    Tx.next_ready_activity = lambda self, queues, now: next(offered)
    try:
        assert env.engine.claim_activity("second", ("default",), at(2)) is None
    finally:
        Tx.next_ready_activity = original

    started = env.events("o1", "ActivityStarted")
    assert [e["attributes"]["worker_id"] for e in started] == ["first"]
    assert env.describe("o1")["activities"][0]["status"] == "started"
