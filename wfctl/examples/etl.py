"""Handlers of the example ETL workflow: extract (with heartbeats), transform, load."""

from __future__ import annotations

import time
from typing import Any

from wfctl import ActivityContext


def extract(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Reads `rows` rows (5 unless told), 50 ms each, heartbeating its progress."""
    rows = []
    for number in range(state.get("rows", 5)):
        rows.append({"id": number, "amount": number * 10})
        ctx.heartbeat({"extracted": len(rows)})
        time.sleep(0.05)
    return {"rows": rows, "source": state.get("source", "unknown")}


def transform(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """With `flaky`, the first attempt fails; with `stall`, it hangs until its attempt times
    out (heartbeat() raises ActivityCancelled then, which ends it)."""
    if state.get("flaky") and ctx.attempt == 1:
        raise ConnectionError("warehouse connection reset (the retry policy takes care of it)")
    while state.get("stall") and ctx.attempt == 1:
        ctx.heartbeat()
        time.sleep(0.05)
    return {"total": sum(row["amount"] for row in state["rows"])}


def load(state: dict[str, Any]) -> dict[str, Any]:
    return {"loaded": len(state["rows"])}


def alert(state: dict[str, Any]) -> None:
    print(f"on_deadline: the import of {state.get('source')} missed its deadline")
