"""Handlers for the deadline and control tests, named `wfh_deadlines:function`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from wfctl import ActivityContext

deadline_calls: list[tuple[str, dict[str, Any]]] = []
# What on_deadline_hook runs after recording its call (a test's way to act mid-handler).
during_deadline_handler: list[Callable[[dict[str, Any]], None]] = []
failed_once: set[str] = set()
_lock = threading.Lock()


def fail_first_time(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Raises on the first call for a workflow, succeeds on every later one (a retry)."""
    with _lock:
        first = ctx.workflow_id not in failed_once
        failed_once.add(ctx.workflow_id)
    if first:
        raise ConnectionError("downstream unavailable")
    return {"recovered": True}


def on_deadline_slow(state: dict[str, Any]) -> None:
    """Records the call after a short pause, so that concurrent sweeps overlap while it runs."""
    time.sleep(0.02)
    with _lock:
        deadline_calls.append((threading.current_thread().name, dict(state)))


def on_deadline_hook(state: dict[str, Any]) -> None:
    """Records the call, then runs each of `during_deadline_handler`."""
    with _lock:
        deadline_calls.append((threading.current_thread().name, dict(state)))
    for hook in list(during_deadline_handler):
        hook(state)
