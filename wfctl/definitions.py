"""workflows.yaml -> frozen dataclasses; every error names file:line, the key path and what was expected."""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from wfctl import durations
from wfctl.errors import DefinitionError, brief
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
        """The shape `describe --json` shows under `retry_policy`."""
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

    def signals(self) -> tuple[str, ...]:
        """The names its `wait_for_signal` steps wait for, at any depth, each once, sorted."""
        return tuple(sorted({part.signal for step in self.steps for part in (step, *step.branches)
                             if part.kind == "wait_for_signal" and part.signal is not None}))

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

    def get(self, name: str) -> WorkflowType | None:
        return self.types.get(name)

    def handlers(self) -> Iterator[tuple[str, str, int]]:
        """(handler, key path, line) of every activity and on_deadline handler."""
        for wf in self.types.values():
            if wf.on_deadline:
                yield wf.on_deadline, f"workflows.{wf.name}.on_deadline", wf.line
            for index, step in enumerate(wf.steps):
                where = f"workflows.{wf.name}.steps[{index}]"
                for sub_index, sub in enumerate(step.branches or (step,)):
                    if sub.handler:
                        path = f"{where}.parallel[{sub_index}]" if step.branches else where
                        yield sub.handler, path, sub.line


def load(path: str | os.PathLike[str]) -> Definitions:
    """Read and validate a definitions file."""
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
    return parse(source, shown)


