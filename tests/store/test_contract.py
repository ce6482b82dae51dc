"""The store contract: what the engine relies on from any backend (`wfctl/store/base.py`).

Every backend runs these; a backend joins by adding itself to the `opener` fixture's params.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from wfctl import clock
from wfctl.store import Store, open_store
from wfctl.vocabulary import EVENT_TYPES, TIMEOUT_EVENTS

T0 = datetime(2026, 4, 12, 12, 0, tzinfo=UTC)
POLICY = {"max_attempts": 3, "backoff_seconds": [1, 2], "schedule_to_start_timeout": None,
          "start_to_close_timeout": 30.0, "schedule_to_close_timeout": None,
          "heartbeat_timeout": None, "non_retryable": ["ValueError"]}


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


def test_nulls_come_back_as_none(store):
    with store.write() as tx:
        add_instance(tx, "i1", deadline_at=None, on_deadline=None)
    with store.read() as tx:
        instance = tx.get_instance("i1")
    assert instance["deadline_at"] is None and instance["closed_at"] is None
    assert instance["execution_timeout_seconds"] is None


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
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert [e["attributes"]["reason"] for e in events] == ["r0", "r1", "r2", "r3", "r4"]


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
        assert tx.get_activity("a1")["owner"] == "w1"
    assert (first, second) == (True, False)


def test_a_run_read_in_a_write_transaction_still_sees_a_workflow_task_added_after(store):
    with store.write() as tx:
        add_instance(tx, "i1")
        add_instance(tx, "i2")
    with store.write() as tx:
        tx.insert_workflow_task({"workflow_run_id": "i2-r1", "workflow_instance_id": "i2",
                                 "status": "scheduled", "reason": "r",
                                 "available_at": T0, "scheduled_event_id": 1})
    with store.write() as tx:
        assert tx.get_run("i1-r1")["workflow_run_id"] == "i1-r1"
        assert tx.get_run("i2-r1")["workflow_run_id"] == "i2-r1"
        none_yet = tx.open_workflow_task("i1-r1")
        tx.insert_workflow_task({"workflow_run_id": "i1-r1", "workflow_instance_id": "i1",
                                 "status": "scheduled", "reason": "r",
                                 "available_at": T0, "scheduled_event_id": 2})
        added = tx.open_workflow_task("i1-r1")
        other = tx.open_workflow_task("i2-r1")
    assert none_yet is None
    assert added is not None and added["scheduled_event_id"] == 2
    assert other is not None and other["scheduled_event_id"] == 1


def test_a_deadline_claim_is_won_once(store):
    with store.write() as tx:
        add_instance(tx, "i1")
    with store.write() as tx:
        assert tx.claim_deadline("i1-r1", "w1", T0, None) is True
        assert tx.claim_deadline("i1-r1", "w2", T0, None) is False
        assert tx.claim_deadline("i1-r1", "w2", T0, "w1") is True


def test_event_instants_and_attributes_round_trip(store):
    at = datetime(2026, 4, 12, 12, 0, 1, 234000, tzinfo=UTC)
    attributes = {"activity_id": "a", "result": {"ünïcode": "✓", "n": [1, 2.5, None, True]},
                  "close_deadline_at": clock.iso(at.replace(minute=5)), "extra": None}
    with store.write() as tx:
        add_instance(tx, "i1")
        seq = tx.append_event(tx.get_run("i1-r1"), "ActivityCompleted", at, attributes)
    with store.read() as tx:
        (event,) = tx.events("i1")
    assert event["seq"] == seq == 1
    assert event["event_type"] == "ActivityCompleted"
    assert event["at"] == at and event["at"].tzinfo is UTC
    assert event["attributes"] == attributes and list(event["attributes"]) == list(attributes)


def test_an_event_instant_given_as_a_datetime_reads_back_as_iso_text(store):
    at = datetime(2026, 4, 12, 12, 0, 1, 234000, tzinfo=UTC)
    with store.write() as tx:
        add_instance(tx, "i1")
        tx.append_event(tx.get_run("i1-r1"), "TimerScheduled", at,
                        {"timer_id": "t", "fire_at": at + timedelta(minutes=5)})
    with store.read() as tx:
        (event,) = tx.events("i1")
    assert event["attributes"] == {"timer_id": "t", "fire_at": "2026-04-12T12:05:01.234+00:00"}


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
    assert run["state"] == state and list(run["state"]) == list(state)
    assert activity["retry_policy"] == POLICY and list(activity["retry_policy"]) == list(POLICY)
    assert instance["retry_policy"] == other_policy
    assert activity["last_error"] == {"exception_class": "E", "message": "m"}
    assert activity["last_heartbeat_details"] == [1, "two"]
    assert signal["data"] is None


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
        due = [t["timer_id"] for t in tx.due_timers(fine, 10)]
        due_before_fine = [t["timer_id"] for t in tx.due_timers(fine - timedelta(microseconds=1), 10)]
        next_due = tx.next_due(T0)
    assert instance["deadline_at"] == fine and instance["deadline_at"].tzinfo is UTC
    assert run["run_deadline_at"] == exact and run["run_deadline_at"].tzinfo is UTC
    assert run["execution_deadline_at"] == exact + timedelta(seconds=1)
    assert run["execution_deadline_at"].tzinfo is UTC
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
    assert run["cancel_requested"] is True and run["step_started"] is False
    assert activity["superseded"] is True


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


def test_a_failed_transaction_leaves_nothing(store):
    with pytest.raises(RuntimeError), store.write() as tx:
        add_instance(tx, "i1")
        tx.append_event(tx.get_run("i1-r1"), "WorkflowStarted", T0, {})
        raise RuntimeError("boom")
    with store.read() as tx:
        assert tx.get_instance("i1") is None
        assert tx.events("i1") == []


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
