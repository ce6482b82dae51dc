"""What the stores' columns hold, and the conversions between their Python and stored values.

Across the store interface values are Python's (store/base.py); in a database they are what its
columns can hold. A column's kind is what the records of store/records.py declare for it (a
column of one name holds one kind in every table):

- an instant: a `datetime` field;
- JSON: a `Json` field — the run's `state`, heartbeat details, an attempt's `last_error`, a
  signal's `data`, a failure's `details` (None is stored as NULL, and a stored JSON `null`
  reads as None);
- a retry policy: a `Policy` field, JSON in the compact form of `codec.encode_policy`;
- a flag: a `bool` field (0/1 in the database).

Inserts and updates write dicts, converted here by those kinds. The columns of an aggregate
(counts, the next deadlines) belong to no record: an instant there is a name ending in `_at`,
or `at` or `oldest`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from wfctl import jsonvalue
from wfctl.store import codec, records

Row = dict[str, Any]


def _declared() -> dict[str, str]:
    """Each column's kind as the records declare it, by its name; a name that two records
    declare with two kinds is a mistake in records.py, refused here."""
    found: dict[str, str] = {}
    for record in vars(records).values():
        if not (isinstance(record, type) and dataclasses.is_dataclass(record)):
            continue
        for field, kind in zip(dataclasses.fields(record), records.kinds(record), strict=True):
            if kind is not None and found.setdefault(field.name, kind) != kind:
                raise TypeError(f"column {field.name} is declared both {found[field.name]} "
                                f"and {kind} in store/records.py")
    return found


DECLARED = _declared()
JSON_COLUMNS = frozenset(name for name, kind in DECLARED.items() if kind == records.JSON)
POLICY_COLUMNS = frozenset(name for name, kind in DECLARED.items() if kind == records.POLICY)
FLAG_COLUMNS = frozenset(name for name, kind in DECLARED.items() if kind == records.FLAG)
_AGGREGATE_INSTANTS = frozenset({"at", "oldest"})


def is_instant(name: str) -> bool:
    kind = DECLARED.get(name)
    if kind is not None:
        return kind == records.INSTANT
    return name.endswith("_at") or name in _AGGREGATE_INSTANTS


def read_plan(names: Iterable[str], instant: Callable[[Any], Any] | None) -> \
        tuple[tuple[str, Callable[[Any], Any]], ...]:
    """For the columns of a result: (name, conversion) of each one whose stored value is not its
    Python value. `instant` reads a stored instant (None where the driver gives datetimes)."""
    plan = []
    for name in names:
        if name in JSON_COLUMNS:
            plan.append((name, codec.decode_json))
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
