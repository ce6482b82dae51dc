"""Handlers for the activity, heartbeat and worker-process tests, named `wfh_activities:function`.

The process tests copy this file beside the workflows.yaml they write; handlers there take
what they need from the state: `_log` (a file that gets one line per call) and `_sleep`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from wfctl import ActivityCancelled, ActivityContext

# In-process tests: hooks run inside the handler before it heartbeats; what it saw is kept.
before_heartbeat: list[Callable[[], None]] = []
seen: list[Any] = []


def _log(state: dict[str, Any], ctx: ActivityContext, what: str = "ran") -> None:
    """One line per call: `workflow step attempt pid what`, appended atomically."""
    line = f"{ctx.workflow_id} {ctx.step} {ctx.attempt} {os.getpid()} {what}\n"
    fd = os.open(state["_log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def record(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Logs the call, sleeps `_sleep` seconds, and returns which attempt ran."""
    _log(state, ctx)
    time.sleep(state.get("_sleep", 0))
    return {f"ran_{ctx.step}": ctx.attempt}


def hang_on_first_attempt(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Attempt 1 logs `started` and never returns (it is there to be killed); later ones finish."""
    if ctx.attempt == 1:
        _log(state, ctx, "started")
        time.sleep(60)
    _log(state, ctx)
    return {"finished_by_pid": os.getpid(), "finished_attempt": ctx.attempt}


def slow(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Logs `started`, works `_sleep` seconds, logs `finished`, returns its result."""
    _log(state, ctx, "started")
    time.sleep(state.get("_sleep", 1))
    _log(state, ctx, "finished")
    return {"slow_result": 42}


def heartbeat_after_hooks(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Runs the test's hooks, then heartbeats; records whether heartbeat() raised."""
    for hook in before_heartbeat:
        hook()
    try:
        ctx.heartbeat({"progress": 1})
    except ActivityCancelled as exc:
        seen.append(exc)
        raise
    seen.append("heartbeat accepted")
    return {"finished": True}


def show_last_details(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Records the previous attempt's details, heartbeats several times, fails on attempt 1."""
    seen.append((ctx.attempt, ctx.last_heartbeat_details))
    for n in range(1, 6):
        ctx.heartbeat({"attempt": ctx.attempt, "n": n})
    if ctx.attempt == 1:
        raise ConnectionError("lost the connection after 5 items")
    return {"done": True}
