"""workflows.yaml -> frozen dataclasses; every error names file:line, the key path and what was expected."""

from __future__ import annotations

import difflib
import functools
import hashlib
import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

import yaml

from wfctl.errors import DefinitionError, brief
from wfctl.lang import durations, schedule_spec
from wfctl.lang.schedule_spec import Schedule
from wfctl.vocabulary import CHILD_POLICIES, RETRY_CAUSES

STEP_KINDS = ("activity", "delay", "wait_for_signal", "parallel", "workflow", "continue_as_new")
BRANCH_KINDS = ("activity", "workflow")
HANDLER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
TYPE_NAME = re.compile(r"[A-Za-z0-9_][\w.-]*")
QUEUE_NAME = re.compile(r"[\w.-]+")
EXCEPTION_NAME = re.compile(r"[A-Za-z_][\w.]*")
MAX_ATTEMPTS = 1000
MAX_COEFFICIENT = 100
# Bounds far beyond any real definitions file, so that no document can exhaust the interpreter's
# recursion, memory or time: nesting, values after expanding aliases, and the file's size.
MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_FILE_SIZE = 10 * 1024 * 1024
LIMIT_DEFAULTS = {
    "payload_size": 2 * 1024 * 1024,
    "pending_activity_count": 2000,
    "pending_signal_count": 5000,
    "history_size": 50_000,
    "child_depth": 64,
}
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(b|kb|kib|mb|mib|gb|gib)?", re.IGNORECASE)
# Retention shorter than this deletes an instance about as soon as anyone could look at it.
SHORT_RETENTION = 60
_T = TypeVar("_T")
_SIZE_UNITS = {
    None: 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2,
    "gb": 1000**3, "gib": 1024**3,
}


@dataclass(frozen=True)
class Backoff:
    """Waits between attempts: an explicit list, or initial * coefficient^n capped at maximum."""

    initial: float = 1.0
    coefficient: float = 2.0
    maximum: float | None = 60.0
    explicit: tuple[float, ...] | None = None

    def schedule(self, max_attempts: int) -> list[float]:
        """The waits that happen: one after each failed attempt but the last, `max_attempts -
        1` in all (an explicit list shorter than that repeats its last wait)."""
        waits: list[float] = []
        for n in range(max_attempts - 1):
            if self.explicit is not None:
                waits.append(self.explicit[min(n, len(self.explicit) - 1)])
                continue
            try:
                wait = self.initial * self.coefficient**n
            except OverflowError:
                wait = math.inf
            waits.append(min(wait, self.maximum) if self.maximum is not None else wait)
        return waits

    def wait_after(self, attempt: int, max_attempts: int) -> float:
        """How long to wait after attempt number `attempt` (1-based) failed."""
        waits = self.schedule(max_attempts)
        return waits[min(attempt, len(waits)) - 1] if waits else 0.0


@dataclass(frozen=True)
class ActivityOptions:
    schedule_to_start: float | None = None
    start_to_close: float | None = None
    schedule_to_close: float | None = None
    heartbeat: float | None = None
    max_attempts: int = 3
    backoff: Backoff = field(default_factory=Backoff)
    non_retryable: tuple[str, ...] = ()
    queue: str = "default"

    def retry_policy(self) -> dict[str, Any]:
        """The shape `describe --json` shows under `retry_policy`, worked out once: each
        activity scheduled records this one dict, which no one changes (so that its stored
        forms are made once too: `codec.encode_policy`)."""
        return self._retry_policy

    @functools.cached_property
    def _retry_policy(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "backoff_seconds": [
                durations.whole_seconds(w) for w in self.backoff.schedule(self.max_attempts)
            ],
            "schedule_to_start_timeout": durations.whole_seconds(self.schedule_to_start),
            "start_to_close_timeout": durations.whole_seconds(self.start_to_close),
            "schedule_to_close_timeout": durations.whole_seconds(self.schedule_to_close),
            "heartbeat_timeout": durations.whole_seconds(self.heartbeat),
            "non_retryable": list(self.non_retryable),
        }


@dataclass(frozen=True)
class WorkflowRetryPolicy:
    """A type's `retry:`: how many runs of a failed step in all, the waits, what it answers."""

    max_attempts: int
    backoff: Backoff = field(default_factory=Backoff)
    when: tuple[str, ...] = RETRY_CAUSES

    def delay_after(self, attempt: int) -> float:
        """How long to wait after attempt number `attempt` (1-based) failed."""
        return self.backoff.wait_after(attempt, self.max_attempts)

    def view(self) -> dict[str, Any]:
        """The shape `describe --json` shows under `retry_policy`."""
        return {
            "max_attempts": self.max_attempts,
            "backoff_seconds": [
                durations.whole_seconds(w) for w in self.backoff.schedule(self.max_attempts)
            ],
            "when": list(self.when),
        }


