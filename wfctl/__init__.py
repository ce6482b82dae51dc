"""wfctl: durable workflows declared in YAML, on one SQLite file.

The public face: `Client` to start and inspect workflows, `to_json` to print its documents as
the CLI's `--json` does, `ActivityContext` and `ActivityCancelled` for handlers, and the errors
wfctl raises.
"""

from typing import Any

from wfctl.client import Client
from wfctl.errors import (
    ActivityCancelled,
    Conflict,
    DatabaseError,
    DatabaseNotFound,
    DatabaseTooNew,
    DeadlinePassed,
    DefinitionError,
    InvalidInput,
    NotFound,
    SignalNotAwaited,
    StoreUnavailable,
    StructuralLimitExceeded,
    WfctlError,
)
from wfctl.lang.context import ActivityContext

__version__ = "0.3.0.dev0"


def to_json(document: Any, *, indent: int | None = None) -> str:
    """A document of `Client` (`describe`, `history`, `list`, ...) as the text `--json` prints:
    its instants, aware UTC datetimes in Python, as ISO 8601 text with milliseconds."""
    from wfctl import jsonvalue

    return jsonvalue.text(document, indent=indent)


__all__ = [
    "ActivityCancelled",
    "ActivityContext",
    "Client",
    "Conflict",
    "DatabaseError",
    "DatabaseNotFound",
    "DatabaseTooNew",
    "DeadlinePassed",
    "DefinitionError",
    "InvalidInput",
    "NotFound",
    "SignalNotAwaited",
    "StoreUnavailable",
    "StructuralLimitExceeded",
    "WfctlError",
    "__version__",
    "to_json",
]
