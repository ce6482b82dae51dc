"""Worker logs: one line per event on stderr, as text (coloured on a terminal) or JSON."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from wfctl import clock
from wfctl.lang.handlers import format_traceback
from wfctl.vocabulary import EVENT_TYPES

LOGGER = logging.getLogger("wfctl")
_WARN_EVENTS = re.compile(r"(TimedOut|Failed|DeadlineExceeded|RetryScheduled|Terminated|Lost)$")
# At info, an activity step logs one line: how its attempt ended.
_DEBUG_EVENTS = re.compile(
    r"^(WorkflowTask(Scheduled|Started|Completed)|Activity(Scheduled|Started)"
    r"|ActivityHeartbeatRecorded|TimerScheduled)$"
)
_FIELDS = (
    "step", "attempt", "failure_category", "timeout_kind", "limit_kind", "reason", "signal",
    "exception_class", "message",
    "child_instance_id", "policy", "deadline_at", "retry_available_at", "handler", "cause",
    "next_attempt_at",
    "handler_error", "worker_id", "new_run_number",
)
# A text value shown as it is (anything else is shown as JSON).
_BARE = re.compile(r"[\w.:/+-]+")
_LEVEL_NAMES = {level: logging.getLevelName(level) for level in
                (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)}
_COLOURS = {"DEBUG": "\x1b[2m", "INFO": "\x1b[36m", "WARNING": "\x1b[33m", "ERROR": "\x1b[31m"}


@functools.cache
def snake(name: str) -> str:
    """WorkflowDeadlineExceeded -> workflow_deadline_exceeded."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _stamp(created: float) -> str:
    """A record's instant as ISO 8601 UTC text with milliseconds (`2026-12-02T09:04:32.555Z`);
    the text of its second is made once for all the lines in it, and the whole text once for
    the lines of one instant (a commit's)."""
    global _second, _last_stamp
    if created == _last_stamp[0]:
        return _last_stamp[1]
    second = int(created)
    # Rounded to the microsecond first, as `datetime.fromtimestamp` does.
    micros = round((created - second) * 1e6)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    cached, text = _second
    if second != cached:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = (second, text)
    stamp = f"{text}.{micros // 1000:03d}Z"
    _last_stamp = (created, stamp)
    return stamp


# The handler `configure` gave the logger.
_configured: logging.StreamHandler | None = None  # type: ignore[type-arg]
# The last second `_stamp` wrote, and its text; the last instant, and its text.
_second: tuple[int | None, str] = (None, "")
_last_stamp: tuple[float | None, str] = (None, "")


class _TextFormatter(logging.Formatter):
    def __init__(self, colour: bool) -> None:
        super().__init__()
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "fields", {})
        if record.exc_info:
            fields = {**fields, **_exception(record)}
        return self.line(record.levelname, record.getMessage(), record.created, fields)

    def line(self, level: str, event: str, created: float, fields: dict[str, Any]) -> str:
        """An event's line: its instant, level and name, then its fields."""
        if self.colour:
            level = f"{_COLOURS.get(level, '')}{level}\x1b[0m"
        parts = [_stamp(created), f"{level:<7}", event]
        for key, value in fields.items():
            if value is None:
                continue
            kind = type(value)
            # The common kinds first, by their exact type (a line a step).
            if kind is str:
                shown = value if _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)
            elif kind is int:
                shown = str(value)
            elif isinstance(value, str) and _BARE.fullmatch(value):
                shown = value
            elif isinstance(value, int | float):
                shown = str(value)
            else:
                shown = json.dumps(value, ensure_ascii=False)
            parts.append(f"{key}={shown}")
        return " ".join(parts)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document = self.document(record.levelname, record.getMessage(), record.created,
                                 getattr(record, "fields", {}))
        document.update(_exception(record))
        if record.exc_info:
            document["traceback"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=False, default=str)

    def document(self, level: str, event: str, created: float,
                 fields: dict[str, Any]) -> dict[str, Any]:
        at = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        return {"time": at, "level": level.lower(), "event": event, **fields}

    def line(self, level: str, event: str, created: float, fields: dict[str, Any]) -> str:
        """An event's line: one JSON document."""
        return json.dumps(self.document(level, event, created, fields), ensure_ascii=False,
                          default=str)


def _exception(record: logging.LogRecord) -> dict[str, str]:
    """An unexpected error's class and message, kept on the event's one line."""
    if not record.exc_info or record.exc_info[1] is None:
        return {}
    error = record.exc_info[1]
    return {"exception": f"{type(error).__name__}: {error}"}


