"""Handlers of the example ETL workflow: extract (with heartbeats), transform, load."""

from __future__ import annotations

import time
from typing import Any

from wfctl import ActivityContext


def extract(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    rows = []
    for number in range(5):
        rows.append({"id": number, "amount": number * 10})
        ctx.heartbeat({"extracted": len(rows)})
        time.sleep(0.05)
    return {"rows": rows, "source": state.get("source", "unknown")}


def transform(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    if state.get("flaky") and ctx.attempt == 1:
        raise ConnectionError("warehouse connection reset (the retry policy takes care of it)")
    return {"total": sum(row["amount"] for row in state["rows"])}


def load(state: dict[str, Any]) -> dict[str, Any]:
    return {"loaded": len(state["rows"])}


def alert(state: dict[str, Any]) -> None:
    print(f"deadline passed for the import of {state.get('source')}")
