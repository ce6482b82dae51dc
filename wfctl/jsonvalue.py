"""Strict JSON values: what wfctl accepts as input, signal data, results and state.

JSON out is always strict — no NaN or Infinity, object keys are strings, nesting is bounded — so
that every document wfctl prints or stores reads back in any JSON parser.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Deeper than any real payload, and far below where the interpreter's recursion would fail.
MAX_DEPTH = 200


class JSONValueError(ValueError):
    """A value that is not strict JSON; the message says where (`key path`) and why."""


def check(value: Any, what: str = "value") -> None:
    """Raise JSONValueError unless `value` is a strict JSON value (dicts with str keys, lists,
    str, finite numbers, bool, None), nested at most MAX_DEPTH deep."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise JSONValueError(f"{what} is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise JSONValueError(
                        f"{what}{_at(path)}: text with a lone surrogate is not valid Unicode"
                    ) from None
            continue
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise JSONValueError(f"{what}{_at(path)}: {item!r} is not a JSON number")
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise JSONValueError(
                        f"{what}{_at(path)}: key {key!r} is not a string")
                stack.append((child, f"{path}.{key}" if path else key, depth + 1))
            continue
        if isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, f"{path}[{index}]", depth + 1))
            continue
        raise JSONValueError(
            f"{what}{_at(path)}: a {type(item).__name__} is not a JSON value")


def _at(path: str) -> str:
    return f" at key {path!r}" if path else ""


def loads(text: str, what: str = "value") -> Any:
    """Parse JSON text strictly: NaN/Infinity, lone surrogates and deep nesting are refused."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except _Constant as exc:
        raise JSONValueError(f"{what}: {exc} is not a JSON number") from None
    except json.JSONDecodeError as exc:
        raise JSONValueError(
            f"{what}: invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise JSONValueError(f"{what} is nested more than {MAX_DEPTH} levels deep") from None
    check(value, what)
    return value


class _Constant(Exception):
    """NaN, Infinity or -Infinity met while parsing."""


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


# One encoder for every call: json.dumps with options builds a new one each time.
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def dumps(value: Any) -> str:
    """Compact strict JSON text (the form wfctl stores)."""
    return _ENCODE(value)
