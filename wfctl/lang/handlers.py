"""Finding and calling the user's handlers, named 'module:function' in workflows.yaml."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wfctl import jsonvalue
from wfctl.errors import ActivityCancelled, WfctlError, brief

# A failure keeps the innermost frames of its traceback, and at most this much text of them.
TRACEBACK_FRAMES = 8
TRACEBACK_CHARS = 4000

_cache: dict[str, tuple[Callable[..., Any], bool]] = {}
_lock = threading.Lock()


class HandlerNotFound(WfctlError):
    """A handler named in workflows.yaml cannot be imported."""


def add_search_path(workflows_file: str | Path) -> None:
    """Put the definitions file's folder on sys.path, so handler modules beside it import."""
    folder = str(Path(workflows_file).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)


def resolve(spec: str) -> Callable[..., Any]:
    return _resolve(spec)[0]


def _resolve(spec: str) -> tuple[Callable[..., Any], bool]:
    found = _cache.get(spec)
    if found is not None:
        return found
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HandlerNotFound(f"handler {spec}: cannot import {module_name!r}: {exc}") from None
    if not hasattr(module, name):
        raise HandlerNotFound(f"handler {spec}: module {module_name!r} has no function {name!r}")
    function = getattr(module, name)
    if not callable(function):
        raise HandlerNotFound(f"handler {spec}: {module_name}.{name} is not callable "
                              f"(it is {type(function).__name__} {brief(function)})")
    found = (function, _takes_context(function))
    with _lock:
        _cache[spec] = found
    return found


def _takes_context(function: Callable[..., Any]) -> bool:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in parameters)


def call(spec: str, state: dict[str, Any], ctx: Any = None,
         make_context: Callable[[], Any] | None = None) -> Any:
    """Call a handler with `(state, ctx)`, or `(state)` when it takes one argument; without
    `ctx`, `make_context()` makes it, for a handler that takes one only."""
    function, with_context = _resolve(spec)
    if not with_context:
        return function(state)
    if ctx is None and make_context is not None:
        ctx = make_context()
    return function(state, ctx)


def check(spec: str) -> str | None:
    """Why a handler cannot be used, or None when it imports and is callable."""
    try:
        _resolve(spec)
    except HandlerNotFound as exc:
        return str(exc)
    except (Exception, SystemExit) as exc:
        # A module that exits while imported is as broken as one that raises.
        return f"handler {spec}: importing it raised {type(exc).__name__}: {exc}"
    return None


@dataclass(frozen=True)
class HandlerError:
    """What a handler raised (or why its result was refused), as a failure records it."""

    exception_class: str
    message: str
    classes: tuple[str, ...]
    traceback: str | None

    @classmethod
    def of(cls, exc: BaseException, *, with_traceback: bool = True) -> HandlerError:
        """`classes` are the names along the class hierarchy, so that `non_retryable:
        [ValueError]` also covers subclasses of ValueError."""
        try:
            message = str(exc)
        except Exception:
            message = f"<{type(exc).__name__}: its message could not be formatted>"
        return cls(
            exception_class=type(exc).__name__,
            message=message or type(exc).__name__,
            classes=tuple(klass.__name__ for klass in type(exc).__mro__),
            traceback=format_traceback(exc, handler_only=True) if with_traceback else None,
        )


# Outcome and HandlerCall are made every step, and hold dicts (so they hash in no case): not
# frozen, which costs a setattr through `object` for each field.
@dataclass(slots=True)
class Outcome:
    """How one handler call ended: a result, an error, or cancelled (its attempt is no longer
    current, so whatever it would report is discarded)."""

    result: dict[str, Any] | None = None
    error: HandlerError | None = None
    cancelled: bool = False


def format_traceback(exc: BaseException, *, handler_only: bool = False) -> str:
    """The innermost frames of `exc`'s traceback, bounded in size (the tail is kept).

    `handler_only`: a handler's exception, caught by wfctl's calling code; its traceback starts
    at the handler's call, without the frames of wfctl's that called it.
    """
    frames = exc.__traceback__
    if handler_only:
        while frames is not None and _is_wfctl(frames.tb_frame.f_code.co_filename):
            frames = frames.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, frames, limit=-TRACEBACK_FRAMES))
    if len(text) > TRACEBACK_CHARS:
        text = "…" + text[-(TRACEBACK_CHARS - 1):]
    return text


_PACKAGE = str(Path(__file__).resolve().parent) + os.sep


def _is_wfctl(filename: str) -> bool:
    return filename.startswith(_PACKAGE)


def check_result(step: str, result: Any) -> dict[str, Any] | None:
    """A handler's return value as a result, or TypeError naming the step and offending key."""
    if result is None:
        return None
    if not isinstance(result, dict):
        raise TypeError(f"step {step!r} returned {type(result).__name__}; "
                        "expected a dict of JSON values or None")
    try:
        jsonvalue.check(result, f"step {step!r} result")
    except jsonvalue.JSONValueError as exc:
        raise TypeError(str(exc)) from None
    return result


def run(spec: str, step: str, state: dict[str, Any], ctx: Any = None, *,
        make_context: Callable[[], Any] | None = None) -> Outcome:
    """Call a handler and say how it ended (`call`); nothing it raises or returns escapes, nor
    anything its module does as it is imported.

    SystemExit and KeyboardInterrupt raised by a handler fail its attempt like any exception:
    they never stop the worker.
    """
    try:
        returned = call(spec, state, ctx, make_context)
    except ActivityCancelled:
        return Outcome(cancelled=True)
    except BaseException as exc:
        return Outcome(error=HandlerError.of(exc))
    try:
        return Outcome(result=check_result(step, returned))
    except TypeError as exc:
        return Outcome(error=HandlerError.of(exc, with_traceback=False))


@dataclass(slots=True)
class HandlerCall:
    """One attempt's handler call: `context` holds ActivityContext's keyword arguments but
    `heartbeats` (plain values, so that the call can cross to another process)."""

    spec: str
    step: str
    state: dict[str, Any]
    context: dict[str, Any]
