"""How history is stored compactly: event types as codes, instants as integers, attribute names as codes.

History is most of a database (over twenty events per three-step workflow), and most of an
event's bytes were its attribute names, its ISO instants and the retry policy repeated in every
ActivityScheduled. Here an event's attributes are a JSON array of alternating names and values
(`[name, value, name, value, …]`): a known name is its small integer code, an unknown one stays
a string; attributes with one of the usual key sequences (`SHAPES`) are `[-shape number,
value, value, …]`, their names implied. An instant of `INSTANT_ATTRIBUTES` (a datetime, or ISO
text in wfctl's form) is `[microseconds after the event's own instant]` (a deadline five minutes
on is `[300000000]`), read back as an aware UTC datetime, as is the instant of a failure (its
`deadline_at`, stored as ISO text); a retry policy with the standard keys is the list of its
values. Decoding gives back the same dict, keys in the same order, its instants as datetimes.

The events one transaction appends to one run at its instant share a row (from schema version 9
on SQLite and on PostgreSQL): its type is `PACKED`, its seq the last of theirs
(so the last seq of a history is still its largest), its attributes `[type, attributes, type,
attributes, …]`, each type as an event's own row stores it and each attributes as above. A
history row costs about as much to write as the row of a single event; a step appends six.

The code tables are append-only: a code, once written to a database, means that name forever.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from wfctl import jsonvalue
from wfctl.vocabulary import TIMEOUT_EVENTS

# Event type codes: the position in this tuple, from 1. Append only.
EVENT_CODES = (
    "WorkflowStarted", "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
    "WorkflowTaskTimedOut", "ActivityScheduled", "ActivityStarted", "ActivityHeartbeatRecorded",
    "ActivityCompleted", "ActivityFailed", "ActivityRetryScheduled", "ActivityTimedOut",
    "ActivityCancelled", "TimerScheduled", "TimerFired", "TimerCancelled", "SignalWaitOpened",
    "SignalReceived", "ChildWorkflowStarted", "ChildWorkflowCompleted", "ChildWorkflowFailed",
    "ChildWorkflowTimedOut", "ParentClosePolicyApplied", "WorkflowPaused", "WorkflowResumed",
    "WorkflowDeadlineExceeded", "WorkflowRetried", "WorkflowContinuedAsNew", "WorkflowCompleted",
    "WorkflowFailed", "WorkflowTimedOut", "WorkflowCancelRequested", "WorkflowCancelled",
    "WorkflowTerminated", "StartRejected", "WorkflowRetryScheduled",
)
# Attribute name codes: the position in this tuple, from 1. Append only.
ATTRIBUTE_CODES = (
    "activity_id", "step", "attempt", "scheduled_event_id", "started_event_id", "worker_id",
    "reason", "result", "handler", "queue", "max_attempts", "retry_policy",
    "schedule_deadline_at", "schedule_to_close_deadline_at", "close_deadline_at",
    "heartbeat_deadline_at", "timeout_at", "state_keys", "workflow_type", "input",
    "execution_timeout_seconds", "deadline_seconds", "on_deadline", "child_policy",
    "parent_instance_id", "run_number", "workflow_run_id", "run_timeout_seconds",
    "workflow_task_timeout_seconds", "execution_deadline_at", "run_deadline_at", "deadline_at",
    "timeout_kind", "message", "exception_class", "failure_category", "failure", "retryable",
    "traceback", "next_attempt", "retry_available_at", "backoff_seconds", "timer_id", "kind",
    "fire_at", "details", "last_heartbeat_at", "last_heartbeat_details", "signal", "name",
    "data", "child_instance_id", "child_run_id", "status", "policy", "child_status",
    "initiated_event_id", "previous_status", "deadline_change", "previous_deadline_at",
    "existing_status", "requested_type", "seconds", "duration_seconds",
)
# The key sequences events are written with, most frequent first: attributes of one of these
# shapes are stored as `[-shape number, value, value, …]`, their names implied. Append only.
SHAPES: tuple[tuple[str, ...], ...] = tuple(tuple(shape.split()) for shape in (
    "reason",
    "scheduled_event_id worker_id timeout_at",
    "scheduled_event_id started_event_id",
    "workflow_type input execution_timeout_seconds deadline_seconds on_deadline child_policy "
    "parent_instance_id run_number workflow_run_id run_timeout_seconds workflow_task_timeout_seconds "
    "execution_deadline_at run_deadline_at deadline_at",
    "activity_id step handler queue attempt max_attempts retry_policy schedule_deadline_at "
    "schedule_to_close_deadline_at",
    "activity_id step attempt worker_id scheduled_event_id close_deadline_at heartbeat_deadline_at",
    "activity_id step attempt scheduled_event_id started_event_id result",
    "state_keys",
    "timer_id step kind duration_seconds fire_at",
    "failure_category message exception_class timeout_kind step",
    "child_instance_id child_run_id workflow_type step",
    "timer_id step kind fire_at scheduled_event_id",
    "signal step timeout_seconds timeout_at",
    "new_run_id new_run_number execution_deadline_at run_deadline_at deadline_at",
    "workflow_type input execution_timeout_seconds deadline_seconds on_deadline child_policy "
    "continued_from_run_id run_number workflow_run_id run_timeout_seconds "
    "workflow_task_timeout_seconds execution_deadline_at run_deadline_at deadline_at",
    "activity_id step attempt details scheduled_event_id started_event_id heartbeat_deadline_at",
    "child_instance_id child_run_id step status initiated_event_id",
    "child_instance_id child_run_id step status initiated_event_id failure",
    "activity_id step attempt reason scheduled_event_id started_event_id",
    "timeout_kind deadline_at execution_deadline_at run_deadline_at child_policy message",
    "timer_id step kind fire_at reason scheduled_event_id",
    "deadline_at handler handler_error claimed_at",
    "failure_category message deadline_at exception_class timeout_kind step",
    "activity_id step attempt scheduled_event_id started_event_id reason next_attempt "
    "retry_available_at backoff_seconds max_attempts failure",
    "activity_id step attempt scheduled_event_id started_event_id reason exception_class message "
    "retryable max_attempts traceback",
    "signal data buffered",
    "activity_id step attempt scheduled_event_id started_event_id timeout_kind deadline_at "
    "schedule_deadline_at close_deadline_at schedule_to_close_deadline_at heartbeat_deadline_at "
    "last_heartbeat_at last_heartbeat_details",
    "activity_id step attempt scheduled_event_id started_event_id reason exception_class message "
    "retryable max_attempts",
    "activity_id step attempt scheduled_event_id started_event_id reason next_attempt "
    "retry_available_at backoff_seconds max_attempts timeout_kind deadline_at",
    "status",
    "step step_index previous_status deadline_at previous_deadline_at deadline_change run_deadline_at "
    "execution_deadline_at",
    "child_instance_id policy child_status",
    "reason cancel_reason",
    "reason requested_type existing_status",
    "reason child_policy",
    "timeout_kind scheduled_event_id started_event_id deadline_at worker_id",
    "child_instance_id child_run_id step status initiated_event_id failure timeout_kind deadline_at",
))
# The attributes that hold an instant (declared, not guessed from the name): every instant wfctl
# records at the top level of an event's attributes. Append only: a name stored as an offset is
# read as one forever.
INSTANT_ATTRIBUTES = frozenset({
    "schedule_deadline_at", "schedule_to_close_deadline_at", "close_deadline_at",
    "heartbeat_deadline_at", "last_heartbeat_at", "timeout_at", "fire_at", "retry_available_at",
    "execution_deadline_at", "run_deadline_at", "deadline_at", "previous_deadline_at",
    "claimed_at", "next_attempt_at", "scheduled_at",
})
# The keys of a retry policy, in the order wfctl writes them.
POLICY_KEYS = (
    "max_attempts", "backoff_seconds", "schedule_to_start_timeout", "start_to_close_timeout",
    "schedule_to_close_timeout", "heartbeat_timeout", "non_retryable",
)

_SHAPE_NUMBER = {shape: number for number, shape in enumerate(SHAPES, 1)}
# An event type's stored code (`type_code`; the step path reads it here, a call the fewer).
TYPE_CODES = {name: code for code, name in enumerate(EVENT_CODES, 1)}
_NAME_CODE = {name: code for code, name in enumerate(ATTRIBUTE_CODES, 1)}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_ISO_LENGTH = len("2026-01-01T00:00:00.000+00:00")


# The stored type of a row that holds several events (see the module's text): no event's code.
PACKED = 0


def type_code(event_type: str) -> int | str:
    """The stored form of an event type: its code, or the name for a type without one."""
    return TYPE_CODES.get(event_type, event_type)


def type_name(stored: int | str) -> str:
    return EVENT_CODES[stored - 1] if isinstance(stored, int) else stored


def micros(instant: datetime) -> int:
    """An aware instant as integer microseconds since the epoch (exact)."""
    return (instant - _EPOCH) // _MICROSECOND


def instant(stored: int) -> datetime:
    return _EPOCH + timedelta(microseconds=stored)


def micros_of_iso(text: str) -> int | None:
    """Microseconds for an instant in wfctl's ISO form; None when `text` is not exactly that
    form (so that it is kept as it is)."""
    # The form's length, separators and offset, checked before parsing: with them, what
    # fromisoformat accepts is written back the same (see the round-trip tests).
    if len(text) != _ISO_LENGTH or text[10] != "T" or text[19] != "." \
            or not text.endswith("+00:00") or not text[20:23].isdigit():
        return None
    try:
        return micros(datetime.fromisoformat(text))
    except ValueError:
        return None


def iso_of_micros(stored: int) -> str:
    return instant(stored).isoformat(timespec="milliseconds")


_PLAIN, _INSTANT, _POLICY, _FAILURE = 0, 1, 2, 3


def _value_kind(key: str) -> int:
    return _INSTANT if key in INSTANT_ATTRIBUTES else _POLICY if key == "retry_policy" \
        else _FAILURE if key == "failure" else _PLAIN


def _shape_plan(shape: tuple[str, ...], number: int) -> \
        tuple[int, tuple[tuple[int, int], ...]]:
    """A known key sequence's stored head, and the values not stored as they are: (their place
    in the stored list, after the head; how each is stored)."""
    return -number, tuple((place, _value_kind(key)) for place, key in enumerate(shape, 1)
                          if _value_kind(key) != _PLAIN)


# For each known key sequence: its stored head and how its values are stored.
_SHAPE_PLANS = {shape: _shape_plan(shape, number) for shape, number in _SHAPE_NUMBER.items()}


@dataclass(frozen=True, slots=True)
class EventKind:
    """An event type whose attributes have one of the usual key sequences (`SHAPES`), `names`:
    appended from its values in that order (`Tx.append_values`), stored as `encode_attributes`
    stores a dict of those names, with no dict made. A step's own events are appended this way."""

    event_type: str
    names: tuple[str, ...]
    code: int
    head: int
    special: tuple[tuple[int, int], ...]


