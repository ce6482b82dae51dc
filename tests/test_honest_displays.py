"""What `list`, `describe` and `history` show is true: the nearest deadline that can fire now,
a deadline held while waiting or paused, the backoff waits that happen, whole values in history's
details, how many instances a limit leaves out, and a type the definitions do not know."""

from __future__ import annotations

import json
import re

import pytest
import wfh
from conftest import at

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  order:
    deadline: 10m
    steps:
      - wait_for_signal: shipped
        timeout: 2m
  working:
    deadline: 1h
    steps:
      - activity: wfh:noop
        schedule_to_start: 30s
        start_to_close: 5m
  flaky:
    steps:
      - activity: wfh:fail_times
        max_attempts: 3
        backoff: {initial: 1s, coefficient: 2}
  many_keys:
    steps:
      - activity: wfh:noop
"""


def iso(seconds: float) -> str:
    return at(seconds).isoformat(timespec="milliseconds")



def listed(wfctl, env, *args: str) -> dict[str, dict]:
    code, out, _ = wfctl(env, "list", "--json", *args)
    assert code == 0
    return {row["workflow_instance_id"]: row for row in json.loads(out)}


def test_a_waiting_instance_lists_its_signal_waits_timeout_not_its_held_deadline(make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.start("order", "o-2")
    env.run(0)
    assert env.describe("o-2")["status"] == "waiting"

    row = listed(wfctl, env)["o-2"]

    # The deadline (+10m) cannot fire while it waits; the signal wait's timeout (+2m) can.
    assert row["nearest_deadline"] == {"kind": "signal_wait", "at": iso(120)}
    code, out, _ = wfctl(env, "list")
    assert code == 0 and re.search(r"o-2\s+order\s+waiting\s+1\s+.*signal_wait", out)
    assert "deadline in" not in out


def test_describe_marks_the_deadline_held_while_waiting_and_while_paused(make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.start("order", "o-2")
    env.run(0)

    _, out, _ = wfctl(env, "describe", "o-2", "--json")
    assert json.loads(out)["deadline_held_while"] == "waiting"
    _, out, _ = wfctl(env, "describe", "o-2")
    assert re.search(r"^deadline\s+10m\s+.*held while waiting \(passed .* ago\)$", out, re.M)

    env.clock.set(1)
    env.client.pause("o-2")
    _, out, _ = wfctl(env, "describe", "o-2", "--json")
    assert json.loads(out)["deadline_held_while"] == "paused"
    assert listed(wfctl, env)["o-2"]["nearest_deadline"] == {"kind": "signal_wait",
                                                             "at": iso(120)}
    _, out, _ = wfctl(env, "describe", "o-2")
    assert "held while paused" in out


def test_a_running_instance_lists_the_nearest_of_its_deadline_and_its_open_work(make_env,
                                                                                 wfctl):
    env = make_env(DEFINITIONS)
    env.start("working", "w1")
    env.decide(0)

    # Scheduled, not yet claimed: its schedule-to-start deadline (+30s) comes first.
    assert listed(wfctl, env)["w1"]["nearest_deadline"] == {"kind": "schedule_to_start",
                                                            "at": iso(30)}
    _, out, _ = wfctl(env, "describe", "w1", "--json")
    assert json.loads(out)["deadline_held_while"] is None

    env.run(1)
    assert env.describe("w1")["status"] == "completed"
    assert listed(wfctl, env)["w1"]["nearest_deadline"] is None


def test_the_backoff_shown_lists_only_the_waits_that_happen(make_env, wfctl):
    env = make_env(DEFINITIONS)
    wfh.failing_calls.pop("f1", None)
    env.start("flaky", "f1", input={"fail_times": 9})
    env.run(0)

    _, out, _ = wfctl(env, "describe", "f1", "--json")
    doc = json.loads(out)
    assert doc["activities"][0]["retry_policy"]["backoff_seconds"] == [1, 2]
    _, out, _ = wfctl(env, "describe", "f1")
    assert "3 attempts · backoff 1s→2s" in out
    _, out, _ = wfctl(env, "history", "f1", "--json")
    [scheduled] = [e for e in json.loads(out) if e["event_type"] == "ActivityScheduled"]
    assert scheduled["attributes"]["retry_policy"]["backoff_seconds"] == [1, 2]

    env.run(1)
    env.run(3)
    waits = [e["attributes"]["backoff_seconds"] for e in env.events("f1", "ActivityRetryScheduled")]
    assert waits == [1, 2]
    assert env.describe("f1")["status"] == "failed"


def test_history_details_show_whole_items_and_count_the_rest(make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.start("many_keys", "m1", input={f"key_{n:02d}_{'x' * 6}": n for n in range(30)})
    env.run(0)
    assert env.describe("m1")["status"] == "completed"

    _, out, _ = wfctl(env, "history", "m1")

    [line] = [line for line in out.splitlines() if "WorkflowCompleted" in line]
    details = line.split("WorkflowCompleted", 1)[1].strip()
    shown = re.fullmatch(r'state_keys=\[(.*), … (\d+) more\]', details)
    assert shown is not None, details
    items = json.loads(f"[{shown[1]}]")
    keys = sorted(f"key_{n:02d}_{'x' * 6}" for n in range(30))
    assert items == keys[:len(items)]
    assert len(items) + int(shown[2]) == 30
    _, out, _ = wfctl(env, "history", "m1", "--json")
    [completed] = [e for e in json.loads(out) if e["event_type"] == "WorkflowCompleted"]
    assert completed["attributes"]["state_keys"] == keys


def test_list_says_how_many_more_there_are_past_its_limit(make_env, wfctl):
    env = make_env(DEFINITIONS)
    for n in range(5):
        env.start("order", f"o-{n}", now=n)

    code, out, err = wfctl(env, "list", "--limit", "2")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "… 3 more (the newest 2 shown; --limit N shows more)"
    assert [line.split()[0] for line in out.splitlines()[1:3]] == ["o-4", "o-3"]

    code, out, err = wfctl(env, "list", "--limit", "2", "--json")
    assert [row["workflow_instance_id"] for row in json.loads(out)] == ["o-4", "o-3"]
    assert err == "Note: 3 more past --limit 2\n"

    code, out, err = wfctl(env, "list", "--limit", "5")
    assert (code, err) == (0, "") and "more" not in out
    code, out, err = wfctl(env, "list", "--limit", "5", "--json")
    assert (code, err) == (0, "") and len(json.loads(out)) == 5


def test_list_warns_of_a_type_the_definitions_do_not_declare(make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.start("order", "o-1")
    workflows = env.folder / "workflows.yaml"

    code, out, err = wfctl(env, "list", "--type", "odrer")
    assert code == 0
    assert err == (f"Warning: {workflows} declares no workflow type 'odrer' (it declares: "
                   "flaky, many_keys, order, working); listing its instances all the same\n")
    assert out.splitlines()[1:] == []
    code, out, err = wfctl(env, "list", "--type", "odrer", "--json")
    assert (code, json.loads(out)) == (0, [])
    assert err.startswith("Warning: ")

    code, out, err = wfctl(env, "list", "--type", "order")
    assert (code, err) == (0, "") and "o-1" in out