@dataclass(frozen=True)
class Step:
    """One entry of `steps:`; `kind` says which fields matter."""

    kind: str
    name: str
    line: int
    handler: str | None = None
    options: ActivityOptions | None = None
    duration: float | None = None
    signal: str | None = None
    timeout: float | None = None
    branches: tuple[Step, ...] = ()
    workflow_type: str | None = None
    while_key: str | None = None
    # Where it is written: `workflows.T.steps[2]`, `workflows.T.steps[3].parallel[0]`.
    path: str = ""


@dataclass(frozen=True)
class WorkflowType:
    name: str
    steps: tuple[Step, ...]
    execution_timeout: float | None = None
    run_timeout: float | None = None
    deadline: float | None = None
    on_deadline: str | None = None
    child_policy: str = "abandon"
    workflow_task_timeout: float | None = 10.0
    retry: WorkflowRetryPolicy | None = None
    # How long a closed instance is kept before housekeeping deletes it; None: forever.
    retention: float | None = None
    line: int = 0
    on_deadline_line: int = 0

    def signals(self) -> tuple[str, ...]:
        """The names its `wait_for_signal` steps wait for, at any depth, each once, sorted."""
        return tuple(sorted({part.signal for step in self.steps for part in (step, *step.branches)
                             if part.kind == "wait_for_signal" and part.signal is not None}))

    @functools.cached_property
    def sets_timers(self) -> bool:
        """Whether a run of it can have a timer: a delay, a signal wait with a timeout, or the
        wait of its retry policy."""
        return self.retry is not None or any(
            part.kind == "delay" or (part.kind == "wait_for_signal" and part.timeout is not None)
            for step in self.steps for part in (step, *step.branches))

    @functools.cached_property
    def starts_children(self) -> bool:
        """Whether any of its steps (or their branches) starts a child workflow."""
        return any(part.kind == "workflow" for step in self.steps
                   for part in (step, *step.branches))

    def first_queue(self) -> str | None:
        """The queue of the first activity the workflow runs (in a parallel step, its first
        branch's), where its work starts; None when it runs no activity."""
        for step in self.steps:
            for part in (step, *step.branches):
                if part.kind == "activity" and part.options is not None:
                    return part.options.queue
        return None


@dataclass(frozen=True)
class Limits:
    payload_size: int = LIMIT_DEFAULTS["payload_size"]
    pending_activity_count: int = LIMIT_DEFAULTS["pending_activity_count"]
    pending_signal_count: int = LIMIT_DEFAULTS["pending_signal_count"]
    history_size: int = LIMIT_DEFAULTS["history_size"]
    child_depth: int = LIMIT_DEFAULTS["child_depth"]


@dataclass(frozen=True)
class Definitions:
    path: str
    source: str
    digest: str
    types: dict[str, WorkflowType]
    limits: Limits
    warnings: tuple[str, ...] = ()
    # Every error found, each as `file:line: path: what`, in the file's order; only a file read
    # with `keep_errors` has any (otherwise the first error is raised).
    errors: tuple[str, ...] = ()
    # The schedules the file declares (SPEC §12), by name.
    schedules: dict[str, Schedule] = field(default_factory=dict)

    def get(self, name: str) -> WorkflowType | None:
        return self.types.get(name)

    def handlers(self, workflow_type: str | None = None) -> Iterator[tuple[str, str, int]]:
        """(handler, key path, line) of every activity and on_deadline handler (of one type,
        when given): parallel branches included."""
        for wf in self.types.values():
            if workflow_type is not None and wf.name != workflow_type:
                continue
            if wf.on_deadline:
                yield wf.on_deadline, f"workflows.{wf.name}.on_deadline", wf.on_deadline_line
            for step in wf.steps:
                for sub in step.branches or (step,):
                    if sub.handler:
                        yield sub.handler, sub.path, sub.line


