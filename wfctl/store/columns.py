"""What the stores' columns hold, and the conversions between their Python and stored values.

Across the store interface values are Python's (store/base.py); in a database they are what its
columns can hold. Rows read as typed records (store/records.py) are converted by their fields'
declared kinds; for the rows still read as dicts, and for every row written, a column's kind
follows from its name alone, the same in every table:

- an instant: a name ending in `_at`, `retain_until`, and the `at` and `oldest` of aggregates;
- JSON: the run's `state`, heartbeat details, an attempt's `last_error`, a signal's `data`, a
  failure's `details` (None is stored as NULL, and a stored JSON `null` reads as None);
- a retry policy: `retry_policy`, JSON in the compact form of `codec.encode_policy`;
- a flag: `step_started`, `cancel_requested`, `superseded` (0/1 in the database).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from wfctl import jsonvalue
from wfctl.store import codec

Row = dict[str, Any]

JSON_COLUMNS = frozenset({"state", "last_heartbeat_details", "last_error", "data", "details"})
POLICY_COLUMNS = frozenset({"retry_policy"})
FLAG_COLUMNS = frozenset({"step_started", "cancel_requested", "superseded"})
_INSTANT_NAMES = frozenset({"retain_until", "at", "oldest"})


def is_instant(name: str) -> bool:
    return name.endswith("_at") or name in _INSTANT_NAMES


def read_plan(names: Iterable[str], instant: Callable[[Any], Any] | None) -> \
        tuple[tuple[str, Callable[[Any], Any]], ...]:
    """For the columns of a result: (name, conversion) of each one whose stored value is not its
    Python value. `instant` reads a stored instant (None where the driver gives datetimes)."""
    plan = []
    for name in names:
        if name in JSON_COLUMNS:
            plan.append((name, json.loads))
        elif name in POLICY_COLUMNS:
            plan.append((name, codec.decode_policy))
        elif name in FLAG_COLUMNS:
            plan.append((name, bool))
        elif instant is not None and is_instant(name):
            plan.append((name, instant))
    return tuple(plan)


def read(row: Row, plan: tuple[tuple[str, Callable[[Any], Any]], ...]) -> Row:
    """A row of stored values as a row of Python values, in place; NULL stays None."""
    for name, convert in plan:
        value = row[name]
        if value is not None:
            row[name] = convert(value)
    return row


class Writer:
    """A row's values as a backend stores them: JSON and policies as text, flags as integers,
    instants through the backend's `instant` (None: as they are). What each column needs is
    worked out once per set of columns written."""

    def __init__(self, instant: Callable[[Any], Any] | None) -> None:
        self._instant = instant
        self._plans: dict[tuple[str, ...], tuple[tuple[int, Callable[[Any], Any]], ...]] = {}

    def values(self, row: Row) -> list[Any]:
        names = tuple(row)
        plan = self._plans.get(names)
        if plan is None:
            plan = self._plan(names)
            if len(self._plans) < 1_000:
                self._plans[names] = plan
        values = list(row.values())
        for index, write in plan:
            value = values[index]
            if value is not None:
                values[index] = write(value)
        return values

    def _plan(self, names: tuple[str, ...]) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
        plan: list[tuple[int, Callable[[Any], Any]]] = []
        for index, name in enumerate(names):
            if name in JSON_COLUMNS:
                plan.append((index, jsonvalue.dumps))
            elif name in POLICY_COLUMNS:
                plan.append((index, codec.encode_policy))
            elif name in FLAG_COLUMNS:
                plan.append((index, int))
            elif self._instant is not None and is_instant(name):
                plan.append((index, self._instant))
        return tuple(plan)
