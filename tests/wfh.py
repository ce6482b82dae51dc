"""Handlers for the tests, named `wfh:function` in test definitions."""

from __future__ import annotations

import threading
import time
from typing import Any

from wfctl import ActivityContext

calls: list[tuple[str, Any]] = []
# Calls of fail_times so far, by workflow instance.
failing_calls: dict[str, int] = {}
deadline_calls: list[dict[str, Any]] = []
release = threading.Event()


def noop(state: dict[str, Any]) -> None:
    return None


def mark(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Records that its step ran, and with which attempt."""
    calls.append((ctx.step, ctx.attempt))
    return {f"ran_{ctx.step}": ctx.attempt}


def add_one(state: dict[str, Any]) -> dict[str, Any]:
    return {"count": state.get("count", 0) + 1}


def fail_until(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Raises ConnectionError until attempt `succeed_on` (default 2)."""
    if ctx.attempt < state.get("succeed_on", 2):
        raise ConnectionError(f"attempt {ctx.attempt} failed")
    return {"succeeded_on": ctx.attempt}


def fail_times(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Raises ConnectionError on the first state['fail_times'] calls for a workflow (default 1),
    whichever activity or attempt makes them; succeeds on every later one."""
    made = failing_calls[ctx.workflow_id] = failing_calls.get(ctx.workflow_id, 0) + 1
    if made <= state.get("fail_times", 1):
        raise ConnectionError(f"call {made} failed")
    return {"succeeded_on_call": made}


def value_error(state: dict[str, Any]) -> None:
    raise ValueError("bad value")


def returns_list(state: dict[str, Any]) -> list[int]:
    return [1, 2, 3]


def loop_counter(state: dict[str, Any]) -> dict[str, Any]:
    """For continue_as_new: counts up to state['until']."""
    count = state.get("i", 0) + 1
    return {"i": count, "more": count < state.get("until", 3)}


def resume_from_heartbeat(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Heartbeats progress; fails on the first attempt after item 3, resumes on the next."""
    start = (ctx.last_heartbeat_details or {}).get("processed", 0)
    for item in range(start, 6):
        ctx.heartbeat({"processed": item + 1})
        if ctx.attempt == 1 and item == 2:
            raise RuntimeError("crashed mid-way")
    return {"resumed_from": start}


def sleeper(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Sleeps state['sleep'] seconds (default 2), heartbeating if state['beat'] is set."""
    end = time.monotonic() + state.get("sleep", 2)
    while time.monotonic() < end:
        if state.get("beat"):
            ctx.heartbeat({"t": time.monotonic()})
        time.sleep(0.01)
    return {"slept": True}


def wait_for_release(state: dict[str, Any]) -> dict[str, Any]:
    release.wait(10)
    return {"released": True}


def on_deadline_record(state: dict[str, Any]) -> None:
    deadline_calls.append(dict(state))


def on_deadline_raise(state: dict[str, Any]) -> None:
    deadline_calls.append(dict(state))
    raise RuntimeError("pager unreachable")


def deep_error(state: dict[str, Any]) -> None:
    """Raises LookupError four calls deep: a traceback with more frames than describe shows."""
    _open_order(state)


def _open_order(state: dict[str, Any]) -> None:
    _read_fields(state)


def _read_fields(state: dict[str, Any]) -> None:
    _field(state, "order_id")


def _field(state: dict[str, Any], name: str) -> None:
    raise LookupError("no such order")


# (workflow id, step) of each call of `trace`, in the order the handlers ran.
traced: list[tuple[str, str]] = []


def trace(state: dict[str, Any], ctx: ActivityContext) -> None:
    """Records which workflow's step ran, in order."""
    traced.append((ctx.workflow_id, ctx.step))