def configure(level: str = "info", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        colour = sys.stderr.isatty() and "NO_COLOR" not in os.environ
        handler.setFormatter(_TextFormatter(colour))
    LOGGER.handlers[:] = [handler]
    LOGGER.setLevel(level.upper())
    LOGGER.propagate = False
    global _configured
    _configured = handler


def event(name: str, level: int = logging.INFO, **fields: Any) -> None:
    if LOGGER.isEnabledFor(level):
        _emit(level, name, fields)


def _emit(level: int, name: str, fields: dict[str, Any]) -> None:
    """Log one event with its fields."""
    _emit_all([(level, name, fields)])


def _emit_all(lines: list[tuple[int, str, dict[str, Any]]]) -> None:
    """Log events (level, name, fields), in order (the caller's source line is not looked up:
    no line shows it, and the lookup was most of a record's cost). While the logger has only
    the handler `configure` gave it, and no filter, their lines are written to it in one write,
    as its `emit` would write each, without a record: a worker writes one a step, the steps
    of a transaction together."""
    handler, handlers = _configured, LOGGER.handlers
    if handler is not None and len(handlers) == 1 and handlers[0] is handler \
            and not LOGGER.filters and not handler.filters \
            and type(formatter := handler.formatter) in (_TextFormatter, _JsonFormatter):
        assert isinstance(formatter, _TextFormatter | _JsonFormatter)
        created = time.time()
        text = "".join([formatter.line(_LEVEL_NAMES.get(level) or logging.getLevelName(level),
                                        name, created, fields) + "\n"
                         for level, name, fields in lines])
        with handler.lock:  # type: ignore[union-attr]
            try:
                handler.stream.write(text)
                handler.stream.flush()
                return
            except Exception:  # the records' way reports it (`Handler.handleError`)
                pass
    for level, name, fields in lines:
        record = logging.LogRecord(LOGGER.name, level, "", 0, name, None, None)
        record.fields = fields
        LOGGER.handle(record)


def failure(name: str, error: BaseException, **fields: Any) -> None:
    """An unexpected error, still on one line: its class and message, and its traceback (the
    last frames) as a field."""
    event(name, logging.ERROR, **fields, exception=f"{type(error).__name__}: {error}",
          traceback=format_traceback(error))


@functools.cache
def _event_level(event_type: str) -> int:
    """The level an event of this type is logged at."""
    if _WARN_EVENTS.search(event_type):
        return logging.WARNING
    if _DEBUG_EVENTS.match(event_type):
        return logging.DEBUG
    return logging.INFO


def unlogged_event_types() -> frozenset[str]:
    """The event types `history_events` logs nothing of at the logger's level (set it first):
    a transaction need not keep its events of these types for it."""
    return frozenset(name for name in EVENT_TYPES if not LOGGER.isEnabledFor(_event_level(name)))


def history_events(events: list[dict[str, Any]]) -> None:
    """Log the events a transaction appended: the worker's log is a projection of history.

    Above debug, a step is one line: the completion of an activity that completes its
    workflow in the same transaction is logged as `workflow_completed`, with the step and
    attempt that ended it."""
    held: tuple[int, dict[str, Any]] | None = None
    merging = not LOGGER.isEnabledFor(logging.DEBUG)
    lines: list[tuple[int, str, dict[str, Any]]] = []
    for item in events:
        name = item["event_type"]
        level = _event_level(name)
        if not LOGGER.isEnabledFor(level):
            continue
        fields = _line_fields(item)
        if held is not None:
            held_level, held_fields = held
            held = None
            if name == "WorkflowCompleted" and held_fields["instance"] == fields["instance"] \
                    and held_fields["run"] == fields["run"]:
                lines.append((level, "workflow_completed", {**held_fields, **fields}))
                continue
            lines.append((held_level, "activity_completed", held_fields))
        if merging and name == "ActivityCompleted":
            held = (level, fields)
            continue
        lines.append((level, snake(name), fields))
    if held is not None:
        lines.append((held[0], "activity_completed", held[1]))
    if lines:
        _emit_all(lines)


def _line_fields(item: dict[str, Any]) -> dict[str, Any]:
    """An appended event's fields on its log line: its instance and run, then the attributes
    `_FIELDS` names that it has."""
    attributes = item["attributes"]
    failure = attributes.get("failure")
    if type(failure) is dict:
        # A retried attempt's exception, which its event holds apart (the last one's event,
        # ActivityFailed, holds it as its own attributes): the line names it alike.
        attributes = {**attributes, **{key: failure.get(key)
                                       for key in ("exception_class", "message")}}
    fields = {"instance": item["workflow_instance_id"], "run": item["run_number"]}
    for key in _shown(tuple(attributes)):
        value = attributes[key]
        if value is not None:
            # An instant is appended as a datetime; history and the log show it as ISO text.
            fields[key] = clock.iso(value) if isinstance(value, datetime) else value
    return fields


@functools.lru_cache(maxsize=256)
def _shown(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Of an event's attribute names, those its log line shows, in `_FIELDS`'s order."""
    return tuple(key for key in _FIELDS if key in keys)