def event_kind(event_type: str, names: str) -> EventKind:
    """The kind of `event_type`'s events whose attributes are `names` (space-separated, one of
    `SHAPES`), which metrics do not count (not a timeout: those go through `append_event`)."""
    shape = tuple(names.split())
    if shape not in _SHAPE_PLANS or event_type not in TYPE_CODES \
            or event_type in TIMEOUT_EVENTS:
        raise ValueError(f"no event kind for {event_type} with {names!r}")
    head, special = _SHAPE_PLANS[shape]
    return EventKind(event_type, shape, TYPE_CODES[event_type], head, special)


def encode_attributes(attributes: dict[str, Any], at: int) -> str:
    """An event's attributes in their stored form (see the module's text); `at` is the event's
    instant in microseconds."""
    return jsonvalue.dumps(stored_attributes(attributes, at))


def stored_attributes(attributes: dict[str, Any], at: int) -> list[Any]:
    """`encode_attributes` before it is JSON text: a history row of several events holds each
    one's list (`[type, attributes, …]`), made text once for the row."""
    plan = _SHAPE_PLANS.get(tuple(attributes))
    if plan is not None:
        return stored_values(*plan, attributes.values(), at)
    items: list[Any] = []
    for key, value in attributes.items():
        code = _NAME_CODE.get(key)
        items.append(key if code is None else code)
        items.append(_stored(_value_kind(key), value, at))
    return items


