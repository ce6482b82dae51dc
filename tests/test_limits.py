"""Structural limits (SPEC §7): each at its value is fine, one over is a typed error."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.errors import StructuralLimitExceeded
from wfctl.lang.definitions import LIMIT_DEFAULTS

pytestmark = pytest.mark.both_backends


def grow(state: dict[str, Any]) -> dict[str, Any]:
    """A handler for these tests: returns a string of state['size'] characters."""
    return {"blob": "x" * state["size"]}


def size(value: Any) -> int:
    """A payload's size as wfctl measures it: compact JSON, in UTF-8 bytes."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def definitions(limits: str = "") -> str:
    return textwrap.dedent("""
        version: 1
        {limits}
        workflows:
          one:
            steps:
              - activity: test_limits:grow
                name: grow
          fan_out:
            steps:
              - parallel:
                  - activity: wfh:noop
                    name: a
                  - activity: wfh:noop
                    name: b
                  - activity: wfh:noop
                    name: c
          gated:
            steps:
              - wait_for_signal: go
          single:
            steps:
              - activity: wfh:noop
    """).replace("{limits}", textwrap.dedent(limits).strip().replace("\n", "\n        "))


def limited(**values: int) -> str:
    return "limits:\n" + "".join(f"  {key}: {value}\n" for key, value in values.items())


def assert_structural_failure(env, instance_id: str, kind: str, value: int, limit: int) -> None:
    doc = env.describe(instance_id)
    assert doc["status"] == "failed"
    failure = doc["failure"]
    assert failure["failure_category"] == "structural_limit"
    assert (failure["limit_kind"], failure["value"], failure["limit"]) == (kind, value, limit)
    assert failure["exception_class"] == "StructuralLimitExceeded"
    failed = env.events(instance_id, "WorkflowFailed")[0]["attributes"]
    assert failed["failure_category"] == "structural_limit"


def test_the_defaults_are_the_contracts():
    assert LIMIT_DEFAULTS == {"payload_size": 2 * 1024 * 1024, "pending_activity_count": 2000,
                              "pending_signal_count": 5000, "history_size": 50_000,
                              "child_depth": 64}


# payload_size

def test_a_start_input_at_the_payload_limit_is_accepted(make_env):
    env = make_env(definitions(limited(payload_size=100)))
    state = {"size": 0, "pad": "p" * (100 - size({"size": 0, "pad": ""}))}
    assert size(state) == 100

    assert env.start("single", "s1", input=state)["outcome"] == "started_new"


def test_a_start_input_over_the_payload_limit_is_refused_and_nothing_is_recorded(make_env):
    env = make_env(definitions(limited(payload_size=100)))
    state = {"pad": "p" * (101 - size({"pad": ""}))}

    with pytest.raises(StructuralLimitExceeded) as refused:
        env.start("single", "s1", input=state)

    assert (refused.value.limit_kind, refused.value.value, refused.value.limit) == \
        ("payload_size", 101, 100)
    assert str(refused.value) == "payload_size limit exceeded: 101 bytes (limit 100)"
    assert env.client.list() == []


def test_the_cli_refuses_an_oversized_input_with_one_line_and_writes_nothing(tmp_path, db, backend):
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(definitions())
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"blob": "x" * (3145767 - size({"blob": ""}))}))
    args = ["--db", db, "-w", str(workflows), "start", "single", "s1"]

    result = CliRunner().invoke(app, [*args, "--input-file", str(big)])

    assert result.exit_code == 1
    assert result.stderr == "Error: payload_size limit exceeded: 3145767 bytes (limit 2097152)\n"
    assert result.stdout == ""
    if backend == "sqlite":
        assert not Path(db).exists()          # not even an empty database file

    CliRunner().invoke(app, [*args[:4], "start", "single", "other"])      # now a database exists
    again = CliRunner().invoke(app, [*args, "--input-file", str(big)])
    assert again.exit_code == 1
    with Client(db, workflows) as client:
        assert [row["workflow_instance_id"] for row in client.list()] == ["other"]


def test_a_result_that_brings_the_state_to_the_limit_is_kept(make_env):
    start = {"size": 0}
    limit = 200
    env = make_env(definitions(limited(payload_size=limit)))
    start["size"] = limit - size({"size": 100, "blob": ""})      # three digits, as the result
    env.start("one", "o1", input=start)

    env.run(1)

    doc = env.describe("o1")
    assert doc["status"] == "completed"
    assert size(doc["state"]) == limit


def test_a_result_over_the_payload_limit_fails_the_workflow(make_env):
    limit = 200
    env = make_env(definitions(limited(payload_size=limit)))
    env.start("one", "o1", input={"size": limit})

    env.run(1)

    value = size({"blob": "x" * limit})
    assert_structural_failure(env, "o1", "payload_size", value, limit)
    failed = env.events("o1", "ActivityFailed")[0]["attributes"]
    assert (failed["exception_class"], failed["message"]) == (
        "StructuralLimitExceeded", f"payload_size limit exceeded: {value} bytes (limit {limit})")
    assert failed["retryable"] is False


