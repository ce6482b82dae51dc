"""Handlers that misbehave, for the worker supervision tests, named `wfh_supervision:function`.

The process tests copy this file beside the workflows.yaml they write; `_log` in the state names
a file that gets one line per call: `workflow step attempt pid what`.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from wfctl import ActivityContext

# In-process tests block a handler on this until they set it.
release = threading.Event()
# What `hooked` runs inside the handler (a test's way to act mid-attempt).
during: list[Callable[[], None]] = []
# Two handlers that must run at the same time to get past it.
meeting = threading.Barrier(2)


def _log(state: dict[str, Any], ctx: ActivityContext, what: str) -> None:
    if "_log" not in state:
        return
    line = f"{ctx.workflow_id} {ctx.step} {ctx.attempt} {os.getpid()} {what}\n"
    fd = os.open(state["_log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def exits(state: dict[str, Any], ctx: ActivityContext) -> None:
    _log(state, ctx, "exits")
    raise SystemExit(3)


def interrupts(state: dict[str, Any], ctx: ActivityContext) -> None:
    _log(state, ctx, "interrupts")
    raise KeyboardInterrupt


def returns_datetime(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    _log(state, ctx, "returns")
    return {"count": 1, "when": datetime.now(UTC)}


def returns_nan(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    _log(state, ctx, "returns")
    return {"ratio": math.nan}


def returns_string(state: dict[str, Any], ctx: ActivityContext) -> str:
    return "done"


def stuck(state: dict[str, Any], ctx: ActivityContext) -> None:
    """Never returns (in a process test); in process, until `release` is set."""
    _log(state, ctx, "stuck")
    release.wait(state.get("_stuck_for", 3600))


def record(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    _log(state, ctx, "ran")
    time.sleep(state.get("_sleep", 0))
    # `_pad` characters more per step: a state that needs room to be written.
    return {f"ran_{ctx.step}": ctx.attempt, f"pad_{ctx.step}": "x" * state.get("_pad", 0)}


def heartbeat_until_cancelled(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Heartbeats until its attempt is no longer current (ctx.heartbeat raises)."""
    while True:
        ctx.heartbeat({"alive": True})
        time.sleep(0.01)


def hooked(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    for hook in during:
        hook()
    return {"hooked": True}


def meet(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Returns only once another handler calls it too (within 5 s)."""
    meeting.wait(5)
    return {"met": True}


def slow_on_deadline(state: dict[str, Any]) -> None:
    """An on_deadline handler that takes `_slow` seconds (in process: until `release`)."""
    release.wait(state.get("_slow", 60))


def quick_on_deadline(state: dict[str, Any]) -> None:
    return None
