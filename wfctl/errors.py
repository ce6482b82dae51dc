"""The exceptions wfctl raises for people: each message is written to be printed as `Error: …`."""

from __future__ import annotations

import reprlib

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlong = 40
_SHORT.maxlevel = 3


def brief(value: object) -> str:
    """A value as a message shows it: its repr, shortened, whatever its size or shape (a
    structure sharing parts through YAML aliases is never printed whole)."""
    try:
        return _SHORT.repr(value)
    except ValueError:
        # Python refuses to print an int of more than 4,300 digits.
        return "a number too large to print" if isinstance(value, int) else "a value too large to print"


class WfctlError(Exception):
    """Base of every error a user can cause; the CLI prints it on one line and exits 1."""


class DefinitionError(WfctlError):
    """workflows.yaml is missing, unreadable or invalid; the message names file:line and key path.

    `errors` holds every problem found, each on one line (the message tells the first and how
    many more); `line` is where the first one is (0 when it is not at a line).
    """

    def __init__(self, message: str, *, line: int = 0, errors: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.line = line
        self.errors = errors or (message,)


class InvalidInput(WfctlError):
    """A command-line or API argument is not acceptable (bad JSON, bad duration, unknown type)."""


class SignalNotAwaited(InvalidInput):
    """A signal no `wait_for_signal` step of the instance's type waits for. The message names
    the library's override (`force=True`); `message(override)` words it for another caller (the
    CLI's `--force`)."""

    def __init__(self, instance_id: str, workflow_type: str, name: str,
                 awaited: tuple[str, ...]) -> None:
        self.instance_id = instance_id
        self.workflow_type = workflow_type
        self.name = name
        self.awaited = awaited
        super().__init__(self.message("force=True"))

    def message(self, override: str) -> str:
        waits = f"waits for {', '.join(self.awaited)}" if self.awaited else "waits for no signal"
        return (f"{self.instance_id} ({self.workflow_type}) has no wait_for_signal step for "
                f"{self.name!r}: its type {waits} ({override} delivers it anyway)")


class DeadlinePassed(InvalidInput):
    """A retry would keep a deadline that has already passed (`retry` refuses it unless told to
    keep it): the run would fail by it again at once. `deadline_at` is that deadline, as text."""

    def __init__(self, instance_id: str, deadline_at: str) -> None:
        self.instance_id = instance_id
        self.deadline_at = deadline_at
        super().__init__(self.worded("extend_deadline=D", "clear_deadline=True",
                                     "keep_deadline=True"))

    def worded(self, extend: str, clear: str, keep: str) -> str:
        """The message, naming the three ways on (`extend`, `clear`, `keep`) as the caller
        spells them: keywords in Python, options on the command line."""
        return (f"cannot retry {self.instance_id} keeping its deadline: it passed at "
                f"{self.deadline_at}, so the next deadline check would fail it again; pass "
                f"{extend} (a new deadline from now), {clear} (none) or {keep} (fail it "
                "again; on_deadline does not run twice)")


class NotFound(WfctlError):
    """No instance (or run) with that id."""


class Conflict(WfctlError):
    """The action does not fit the instance's current status (closed, duplicate, not failed)."""


class DatabaseError(WfctlError):
    """The database cannot be used: missing, not a wfctl database, or written by a newer wfctl."""


class DatabaseNotFound(DatabaseError):
    """There is no database at the path, and the caller asked not to create one."""


class DatabaseTooNew(DatabaseError):
    """The database was written by a newer wfctl; it is refused and never written to.

    `schema` is the file's schema version, `known` the newest this wfctl knows.
    """

    def __init__(self, path: str, schema: int, known: int) -> None:
        self.schema = schema
        self.known = known
        super().__init__(f"{path} was written by a newer wfctl "
                         f"(schema {schema}; this wfctl knows up to {known})")


class StoreUnavailable(DatabaseError):
    """The database refused a write for now: busy past the busy timeout, disk full, read-only,
    or an I/O error. A worker logs it once, backs off and tries again; nothing is lost.

    `reason` is one of "busy", "full", "readonly", "io", and "unreachable" (a PostgreSQL
    server that cannot be reached or dropped the connection).
    """

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class TransientConflict(DatabaseError):
    """The database could not serialize a transaction with another (a stale snapshot, a
    serialization failure, a deadlock): nothing was written, and the engine runs the whole
    operation again. Never shown to a user."""


class StructuralLimitExceeded(WfctlError):
    """A payload, a count or a history grew past a configured structural limit."""

    def __init__(self, limit_kind: str, value: int, limit: int) -> None:
        self.limit_kind = limit_kind
        self.value = value
        self.limit = limit
        unit = " bytes" if limit_kind == "payload_size" else ""
        super().__init__(f"{limit_kind} limit exceeded: {value}{unit} (limit {limit})")


class ActivityCancelled(Exception):
    """Raised inside a handler by `ctx.heartbeat()` once its attempt is no longer current.

    The attempt timed out, was cancelled, or its workflow closed; whatever the handler returns
    afterwards is discarded, so it should stop and clean up.
    """
