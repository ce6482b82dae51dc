"""Handlers for the process pool tests, named `wfh_isolation:function`; they run in child processes.

Handlers that are to be killed or signalled write their pid (and their program's) to
`state["_pidfile"]` first, so the test knows when they are running and what to look for.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from datetime import datetime
from typing import Any

from wfctl import ActivityCancelled, ActivityContext


class OutOfStock(LookupError):
    """A handler's own exception, below a built-in one."""


def _running(state: dict[str, Any], *pids: int) -> None:
    path = state["_pidfile"]
    with open(path + ".part", "w") as file:
        file.write(" ".join(str(pid) for pid in (os.getpid(), *pids)))
    os.replace(path + ".part", path)


def whoami(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """What the handler saw of its call, and the process it ran in."""
    return {
        "pid": os.getpid(), "state": state, "workflow_id": ctx.workflow_id,
        "attempt": ctx.attempt, "close_deadline_at": ctx.close_deadline_at.isoformat(),
        "last_heartbeat_details": ctx.last_heartbeat_details,
    }


def out_of_stock(state: dict[str, Any]) -> None:
    raise OutOfStock(f"no {state['item']} left")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception has no text")


def raises_unprintable(state: dict[str, Any]) -> None:
    raise Unprintable()


def raises_undecodable(state: dict[str, Any]) -> None:
    raise ValueError(b"name \xff".decode("utf-8", "surrogateescape"))


def exits(state: dict[str, Any]) -> None:
    raise SystemExit(2)


def returns_datetime(state: dict[str, Any]) -> dict[str, Any]:
    return {"when": datetime(2026, 4, 12, 12, 0)}


def heartbeats(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    for done in range(state["beats"]):
        ctx.heartbeat({"done": done})
    return {"beats": state["beats"]}


def heartbeat_once(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    ctx.heartbeat({"done": 1})
    return {"went_on": True}


def heartbeat_catching(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    try:
        ctx.heartbeat({"done": 1})
    except ActivityCancelled:
        return {"cancelled_seen": True, "ctx_cancelled": ctx.cancelled}
    return {"cancelled_seen": False}


def heartbeat_nan(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    try:
        ctx.heartbeat({"ratio": float("nan")})
    except ValueError as exc:
        return {"refused": str(exc)}
    return {"refused": None}


def hangs(state: dict[str, Any]) -> None:
    _running(state)
    time.sleep(3600)


def starts_a_program_and_hangs(state: dict[str, Any]) -> None:
    program = subprocess.Popen(["sleep", "3600"])
    _running(state, program.pid)
    time.sleep(3600)


def sleeps(state: dict[str, Any]) -> dict[str, Any]:
    if "_pidfile" in state:
        _running(state)
    time.sleep(state["seconds"])
    return {"pid": os.getpid()}


def exits_hard(state: dict[str, Any]) -> None:
    os._exit(3)


def forks_and_exits(state: dict[str, Any]) -> None:
    """Leaves behind a copy of itself (holding the connection to the worker), and exits."""
    copy = os.fork()
    if copy == 0:
        time.sleep(3600)
        os._exit(0)
    _running(state, copy)
    os._exit(4)


def crashes(state: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash, without a core file
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)