def load(path: str | os.PathLike[str], *, keep_errors: bool = False) -> Definitions:
    """Read and validate a definitions file; see `parse` for `keep_errors`."""
    shown = str(path)
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_SIZE + 1)
    except FileNotFoundError:
        raise DefinitionError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise DefinitionError(f"{shown} is a folder, not a definitions file") from None
    except OSError as exc:
        raise DefinitionError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_SIZE:
        raise DefinitionError(f"{shown}: larger than {MAX_FILE_SIZE // (1024 * 1024)} MiB")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DefinitionError(
            f"{shown}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    return parse(source, shown, keep_errors=keep_errors)


def parse(source: str, path: str = "workflows.yaml", *, keep_errors: bool = False) -> Definitions:
    """Validate definitions text; `path` is only used in messages.

    Every error is found, not only the first: DefinitionError's `errors` lists them all. With
    `keep_errors`, definitions that were read despite errors come back with them in `errors`
    (only a file that cannot be read as a mapping of sections still raises).
    """
    if not _is_unicode(source):
        raise DefinitionError(f"{path}: the text holds a lone surrogate (not valid Unicode)")
    loader = None
    try:
        loader = _Loader(source)
        root = loader.get_single_node()
        if root is not None:
            _check_expansion(root)
    except yaml.YAMLError as exc:
        line, problem = _yaml_problem(source, exc)
        raise DefinitionError(f"{path}:{line}: invalid YAML: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        raise DefinitionError(f"{path}:1: the file is empty (expected version: 1 and workflows:)")
    parser = _Parser(path, loader)
    found: Definitions | None = None
    try:
        found = parser.definitions(_Node(parser, root, ""), source)
    except DefinitionError as exc:
        parser.record(exc)
    errors = parser.errors()
    if errors and (found is None or not keep_errors):
        first = errors[0]
        more = len(errors) - 1
        message = first if not more else \
            f"{first} (and {more} more error{'s' if more > 1 else ''}: wfctl validate lists them)"
        raise DefinitionError(message, line=parser.lines[0], errors=errors)
    assert found is not None
    return replace(found, errors=errors)


def unknown_key(key: str, known: tuple[str, ...], what: str = "key") -> str:
    """The complaint about a key that is not one of `known`: the closest known one when a
    typing slip explains it, else all of them."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"unknown {what} (did you mean {close[0]}?)"
    return f"unknown {what} (expected one of: {', '.join(known)})"


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def yaml_value(text: str) -> Any:
    """One YAML value read within the bounds of a definitions file (a duration mapping given on
    the command line); DefinitionError says what is wrong."""
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise DefinitionError(f"invalid YAML: {_yaml_problem(text, exc)[1]}") from None
    except Exception as exc:
        # As in _Parser.construct: an explicit tag on text it cannot read.
        raise DefinitionError(f"invalid value: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_problem(source: str, exc: yaml.YAMLError) -> tuple[int, str]:
    """The line and a one-line description of a YAML error."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = source.count("\n", 0, exc.position) + 1
        problem = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
    else:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
    return line, " ".join(problem.split())


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing nesting deeper than MAX_DEPTH before its recursive
    composer could exhaust the interpreter's stack."""

    def __init__(self, source: str) -> None:
        super().__init__(source)
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand it past MAX_VALUES values or MAX_DEPTH levels
    (a "billion laughs"), or that contains itself, before anything walks or prints it."""
    sizes: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)][0] for child in children)
            depth = 1 + max((sizes[id(child)][1] for child in children), default=0)
            if size > MAX_VALUES or depth > MAX_DEPTH:
                what = f"more than {MAX_VALUES} values" if size > MAX_VALUES \
                    else f"more than {MAX_DEPTH} levels deep"
                raise yaml.composer.ComposerError(
                    None, None, f"aliases expand the document to {what}", node.start_mark)
            sizes[key] = (size, depth)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a node that contains it", node.start_mark)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []




class _Node:
    """A YAML node with its key path, so that every complaint can say where it is."""

    def __init__(self, parser: _Parser, node: yaml.Node, path: str) -> None:
        self.parser = parser
        self.node = node
        self.path = path

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def fail(self, message: str) -> DefinitionError:
        where = f"{self.path}: " if self.path else ""
        return DefinitionError(f"{self.parser.file}:{self.line}: {where}{message}",
                               line=self.line)

    def warn(self, message: str) -> None:
        self.parser.warnings.append(
            (self.line, f"{self.parser.file}:{self.line}: {self.path}: {message}"))

    def value(self) -> Any:
        return self.parser.construct(self, self.node)

    def is_mapping(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    def mapping(self, allowed: tuple[str, ...], what: str) -> dict[str, _Node]:
        if not self.is_mapping():
            raise self.fail(f"expected a mapping of {what} (got {self._shown()})")
        result: dict[str, _Node] = {}
        for key_node, value_node in self.node.value:
            key = self.parser.construct(_Node(self.parser, key_node, self.path), key_node)
            if not isinstance(key, str):
                raise _Node(self.parser, key_node, self.path).fail(
                    f"keys must be text (got {brief(key)})"
                )
            if not _is_unicode(key):
                raise _Node(self.parser, key_node, self.path).fail(
                    f"key {key!r} holds a lone surrogate (not valid Unicode)")
            child_path = f"{self.path}.{key}" if self.path else key
            child = _Node(self.parser, value_node, child_path)
            # A duplicate or unknown key is reported and left out, so that the rest is checked.
            if key in result:
                self.parser.record(child.fail("duplicate key"))
            elif allowed and key not in allowed:
                self.parser.record(child.fail(unknown_key(key, allowed)))
            else:
                result[key] = child
        return result

    def sequence(self, what: str) -> list[_Node]:
        if not isinstance(self.node, yaml.SequenceNode):
            raise self.fail(f"expected a list of {what} (got {self._shown()})")
        return [
            _Node(self.parser, item, f"{self.path}[{index}]")
            for index, item in enumerate(self.node.value)
        ]

    def text(self, pattern: re.Pattern[str] | None = None, expected: str = "text") -> str:
        value = self.value()
        if not isinstance(value, str) or not value or (pattern and not pattern.fullmatch(value)):
            raise self.fail(f"expected {expected} (got {brief(value)})")
        if not _is_unicode(value):
            raise self.fail(f"expected {expected} (got {value!r}, a lone surrogate is not text)")
        return value

    def integer(self, minimum: int, maximum: int | None = None) -> int:
        value = self.value()
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum \
                or (maximum is not None and value > maximum):
            expected = f"of at least {minimum}" if maximum is None else f"from {minimum} to {maximum}"
            raise self.fail(f"expected a whole number {expected} (got {brief(value)})")
        return value

    def timeout(self) -> float | None:
        try:
            return durations.parse_timeout(self.value())
        except durations.DurationError as exc:
            raise self.fail(str(exc)) from None

    def interval(self, minimum: float = 0.001) -> float:
        try:
            return durations.parse_interval(self.value(), minimum=minimum)
        except durations.DurationError as exc:
            raise self.fail(str(exc)) from None

    def _shown(self) -> str:
        if isinstance(self.node, yaml.SequenceNode):
            return "a list"
        if isinstance(self.node, yaml.MappingNode):
            return "a mapping"
        return brief(self.value())


class _Parser:
    """Reads the document's nodes into definitions; an error in one value is recorded and the
    reading goes on with the next, so that one pass finds them all."""

    def __init__(self, file: str, loader: yaml.SafeLoader) -> None:
        self.file = file
        self.loader = loader
        self.warnings: list[tuple[int, str]] = []
        self._errors: dict[str, int] = {}
        # Every workflow type the file defines, read or not: what a child step may name.
        self.type_names: tuple[str, ...] = ()

    def record(self, exc: DefinitionError) -> None:
        """Keep an error (once: a mapping read twice reports its unknown keys once)."""
        for message in exc.errors:
            self._errors.setdefault(message, exc.line)

    def errors(self) -> tuple[str, ...]:
        """The errors recorded, in the file's order."""
        return tuple(sorted(self._errors, key=self._errors.__getitem__))

    @property
    def lines(self) -> list[int]:
        return sorted(self._errors.values())

    def recover(self, read: Callable[[], _T], default: _T) -> _T:
        """`read()`, or `default` once its error is recorded."""
        try:
            return read()
        except DefinitionError as exc:
            self.record(exc)
            return default

    def construct(self, at: _Node, node: yaml.Node) -> Any:
        """The Python value of a node; a value PyYAML cannot build is this file's error."""
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise at.fail(f"invalid value: {getattr(exc, 'problem', None) or exc}") from None
        except Exception as exc:
            # An explicit tag (!!timestamp, !!int, !!bool) on text it cannot read makes PyYAML's
            # constructors raise ValueError, KeyError or AttributeError rather than a YAMLError.
            raise at.fail(f"invalid value: {exc}") from None

    def definitions(self, root: _Node, source: str) -> Definitions:
        top = root.mapping(("version", "defaults", "limits", "workflows", "schedules"),
                           "sections")
        if "version" not in top:
            self.record(root.fail("version: missing (expected version: 1)"))
        else:
            version = top["version"].value()
            if isinstance(version, bool) or version != 1:
                self.record(top["version"].fail(f"expected 1 (got {brief(version)})"))
        type_defaults = self.recover(lambda: self.defaults(top.get("defaults")), _TypeDefaults())
        limits = self.recover(lambda: self.limits(top.get("limits")), Limits())
        if "workflows" not in top:
            raise root.fail("workflows: missing (expected a mapping of workflow types)")
        workflows = top["workflows"].mapping((), "workflow types")
        if not workflows:
            raise top["workflows"].fail("expected at least one workflow type")
        self.type_names = tuple(workflows)
        types = {}
        for name, node in workflows.items():
            wf = self.recover(lambda name=name, node=node: self.workflow(name, node,
                                                                         type_defaults), None)
            if wf is not None:
                types[name] = wf
        schedules = self.recover(lambda: self.schedules(top.get("schedules")), {})
        return Definitions(
            path=self.file,
            source=source,
            # 64 bits name a definitions text among those one database ever sees; every instance
            # row carries it, so it is kept short.
            digest=hashlib.sha256(source.encode()).hexdigest()[:16],
            types=types,
            limits=limits,
            schedules=schedules,
            warnings=tuple(warning for _, warning in sorted(self.warnings,
                                                             key=lambda warning: warning[0])),
        )

    def schedules(self, node: _Node | None) -> dict[str, Schedule]:
        if node is None:
            return {}
        found = {}
        for name, child in node.mapping((), "schedules").items():
            schedule = self.recover(lambda name=name, child=child: self.schedule(name, child),
                                    None)
            if schedule is not None:
                found[name] = schedule
        return found

    def schedule(self, name: str, node: _Node) -> Schedule:
        if not TYPE_NAME.fullmatch(name):
            raise node.fail("schedule names use letters, digits, '_', '.' and '-'")
        keys = node.mapping(_SCHEDULE_KEYS, "schedule settings")

        def spec_error(at: _Node, read: Callable[[], _T]) -> _T:
            try:
                return read()
            except schedule_spec.SpecError as exc:
                raise at.fail(str(exc)) from None

        if "workflow" not in keys:
            raise node.fail("workflow: missing (expected the workflow type it starts)")
        workflow = keys["workflow"].text(TYPE_NAME, "a workflow type")
        if workflow not in self.type_names:
            raise keys["workflow"].fail(f"unknown workflow type {workflow!r} (defined: "
                                        f"{', '.join(sorted(self.type_names))})")
        if ("cron" in keys) == ("every" in keys):
            raise node.fail("expected one of cron (five fields or @daily...) or every (a duration)")
        timezone = keys["timezone"].text() if "timezone" in keys else "UTC"
        # A zone's error is recorded, and the cron fields are still checked (in UTC).
        if self.recover(lambda: spec_error(keys.get("timezone", node),
                                                   lambda: schedule_spec.zone(timezone)),
                        None) is None:
            timezone = "UTC"
        if "cron" in keys:
            cron = keys["cron"].text(expected="a cron expression")
            spec = spec_error(keys["cron"], lambda: schedule_spec.TickSpec(cron, None, timezone))
        else:
            every = keys["every"].interval(minimum=1.0)
            spec = schedule_spec.TickSpec(None, every, timezone)
        values: dict[str, Any] = {}
        if "input" in keys:
            state = keys["input"].value()
            if not isinstance(state, dict):
                raise keys["input"].fail(f"expected a mapping (got {brief(state)})")
            values["input"] = state
        if "id" in keys:
            values["id_template"] = keys["id"].text(expected="an id template")
        template = values.get("id_template", schedule_spec.DEFAULT_ID)
        spec_error(keys.get("id", node), lambda: schedule_spec.check_template(template, name, spec))
        if "overlap" in keys:
            overlap = keys["overlap"].value()
            if overlap not in schedule_spec.OVERLAP_POLICIES:
                raise keys["overlap"].fail(
                    f"expected one of {', '.join(schedule_spec.OVERLAP_POLICIES)} "
                    f"(got {brief(overlap)})")
            values["overlap"] = overlap
        if "catchup_window" in keys:
            values["catchup_window"] = keys["catchup_window"].interval(minimum=0.0)
        if "jitter" in keys:
            values["jitter"] = keys["jitter"].interval(minimum=0.0)
        overrides = {key: keys[key].timeout() for key in ("execution_timeout", "run_timeout",
                                                         "deadline") if key in keys}
        if "paused" in keys:
            paused = keys["paused"].value()
            if not isinstance(paused, bool):
                raise keys["paused"].fail(f"expected true or false (got {brief(paused)})")
            values["paused"] = paused
        if "start_at" in keys:
            values["start_at"] = _instant(keys["start_at"])
        return Schedule(name=name, workflow=workflow, spec=spec, input=values.pop("input", {}),
                        overrides=overrides, line=node.line, **values)

    def defaults(self, node: _Node | None) -> _TypeDefaults:
        if node is None:
            return _TypeDefaults()
        keys = node.mapping(("activity", "workflow_task_timeout", "retry", "retention"),
                            "defaults")
        options = ActivityOptions()
        if "activity" in keys:
            options = self.recover(
                lambda: self.activity_options(keys["activity"], options, allowed=_OPTION_KEYS),
                options)
        task_timeout = self.recover(keys["workflow_task_timeout"].timeout, 10.0) \
            if "workflow_task_timeout" in keys else 10.0
        return _TypeDefaults(
            activity=options,
            workflow_task_timeout=task_timeout,
            retry=self.recover(lambda: self.retry(keys["retry"]), None) if "retry" in keys
            else None,
            retention=self.retention(keys["retention"]) if "retention" in keys else None,
        )

    def retention(self, node: _Node) -> float | None:
        retention = self.recover(node.timeout, None)
        if retention is not None and retention < SHORT_RETENTION:
            node.warn(f"retention ({durations.format(retention)}) is shorter than a minute: "
                      "a closed instance is deleted almost at once")
        return retention

    def limits(self, node: _Node | None) -> Limits:
        values = dict(LIMIT_DEFAULTS)
        if node is not None:
            for key, child in node.mapping(tuple(LIMIT_DEFAULTS), "limits").items():
                values[key] = self.recover(
                    lambda key=key, child=child: _size(child) if key == "payload_size"
                    else child.integer(0), values[key])
        for key in LIMIT_DEFAULTS:
            env = os.environ.get(f"WFCTL_LIMIT_{key.upper()}")
            if env is not None:
                values[key] = self.recover(lambda key=key, env=env: _env_limit(key, env),
                                           values[key])
        return Limits(**values)

    def workflow(self, name: str, node: _Node, type_defaults: _TypeDefaults) -> WorkflowType:
        if not TYPE_NAME.match(name):
            raise node.fail("workflow type names use letters, digits, '_', '.' and '-'")
        keys = node.mapping(_WORKFLOW_KEYS, "workflow settings")
        defaults = type_defaults.activity
        steps: list[tuple[_Node, Step]] = []
        if "steps" not in keys:
            self.record(node.fail("steps: missing (expected a list of steps)"))
        else:
            items = self.recover(lambda: keys["steps"].sequence("steps"), None)
            if items == []:
                self.record(keys["steps"].fail("expected at least one step"))
            for item in items or ():
                step = self.recover(lambda item=item: self.step(item, defaults, STEP_KINDS), None)
                if step is not None:
                    steps.append((item, step))
        for item, step in steps[:-1]:
            if step.kind == "continue_as_new":
                self.record(item.fail("continue_as_new must be the last step"))
        child_policy = "abandon"
        if "child_policy" in keys:
            child_policy = self.recover(lambda: keys["child_policy"].text(
                re.compile("|".join(CHILD_POLICIES)),
                "one of terminate, request_cancel, abandon",
            ), child_policy)
        on_deadline = None
        if "on_deadline" in keys:
            on_deadline = self.recover(
                lambda: keys["on_deadline"].text(HANDLER, "a handler as 'module:function'"), None)
        timeouts = {key: self.recover(keys[key].timeout, None) if key in keys else None
                    for key in ("execution_timeout", "run_timeout", "deadline")}
        if "on_deadline" in keys and "deadline" not in keys:
            keys["on_deadline"].warn("on_deadline is set but the type has no deadline: it runs "
                                     "only for instances started with --deadline")
        self.check_signal_waits(steps, timeouts["run_timeout"], timeouts["execution_timeout"])
        return WorkflowType(
            name=name,
            steps=tuple(step for _, step in steps),
            execution_timeout=timeouts["execution_timeout"],
            run_timeout=timeouts["run_timeout"],
            deadline=timeouts["deadline"],
            on_deadline=on_deadline,
            child_policy=child_policy,
            workflow_task_timeout=self.recover(keys["workflow_task_timeout"].timeout, None)
            if "workflow_task_timeout" in keys
            else type_defaults.workflow_task_timeout,
            retry=self.recover(lambda: self.retry(keys["retry"]), None) if "retry" in keys
            else type_defaults.retry,
            retention=self.retention(keys["retention"]) if "retention" in keys
            else type_defaults.retention,
            line=node.line,
            on_deadline_line=keys["on_deadline"].line if "on_deadline" in keys else 0,
        )

    @staticmethod
    def check_signal_waits(steps: list[tuple[_Node, Step]], run_timeout: float | None,
                           execution_timeout: float | None) -> None:
        """Warn about a signal wait's timeout that the run or execution timeout around it always
        cuts short (the shorter of the two)."""
        bounds = [(seconds, key) for seconds, key in ((run_timeout, "run_timeout"),
                                                      (execution_timeout, "execution_timeout"))
                  if seconds is not None]
        if not bounds:
            return
        bound, key = min(bounds)
        for item, step in steps:
            if step.kind == "wait_for_signal" and step.timeout is not None \
                    and step.timeout > bound:
                item.warn(f"the signal wait's timeout ({durations.format(step.timeout)}) is "
                          f"longer than {key} ({durations.format(bound)}): the {key} "
                          "fires first")

    def step(self, node: _Node, defaults: ActivityOptions, kinds: tuple[str, ...]) -> Step:
        return replace(self._step(node, defaults, kinds), path=node.path)

    def _step(self, node: _Node, defaults: ActivityOptions, kinds: tuple[str, ...]) -> Step:
        kind = self._step_kind(node, kinds)
        allowed = _STEP_KEYS[kind]
        keys = node.mapping(allowed, f"{kind} step settings")
        name = self.recover(keys["name"].text, None) if "name" in keys else None
        return self._STEP_PARSERS[kind](self, node, keys, name, defaults)

    def _step_kind(self, node: _Node, kinds: tuple[str, ...]) -> str:
        """The one step kind a step's mapping names, among `kinds`."""
        if not node.is_mapping():
            raise node.fail(f"expected a step: a mapping with one of {', '.join(kinds)}")
        written = [(self.construct(node, k), k) for k, _ in node.node.value]
        present = [key for key, _ in written if isinstance(key, str) and key in STEP_KINDS]
        if not present:
            # A step kind misspelt (`activty:`) is named as such, not as a step without a kind.
            for key, key_node in written:
                if isinstance(key, str) and difflib.get_close_matches(key, kinds, n=1,
                                                                      cutoff=0.6):
                    raise _Node(self, key_node, f"{node.path}.{key}").fail(
                        unknown_key(key, kinds, "step kind"))
        if len(present) != 1 or present[0] not in kinds:
            found = ", ".join(present) if present else "none"
            raise node.fail(f"expected exactly one of {', '.join(kinds)} (found {found})")
        return present[0]

    def _activity_step(self, node: _Node, keys: dict[str, _Node], name: str | None,
                       defaults: ActivityOptions) -> Step:
        handler = self.recover(
            lambda: keys["activity"].text(HANDLER, "a handler as 'module:function'"), None)
        options = self.activity_options(node, defaults, allowed=_STEP_KEYS["activity"])
        return Step("activity", name or (handler or ":activity").split(":")[1], node.line,
                    handler=handler, options=options)

    def _delay_step(self, node: _Node, keys: dict[str, _Node], name: str | None,
                    defaults: ActivityOptions) -> Step:
        duration = keys["delay"].interval()
        return Step("delay", name or f"delay {durations.format(duration)}", node.line,
                    duration=duration)

    def _signal_step(self, node: _Node, keys: dict[str, _Node], name: str | None,
                     defaults: ActivityOptions) -> Step:
        signal = self.recover(lambda: keys["wait_for_signal"].text(expected="a signal name"),
                              None)
        timeout = self.recover(keys["timeout"].timeout, None) if "timeout" in keys else None
        return Step("wait_for_signal", name or signal or "wait_for_signal", node.line,
                    signal=signal, timeout=timeout)

    def _parallel_step(self, node: _Node, keys: dict[str, _Node], name: str | None,
                       defaults: ActivityOptions) -> Step:
        main = keys["parallel"]
        items = main.sequence("branches")
        if not items:
            raise main.fail("expected at least one branch")
        branches = tuple(
            branch for branch in (
                self.recover(lambda item=item: self.step(item, defaults, BRANCH_KINDS), None)
                for item in items)
            if branch is not None)
        return Step("parallel", name or "parallel", node.line, branches=branches)

    def _workflow_step(self, node: _Node, keys: dict[str, _Node], name: str | None,
                       defaults: ActivityOptions) -> Step:
        main = keys["workflow"]
        child = main.text(TYPE_NAME, "a workflow type name")
        if child not in self.type_names:
            raise main.fail(f"unknown workflow type {child!r} "
                            f"(defined: {', '.join(sorted(self.type_names))})")
        return Step("workflow", name or child, node.line, workflow_type=child)

    def _continue_step(self, node: _Node, keys: dict[str, _Node], name: str | None,
                       defaults: ActivityOptions) -> Step:
        main = keys["continue_as_new"]
        cont = main.mapping(("while",), "continue_as_new settings")
        if "while" not in cont:
            raise main.fail("while: missing (expected the state key that keeps the loop going)")
        return Step("continue_as_new", name or "continue_as_new", node.line,
                    while_key=cont["while"].text(expected="a state key"))

    # How each step kind is read, after its keys were checked.
    _STEP_PARSERS: ClassVar[dict[str, Callable[..., Step]]] = {
        "activity": _activity_step, "delay": _delay_step, "wait_for_signal": _signal_step,
        "parallel": _parallel_step, "workflow": _workflow_step,
        "continue_as_new": _continue_step,
    }

    def activity_options(
        self, node: _Node, base: ActivityOptions, allowed: tuple[str, ...]
    ) -> ActivityOptions:
        keys = node.mapping(allowed, "activity options")
        values: dict[str, Any] = {}
        for key in _TIMEOUT_KEYS:
            if key in keys:
                values[key] = self.recover(keys[key].timeout, getattr(base, key))
        if "max_attempts" in keys:
            values["max_attempts"] = self.recover(
                lambda: keys["max_attempts"].integer(1, MAX_ATTEMPTS), base.max_attempts)
        if "backoff" in keys:
            values["backoff"] = self.recover(lambda: self.backoff(keys["backoff"]), base.backoff)
        if "non_retryable" in keys:
            values["non_retryable"] = self.recover(lambda: tuple(
                item.text(EXCEPTION_NAME, "an exception class name")
                for item in keys["non_retryable"].sequence("exception class names")
            ), base.non_retryable)
        if "queue" in keys:
            values["queue"] = self.recover(
                lambda: keys["queue"].text(QUEUE_NAME, "a queue name"), base.queue)
        options = ActivityOptions(**{**base.__dict__, **values})
        _check_timeouts(node, options, set(values))
        return options

    def backoff(self, node: _Node) -> Backoff:
        if isinstance(node.node, yaml.SequenceNode):
            waits = tuple(item.interval(minimum=0) for item in node.sequence("waits"))
            if not waits:
                raise node.fail("expected at least one wait")
            return Backoff(explicit=waits)
        keys = node.mapping(("initial", "coefficient", "max"), "backoff settings")
        initial = keys["initial"].interval(minimum=0) if "initial" in keys else 1.0
        coefficient = 2.0
        if "coefficient" in keys:
            coefficient = keys["coefficient"].value()
            if isinstance(coefficient, bool) or not isinstance(coefficient, int | float) \
                    or not 1 <= coefficient <= MAX_COEFFICIENT:
                raise keys["coefficient"].fail(
                    f"expected a number from 1 to {MAX_COEFFICIENT} (got {brief(coefficient)})"
                )
        maximum = keys["max"].interval(minimum=0) if "max" in keys else 60.0
        return Backoff(initial=initial, coefficient=float(coefficient), maximum=maximum)

    def retry(self, node: _Node) -> WorkflowRetryPolicy | None:
        """A `retry:` mapping; NONE (or null) turns off a policy the defaults set."""
        value = node.value() if not node.is_mapping() else {}
        if value is None or (isinstance(value, str) and value.strip().upper() == "NONE"):
            return None
        keys = node.mapping(("max_attempts", "backoff", "when"), "retry settings")
        if "max_attempts" not in keys:
            raise node.fail("max_attempts: missing (expected the number of attempts in all, "
                            "the first included)")
        max_attempts = keys["max_attempts"].integer(1, MAX_ATTEMPTS)
        backoff = self.recover(lambda: self.backoff(keys["backoff"]), Backoff()) \
            if "backoff" in keys else Backoff()
        when = self.recover(lambda: self.retry_causes(keys["when"]), RETRY_CAUSES) \
            if "when" in keys else RETRY_CAUSES
        return WorkflowRetryPolicy(max_attempts=max_attempts, backoff=backoff, when=when)

    def retry_causes(self, node: _Node) -> tuple[str, ...]:
        items = node.sequence("causes")
        if not items:
            raise node.fail(f"expected at least one of {', '.join(RETRY_CAUSES)}")
        names: list[str] = []
        for item in items:
            cause = item.value()
            if cause not in RETRY_CAUSES:
                raise item.fail(f"expected one of {', '.join(RETRY_CAUSES)} "
                                f"(got {brief(cause)})")
            if cause in names:
                raise item.fail(f"{cause} is listed twice")
            names.append(cause)
        return tuple(names)


@dataclass(frozen=True)
class _TypeDefaults:
    """What `defaults:` gives every workflow type that does not set its own."""

    activity: ActivityOptions = field(default_factory=ActivityOptions)
    workflow_task_timeout: float | None = 10.0
    retry: WorkflowRetryPolicy | None = None
    retention: float | None = None


_TIMEOUT_KEYS = ("schedule_to_start", "start_to_close", "schedule_to_close", "heartbeat")
_OPTION_KEYS = (
    "schedule_to_start", "start_to_close", "schedule_to_close", "heartbeat", "max_attempts",
    "backoff", "non_retryable", "queue",
)
_SCHEDULE_KEYS = (
    "workflow", "cron", "every", "timezone", "input", "id", "overlap", "catchup_window",
    "jitter", "execution_timeout", "run_timeout", "deadline", "paused", "start_at",
)
_WORKFLOW_KEYS = (
    "steps", "execution_timeout", "run_timeout", "deadline", "on_deadline", "child_policy",
    "workflow_task_timeout", "retry", "retention",
)
_STEP_KEYS = {
    "activity": ("activity", "name", *_OPTION_KEYS),
    "delay": ("delay", "name"),
    "wait_for_signal": ("wait_for_signal", "name", "timeout"),
    "parallel": ("parallel", "name"),
    "workflow": ("workflow", "name"),
    "continue_as_new": ("continue_as_new", "name"),
}


def _check_timeouts(node: _Node, options: ActivityOptions, set_here: set[str]) -> None:
    """Warn about activity timeouts that cannot be meant: one that can never fire because
    another always fires first. A schedule_to_close longer than one attempt is not one: it spans
    the retries, which is what it is for. Only where one of the two is set, so that a step does
    not repeat what its defaults were warned of."""
    def shown(seconds: float) -> str:
        return durations.format(seconds)

    s2s, s2c, total = options.schedule_to_start, options.start_to_close, \
        options.schedule_to_close
    heartbeat = options.heartbeat
    if heartbeat is not None and s2c is not None and set_here & {"heartbeat", "start_to_close"} \
            and heartbeat >= s2c:
        node.warn(f"heartbeat ({shown(heartbeat)}) is not shorter than start_to_close "
                  f"({shown(s2c)}): the heartbeat timeout can never fire")
    for key, seconds in (("schedule_to_start", s2s), ("start_to_close", s2c)):
        if seconds is not None and total is not None \
                and set_here & {key, "schedule_to_close"} and seconds >= total:
            node.warn(f"{key} ({shown(seconds)}) is not shorter than schedule_to_close "
                      f"({shown(total)}): it can never fire")


def _instant(node: _Node) -> datetime:
    """An instant with its offset (`2026-05-01T00:00:00+02:00`); YAML's own timestamps too."""
    value = node.value()
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            value = None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise node.fail("expected an ISO 8601 instant with its offset, e.g. "
                        "2026-05-01T00:00:00+02:00")
    return value.astimezone(UTC)


def _size(node: _Node) -> int:
    value = node.value()
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    size = _parse_size(value.strip()) if isinstance(value, str) else None
    if size is None:
        raise node.fail(
            f"expected a size such as 2MiB, 512KiB or a number of bytes (got {brief(value)})")
    return size


def _parse_size(text: str) -> int | None:
    """Bytes for '2MiB', '512 KiB', '1000'; None for anything else."""
    match = _SIZE.fullmatch(text)
    if not match:
        return None
    unit = match.group(2).lower() if match.group(2) else None
    size = float(match.group(1)) * _SIZE_UNITS[unit]
    return int(size) if math.isfinite(size) else None


def _env_limit(key: str, text: str) -> int:
    size = _parse_size(text.strip()) if key == "payload_size" else None
    if size is not None:
        return size
    if re.fullmatch(r"[0-9]+", text.strip()):
        return int(text.strip())
    raise DefinitionError(
        f"WFCTL_LIMIT_{key.upper()}: expected a whole number of at least 0 (got {text!r})"
    )