def test_a_merged_state_over_the_payload_limit_fails_the_workflow(make_env):
    limit = 200
    env = make_env(definitions(limited(payload_size=limit)))
    start = {"size": 150, "pad": "p" * 30}
    env.start("one", "o1", input=start)

    env.run(1)

    assert_structural_failure(env, "o1", "payload_size", size({**start, "blob": "x" * 150}),
                              limit)


def test_signal_data_over_the_payload_limit_is_refused(make_env):
    env = make_env(definitions(limited(payload_size=100)))
    env.start("gated", "g1")
    at_limit = {"pad": "p" * (100 - size({"pad": ""}))}
    over = {"pad": "p" * (101 - size({"pad": ""}))}

    env.client.signal("g1", "go", at_limit)
    with pytest.raises(StructuralLimitExceeded) as refused:
        env.client.signal("g1", "go", over)

    assert (refused.value.limit_kind, refused.value.value) == ("payload_size", 101)
    assert len(env.events("g1", "SignalReceived")) == 1


# pending_activity_count

def test_pending_activities_at_the_limit_are_scheduled(make_env):
    env = make_env(definitions(limited(pending_activity_count=3)))
    env.start("fan_out", "f1")

    env.run(1)

    assert env.describe("f1")["status"] == "completed"
    assert len(env.events("f1", "ActivityScheduled")) == 3


def test_pending_activities_over_the_limit_fail_the_workflow(make_env):
    env = make_env(definitions(limited(pending_activity_count=2)))
    env.start("fan_out", "f1")

    env.run(1)

    assert_structural_failure(env, "f1", "pending_activity_count", 3, 2)
    assert env.events("f1", "ActivityScheduled") == []
    assert env.describe("f1")["failure"]["message"] == \
        "pending_activity_count limit exceeded: 3 (limit 2)"


# pending_signal_count

def test_pending_signals_up_to_the_limit_are_buffered_and_one_more_is_refused(make_env):
    env = make_env(definitions(limited(pending_signal_count=2)))
    env.start("gated", "g1")

    env.client.signal("g1", "later", {"n": 1}, force=True)
    env.client.signal("g1", "later", {"n": 2}, force=True)
    with pytest.raises(StructuralLimitExceeded) as refused:
        env.client.signal("g1", "later", {"n": 3}, force=True)

    assert (refused.value.limit_kind, refused.value.value, refused.value.limit) == \
        ("pending_signal_count", 3, 2)
    assert str(refused.value) == "pending_signal_count limit exceeded: 3 (limit 2)"
    assert len(env.events("g1", "SignalReceived")) == 2


def test_the_cli_reports_a_refused_signal_on_one_line(tmp_path, db):
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(definitions(limited(pending_signal_count=1)))
    base = ["--db", db, "-w", str(workflows)]
    CliRunner().invoke(app, [*base, "start", "gated", "g1"])
    CliRunner().invoke(app, [*base, "signal", "g1", "later", "--force"])

    result = CliRunner().invoke(app, [*base, "signal", "g1", "later", "--force"])

    assert (result.exit_code, result.stderr) == (
        1, "Error: pending_signal_count limit exceeded: 2 (limit 1)\n")


# history_size

def test_a_history_at_the_limit_goes_on(make_env):
    # single: 4 events before the first decision, 10 before the second (which completes it).
    env = make_env(definitions(limited(history_size=10)))
    env.start("single", "s1")

    env.run(1)

    assert env.describe("s1")["status"] == "completed"


def test_a_history_over_the_limit_fails_the_workflow(make_env):
    env = make_env(definitions(limited(history_size=9)))
    env.start("single", "s1")

    env.run(1)

    assert_structural_failure(env, "s1", "history_size", 10, 9)
    assert env.events("s1", "ActivityCompleted")      # the first decision was under the limit


def test_refused_duplicate_starts_do_not_count_toward_the_history_size(make_env):
    env = make_env(definitions(limited(history_size=10)))
    env.start("single", "s1")
    for _ in range(5):
        assert env.client.start("single", "s1")["outcome"] == "rejected_duplicate"

    env.run(1)

    assert env.describe("s1")["status"] == "completed"
    assert env.event_types("s1").count("StartRejected") == 5   # still in the history


def test_a_history_over_the_limit_fails_the_workflow_with_refused_starts_in_between(make_env):
    env = make_env(definitions(limited(history_size=9)))
    env.start("single", "s1")
    env.client.start("single", "s1")

    env.run(1)

    assert_structural_failure(env, "s1", "history_size", 10, 9)


# child_depth

