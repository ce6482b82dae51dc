"""Strict JSON values: what wfctl accepts as input, signal data, results and state.

JSON out is always strict — no NaN or Infinity, object keys are strings, nesting is bounded — so
that every document wfctl prints or stores reads back in any JSON parser. A document printed
(`text`) may hold instants, aware datetimes: they are printed as wfctl's ISO text (clock.iso).
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from json import encoder as json_encoder
from typing import Any

from wfctl import clock

# Deeper than any real payload, and far below where the interpreter's recursion would fail.
MAX_DEPTH = 200


class JSONValueError(ValueError):
    """A value that is not strict JSON; the message says where (`key path`) and why."""


def check(value: Any, what: str = "value", *, instants: bool = False) -> None:
    """Raise JSONValueError unless `value` is a strict JSON value (dicts with str keys, lists,
    str, finite numbers, bool, None), nested at most MAX_DEPTH deep; with `instants`, datetimes
    too (a document `text` prints)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise JSONValueError(f"{what} is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, str):
            if not item.isascii() and not _encodable(item):
                raise JSONValueError(
                    f"{what}{_at(path)}: text with a lone surrogate is not valid Unicode")
        elif isinstance(item, dict):
            _push_members(item, path, depth, what, stack)
        elif isinstance(item, list | tuple):
            for index, child in enumerate(item):
                stack.append((child, f"{path}[{index}]", depth + 1))
        elif not (instants and isinstance(item, datetime)):
            _check_scalar(item, path, what)


def _push_members(item: dict[Any, Any], path: str, depth: int, what: str,
                  stack: list[tuple[Any, str, int]]) -> None:
    """Check a dict's keys and push its values onto `check`'s stack."""
    for key, child in item.items():
        if not isinstance(key, str):
            raise JSONValueError(
                f"{what}{_at(path)}: key {key!r} is not a string")
        if not key.isascii() and not _encodable(key):
            raise JSONValueError(
                f"{what}{_at(path)}: key {key!r} is text with a lone surrogate, "
                "not valid Unicode")
        stack.append((child, f"{path}.{key}" if path else key, depth + 1))


def _check_scalar(item: Any, path: str, what: str) -> None:
    """Check a value that is neither text nor a container: null, a bool or a number."""
    if item is None or isinstance(item, bool):
        return
    if isinstance(item, int):
        if item.bit_length() > _SHORT_INT_BITS and not _printable(item):
            raise JSONValueError(f"{what}{_at(path)}: {_too_long()}")
        return
    if isinstance(item, float):
        if not math.isfinite(item):
            raise JSONValueError(f"{what}{_at(path)}: {item!r} is not a JSON number")
        return
    raise JSONValueError(
        f"{what}{_at(path)}: a {type(item).__name__} is not a JSON value")


def _at(path: str) -> str:
    return f" at key {path!r}" if path else ""


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# An int below 2**2000 has fewer than 640 digits, the least limit on printing one Python allows
# (sys.int_info.str_digits_check_threshold): only longer ones are tried.
_SHORT_INT_BITS = 2_000


def _printable(number: int) -> bool:
    """Whether Python will print `number` (it refuses ints of more digits than
    sys.get_int_max_str_digits(), so as not to spend quadratic time on them)."""
    try:
        str(number)
    except ValueError:
        return False
    return True


def _too_long() -> str:
    return f"an integer of more than {sys.get_int_max_str_digits()} digits is not accepted"


def loads(text: str, what: str = "value") -> Any:
    """Parse JSON text strictly: NaN/Infinity, lone surrogates and deep nesting are refused."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_int=_parse_int)
    except _Constant as exc:
        raise JSONValueError(f"{what}: {exc} is not a JSON number") from None
    except _TooLong:
        raise JSONValueError(f"{what}: {_too_long()}") from None
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


class _TooLong(Exception):
    """An integer of more digits than Python converts."""


def _parse_int(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:
        raise _TooLong from None


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# The C encoder the one above makes afresh at every call (most of the cost of a small value),
# made once per thread instead: its record of the containers being encoded (`markers`, which
# finds cycles) is the thread's own, and is emptied when an encoding fails part way.
_PER_THREAD = threading.local()


def _c_encoder() -> tuple[Callable[[Any, int], list[str]], dict[int, Any]]:
    markers: dict[int, Any] = {}
    encode = json_encoder.c_make_encoder(
        markers, _ENCODER.default, json_encoder.encode_basestring, None, ":", ",", False,
        False, False)
    _PER_THREAD.encoder = encode, markers
    return encode, markers


def dumps(value: Any) -> str:
    """Compact strict JSON text (the form wfctl stores)."""
    if json_encoder.c_make_encoder is None:
        return _ENCODER.encode(value)
    try:
        encode, markers = _PER_THREAD.encoder
    except AttributeError:
        encode, markers = _c_encoder()
    try:
        return "".join(encode(value, 0))
    except BaseException:
        markers.clear()
        raise


# `dumps` without the record of the containers being encoded: for values that cannot hold
# themselves, which it need not look for (shared by every thread: it keeps nothing).
_ACYCLIC = None if json_encoder.c_make_encoder is None else json_encoder.c_make_encoder(
    None, _ENCODER.default, json_encoder.encode_basestring, None, ":", ",", False, False, False)


def dumps_checked(value: Any) -> str:
    """`dumps` for a value made of values `check` passed, and of what wfctl builds around them
    (a history row): none holds itself, so no container is recorded to find a cycle (a quarter
    of a small row's cost). A cycle all the same ends in RecursionError."""
    if _ACYCLIC is None:
        return dumps(value)
    return "".join(_ACYCLIC(value, 0))


def text(document: Any, *, indent: int | None) -> str:
    """`document` as strict JSON (`indent` None: on one line), its instants as ISO text; what
    JSON cannot carry raises JSONValueError, naming where it is."""
    try:
        return json.dumps(document, indent=indent, ensure_ascii=False, allow_nan=False,
                          default=instant_text)
    except ValueError:
        check(document, "the document", instants=True)
        raise


def instant_text(value: Any) -> Any:
    """json.dumps's `default` for a document that holds instants: an aware datetime as wfctl's
    ISO text; any other value JSON cannot carry is a TypeError, as without it."""
    if isinstance(value, datetime):
        return clock.iso(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
