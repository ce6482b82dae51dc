"""The store contract: what the engine relies on from any backend (`wfctl/store/base.py`).

Every backend runs these; a backend joins by adding itself to the `opener` fixture's params.
Each test names the methods of the interface it proves (`@covers`), and one test checks that
every method of `Tx` and `Store` is named by some test.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import UTC, datetime, timedelta, timezone

import pytest

from wfctl import clock
from wfctl.store import Store, codec, open_store, records
from wfctl.store import base as interface
from wfctl.vocabulary import EVENT_TYPES, TIMEOUT_EVENTS

T0 = datetime(2026, 4, 12, 12, 0, tzinfo=UTC)
POLICY = {"max_attempts": 3, "backoff_seconds": [1, 2], "schedule_to_start_timeout": None,
          "start_to_close_timeout": 30.0, "schedule_to_close_timeout": None,
          "heartbeat_timeout": None, "non_retryable": ["ValueError"]}

# The methods of the interface some test below proves.
COVERED: set[str] = set()


def covers(*names: str):
    """Mark a test as proving these methods of `Tx` or `Store`."""
    COVERED.update(names)
    return lambda test: test


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request, tmp_path):
    """Opens a fresh connection to one database of the backend under test."""
    stores: list[Store] = []
    if request.param == "postgres":
        location = request.getfixturevalue("pg_url")
    else:
        location = str(tmp_path / "contract.db")

    def open_one() -> Store:
        store = open_store(location)
        stores.append(store)
        return store

    yield open_one
    for store in stores:
        store.close()


@pytest.fixture
def store(opener):
    return opener()


def typed(value: object, record: type) -> bool:
    """Whether `value` is a `record` whose fields hold what their annotations declare: instants
    as aware UTC datetimes, flags as bools, JSON as its value, plain columns as their type. (A
    run read with what came along is a `RunRead`, a `Run` with those fields besides.)"""
    assert isinstance(value, record), f"{type(value).__name__} is not a {record.__name__}"
    hints = typing.get_type_hints(record, include_extras=True)
    for field in dataclasses.fields(record):
        hint, held = hints[field.name], getattr(value, field.name)
        if typing.get_origin(hint) is typing.Annotated:
            assert not isinstance(held, str | bytes), f"{field.name} holds JSON text"
            continue
        allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        # A generic's own class (`dict` of `dict[str, Any]`): isinstance takes no other.
        allowed = tuple(typing.get_origin(a) or a for a in allowed)
        assert isinstance(held, allowed), f"{record.__name__}.{field.name} is {held!r}, not {hint}"
        if isinstance(held, datetime):
            assert held.tzinfo is UTC, f"{record.__name__}.{field.name} is not in UTC"
    return True


def add_instance(tx, instance_id: str, *, created: datetime = T0, **fields) -> None:
    tx.put_definitions("d", "workflows.yaml", "version: 1", T0)
    run_id = f"{instance_id}-r1"
    tx.insert_instance({
        "workflow_instance_id": instance_id, "workflow_type": "t", "definitions_digest": "d",
        "status": "running", "current_run_id": run_id, "run_count": 1,
        "child_policy": "abandon", "created_at": created,
        "updated_at": created, **fields,
    })
    tx.insert_run({
        "workflow_run_id": run_id, "workflow_instance_id": instance_id, "run_number": 1,
        "status": "running", "state": {"k": "v"}, "first_seq": 1,
        "started_at": created,
    })


def add_activity(tx, activity_id: str, run_id: str, *, status: str = "scheduled") -> None:
    tx.insert_activity({
        "activity_id": activity_id, "workflow_run_id": run_id,
        "workflow_instance_id": run_id.removesuffix("-r1"), "step_index": 0,
        "branch_index": 0, "step": "s", "handler": "h:f", "queue": "default",
        "status": status, "attempt": 1, "max_attempts": 3, "retry_policy": POLICY,
        "available_at": T0, "scheduled_at": T0, "scheduled_event_id": 1,
    })


@covers("put_definitions", "insert_instance", "insert_run", "get_instance")
def test_nulls_come_back_as_none(store):
    with store.write() as tx:
        add_instance(tx, "i1", deadline_at=None, on_deadline=None)
    with store.read() as tx:
        instance = tx.get_instance("i1")
    assert typed(instance, records.Instance)
    assert instance.deadline_at is None and instance.closed_at is None
    assert instance.execution_timeout_seconds is None and instance.retry_policy is None


@covers("hold_run")
def test_a_run_held_and_read_at_once_is_the_run_read(store):
    with store.write() as tx:
        add_instance(tx, "i1")
    with store.write() as tx:
        tx.update_run("i1-r1", step_index=4)
    with store.write() as tx:
        run = tx.hold_run("i1", "i1-r1")
        assert typed(run, records.Run)
        assert (run.workflow_run_id, run.step_index, run.state) == ("i1-r1", 4, {"k": "v"})
        assert run == tx.get_run("i1-r1")
        assert tx.run_instance_fields("i1-r1") == ("d", "t", 0, "abandon")
        assert tx.hold_run("i1", "i1-r1") == run, "held already: read again as it is"
        assert tx.hold_run("i1", "no-such-run") is None


@covers("run_instance_fields")
def test_a_run_read_brings_its_instances_unchanging_fields(store):
    with store.write() as tx:
        add_instance(tx, "i1", child_depth=2, child_policy="terminate")
        add_instance(tx, "i2")
    with store.write() as tx:
        assert tx.run_instance_fields("i1-r1") is None, "not read yet"
        tx.get_run("i1-r1")
        assert tx.run_instance_fields("i1-r1") == ("d", "t", 2, "terminate")
        assert tx.run_instance_fields("i2-r1") is None


@covers("list_instances", "append_event", "events", "get_run")
def test_lists_come_newest_first_and_history_in_seq_order(store):
    with store.write() as tx:
        for n in range(3):
            add_instance(tx, f"i{n}", created=T0.replace(minute=n))
    with store.write() as tx:
        run = tx.get_run("i1-r1")
        for n in range(5):
            tx.append_event(run, "WorkflowTaskScheduled", T0, {"reason": f"r{n}"})
    with store.read() as tx:
        listed = [row["workflow_instance_id"] for row in tx.list_instances(
            status=None, workflow_type=None, since=None, limit=10)]
        events = tx.events("i1")
    assert listed == ["i2", "i1", "i0"]
    assert all(typed(e, records.Event) for e in events)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert [e.attributes["reason"] for e in events] == ["r0", "r1", "r2", "r3", "r4"]


@covers("append_event", "events", "event")
def test_every_range_of_a_history_reads_back_however_its_transactions_wrote_it(store):
    # Transactions of one, three, four, one and two events, at instants of their own; the
    # third's last event is the second run's first.
    with store.write() as tx:
        add_instance(tx, "i1")
    with store.write() as tx:
        tx.insert_run({"workflow_run_id": "i1-r2", "workflow_instance_id": "i1", "run_number": 2,
                       "status": "running", "state": {}, "first_seq": 8, "started_at": T0})
    kinds = ("WorkflowTaskScheduled", "TimerFired", "SignalReceived")
    appended = []
    for number, size in enumerate((1, 3, 4, 1, 2)):
        with store.write() as tx:
            for _ in range(size):
                run = tx.get_run("i1-r2" if len(appended) >= 7 else "i1-r1")
                kind = kinds[len(appended) % 3]
                at = T0 + timedelta(seconds=number)
                seq = tx.append_event(run, kind, at, {"reason": f"e{len(appended)}"})
                appended.append((seq, run.run_number, kind, at, f"e{len(appended)}"))
    assert [seq for seq, *_ in appended] == list(range(1, 12))
    with store.read() as tx:
        # A row a transaction and run: the third transaction's events are of two runs.
        assert tx.count_owned_rows(["i1"])["events"] == 6

        def read(**ranges):
            return [(e.seq, e.run_number, e.event_type, e.at, e.attributes["reason"])
                    for e in tx.events("i1", **ranges)]

        for after in range(13):
            for until in (None, *range(after, 13)):
                assert read(after_seq=after, until_seq=until) == [
                    event for event in appended
                    if event[0] > after and (until is None or event[0] <= until)]
        for types in (["TimerFired"], ["WorkflowTaskScheduled", "SignalReceived"]):
            assert read(event_types=types) == [e for e in appended if e[2] in types]
        assert read(run_number=2, after_seq=7) == [e for e in appended if e[1] == 2 and e[0] > 7]
        assert read(run_number=1, event_types=["TimerFired"], until_seq=5) == \
            [e for e in appended if e[1] == 1 and e[2] == "TimerFired" and e[0] <= 5]
        assert [tx.event("i1", seq).seq for seq in range(1, 12)] == list(range(1, 12))
        assert tx.event("i1", 12) is None


@covers("list_instances")
def test_a_list_pages_on_from_a_row_however_many_share_its_instant(store):
    # Five instances in one millisecond among others: the cursor's id orders them.
    created = [T0.replace(minute=m) for m in (0, 1, 1, 1, 1, 1, 2)]
    with store.write() as tx:
        for n, at in enumerate(created):
            add_instance(tx, f"i{n}", created=at, status="paused" if n % 2 else "running")

    def listed(size: int, **filters) -> list[str]:
        return [instance_id for page in pages(size, **filters) for instance_id in page]

    def pages(size: int, **filters) -> list[list[str]]:
        chunks, before = [], None
        while True:
            with store.read() as tx:
                rows = tx.list_instances(status=filters.get("status"), workflow_type=None,
                                         since=filters.get("since"), limit=size, before=before)
            if not rows:
                return chunks
            chunks.append([row["workflow_instance_id"] for row in rows])
            before = (rows[-1]["created_at"], rows[-1]["workflow_instance_id"])

    newest_first = ["i6", "i5", "i4", "i3", "i2", "i1", "i0"]
    assert pages(2) == [newest_first[0:2], newest_first[2:4], newest_first[4:6], ["i0"]]
    assert listed(1) == listed(3) == newest_first
    assert listed(2, status="paused") == ["i5", "i3", "i1"]
    assert listed(2, since=T0.replace(minute=1)) == newest_first[:-1]
    with store.read() as tx:
        # An instance no longer there still marks its instant: what was created before it.
        gone = tx.list_instances(status=None, workflow_type=None, since=None, limit=10,
                                 before=(T0.replace(minute=1), "deleted"))
        first = tx.list_instances(status=None, workflow_type=None, since=None, limit=10,
                                  before=(T0.replace(minute=3), "deleted"))
    assert [row["workflow_instance_id"] for row in gone] == ["i0"]
    assert [row["workflow_instance_id"] for row in first] == newest_first


@covers("insert_activity", "update_activity", "get_activity")
def test_a_conditional_change_says_whether_it_won(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_activity(tx, "a1", "i1-r1")
    with store.write() as tx:
        first = tx.update_activity("a1", expect_attempt=1,
                                   expect_status=("scheduled", "retry_scheduled"),
                                   status="started", owner="w1")
        second = tx.update_activity("a1", expect_attempt=1,
                                    expect_status=("scheduled", "retry_scheduled"),
                                    status="started", owner="w2")
    with store.read() as tx:
        activity = tx.get_activity("a1")
    assert typed(activity, records.Activity)
    assert (activity.status, activity.owner) == ("started", "w1")
    assert (first, second) == (True, False)
    with store.write() as tx:
        # A write transaction's read (which locks the activity's family) gives a record too.
        assert typed(tx.get_activity("a1"), records.Activity)


@covers("hold_run_and_close")
def test_an_attempt_closes_with_its_run_read_only_when_the_run_takes_it(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        for activity_id in ("a1", "a2"):
            add_activity(tx, activity_id, "i1-r1")
            tx.update_activity(activity_id, status="started", owner="w1", started_event_id=2)
    seen = []

    def refuse(run):
        seen.append(run)
        return False

    with store.write() as tx:
        run, closed = tx.hold_run_and_close("i1", "i1-r1", refuse, "a1", 1, "w1", later(1),
                                            status="completed", closed_at=later(1), owner=None,
                                            last_heartbeat_details={"n": 1})
        assert closed is False and typed(run, records.Run) and seen == [run]
        # Refused: the attempt is as it was, for the rest of the transaction too.
        assert (tx.get_activity("a1").status, tx.get_activity("a1").owner) == ("started", "w1")
    with store.read() as tx:
        refused = tx.get_activity("a1")
        assert (refused.status, refused.owner, refused.closed_at) == ("started", "w1", None)
    with store.write() as tx:
        run, closed = tx.hold_run_and_close("i1", "i1-r1", lambda run: run is not None, "a1", 1,
                                            "w1", later(2), status="completed",
                                            closed_at=later(2), owner=None)
        assert closed is True
        assert typed(run, records.Run) and run == tx.get_run("i1-r1")
        _, again = tx.hold_run_and_close("i1", "i1-r1", lambda run: True, "a1", 1, "w1",
                                         later(3), status="completed")
        _, not_current = tx.hold_run_and_close("i1", "i1-r1", lambda run: True, "a2", 1, "w2",
                                               later(3), status="completed")
        assert (again, not_current) == (False, False)
        assert tx.hold_run_and_close("i1", "no-such-run", lambda run: run is not None, "a2", 1,
                                     "w1", later(3), status="completed") == (None, False)
    with store.read() as tx:
        assert (tx.get_activity("a1").status, tx.get_activity("a1").closed_at) == \
            ("completed", later(2))
        assert tx.get_activity("a2").status == "started"


@covers("expect")
def test_attempts_of_instances_a_transaction_expects_close_as_they_would_without(store):
    """A backend may lock every expected instance's family with the first close: each
    attempt still closes once, with its own run read, and an instance that is gone, or one
    not expected, changes nothing of that."""
    with store.write() as tx:
        for instance_id in ("i1", "i2", "i3"):
            add_instance(tx, instance_id)
            add_activity(tx, f"a-{instance_id}", f"{instance_id}-r1")
            tx.update_activity(f"a-{instance_id}", status="started", owner="w1")
    with store.write() as tx:
        tx.expect(["i2", "gone", "i1"])
        closed = [tx.hold_run_and_close(instance_id, f"{instance_id}-r1",
                                        lambda run: run is not None, f"a-{instance_id}", 1,
                                        "w1", later(1), status="completed",
                                        closed_at=later(1), owner=None)
                  for instance_id in ("i1", "i2", "i3", "i1")]
        assert [(run.workflow_run_id, was_closed) for run, was_closed in closed] == [
            ("i1-r1", True), ("i2-r1", True), ("i3-r1", True), ("i1-r1", False)]
        tx.update_run("i2-r1", step_index=4)
    with store.read() as tx:
        assert [tx.get_activity(f"a-{i}").status for i in ("i1", "i2", "i3")] == \
            ["completed"] * 3
        assert tx.get_run("i2-r1").step_index == 4


@covers("close_current_attempt")
def test_an_attempt_closes_in_one_statement_only_while_current_and_within_its_deadlines(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        for activity_id in ("a1", "a2", "a3", "a4"):
            add_activity(tx, activity_id, "i1-r1")
        tx.update_activity("a1", status="started", owner="w1", started_event_id=2)
        tx.update_activity("a2", status="started", owner="w1", close_deadline_at=later(30))
        tx.update_activity("a3", status="started", owner="w1", heartbeat_deadline_at=later(5))
        tx.update_activity("a4", status="started", owner="w1", superseded=True)
    with store.write() as tx:
        other_worker = tx.close_current_attempt("a1", 1, "w2", later(1), status="completed")
        other_attempt = tx.close_current_attempt("a1", 2, "w1", later(1), status="completed")
        closed = tx.close_current_attempt("a1", 1, "w1", later(1), status="completed",
                                          closed_at=later(1), owner=None)
        again = tx.close_current_attempt("a1", 1, "w1", later(1), status="completed")
        in_time = tx.close_current_attempt("a2", 1, "w1", later(29), status="completed")
        heartbeat_passed = tx.close_current_attempt("a3", 1, "w1", later(5), status="completed")
        superseded = tx.close_current_attempt("a4", 1, "w1", later(1), status="completed")
    assert (closed, in_time) == (True, True)
    assert (other_worker, other_attempt, again, heartbeat_passed, superseded) == (False,) * 5
    with store.read() as tx:
        first = tx.get_activity("a1")
        assert (first.status, first.owner, first.closed_at) == ("completed", None, later(1))
        assert [tx.get_activity(a).status for a in ("a2", "a3", "a4")] == \
            ["completed", "started", "started"]


@covers("take_ready_workflow_task")
def test_the_oldest_ready_workflow_task_is_taken_once_and_never_once_started(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_instance(tx, "i2")
        add_instance(tx, "i3")
        started = add_task(tx, "i1-r1", available_at=later(-2))
        tx.update_workflow_task(started, status="started", owner="w1")
        newer = add_task(tx, "i2-r1", available_at=later(1))
        older = add_task(tx, "i3-r1", available_at=later(-1))
        future = add_task(tx, "i1-r1", available_at=later(9))
    with store.write() as tx:
        taken = [tx.take_ready_workflow_task(later(5)) for _ in range(3)]
    assert [t and t.task_id for t in taken] == [older, newer, None]
    assert typed(taken[0], records.WorkflowTask) and taken[0].workflow_run_id == "i3-r1"
    assert taken[0].status == "scheduled"
    with store.read() as tx:
        assert tx.get_workflow_task(older) is None and tx.get_workflow_task(newer) is None
        assert tx.get_workflow_task(started).owner == "w1"
        assert tx.get_workflow_task(future).status == "scheduled"


@covers("take_ready_workflow_task", "get_run")
def test_workflow_tasks_taken_ahead_come_oldest_first_and_their_runs_read_as_they_are_now(store):
    """A transaction that says it will take several ready tasks gets them one a call, oldest
    first, as one taking them one by one would; each run it reads then is the run as it is
    now (its task gone, a change written meanwhile kept), and a task it did not take stays
    ready for the next; once it found fewer than it asked for, one it schedules itself is
    found all the same."""
    with store.write() as tx:
        for n, name in enumerate(("i1", "i2", "i3", "i4")):
            add_instance(tx, name)
            add_task(tx, f"{name}-r1", available_at=later(n))
    with store.write() as tx:
        first = tx.take_ready_workflow_task(later(9), ahead=3)
        tx.update_run("i2-r1", state={"changed": True})
        second = tx.take_ready_workflow_task(later(9), ahead=2)
        third = tx.take_ready_workflow_task(later(9), ahead=1)
        tx.insert_workflow_task({"workflow_run_id": "i3-r1", "workflow_instance_id": "i3",
                                 "status": "started", "reason": "r", "available_at": T0,
                                 "scheduled_event_id": 2})
        runs = [tx.get_run(f"i{n}-r1") for n in (1, 2, 3)]
        opened = [tx.open_workflow_task(f"i{n}-r1") for n in (1, 3)]
    assert [task.workflow_run_id for task in (first, second, third)] == \
        ["i1-r1", "i2-r1", "i3-r1"]
    assert [run.state for run in runs] == [{"k": "v"}, {"changed": True}, {"k": "v"}]
    assert opened[0] is None and opened[1].status == "started"
    with store.write() as tx:
        left = [tx.take_ready_workflow_task(later(9), ahead=3) for _ in range(2)]
        # Found fewer than asked for: one the transaction schedules is found all the same.
        add_task(tx, "i2-r1")
        again = tx.take_ready_workflow_task(later(9), ahead=1)
    assert [task and task.workflow_run_id for task in left] == ["i4-r1", None]
    assert again.workflow_run_id == "i2-r1"


@covers("insert_workflow_task", "open_workflow_task")
def test_a_run_read_in_a_write_transaction_still_sees_a_workflow_task_added_after(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_instance(tx, "i2")
    with store.write() as tx:
        tx.insert_workflow_task({"workflow_run_id": "i2-r1", "workflow_instance_id": "i2",
                                 "status": "scheduled", "reason": "r",
                                 "available_at": T0, "scheduled_event_id": 1})
    with store.write() as tx:
        run = tx.get_run("i1-r1")
        assert typed(run, records.Run) and run.workflow_run_id == "i1-r1"
        assert tx.get_run("i2-r1").workflow_run_id == "i2-r1"
        none_yet = tx.open_workflow_task("i1-r1")
        tx.insert_workflow_task({"workflow_run_id": "i1-r1", "workflow_instance_id": "i1",
                                 "status": "scheduled", "reason": "r",
                                 "available_at": T0, "scheduled_event_id": 2})
        added = tx.open_workflow_task("i1-r1")
        other = tx.open_workflow_task("i2-r1")
    assert none_yet is None
    assert typed(added, records.WorkflowTask) and added.scheduled_event_id == 2
    assert typed(other, records.WorkflowTask) and other.scheduled_event_id == 1


@covers("claim_deadline")
def test_a_deadline_claim_is_won_once(store):
    with store.write() as tx:
        add_instance(tx, "i1")
    with store.write() as tx:
        assert tx.claim_deadline("i1-r1", "w1", T0, None) is True
        assert tx.claim_deadline("i1-r1", "w2", T0, None) is False
        assert tx.claim_deadline("i1-r1", "w2", T0, "w1") is True


@covers("append_event", "events")
def test_an_event_type_without_a_code_is_kept_by_name_in_a_file_and_refused_by_postgresql(store):
    with store.write() as tx:
        add_instance(tx, "i1")
    with store.write() as tx:
        run = tx.get_run("i1-r1")
        tx.append_event(run, "WorkflowTaskScheduled", T0, {"reason": "r"})
        if type(store).__name__ == "PostgresStore":
            # Its column holds codes only.
            with pytest.raises(ValueError, match="'Brandnew' has no code"):
                tx.append_event(run, "Brandnew", T0, {"n": 1})
        else:
            tx.append_event(run, "Brandnew", T0, {"n": 1})
        tx.append_event(run, "TimerFired", T0, {"timer_id": "t"})
    with store.read() as tx:
        events = [(e.seq, e.event_type, e.attributes) for e in tx.events("i1")]
    named = [] if type(store).__name__ == "PostgresStore" else [(2, "Brandnew", {"n": 1})]
    assert events == [(1, "WorkflowTaskScheduled", {"reason": "r"}), *named,
                      (len(named) + 2, "TimerFired", {"timer_id": "t"})]


@covers("append_event", "append_values", "last_seq")
def test_an_event_appended_at_an_earlier_instant_is_stamped_at_the_last_ones(store):
    # Transactions given their instants before they waited for the writer before them.
    later, earlier = T0 + timedelta(seconds=5), T0 + timedelta(seconds=2)
    deadline = T0 + timedelta(minutes=1)
    with store.write() as tx:
        add_instance(tx, "i1")
    with store.write() as tx:
        tx.append_event(tx.get_run("i1-r1"), "WorkflowTaskScheduled", later, {"reason": "a"})
    # The last event's instant read with the run, then (the run kept) without a read.
    for reason in ("b", "c"):
        with store.write() as tx:
            tx.append_event(tx.get_run("i1-r1"), "WorkflowTaskScheduled", earlier,
                            {"reason": reason})
    # Read with the last seq alone, and within the transaction after it.
    with store.write() as tx:
        assert tx.last_seq("i1") == 3
        kind = codec.event_kind("WorkflowTaskStarted", "scheduled_event_id worker_id timeout_at")
        tx.append_values(tx.get_run("i1-r1"), kind, earlier, (1, "w", deadline))
        tx.append_event(tx.get_run("i1-r1"), "WorkflowTaskScheduled", T0, {"reason": "e"})
    with store.read() as tx:
        events = tx.events("i1")
    assert [(e.seq, e.at) for e in events] == [(seq, later) for seq in range(1, 6)]
    # An instant an attribute holds is kept exact, whatever its event's stamp.
    assert events[3].attributes == {"scheduled_event_id": 1, "worker_id": "w",
                                    "timeout_at": deadline}


def test_event_instants_and_attributes_round_trip(store):
    at = datetime(2026, 4, 12, 12, 0, 1, 234000, tzinfo=UTC)
    attributes = {"activity_id": "a", "result": {"ünïcode": "✓", "n": [1, 2.5, None, True]},
                  "close_deadline_at": at.replace(minute=5), "extra": None}
    with store.write() as tx:
        add_instance(tx, "i1")
        seq = tx.append_event(tx.get_run("i1-r1"), "ActivityCompleted", at, attributes)
    with store.read() as tx:
        (event,) = tx.events("i1")
    assert typed(event, records.Event)
    assert event == records.Event("i1", seq, 1, "ActivityCompleted", at, attributes)
    assert seq == 1 and list(event.attributes) == list(attributes)


@covers("append_values")
def test_an_event_appended_from_its_values_reads_back_as_one_appended_from_a_dict(store):
    at = datetime(2026, 4, 12, 12, 0, 1, 234000, tzinfo=UTC)
    policy = {"max_attempts": 3, "backoff_seconds": 1.0, "schedule_to_start_timeout": None,
              "start_to_close_timeout": 300.0, "schedule_to_close_timeout": None,
              "heartbeat_timeout": None, "non_retryable": []}
    appended = [
        ("WorkflowTaskScheduled", {"reason": "activity_completed"}),
        ("WorkflowTaskStarted", {"scheduled_event_id": 1, "worker_id": "w",
                                 "timeout_at": at + timedelta(seconds=10)}),
        ("ActivityScheduled", {"activity_id": "a", "step": "s", "handler": "m:f", "queue": "q",
                               "attempt": 1, "max_attempts": 3, "retry_policy": policy,
                               "schedule_deadline_at": None,
                               "schedule_to_close_deadline_at": at + timedelta(hours=1)}),
        ("ActivityCompleted", {"activity_id": "a", "step": "s", "attempt": 1,
                               "scheduled_event_id": 3, "started_event_id": 4,
                               "result": {"ünïcode": "✓", "n": [1, 2.5, None, True]}}),
    ]
    with store.write() as tx:
        add_instance(tx, "i1")
        add_instance(tx, "i2")
        by_dict, by_values = tx.get_run("i1-r1"), tx.get_run("i2-r1")
        for event_type, attributes in appended:
            tx.append_event(by_dict, event_type, at, attributes)
            kind = codec.event_kind(event_type, " ".join(attributes))
            tx.append_values(by_values, kind, at, tuple(attributes.values()))
    with store.read() as tx:
        assert tx.count_owned_rows(["i1"]) == tx.count_owned_rows(["i2"])
        read = {instance: [(e.seq, e.event_type, e.at, e.attributes, list(e.attributes))
                           for e in tx.events(instance)] for instance in ("i1", "i2")}
    assert read["i2"] == read["i1"] == [
        (seq, event_type, at, attributes, list(attributes))
        for seq, (event_type, attributes) in enumerate(appended, 1)]


def test_history_instants_read_back_as_aware_utc_datetimes_however_they_were_given(store):
    at = datetime(2026, 4, 12, 12, 0, 1, 234000, tzinfo=UTC)
    later = at + timedelta(minutes=5)
    with store.write() as tx:
        add_instance(tx, "i1")
        run = tx.get_run("i1-r1")
        tx.append_event(run, "TimerScheduled", at, {"timer_id": "t", "fire_at": later})
        tx.append_event(run, "TimerScheduled", at,
                        {"timer_id": "u", "fire_at": "2026-04-12T12:05:01.234+00:00"})
        tx.append_event(run, "ChildWorkflowFailed", at,
                        {"child_instance_id": "c", "failure": {"message": "m", "deadline_at": later}})
    with store.read() as tx:
        timer, text, child = tx.events("i1")
    assert timer.attributes == {"timer_id": "t", "fire_at": later}
    assert text.attributes == {"timer_id": "u", "fire_at": later}
    assert child.attributes["failure"] == {"message": "m", "deadline_at": later}
    instants = [timer.attributes["fire_at"], text.attributes["fire_at"],
                child.attributes["failure"]["deadline_at"]]
    assert all(instant.tzinfo is UTC for instant in instants)


@covers("update_run", "insert_signal", "first_pending_signal")
def test_json_values_round_trip(store):
    state = {"emoji": "😀", "nested": {"a": [1, {"b": None}]}, "big": 12345678901234567890,
             "x": 0.1, "order": "kept"}
    other_policy = {"max_attempts": 1, "backoff_seconds": []}
    with store.write() as tx:
        add_instance(tx, "i1", retry_policy=other_policy)
        tx.update_run("i1-r1", state=state)
        add_activity(tx, "a1", "i1-r1")
        tx.update_activity("a1", last_error={"exception_class": "E", "message": "m"},
                           last_heartbeat_details=[1, "two"])
        tx.insert_signal({"workflow_instance_id": "i1", "name": "go", "data": None,
                          "received_at": T0, "received_event_id": 1})
    with store.read() as tx:
        run, activity = tx.get_run("i1-r1"), tx.get_activity("a1")
        instance, signal = tx.get_instance("i1"), tx.first_pending_signal("i1", "go")
    assert run.state == state and list(run.state) == list(state)
    assert typed(activity, records.Activity)
    assert activity.retry_policy == POLICY and list(activity.retry_policy) == list(POLICY)
    assert typed(instance, records.Instance) and instance.retry_policy == other_policy
    assert activity.last_error == {"exception_class": "E", "message": "m"}
    assert activity.last_heartbeat_details == [1, "two"]
    assert typed(signal, records.Signal) and signal.data is None


@covers("insert_timer", "due_timers", "next_due")
def test_instants_round_trip_to_the_microsecond_and_sort_in_time_order(store):
    exact = datetime(2026, 4, 12, 12, 0, 1, 234000, tzinfo=UTC)
    fine = datetime(2026, 4, 12, 12, 0, 1, 234567, tzinfo=UTC)
    # Another zone's instant is the same instant.
    elsewhere = (exact + timedelta(seconds=1)).astimezone(timezone(timedelta(hours=-5)))
    with store.write() as tx:
        add_instance(tx, "i1", deadline_at=fine)
        tx.update_run("i1-r1", run_deadline_at=exact, execution_deadline_at=elsewhere)
        for timer_id, fire_at in (("late", fine), ("early", exact),
                                  ("first", exact - timedelta(microseconds=1))):
            tx.insert_timer({"timer_id": timer_id, "workflow_run_id": "i1-r1",
                             "workflow_instance_id": "i1", "step_index": 0, "step": "s",
                             "kind": "delay", "fire_at": fire_at, "status": "scheduled",
                             "scheduled_event_id": 1})
    with store.read() as tx:
        instance, run = tx.get_instance("i1"), tx.get_run("i1-r1")
        due = [t.timer_id for t in tx.due_timers(fine, 10)]
        due_before_fine = [t.timer_id for t in tx.due_timers(fine - timedelta(microseconds=1), 10)]
        next_due = tx.next_due(T0)
    assert instance.deadline_at == fine and instance.deadline_at.tzinfo is UTC
    assert run.run_deadline_at == exact and run.run_deadline_at.tzinfo is UTC
    assert run.execution_deadline_at == exact + timedelta(seconds=1)
    assert typed(run, records.Run)
    assert due == ["first", "early", "late"] and due_before_fine == ["first", "early"]
    assert next_due == exact - timedelta(microseconds=1)


def test_flags_come_back_as_bools(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_activity(tx, "a1", "i1-r1")
        tx.update_run("i1-r1", cancel_requested=True)
        tx.update_activity("a1", superseded=True)
    with store.read() as tx:
        run, activity = tx.get_run("i1-r1"), tx.get_activity("a1")
    assert run.cancel_requested is True and run.step_started is False
    assert activity.superseded is True


@covers("write", "read", "peek")
def test_an_uncommitted_write_is_invisible_to_another_connection(opener):
    writer, reader = opener(), opener()
    with writer.write() as tx:
        add_instance(tx, "i0")
    with reader.read() as before:
        with writer.write() as tx:
            add_instance(tx, "i1")
            assert reader.peek().get_instance("i1") is None
        # A read transaction keeps its snapshot while another commits.
        assert before.get_instance("i1") is None
    assert reader.peek().get_instance("i1") is not None


@covers("write")
def test_a_failed_transaction_leaves_nothing(store):
    with pytest.raises(RuntimeError), store.write() as tx:
        add_instance(tx, "i1")
        tx.append_event(tx.get_run("i1-r1"), "WorkflowStarted", T0, {})
        raise RuntimeError("boom")
    with store.read() as tx:
        assert tx.get_instance("i1") is None
        assert tx.events("i1") == []


@covers("timeout_event_counts")
def test_timeout_and_deadline_events_are_counted_as_they_are_appended(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        run = tx.get_run("i1-r1")
        for event_type in EVENT_TYPES:
            tx.append_event(run, event_type, T0,
                            {"timeout_kind": "heartbeat", "failure_category": "x"})
        tx.append_event(run, "WorkflowFailed", T0, {})
    with store.read() as tx:
        counted = {(row["event_type"], row["timeout_kind"], row["failure_category"]): row["count"]
                   for row in tx.timeout_event_counts()}
    assert counted == {**{(t, "heartbeat", "x"): 1 for t in TIMEOUT_EVENTS},
                       ("WorkflowFailed", None, None): 1}


def add_task(tx, run_id: str, *, status: str = "scheduled", **fields) -> int:
    return tx.insert_workflow_task({
        "workflow_run_id": run_id, "workflow_instance_id": run_id.removesuffix("-r1"),
        "status": status, "reason": "r", "available_at": T0, "scheduled_event_id": 1, **fields,
    })


def add_timer(tx, timer_id: str, run_id: str, **fields) -> None:
    tx.insert_timer({"timer_id": timer_id, "workflow_run_id": run_id,
                     "workflow_instance_id": run_id.removesuffix("-r1"), "step_index": 0,
                     "step": "s", "kind": "delay", "fire_at": T0, "status": "scheduled",
                     "scheduled_event_id": 1, **fields})


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@covers("get_definitions", "update_instance", "count_instances", "instance_ids",
        "get_run_by_number", "hold")
def test_instances_are_found_by_id_prefix_filter_and_number(store):
    with store.write() as tx:
        for instance_id in ("order-1", "order-2", "other"):
            add_instance(tx, instance_id)
        tx.update_instance("other", status="completed", closed_at=T0)
    with store.write() as tx:
        tx.hold("order-1")
        held = tx.get_instance("order-1")
    with store.read() as tx:
        found = tx.get_definitions("d")
        assert typed(found, records.StoredDefinitions) and found.source == "version: 1"
        assert found.created_at == T0
        assert tx.get_definitions("nope") is None
        assert typed(held, records.Instance) and held.workflow_instance_id == "order-1"
        assert tx.instance_ids("order-", 10) == ["order-1", "order-2"]
        assert tx.instance_ids("order-", 1) == ["order-1"]
        assert tx.count_instances(status="running", workflow_type=None, since=None) == 2
        assert tx.count_instances(status=None, workflow_type="t", since=later(1)) == 0
        by_number = tx.get_run_by_number("other", 1)
        assert typed(by_number, records.Run) and by_number.workflow_run_id == "other-r1"
        assert tx.get_run_by_number("other", 2) is None
        assert tx.get_instance("other").closed_at == T0


@covers("instance_key", "last_seq", "flush", "history_count", "event")
def test_history_is_counted_and_read_one_event_at_a_time(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        run = tx.get_run("i1-r1")
        run.rejected_starts = 0
        for n in range(3):
            tx.append_event(run, "WorkflowTaskScheduled", T0, {"reason": f"r{n}"})
        tx.flush()
        assert tx.last_seq("i1") == 3 and tx.history_count(run) == 3
        # A write transaction reads its own events, as records too.
        assert typed(tx.event("i1", 3), records.Event)
    with store.read() as tx:
        assert isinstance(tx.instance_key("i1"), int) and tx.instance_key("none") is None
        assert tx.last_seq("i1") == 3 and tx.last_seq("none") == 0
        found = tx.event("i1", 2)
        assert typed(found, records.Event) and found.seq == 2
        assert found.attributes == {"reason": "r1"}
        assert tx.event("i1", 4) is None
        assert [e.seq for e in tx.events("i1", after_seq=1,
                                         event_types=["WorkflowTaskScheduled"])] == [2, 3]


@covers("get_workflow_task", "update_workflow_task", "next_ready_workflow_task",
        "close_workflow_task", "close_workflow_tasks", "timed_out_workflow_tasks",
        "workflow_tasks_owned_by")
def test_workflow_tasks_are_claimed_timed_out_and_closed(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        first = add_task(tx, "i1-r1")
        second = add_task(tx, "i1-r1", available_at=later(5))
    with store.write() as tx:
        ready = tx.next_ready_workflow_task(T0)
        won = tx.update_workflow_task(ready.task_id, expect_status="scheduled",
                                      status="started", owner="w1", started_at=T0,
                                      started_event_id=2, timeout_at=later(10))
        lost = tx.update_workflow_task(ready.task_id, expect_status="scheduled", owner="w2")
    assert typed(ready, records.WorkflowTask) and ready.task_id == first
    assert (ready.status, ready.owner, ready.timeout_at) == ("scheduled", None, None)
    assert (won, lost) == (True, False)
    with store.read() as tx:
        started = tx.get_workflow_task(first)
        assert typed(started, records.WorkflowTask)
        assert (started.status, started.owner, started.started_at, started.started_event_id,
                started.timeout_at) == ("started", "w1", T0, 2, later(10))
        assert tx.next_ready_workflow_task(T0) is None
        owned = tx.workflow_tasks_owned_by(["w1", "w9"])
        assert [t.task_id for t in owned] == [first] and typed(owned[0], records.WorkflowTask)
        assert tx.timed_out_workflow_tasks(later(9), 10) == []
        timed_out = tx.timed_out_workflow_tasks(later(10), 10)
        assert [t.task_id for t in timed_out] == [first]
        assert typed(timed_out[0], records.WorkflowTask)
    with store.write() as tx:
        # A write transaction's reads (which lock the tasks' families) give records too.
        assert typed(tx.get_workflow_task(first), records.WorkflowTask)
        assert [type(t) for t in tx.timed_out_workflow_tasks(later(10), 10)] == \
            [records.WorkflowTask]
        assert [type(t) for t in tx.workflow_tasks_owned_by(["w1"])] == [records.WorkflowTask]
    with store.write() as tx:
        claimed = tx.next_ready_workflow_task(later(5))
        assert typed(claimed, records.WorkflowTask) and claimed.task_id == second
    with store.write() as tx:
        tx.close_workflow_tasks("i1-r1", keep=second)
        assert tx.get_workflow_task(first) is None and tx.get_workflow_task(second) is not None
        tx.close_workflow_task(second)
        assert tx.open_workflow_task("i1-r1") is None


@covers("step_activities", "run_activities", "open_activities", "count_open_activities",
        "next_ready_activity", "next_activity_available_at", "expired_activities",
        "activities_owned_by")
def test_activities_are_listed_claimed_and_found_past_their_deadlines(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_activity(tx, "a1", "i1-r1")
        add_activity(tx, "a2", "i1-r1")
        tx.update_activity("a2", queue="other", available_at=later(3),
                           schedule_deadline_at=later(20), superseded=True)
        add_activity(tx, "a3", "i1-r1", status="completed")
    with store.write() as tx:
        claimed = tx.next_ready_activity(["default", "other"], later(5))
        tx.update_activity(claimed.activity_id, status="started", owner="w1",
                           close_deadline_at=later(10))
    assert typed(claimed, records.Activity) and claimed.activity_id == "a1"
    with store.read() as tx:
        step = tx.step_activities("i1-r1", 0)
        assert sorted(a.activity_id for a in step) == ["a1", "a3"]
        run = tx.run_activities("i1-r1")
        assert [a.activity_id for a in run] == ["a1", "a2", "a3"]
        opened = tx.open_activities("i1-r1")
        assert sorted(a.activity_id for a in opened) == ["a1", "a2"]
        assert all(typed(a, records.Activity) for a in (*step, *run, *opened))
        assert tx.count_open_activities("i1-r1") == 2
        assert tx.next_ready_activity(["other"], later(2)) is None
        ready = tx.next_ready_activity(["default", "other"], later(10))
        assert typed(ready, records.Activity) and ready.activity_id == "a2"
        assert tx.next_ready_activity(["other"], later(20)) is None
        assert tx.next_activity_available_at(["default", "other"]) == later(3)
        owned = tx.activities_owned_by(["w1"])
        assert [a.activity_id for a in owned] == ["a1"] and typed(owned[0], records.Activity)
        assert tx.expired_activities(later(9), 10) == []
        expired = tx.expired_activities(later(20), 10)
        assert sorted(a.activity_id for a in expired) == ["a1", "a2"]
        assert all(typed(a, records.Activity) for a in expired)
    with store.write() as tx:
        # A write transaction's scans (which lock the activities' families) give records too.
        assert [type(a) for a in tx.activities_owned_by(["w1"])] == [records.Activity]
        assert sorted((type(a), a.activity_id) for a in tx.expired_activities(later(20), 10)) \
            == [(records.Activity, "a1"), (records.Activity, "a2")]


@covers("next_ready_activity_with_run")
def test_activities_claimed_ahead_come_oldest_first_as_they_are_now(store):
    """A transaction that says it will claim several ready activities gets them one a call,
    oldest first, each with its run as it is now: one it changed meanwhile (no longer ready)
    is not handed out, nor one of another queue; once it found fewer than it asked for, one it
    makes ready itself is found all the same; one it was handed and did not start is ready
    for the next transaction."""
    with store.write() as tx:
        for n in range(1, 5):
            add_instance(tx, f"i{n}")
            add_activity(tx, f"a{n}", f"i{n}-r1")
            tx.update_activity(f"a{n}", available_at=later(n))

    def claimed(tx, ahead: int) -> tuple[records.Activity, records.Run] | None:
        found = tx.next_ready_activity_with_run(["default"], later(9), ahead=ahead)
        if found is not None:
            assert tx.update_activity(found[0].activity_id, expect_attempt=1,
                                      expect_status=["scheduled"], status="started",
                                      owner="w1") is True
        return found

    with store.write() as tx:
        first, _ = claimed(tx, 5)
        tx.update_activity("a2", status="started", owner="w9")
        tx.update_run("i3-r1", state={"changed": True})
        second, run = claimed(tx, 4)
        # Handed out, not started (a claim whose worker turned it down): ready still.
        third, _ = tx.next_ready_activity_with_run(["default"], later(9), ahead=3)
        add_instance(tx, "i5")
        add_activity(tx, "a5", "i5-r1")
        fifth, _ = claimed(tx, 2)
    assert [a.activity_id for a in (first, second, third, fifth)] == ["a1", "a3", "a4", "a5"]
    assert run.state == {"changed": True}
    with store.write() as tx:
        assert tx.next_ready_activity_with_run(["other"], later(9), ahead=3) is None
        assert claimed(tx, 2)[0].activity_id == "a4"
        assert claimed(tx, 2) is None


@covers("next_ready_activity_with_run")
def test_a_claim_reads_the_oldest_ready_activity_with_its_run(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_instance(tx, "i2")
        add_activity(tx, "a1", "i1-r1")
        add_activity(tx, "a2", "i2-r1")
        tx.update_activity("a1", queue="other", available_at=later(2))
        tx.update_activity("a2", available_at=later(1))
        tx.update_run("i2-r1", step_index=1, state={"k": [1]})
        tx.append_event(tx.get_run("i2-r1"), "WorkflowTaskScheduled", T0, {"reason": "r"})
    with store.write() as tx:
        assert tx.next_ready_activity_with_run(["default", "other"], T0) is None
        activity, run = tx.next_ready_activity_with_run(["default", "other"], later(5))
        assert typed(activity, records.Activity) and activity.activity_id == "a2"
        assert typed(run, records.Run) and run == tx.get_run("i2-r1")
        assert (run.step_index, run.state) == (1, {"k": [1]})
        # What the run's read brings comes along: the history goes on after its last event.
        tx.append_event(run, "WorkflowTaskScheduled", T0, {"reason": "again"})
        activity, run = tx.next_ready_activity_with_run(["other"], later(5))
        assert (activity.activity_id, run.workflow_run_id) == ("a1", "i1-r1")
        # The claim's update says whether it won, as any: an attempt other than the one read
        # is not updated; the one read is.
        assert tx.update_activity("a1", expect_attempt=2, status="started") is False
        assert tx.update_activity("a1", expect_attempt=1, expect_status=["scheduled"],
                                  status="started", owner="w1") is True
        assert (tx.get_activity("a1").status, tx.get_activity("a1").owner) == ("started", "w1")
    with store.write() as tx:
        activity, _ = tx.next_ready_activity_with_run(["default"], later(5))
        assert tx.update_activity(activity.activity_id, expect_attempt=activity.attempt,
                                  expect_status=["scheduled"], status="started",
                                  owner="w2") is True
    with store.read() as tx:
        assert [e.seq for e in tx.events("i2")] == [1, 2]
        assert (tx.get_activity("a2").status, tx.get_activity("a2").owner) == ("started", "w2")


@covers("update_timer", "step_timers", "run_timers", "open_timers")
def test_timers_fire_once_and_are_listed_by_step_and_run(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_timer(tx, "t1", "i1-r1")
        add_timer(tx, "t2", "i1-r1", step_index=1)
        add_timer(tx, "t3", "i1-r1", superseded=True)
    with store.write() as tx:
        fired = tx.update_timer("t1", expect_status="scheduled", status="fired", closed_at=T0)
        again = tx.update_timer("t1", expect_status="scheduled", status="fired")
    with store.read() as tx:
        assert (fired, again) == (True, False)
        assert [t.timer_id for t in tx.step_timers("i1-r1", 0)] == ["t1"]
        timers = tx.run_timers("i1-r1")
        assert [t.timer_id for t in timers] == ["t1", "t2", "t3"]
        assert all(typed(t, records.Timer) for t in timers)
        assert [(t.status, t.closed_at, t.superseded) for t in timers] == [
            ("fired", T0, False), ("scheduled", None, False), ("scheduled", None, True)]
        assert sorted(t.timer_id for t in tx.open_timers("i1-r1")) == ["t2", "t3"]
        page = tx.due_timers(T0, 1)
        assert typed(page[0], records.Timer) and page[0].fire_at == T0
        assert [t.timer_id for t in tx.due_timers(T0, 5, after=(T0, page[0].timer_id))] \
            == ["t3"]
    with store.write() as tx:
        # A write transaction's scan (which locks the timers' families) gives records too.
        assert [(type(t), t.timer_id) for t in tx.due_timers(T0, 5)] == [
            (records.Timer, "t2"), (records.Timer, "t3")]


@covers("pending_signals", "count_pending_signals", "consume_signal", "consumed_signal")
def test_a_signal_is_consumed_once_and_remembered_by_its_step(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        for n, name in enumerate(("go", "stop", "go")):
            tx.insert_signal({"workflow_instance_id": "i1", "name": name, "data": {"n": n},
                              "received_at": later(n), "received_event_id": n + 1})
    with store.write() as tx:
        signal = tx.first_pending_signal("i1", "go")
        tx.consume_signal(signal.signal_id, "i1-r1", 2, later(5))
    with store.read() as tx:
        assert typed(signal, records.Signal) and signal.data == {"n": 0}
        pending = tx.pending_signals("i1")
        assert all(typed(s, records.Signal) for s in pending)
        assert [(s.name, s.received_at, s.data) for s in pending] == [
            ("stop", later(1), {"n": 1}), ("go", later(2), {"n": 2})]
        assert tx.count_pending_signals("i1") == 2
        consumed = tx.consumed_signal("i1-r1", 2)
        assert typed(consumed, records.Signal)
        assert (consumed.signal_id, consumed.consumed_run_id, consumed.consumed_step_index,
                consumed.consumed_at) == (signal.signal_id, "i1-r1", 2, later(5))
        assert tx.consumed_signal("i1-r1", 3) is None


@covers("insert_child", "child_link", "step_children", "run_children", "supersede_child",
        "supersede_children")
def test_children_are_linked_and_let_go(store):
    with store.write() as tx:
        add_instance(tx, "p")
        for n, status in enumerate(("failed", "running", "completed")):
            add_instance(tx, f"c{n}", parent_instance_id="p", status=status)
            tx.insert_child({"child_instance_id": f"c{n}", "parent_instance_id": "p",
                             "parent_run_id": "p-r1", "step_index": 0, "branch_index": n,
                             "step": "s", "workflow_type": "t", "started_event_id": n + 1,
                             "created_at": T0})
    with store.write() as tx:
        tx.supersede_children("p-r1", 0)
        assert [c.child_instance_id for c in tx.step_children("p-r1", 0)] == ["c1", "c2"]
        tx.supersede_child("c1")
        tx.update_instance("c2", closed_at=later(1))
    with store.read() as tx:
        link = tx.child_link("c0")
        assert typed(link, records.Child) and link.superseded is True
        assert (link.parent_run_id, link.status, link.created_at) == ("p-r1", "failed", T0)
        assert tx.child_link("nope") is None
        assert [c.child_instance_id for c in tx.step_children("p-r1", 0)] == ["c2"]
        children = tx.run_children("p-r1")
        assert all(typed(c, records.Child) for c in children)
        assert [(c.child_instance_id, c.status, c.closed_at) for c in children] \
            == [("c0", "failed", None), ("c1", "running", None), ("c2", "completed", later(1))]


@covers("insert_failure", "get_failure", "activity_failure")
def test_failures_are_kept_and_found_by_activity(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        ids = [tx.insert_failure({"workflow_instance_id": "i1", "workflow_run_id": "i1-r1",
                                  "activity_id": "a1", "failure_category": "activity",
                                  "message": f"m{n}", "details": {"n": n}, "created_at": T0})
               for n in range(2)]
    with store.write() as tx:
        ids.append(tx.insert_failure({
            "workflow_instance_id": "i1", "workflow_run_id": "i1-r1", "activity_id": None,
            "failure_category": "timeout", "propagation_kind": "activity",
            "timeout_kind": "heartbeat", "exception_class": "E", "message": "late",
            "deadline_at": later(1), "details": None, "created_at": later(2)}))
    with store.read() as tx:
        first, last = tx.get_failure(ids[0]), tx.get_failure(ids[2])
        assert typed(first, records.Failure) and first.details == {"n": 0}
        assert typed(last, records.Failure) and (last.deadline_at, last.details) == (later(1), None)
        assert tx.activity_failure("a1").failure_id == ids[1]
        assert tx.activity_failure("a2") is None


@covers("expired_deadlines", "earliest_deadline", "claimed_deadlines",
        "runs_past_deadline_without_task", "open_deadlines")
def test_deadlines_and_run_timeouts_are_found_when_due(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_instance(tx, "i2")
        tx.update_run("i1-r1", deadline_at=later(10), run_deadline_at=later(20))
        tx.update_run("i2-r1", deadline_at=later(30))
        add_activity(tx, "a1", "i1-r1")
        tx.update_activity("a1", schedule_deadline_at=later(7))
        add_timer(tx, "t1", "i2-r1", kind="signal_timeout", fire_at=later(8))
        add_task(tx, "i2-r1", status="started", timeout_at=later(9))
    with store.read() as tx:
        assert tx.earliest_deadline() == later(10)
        expired = tx.expired_deadlines(later(10), 10)
        assert [r.workflow_run_id for r in expired] == ["i1-r1"] and typed(expired[0], records.Run)
        assert tx.runs_past_deadline_without_task(later(19), 10) == []
        past = tx.runs_past_deadline_without_task(later(20), 10)
        assert [r.workflow_run_id for r in past] == ["i1-r1"] and typed(past[0], records.Run)
        assert sorted((d["workflow_run_id"], d["kind"], d["at"])
                      for d in tx.open_deadlines(["i1-r1", "i2-r1"])) == [
            ("i1-r1", "schedule_to_start", later(7)), ("i2-r1", "signal_wait", later(8)),
            ("i2-r1", "workflow_task_timeout", later(9)),
        ]
    with store.write() as tx:
        tx.claim_deadline("i1-r1", "w1", later(10), None)
        claimed = tx.claimed_deadlines()
        assert [r.workflow_run_id for r in claimed] == ["i1-r1"] and typed(claimed[0], records.Run)
        assert claimed[0].deadline_claimed_by == "w1"
        assert tx.earliest_deadline() == later(30)


@covers("prunable_instances", "next_retain_until", "delete_instances", "count_owned_rows")
def test_closed_instances_past_retention_are_deleted_with_what_they_own(store):
    with store.write() as tx:
        for n in range(3):
            add_instance(tx, f"i{n}")
            tx.update_instance(f"i{n}", status="completed", closed_at=T0,
                               retain_until=later(10 * (n + 1)))
            tx.append_event(tx.get_run(f"i{n}-r1"), "WorkflowStarted", T0, {})
            add_activity(tx, f"a{n}", f"i{n}-r1", status="completed")
    with store.read() as tx:
        due = tx.prunable_instances(later(20), closed_before=None, limit=10)
        assert due == [{"workflow_instance_id": "i0", "events": 1},
                       {"workflow_instance_id": "i1", "events": 1}]
        assert len(tx.prunable_instances(later(20), closed_before=later(1), limit=-1)) == 3
        assert tx.next_retain_until(later(20)) == later(30)
        counted = tx.count_owned_rows(["i0", "i1"])
    with store.write() as tx:
        deleted = tx.delete_instances(["i0", "i1"])
    assert {t: n for t, n in deleted.items() if n} == {t: n for t, n in counted.items() if n} \
        == {"activities": 2, "runs": 2, "instances": 2, "events": 2}
    with store.read() as tx:
        assert tx.get_instance("i0") is None and tx.events("i2") != []


@covers("mark_pruning", "pruning_instance", "is_pruning", "delete_instance_part")
def test_a_long_history_is_pruned_over_several_transactions(store):
    with store.write() as tx:
        add_instance(tx, "i1", status="completed", closed_at=T0)
    for _ in range(5):
        # A row of history each (a transaction's events of a run may share one).
        with store.write() as tx:
            tx.append_event(tx.get_run("i1-r1"), "WorkflowTaskScheduled", T0, {})
    with store.write() as tx:
        assert tx.pruning_instance() is None
        tx.mark_pruning("i1", T0)
    parts = []
    while True:
        with store.write() as tx:
            assert tx.pruning_instance() == "i1" and tx.is_pruning("i1")
            parts.append(tx.delete_instance_part("i1", 2))
            if parts[-1].get("instances"):
                break
    with store.read() as tx:
        assert tx.get_instance("i1") is None and not tx.is_pruning("i1")
    assert sum(part.get("events", 0) for part in parts) == 5
    assert sum(part.get("runs", 0) for part in parts) == 1


@covers("register_worker", "renew_worker", "revive_worker", "stop_worker", "live_workers",
        "get_worker")
def test_a_worker_registers_renews_its_lease_and_stops(store):
    with store.write() as tx:
        tx.register_worker({"worker_id": "w1", "kind": "worker", "hostname": "h", "pid": 1,
                            "queues": "default", "started_at": T0, "heartbeat_at": T0,
                            "lease_expires_at": later(30)})
    with store.write() as tx:
        assert tx.renew_worker("w1", later(10), later(40)) is True
        tx.stop_worker("w1", later(11))
        assert tx.renew_worker("w1", later(12), later(42)) is False
        assert tx.live_workers() == []
        tx.revive_worker("w1", later(13), later(43))
    with store.read() as tx:
        (worker,) = tx.live_workers()
        assert typed(worker, records.RegisteredWorker) and worker == tx.get_worker("w1")
        assert (worker.heartbeat_at, worker.lease_expires_at) == (later(13), later(43))
        assert (worker.started_at, worker.stopped_at, worker.pid_started, worker.host_id) \
            == (T0, None, None, None)
        assert tx.get_worker("w2") is None


@covers("instance_counts", "open_activity_counts", "ready_activity_counts",
        "ready_workflow_task_count", "next_deadlines")
def test_metrics_read_counts_and_the_next_deadline_of_each_kind(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_instance(tx, "i2")
        tx.update_instance("i2", status="completed")
        add_activity(tx, "a1", "i1-r1")
        add_activity(tx, "a2", "i1-r1", status="started")
        tx.update_activity("a2", close_deadline_at=later(5))
        add_task(tx, "i1-r1", available_at=later(1))
    with store.read() as tx:
        assert [(r["workflow_type"], r["status"], r["count"]) for r in tx.instance_counts()
                if r["count"]] == [("t", "completed", 1), ("t", "running", 1)]
        assert sorted((r["queue"], r["status"], r["count"])
                      for r in tx.open_activity_counts()) == [("default", "scheduled", 1),
                                                              ("default", "started", 1)]
        assert tx.ready_activity_counts(T0) == [{"queue": "default", "count": 1, "oldest": T0}]
        assert tx.ready_workflow_task_count(T0) == {"count": 0, "oldest": None}
        assert tx.ready_workflow_task_count(later(1)) == {"count": 1, "oldest": later(1)}
        deadlines = tx.next_deadlines()
    assert deadlines["start_to_close"] == later(5)
    assert {kind for kind, at in deadlines.items() if at is None} == {
        "execution_timeout", "run_timeout", "deadline", "workflow_task_timeout",
        "schedule_to_start", "heartbeat", "schedule_to_close", "signal_wait"}


@covers("data_version", "listen", "fit_connections", "defer_checkpoints", "checkpoint",
        "bulk_write", "file_size", "vacuum", "now", "close")
def test_the_store_keeps_its_file_or_server_and_says_when_others_commit(opener):
    store, other = opener(), opener()
    before = store.data_version()
    with other.write() as tx:
        add_instance(tx, "i1")
    assert store.data_version() != before
    listener = store.listen()
    if listener is not None:
        assert listener.wait(0) is True
        listener.close()
    store.fit_connections(4)
    store.defer_checkpoints()
    with store.bulk_write() as tx:
        tx.delete_instances(["i1"])
    assert store.checkpoint() >= 0
    store.vacuum()
    assert store.file_size() > 0
    assert abs(store.now() - clock.now()) < timedelta(minutes=1)
    store.close()
    assert store.peek().get_instance("i1") is None


def test_every_method_of_the_interface_has_a_contract_test():
    methods = {name for protocol in (interface.Tx, interface.Store)
               for name, value in vars(protocol).items()
               if callable(value) and not name.startswith("_")}
    assert sorted(methods - COVERED) == []


@covers("update_run", "insert_activity", "flush")
def test_a_write_that_fails_leaves_nothing_of_its_transaction(store):
    """However late a backend sends a write (PostgreSQL holds back those whose result nobody
    reads, for the next round trip), its failure fails the whole transaction."""
    with store.write() as tx:
        add_instance(tx, "i1")
        add_activity(tx, "a1", "i1-r1")
    with pytest.raises(Exception, match=r"(?i)unique|duplicate|constraint"), store.write() as tx:
        run = tx.get_run("i1-r1")
        tx.update_run("i1-r1", step_index=5)
        tx.append_event(run, "WorkflowTaskScheduled", T0, {"reason": "r"})
        add_activity(tx, "a1", "i1-r1")
    with store.read() as tx:
        assert tx.get_run("i1-r1").step_index == 0
        assert tx.events("i1") == []
        assert [a.activity_id for a in tx.open_activities("i1-r1")] == ["a1"]
    with store.write() as tx:
        tx.update_run("i1-r1", step_index=2)
    with store.read() as tx:
        assert tx.get_run("i1-r1").step_index == 2, "the store writes again after the failure"


def add_schedule(tx, name: str, due: datetime, **fields) -> bool:
    return tx.insert_schedule({"name": name, "workflow_type": "t", "spec_digest": "s",
                               "file_paused": False, "paused": False, "next_tick_at": due,
                               "due_at": due, "created_at": T0, **fields})


@covers("insert_schedule", "get_schedule", "schedules", "update_schedule")
def test_a_schedule_is_recorded_once_and_changed_only_while_it_holds_what_was_read(store):
    due = T0 + timedelta(seconds=1, microseconds=5)
    with store.write() as tx:
        assert add_schedule(tx, "b", due) is True
        assert add_schedule(tx, "a", due, paused=True) is True
        assert add_schedule(tx, "a", T0) is False
    with store.write() as tx:
        assert tx.update_schedule("b", {"next_tick_at": T0}, next_tick_at=T0) is False
        assert tx.update_schedule("b", {"next_tick_at": due, "buffered_tick_at": None},
                                  next_tick_at=due + timedelta(seconds=1),
                                  buffered_tick_at=due) is True
    with store.read() as tx:
        assert [row.name for row in tx.schedules()] == ["a", "b"]
        row = tx.get_schedule("b")
        assert typed(row, records.ScheduleState)
        assert (row.next_tick_at, row.buffered_tick_at, row.paused) == \
            (due + timedelta(seconds=1), due, False)
        assert tx.get_schedule("a").paused is True
        assert tx.get_schedule("c") is None


@covers("due_schedules", "next_schedule_due", "buffered_schedules")
def test_due_schedules_are_the_active_ones_whose_start_has_come(store):
    with store.write() as tx:
        add_schedule(tx, "soon", T0 + timedelta(seconds=1))
        add_schedule(tx, "now", T0)
        add_schedule(tx, "paused", T0 - timedelta(seconds=5), paused=True)
        add_schedule(tx, "removed", T0 - timedelta(seconds=5), removed_at=T0)
        add_schedule(tx, "held", T0 + timedelta(hours=1), buffered_tick_at=T0)
    with store.write() as tx:
        assert [row.name for row in tx.due_schedules(T0, 10)] == ["now"]
        assert [row.name for row in tx.due_schedules(T0 + timedelta(seconds=2), 10)] == \
            ["now", "soon"]
        assert [row.name for row in tx.due_schedules(T0 + timedelta(seconds=2), 1)] == ["now"]
        assert tx.next_schedule_due() == T0
        assert [row.name for row in tx.buffered_schedules()] == ["held"]


@covers("due_schedules")
def test_a_due_schedule_read_by_one_writer_is_not_handed_to_another(opener):
    first, second = opener(), opener()
    with first.write() as tx:
        add_schedule(tx, "s", T0)
    with first.write() as tx:
        assert [row.name for row in tx.due_schedules(T0, 10)] == ["s"]
        if first.path.startswith("postgresql"):
            # SQLite's writer holds the whole file: a second write waits instead.
            with second.write() as other:
                assert other.due_schedules(T0, 10) == []


@covers("open_schedule_instances", "insert_schedule_actions", "schedule_actions",
        "list_instances", "count_instances")
def test_a_schedules_instances_and_actions_are_found_by_its_name(store):
    with store.write() as tx:
        add_instance(tx, "s-1", schedule_name="s", schedule_tick_at=T0)
        add_instance(tx, "s-2", created=T0 + timedelta(seconds=1), schedule_name="s",
                     schedule_tick_at=T0 + timedelta(seconds=1), status="completed",
                     closed_at=T0 + timedelta(seconds=2))
        add_instance(tx, "other", schedule_name="o", schedule_tick_at=T0)
        add_instance(tx, "plain")
        tx.insert_schedule_actions([
            {"schedule_name": "s", "tick_at": T0, "action": "started", "instance_id": "s-1",
             "reason": "on time", "at": T0},
            {"schedule_name": "s", "tick_at": T0 + timedelta(seconds=1), "action": "skipped",
             "instance_id": None, "reason": "s-1 is still open", "at": T0},
            {"schedule_name": "o", "tick_at": T0, "action": "missed", "instance_id": None,
             "reason": None, "at": T0},
        ])
    with store.read() as tx:
        assert tx.open_schedule_instances("s") == ["s-1"]
        actions = tx.schedule_actions("s", 10)
        assert [(a.action, a.instance_id) for a in actions] == [("skipped", None),
                                                                ("started", "s-1")]
        assert typed(actions[0], records.ScheduleAction)
        assert tx.schedule_actions("s", 1)[0].action == "skipped"
        listed = tx.list_instances(status=None, workflow_type=None, since=None, limit=10,
                                   schedule="s")
        assert [row["workflow_instance_id"] for row in listed] == ["s-2", "s-1"]
        assert tx.count_instances(status=None, workflow_type=None, since=None, schedule="s") == 2
        assert tx.get_instance("s-1").schedule_tick_at == T0
