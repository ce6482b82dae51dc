"""Finding and calling the user's handlers, named 'module:function' in workflows.yaml."""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wfctl.errors import WfctlError

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
    function = getattr(module, name, None)
    if not callable(function):
        raise HandlerNotFound(f"handler {spec}: module {module_name!r} has no function {name!r}")
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


def call(spec: str, state: dict[str, Any], ctx: Any = None) -> Any:
    """Call a handler with `(state, ctx)`, or `(state)` when it takes one argument."""
    function, with_context = _resolve(spec)
    return function(state, ctx) if with_context else function(state)


def check(spec: str) -> str | None:
    """Why a handler cannot be used, or None when it imports and is callable."""
    try:
        _resolve(spec)
    except HandlerNotFound as exc:
        return str(exc)
    except Exception as exc:
        return f"handler {spec}: importing it raised {type(exc).__name__}: {exc}"
    return None