def parse(source: str, path: str = "workflows.yaml") -> Definitions:
    """Validate definitions text; `path` is only used in messages."""
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
    return parser.definitions(_Node(parser, root, ""), source)


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
        return DefinitionError(f"{self.parser.file}:{self.line}: {where}{message}")

    def warn(self, message: str) -> None:
        self.parser.warnings.append(f"{self.parser.file}:{self.line}: {self.path}: {message}")

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
            if key in result:
                raise child.fail("duplicate key")
            if allowed and key not in allowed:
                raise child.fail(f"unknown key (expected one of: {', '.join(allowed)})")
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
    def __init__(self, file: str, loader: yaml.SafeLoader) -> None:
        self.file = file
        self.loader = loader
        self.warnings: list[str] = []

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
        top = root.mapping(("version", "defaults", "limits", "workflows"), "sections")
        if "version" not in top:
            raise root.fail("version: missing (expected version: 1)")
        version = top["version"].value()
        if isinstance(version, bool) or version != 1:
            raise top["version"].fail(f"expected 1 (got {brief(version)})")
        type_defaults = self.defaults(top.get("defaults"))
        limits = self.limits(top.get("limits"))
        if "workflows" not in top:
            raise root.fail("workflows: missing (expected a mapping of workflow types)")
        workflows = top["workflows"].mapping((), "workflow types")
        if not workflows:
            raise top["workflows"].fail("expected at least one workflow type")
        types = {name: self.workflow(name, node, type_defaults) for name, node in workflows.items()}
        for wf in types.values():
            self.check_children(wf, types, workflows[wf.name])
        return Definitions(
            path=self.file,
            source=source,
            # 64 bits name a definitions text among those one database ever sees; every instance
            # row carries it, so it is kept short.
            digest=hashlib.sha256(source.encode()).hexdigest()[:16],
            types=types,
            limits=limits,
            warnings=tuple(self.warnings),
        )

    def defaults(self, node: _Node | None) -> _TypeDefaults:
        if node is None:
            return _TypeDefaults()
        keys = node.mapping(("activity", "workflow_task_timeout", "retry", "retention"),
                            "defaults")
        options = ActivityOptions()
        if "activity" in keys:
            options = self.activity_options(keys["activity"], options, allowed=_OPTION_KEYS)
        task_timeout = keys["workflow_task_timeout"].timeout() if "workflow_task_timeout" in keys \
            else 10.0
        return _TypeDefaults(
            activity=options,
            workflow_task_timeout=task_timeout,
            retry=self.retry(keys["retry"]) if "retry" in keys else None,
            retention=keys["retention"].timeout() if "retention" in keys else None,
        )

    def limits(self, node: _Node | None) -> Limits:
        values = dict(LIMIT_DEFAULTS)
        if node is not None:
            for key, child in node.mapping(tuple(LIMIT_DEFAULTS), "limits").items():
                values[key] = _size(child) if key == "payload_size" else child.integer(0)
        for key in LIMIT_DEFAULTS:
            env = os.environ.get(f"WFCTL_LIMIT_{key.upper()}")
            if env is not None:
                values[key] = _env_limit(key, env)
        return Limits(**values)

    def workflow(self, name: str, node: _Node, type_defaults: _TypeDefaults) -> WorkflowType:
        if not TYPE_NAME.match(name):
            raise node.fail("workflow type names use letters, digits, '_', '.' and '-'")
        keys = node.mapping(_WORKFLOW_KEYS, "workflow settings")
        defaults = type_defaults.activity
        if "steps" not in keys:
            raise node.fail("steps: missing (expected a list of steps)")
        steps = tuple(
            self.step(item, defaults, STEP_KINDS)
            for item in keys["steps"].sequence("steps")
        )
        if not steps:
            raise keys["steps"].fail("expected at least one step")
        for index, step in enumerate(steps[:-1]):
            if step.kind == "continue_as_new":
                raise keys["steps"].sequence("steps")[index].fail(
                    "continue_as_new must be the last step"
                )
        child_policy = "abandon"
        if "child_policy" in keys:
            child_policy = keys["child_policy"].text(
                re.compile("|".join(CHILD_POLICIES)),
                "one of terminate, request_cancel, abandon",
            )
        on_deadline = None
        if "on_deadline" in keys:
            on_deadline = keys["on_deadline"].text(HANDLER, "a handler as 'module:function'")
        return WorkflowType(
            name=name,
            steps=steps,
            execution_timeout=_opt(keys, "execution_timeout"),
            run_timeout=_opt(keys, "run_timeout"),
            deadline=_opt(keys, "deadline"),
            on_deadline=on_deadline,
            child_policy=child_policy,
            workflow_task_timeout=keys["workflow_task_timeout"].timeout()
            if "workflow_task_timeout" in keys
            else type_defaults.workflow_task_timeout,
            retry=self.retry(keys["retry"]) if "retry" in keys else type_defaults.retry,
            retention=keys["retention"].timeout() if "retention" in keys
            else type_defaults.retention,
            line=node.line,
        )

    def step(self, node: _Node, defaults: ActivityOptions, kinds: tuple[str, ...]) -> Step:
        if not node.is_mapping():
            raise node.fail(f"expected a step: a mapping with one of {', '.join(kinds)}")
        present = [
            key for key in (self.construct(node, k) for k, _ in node.node.value)
            if isinstance(key, str) and key in STEP_KINDS
        ]
        if len(present) != 1 or present[0] not in kinds:
            found = ", ".join(present) if present else "none"
            raise node.fail(f"expected exactly one of {', '.join(kinds)} (found {found})")
        kind = present[0]
        allowed = _STEP_KEYS[kind]
        keys = node.mapping(allowed, f"{kind} step settings")
        main = keys[kind]
        name = keys["name"].text() if "name" in keys else None
        if kind == "activity":
            handler = main.text(HANDLER, "a handler as 'module:function'")
            options = self.activity_options(node, defaults, allowed=allowed)
            return Step(kind, name or handler.split(":")[1], node.line, handler=handler,
                        options=options)
        if kind == "delay":
            return Step(kind, name or f"delay {durations.format(main.interval())}", node.line,
                        duration=main.interval())
        if kind == "wait_for_signal":
            signal = main.text(expected="a signal name")
            timeout = keys["timeout"].timeout() if "timeout" in keys else None
            return Step(kind, name or signal, node.line, signal=signal, timeout=timeout)
        if kind == "parallel":
            branches = tuple(
                self.step(item, defaults, BRANCH_KINDS) for item in main.sequence("branches")
            )
            if not branches:
                raise main.fail("expected at least one branch")
            return Step(kind, name or "parallel", node.line, branches=branches)
        if kind == "workflow":
            child = main.text(TYPE_NAME, "a workflow type name")
            return Step(kind, name or child, node.line, workflow_type=child)
        cont = main.mapping(("while",), "continue_as_new settings")
        if "while" not in cont:
            raise main.fail("while: missing (expected the state key that keeps the loop going)")
        return Step(kind, name or "continue_as_new", node.line,
                    while_key=cont["while"].text(expected="a state key"))

    def activity_options(
        self, node: _Node, base: ActivityOptions, allowed: tuple[str, ...]
    ) -> ActivityOptions:
        keys = node.mapping(allowed, "activity options")
        values: dict[str, Any] = {}
        for key in ("schedule_to_start", "start_to_close", "schedule_to_close", "heartbeat"):
            if key in keys:
                values[key] = keys[key].timeout()
        if "max_attempts" in keys:
            values["max_attempts"] = keys["max_attempts"].integer(1, MAX_ATTEMPTS)
        if "backoff" in keys:
            values["backoff"] = self.backoff(keys["backoff"])
        if "non_retryable" in keys:
            names = [
                item.text(EXCEPTION_NAME, "an exception class name")
                for item in keys["non_retryable"].sequence("exception class names")
            ]
            values["non_retryable"] = tuple(names)
        if "queue" in keys:
            values["queue"] = keys["queue"].text(QUEUE_NAME, "a queue name")
        options = ActivityOptions(**{**base.__dict__, **values})
        s2s, s2c, total = options.schedule_to_start, options.start_to_close, \
            options.schedule_to_close
        if total is not None and s2s is not None and s2c is not None and total > s2s + s2c:
            node.warn(
                f"schedule_to_close ({durations.format(total)}) exceeds schedule_to_start + "
                f"start_to_close ({durations.format(s2s + s2c)})"
            )
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
        backoff = self.backoff(keys["backoff"]) if "backoff" in keys else Backoff()
        when = RETRY_CAUSES
        if "when" in keys:
            items = keys["when"].sequence("causes")
            if not items:
                raise keys["when"].fail(f"expected at least one of {', '.join(RETRY_CAUSES)}")
            names: list[str] = []
            for item in items:
                cause = item.value()
                if cause not in RETRY_CAUSES:
                    raise item.fail(f"expected one of {', '.join(RETRY_CAUSES)} "
                                    f"(got {brief(cause)})")
                if cause in names:
                    raise item.fail(f"{cause} is listed twice")
                names.append(cause)
            when = tuple(names)
        return WorkflowRetryPolicy(max_attempts=max_attempts, backoff=backoff, when=when)

    def check_children(self, wf: WorkflowType, types: dict[str, WorkflowType],
                       node: _Node) -> None:
        for index, step in enumerate(wf.steps):
            for sub_index, sub in enumerate(step.branches or (step,)):
                if sub.kind == "workflow" and sub.workflow_type not in types:
                    path = f"workflows.{wf.name}.steps[{index}]"
                    if step.branches:
                        path += f".parallel[{sub_index}]"
                    raise DefinitionError(
                        f"{self.file}:{sub.line}: {path}.workflow: unknown workflow type "
                        f"{sub.workflow_type!r} (defined: {', '.join(sorted(types))})"
                    )


@dataclass(frozen=True)
class _TypeDefaults:
    """What `defaults:` gives every workflow type that does not set its own."""

    activity: ActivityOptions = field(default_factory=ActivityOptions)
    workflow_task_timeout: float | None = 10.0
    retry: WorkflowRetryPolicy | None = None
    retention: float | None = None


_OPTION_KEYS = (
    "schedule_to_start", "start_to_close", "schedule_to_close", "heartbeat", "max_attempts",
    "backoff", "non_retryable", "queue",
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


def _opt(keys: dict[str, _Node], key: str) -> float | None:
    return keys[key].timeout() if key in keys else None


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