def stored_values(head: int, special: tuple[tuple[int, int], ...], values: Iterable[Any],
                  at: int) -> list[Any]:
    """`stored_attributes` of a known key sequence's values in its order (`head`, `special`:
    the sequence's plan, as an `EventKind` holds it)."""
    stored = [head, *values]
    for place, kind in special:
        value = stored[place]
        if value is not None:
            stored[place] = [micros(value) - at] \
                if kind == _INSTANT and type(value) is datetime else _stored(kind, value, at)
    return stored


def _stored(kind: int, value: Any, at: int) -> Any:
    if kind == _INSTANT:
        if type(value) is datetime:
            return [micros(value) - at]
        return _encode_instant(value, at)
    if kind == _POLICY:
        return encode_policy_value(value)
    if kind == _FAILURE:
        return _encode_failure(value)
    return value


def unpack(text: str) -> list[tuple[int | str, Any]]:
    """A packed row's events, in order: each its stored type and its attributes as parsed JSON
    (for `decode_items`)."""
    items = json.loads(text)
    return list(zip(items[::2], items[1::2], strict=True))


def decode_attributes(text: str, at: int) -> dict[str, Any]:
    """The attributes dict `encode_attributes` was given (with the same `at`), its instants as
    aware UTC datetimes; a JSON object (the form before this one) is returned with its instants
    read the same way."""
    return decode_items(json.loads(text), at)