def chain(length: int, limits: str = "") -> str:
    """Types level0 -> level1 -> ... : each starts the next as a child; the last runs a step."""
    types = "".join(
        f"  level{n}:\n    steps:\n      - workflow: level{n + 1}\n        name: down\n"
        for n in range(length - 1)
    )
    last = f"  level{length - 1}:\n    steps:\n      - activity: wfh:noop\n"
    return f"version: 1\n{limits}workflows:\n{types}{last}"


def test_children_as_deep_as_the_limit_complete(make_env):
    env = make_env(chain(4, limited(child_depth=3)))   # the last child is 3 deep
    env.start("level0", "top")

    env.run(1)

    assert env.describe("top")["status"] == "completed"
    assert len(env.client.list()) == 4


def test_a_child_start_one_over_the_depth_limit_fails_the_parents_step(make_env):
    env = make_env(chain(4, limited(child_depth=2)))
    env.start("level0", "top")

    env.run(1)

    [deepest] = [row for row in env.client.list() if row["workflow_type"] == "level2"]
    assert_structural_failure(env, deepest["workflow_instance_id"], "child_depth", 3, 2)
    assert env.describe(deepest["workflow_instance_id"])["failure"]["message"] == \
        "child_depth limit exceeded: 3 (limit 2)"
    failed = env.events(deepest["workflow_instance_id"], "WorkflowFailed")[0]["attributes"]
    assert failed["step"] == "down"
    assert len(env.client.list()) == 3                 # level3 never started
    top = env.describe("top")
    assert (top["status"], top["failure"]["failure_category"]) == ("failed", "child_workflow")


def test_a_type_that_starts_itself_stops_at_the_default_depth(make_env):
    env = make_env("""
        version: 1
        workflows:
          again:
            steps:
              - workflow: again
                name: again
    """)
    env.start("again", "top")

    env.run(1)

    rows = env.client.list(limit=1000)
    assert len(rows) == 65                             # top and 64 generations of children
    assert {row["status"] for row in rows} == {"failed"}
    deepest = env.client.list(limit=1)[0]["workflow_instance_id"]
    assert_structural_failure(env, deepest, "child_depth", 65, 64)


def test_zero_disables_the_child_depth_limit(make_env, monkeypatch):
    monkeypatch.setenv("WFCTL_LIMIT_CHILD_DEPTH", "0")
    env = make_env(chain(70))
    env.start("level0", "top")

    env.run(1)

    assert env.describe("top")["status"] == "completed"
    assert len(env.client.list(limit=1000)) == 70


# configuration

def test_limits_come_from_the_file_and_the_environment(monkeypatch, tmp_path):
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(definitions("limits:\n  payload_size: 1KiB\n  history_size: 500\n"
                                     "  child_depth: 8\n"))
    monkeypatch.setenv("WFCTL_LIMIT_HISTORY_SIZE", "700")
    monkeypatch.setenv("WFCTL_LIMIT_PENDING_SIGNAL_COUNT", "0")

    limits = Client(workflows=workflows).definitions().limits
    monkeypatch.setenv("WFCTL_LIMIT_CHILD_DEPTH", "3")
    from_env = Client(workflows=workflows).definitions().limits

    assert (limits.payload_size, limits.history_size, limits.pending_signal_count,
            limits.pending_activity_count, limits.child_depth) == (1024, 700, 0, 2000, 8)
    assert from_env.child_depth == 3


def test_zero_disables_a_limit(make_env):
    env = make_env(definitions(limited(payload_size=0, pending_activity_count=0)))

    env.start("fan_out", "f1", input={"pad": "p" * (3 * 1024 * 1024)})
    env.run(1)

    assert env.describe("f1")["status"] == "completed"


def test_a_bad_environment_limit_is_one_error_line(monkeypatch, tmp_path, db):
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(definitions())
    monkeypatch.setenv("WFCTL_LIMIT_HISTORY_SIZE", "lots")

    result = CliRunner().invoke(app, ["--db", db, "-w", str(workflows),
                                      "start", "single"])

    assert (result.exit_code, result.stderr) == (
        1, "Error: WFCTL_LIMIT_HISTORY_SIZE: expected a whole number of at least 0 (got 'lots')\n")


def test_describe_shows_the_limit_that_failed_a_workflow(make_env):
    env = make_env(definitions(limited(pending_activity_count=2)))
    env.start("fan_out", "f1")
    env.run(1)

    result = CliRunner().invoke(app, ["--db", env.db, "-w",
                                      str(env.folder / "workflows.yaml"), "describe", "f1"])

    text = result.stdout
    for line in ("category         structural_limit",
                 "message          pending_activity_count limit exceeded: 3 (limit 2)",
                 "limit kind       pending_activity_count", "value            3",
                 "limit            2"):
        assert line in text.splitlines(), line
