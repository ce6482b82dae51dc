"""The watchdog's expiry pass: what it found due is enforced only if still due when its
instance's own transaction reads it again, and due timers are read a page at a time, so that a
page of timers that cannot fire yet never hides the ones after it."""

from __future__ import annotations

import pytest
from conftest import at

from wfctl.engine.time import expiry as engine_time

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  late:
    run_timeout: 10s
    steps:
      - delay: 20s
  punctual:
    steps:
      - delay: 25s
  slow:
    steps:
      - activity: wfh:noop
        name: work
        start_to_close: 10s
"""


def test_timers_that_cannot_fire_yet_do_not_hide_a_due_timer_after_them(make_env):
    env = make_env(DEFINITIONS)
    for n in range(3):
        env.start("late", f"late{n}")
    env.start("punctual", "p1")
    env.decide(0)

    # Pages of two: the three `late` timers (due at +20s, after their runs' timeouts at +10s)
    # come first and do not fire; the punctual one, on the second page, does.
    done = env.engine.expire(at(30), 2)

    assert done.timers_fired == 1
    assert "TimerFired" in env.event_types("p1")
    for n in range(3):
        assert "TimerFired" not in env.event_types(f"late{n}")


def test_what_another_watchdog_enforced_between_the_scan_and_its_transaction_is_left_alone(
        make_env, monkeypatch):
    env = make_env(DEFINITIONS)
    env.start("slow", "s1")
    env.decide(0)
    task = env.claim(0)
    enforce = engine_time._expire_instance
    others: list[int] = []

    def enforced_by_another_first(engine, now, due):
        # Another worker's watchdog found the same attempt and got to it first.
        assert due.activities == [task.activity_id]
        others.append(enforce(engine, now, due).activities_timed_out)
        return enforce(engine, now, due)

    monkeypatch.setattr(engine_time, "_expire_instance", enforced_by_another_first)
    done = env.engine.expire(at(20), 500)

    assert (others, done.activities_timed_out) == ([1], 0)
    assert env.event_types("s1").count("ActivityRetryScheduled") == 1


def test_a_long_pass_enforces_each_instance_at_the_instant_its_transaction_runs(make_env):
    env = make_env(DEFINITIONS)
    for n in range(5):
        env.start("slow", f"s{n}")
    env.decide(0)
    for _ in range(5):
        env.claim(0)
    readings = iter(at(20 + n) for n in range(100))

    # Due at +10s, found at +20s; the clock reads a second later at each transaction.
    done = env.engine.expire(at(20), 500, lambda: next(readings))

    assert done.activities_timed_out == 5
    retried = sorted(e["at"] for n in range(5) for e in env.history(f"s{n}")
                     if e["event_type"] == "ActivityRetryScheduled")
    assert retried == [at(20 + n) for n in range(5)]
