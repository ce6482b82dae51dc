"""Acting on many instances at once: starts from a list, and one operator action on many
instances, each in short transactions of its own."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wfctl import jsonvalue
from wfctl.engine import start as starting
from wfctl.engine.core import OPERATION_RUNS, EngineCore
from wfctl.errors import Conflict, InvalidInput, NotFound, TransientConflict, WfctlError
from wfctl.lang import durations
from wfctl.lang.definitions import Definitions
from wfctl.store.records import Instance

# Starts in one transaction at most: one commit (one fsync) for all of them.
START_CHUNK = 1000
# How long one transaction of a batch action may go on adding instances: it then commits, so
# that a worker waiting for the write lock waits no longer than about this plus one action.
ACTION_BUDGET = 0.01


@dataclass(frozen=True, slots=True)
class PlannedStart:
    """One start of `start_many`, checked: its id (None: generated), input, the timeouts it
    overrides (None: NONE) and its duplicate policy."""

    instance_id: str | None
    input: dict[str, Any]
    overrides: dict[str, float | None]
    on_duplicate: str


# What one start of a list may say; every key is optional.
START_KEYS = ("id", "input", "deadline", "execution_timeout", "run_timeout", "on_duplicate")


def plan_start(definitions: Definitions, workflow_type: str, item: Any,
               defaults: Mapping[str, Any]) -> PlannedStart:
    """One start of a list, checked as `start` checks its own (InvalidInput when it is not
    one); `defaults` gives the keys it leaves out."""
    if not isinstance(item, dict):
        raise InvalidInput(f"expected a JSON object (got {type(item).__name__})")
    unknown = [key for key in item if key not in START_KEYS]
    if unknown:
        raise InvalidInput(f"unknown key {unknown[0]!r} (known: {', '.join(START_KEYS)})")
    given = {**defaults, **item}
    instance_id = given.get("id")
    if instance_id is not None and not isinstance(instance_id, str):
        raise InvalidInput(f"id must be text (got {type(instance_id).__name__})")
    state = given.get("input")
    if state is not None:
        if not isinstance(state, dict):
            raise InvalidInput(f"input must be a JSON object (got {type(state).__name__})")
        try:
            jsonvalue.check(state, "input")
        except jsonvalue.JSONValueError as exc:
            raise InvalidInput(str(exc)) from None
    overrides = {}
    for name in starting.OVERRIDABLE:
        if name in given:
            try:
                overrides[name] = durations.parse_timeout(given[name])
            except durations.DurationError as exc:
                raise InvalidInput(f"{name}: {exc}") from None
    on_duplicate = given.get("on_duplicate", "reject")
    if not isinstance(on_duplicate, str):
        raise InvalidInput(f"on_duplicate must be reject or return-existing "
                           f"(got {on_duplicate!r})")
    state = starting.validate_start(definitions, workflow_type, instance_id, state, on_duplicate)
    return PlannedStart(instance_id, state, overrides, on_duplicate)


def start_many(engine: EngineCore, definitions: Definitions, workflow_type: str,
               starts: Sequence[PlannedStart], now: Callable[[], datetime]) -> list[dict[str, Any]]:
    """Start every planned instance, `START_CHUNK` to a transaction, and return each one's
    outcome (`start`'s document) in their order. A start the engine refuses on its own (an id
    whose closed instance is being pruned) gets the outcome `failed` with its `error`; the
    others of its transaction start all the same."""
    outcomes: list[dict[str, Any]] = []
    for first in range(0, len(starts), START_CHUNK):
        outcomes.extend(_start_chunk(engine, definitions, workflow_type,
                                     starts[first:first + START_CHUNK], now))
    return outcomes


def _start_chunk(engine: EngineCore, definitions: Definitions, workflow_type: str,
                 chunk: Sequence[PlannedStart], now: Callable[[], datetime]) -> list[dict[str, Any]]:
    for runs in range(1, OPERATION_RUNS + 1):
        at = now()
        try:
            with engine.batch():
                return [starting.start(engine, definitions, workflow_type, planned.instance_id,
                                       planned.input, at, overrides=planned.overrides,
                                       on_duplicate=planned.on_duplicate)
                        for planned in chunk]
        except TransientConflict:
            if runs == OPERATION_RUNS:
                raise
        except WfctlError:
            # One start refused rolls its transaction back: each starts alone instead.
            return [_start_alone(engine, definitions, workflow_type, planned, now)
                    for planned in chunk]
    raise AssertionError("unreachable")


def _start_alone(engine: EngineCore, definitions: Definitions, workflow_type: str,
                 planned: PlannedStart, now: Callable[[], datetime]) -> dict[str, Any]:
    try:
        return starting.start(engine, definitions, workflow_type, planned.instance_id,
                              planned.input, now(), overrides=planned.overrides,
                              on_duplicate=planned.on_duplicate)
    except WfctlError as exc:
        return {"started": False, "outcome": "failed",
                "workflow_instance_id": planned.instance_id, "error": str(exc)}


@dataclass(slots=True)
class BatchReport:
    """What a batch action did: how many instances matched, how many it acted on, and those it
    skipped (no longer qualifying, with why) or could not act on (with the error)."""

    matched: int
    done: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    # How long each transaction held the write lock, in seconds (the benchmark reads them).
    transactions: list[float] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {"matched": self.matched, "done": self.done, "skipped": self.skipped,
                "failed": self.failed}


# What an action is: the operation on one instance at `now`.
Action = Callable[[str, datetime], Any]
# Why an instance no longer qualifies (None: it does), read in the transaction that acts on it.
Qualifies = Callable[[Any, Instance], str | None]


def act_on_many(engine: EngineCore, instance_ids: Sequence[str], action: Action,
                qualifies: Qualifies, now: Callable[[], datetime], *,
                pause: Callable[[float], None] = time.sleep,
                budget: float = ACTION_BUDGET,
                worded: Callable[[WfctlError], str] = str) -> BatchReport:
    """Act on each instance in turn, in transactions that each stop taking instances after
    `budget` seconds and commit; between them, `pause(0)` lets other writers have the lock.

    In each transaction an instance is read again and skipped, with the reason, when it no
    longer qualifies (`qualifies`, or the action's own refusal: a Conflict or NotFound); any
    other refusal of the action is a failure of that instance, its error `worded` for the
    caller (the command line names its own options). Each action refuses before it
    writes anything, so the others of its transaction commit. A transaction the store asks to
    run again runs again whole.
    """
    report = BatchReport(matched=len(instance_ids))
    left = list(instance_ids)
    while left:
        for runs in range(1, OPERATION_RUNS + 1):
            try:
                taken, outcome = _act_in_one(engine, left, action, qualifies, now(), budget,
                                             worded)
                break
            except TransientConflict:
                if runs == OPERATION_RUNS:
                    raise
        report.transactions.append(outcome.pop("seconds"))
        report.done += outcome["done"]
        report.skipped += outcome["skipped"]
        report.failed += outcome["failed"]
        left = left[taken:]
        if left:
            pause(0)
    return report


def _act_in_one(engine: EngineCore, instance_ids: Sequence[str], action: Action,
                qualifies: Qualifies, at: datetime, budget: float,
                worded: Callable[[WfctlError], str]) -> tuple[int, dict[str, Any]]:
    """One transaction of `act_on_many`: how many instances it took, and what it did."""
    outcome: dict[str, Any] = {"done": 0, "skipped": [], "failed": []}
    taken = 0
    began = time.perf_counter()
    with engine.batch():
        # The write lock is taken at the first statement: the budget counts from there.
        for instance_id in instance_ids:
            taken += 1
            with engine.transaction(at) as c:
                instance = c.tx.get_instance(instance_id)
                why = "it no longer exists" if instance is None else qualifies(c, instance)
            if why is None:
                try:
                    action(instance_id, at)
                    outcome["done"] += 1
                except (Conflict, NotFound) as exc:
                    why = str(exc)
                except TransientConflict:
                    raise
                except WfctlError as exc:
                    outcome["failed"].append({"id": instance_id, "error": worded(exc)})
            if why is not None:
                outcome["skipped"].append({"id": instance_id, "reason": why})
            if time.perf_counter() - began >= budget:
                break
    # Until the commit: as long as the write lock was held.
    outcome["seconds"] = time.perf_counter() - began
    return taken, outcome