def decode_items(items: Any, at: int) -> dict[str, Any]:
    """`decode_attributes` of attributes already parsed."""
    if isinstance(items, dict):
        return {key: _instant_of_text(value) if key in INSTANT_ATTRIBUTES
                else _decode_failure(value) if key == "failure" else value
                for key, value in items.items()}
    if items and isinstance(items[0], int) and items[0] < 0:
        pairs: Any = zip(SHAPES[-items[0] - 1], items[1:], strict=True)
    else:
        pairs = ((ATTRIBUTE_CODES[key - 1] if isinstance(key, int) else key, value)
                 for key, value in zip(items[::2], items[1::2], strict=True))
    attributes: dict[str, Any] = {}
    for key, value in pairs:
        if key == "retry_policy":
            value = decode_policy_value(value)
        elif key in INSTANT_ATTRIBUTES:
            value = _decode_instant(value, at)
        elif key == "failure":
            value = _decode_failure(value)
        attributes[key] = value
    return attributes


def _encode_instant(value: Any, at: int) -> Any:
    """An instant attribute's value: an instant (a datetime, or ISO text in wfctl's form) becomes
    `[offset]`, read back as a datetime; any other list is wrapped as `[list]`, so that it is
    never taken for one; everything else stays as it is."""
    if isinstance(value, datetime):
        return [micros(value) - at]
    if isinstance(value, str):
        stored = micros_of_iso(value)
        return value if stored is None else [stored - at]
    if isinstance(value, list):
        return [value]
    return value


def _decode_instant(stored: Any, at: int) -> Any:
    if isinstance(stored, list):
        (inner,) = stored
        return instant(at + inner) if type(inner) is int else inner
    return stored


def _instant_of_text(value: Any) -> Any:
    """ISO text in wfctl's form as a datetime; anything else (text in another form, which
    wfctl never wrote for an instant) as it is."""
    if isinstance(value, str):
        stored = micros_of_iso(value)
        if stored is not None:
            return instant(stored)
    return value


def _encode_failure(failure: Any) -> Any:
    """A failure (`reasons.failure_view`): its instant as ISO text in wfctl's form."""
    if isinstance(failure, dict) and isinstance(failure.get("deadline_at"), datetime):
        return {**failure, "deadline_at": iso_of_micros(micros(failure["deadline_at"]))}
    return failure


def _decode_failure(stored: Any) -> Any:
    if isinstance(stored, dict) and "deadline_at" in stored:
        return {**stored, "deadline_at": _instant_of_text(stored["deadline_at"])}
    return stored


def encode_policy_value(policy: Any) -> Any:
    """A retry policy with the standard keys in order as the list of its values."""
    last, stored, _ = _last_policy
    if policy is last:
        return stored
    if isinstance(policy, dict) and tuple(policy) == POLICY_KEYS:
        return list(policy.values())
    return policy


def decode_policy_value(stored: Any) -> Any:
    if isinstance(stored, list) and len(stored) == len(POLICY_KEYS):
        return dict(zip(POLICY_KEYS, stored, strict=True))
    return stored


def decode_json(text: str) -> Any:
    """A JSON column's value (a run's state: most often empty, and read every step)."""
    return {} if text == "{}" else json.loads(text)


def encode_policy(policy: dict[str, Any]) -> str:
    """An activity row's retry policy, stored compactly."""
    global _last_policy
    last, _, text = _last_policy
    if policy is last:
        return text
    stored = encode_policy_value(policy)
    text = jsonvalue.dumps(stored)
    _last_policy = (policy, stored, text)
    return text


# The last policy `encode_policy` stored, with its stored value and text: an activity type's
# policy is one dict that no one changes (`ActivityOptions.retry_policy`), recorded by every
# activity of the type (its row and its ActivityScheduled event); held here, it stays that dict.
_last_policy: tuple[Any, Any, str] = (None, None, "")


def decode_policy(text: str) -> dict[str, Any]:
    """An activity row's retry policy, whichever form it was stored in."""
    return decode_policy_value(json.loads(text))
