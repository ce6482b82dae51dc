"""wfctl: durable workflows declared in YAML, on one SQLite file.

The public face: `Client` to start and inspect workflows, `ActivityContext` and
`ActivityCancelled` for handlers, and the errors wfctl raises.
"""

from wfctl.client import Client
from wfctl.context import ActivityContext
from wfctl.errors import (
    ActivityCancelled,
    Conflict,
    DatabaseError,
    DatabaseNotFound,
    DatabaseTooNew,
    DefinitionError,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    StructuralLimitExceeded,
    WfctlError,
)

__version__ = "0.3.0.dev0"

__all__ = [
    "ActivityCancelled",
    "ActivityContext",
    "Client",
    "Conflict",
    "DatabaseError",
    "DatabaseNotFound",
    "DatabaseTooNew",
    "DefinitionError",
    "InvalidInput",
    "NotFound",
    "StoreUnavailable",
    "StructuralLimitExceeded",
    "WfctlError",
    "__version__",
]
