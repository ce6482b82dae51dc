"""Handlers of tests/data/v02/workflows.yaml: they made tests/data/v02.db and finish its work."""

from __future__ import annotations

from typing import Any

from wfctl import ActivityContext

escalations: list[dict[str, Any]] = []


def fetch(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Resumes from the previous attempt's heartbeat, as a long fetch would."""
    start = (ctx.last_heartbeat_details or {}).get("fetched", 0)
    return {"rows": state.get("rows", 100), "resumed_from": start, "fetch_attempt": ctx.attempt}


def store(state: dict[str, Any]) -> dict[str, Any]:
    return {"stored": state.get("rows", 0)}


def publish(state: dict[str, Any]) -> dict[str, Any]:
    return {"published": True}


def prepare(state: dict[str, Any]) -> dict[str, Any]:
    return {"prepared": True}


def load(state: dict[str, Any]) -> dict[str, Any]:
    return {"loaded": True}


def fail_first(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    if ctx.attempt == 1:
        raise ConnectionError("upstream refused the first attempt")
    return {"succeeded_on": ctx.attempt}


def poll(state: dict[str, Any]) -> dict[str, Any]:
    """For continue_as_new: one poll per run until state['until']."""
    polls = state.get("polls", 0) + 1
    return {"polls": polls, "more": polls < state.get("until", 2)}


def summarize(state: dict[str, Any]) -> dict[str, Any]:
    return {"summary": f"imported {state['import']['stored']} rows"}


def escalate(state: dict[str, Any]) -> None:
    escalations.append(dict(state))
