"""The typer application: every command's options, help and completion; parse, call the Client,
render. No workflow logic lives here."""

from __future__ import annotations

import enum
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from wfctl import __version__, clock, jsonvalue
from wfctl.cli import batches, reads
from wfctl.cli.reads import fail as _fail
from wfctl.cli.reads import print_json as _print_json
from wfctl.cli.reads import usage as _usage
from wfctl.cli.schedule_commands import (
    SCHEDULE_COMMANDS,
    schedules_command,
    show_validated_schedules,
    validated_schedules,
)
from wfctl.client import Client
from wfctl.errors import DefinitionError, WfctlError
from wfctl.lang import durations
from wfctl.ops.systemd import ENVIRONMENT_FILE
from wfctl.vocabulary import EVENT_TYPES, INSTANCE_STATUSES

# Each command imports what only it needs (rich to render, YAML, the worker) inside its body, so
# that no command waits for modules it does not use.


class _Commands(TyperGroup):
    """Translates wfctl's errors once, at the edge: one `Error:` line on stderr, exit 1; and
    Ctrl-C into exit 130, as the fast path does, so every follow or wait mode ends alike."""

    def get_params(self, ctx: typer.Context) -> list[Any]:
        # typer adds its completion options after the group is built, with help of their own.
        params = super().get_params(ctx)
        for param in params:
            if param.name in COMPLETION_HELP:
                param.help = COMPLETION_HELP[param.name]
        return params

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            _complete_for_a_named_shell(ctx.info_name or "wfctl", args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except WfctlError as exc:
            sys.stderr.write(f"Error: {reads.error_message(exc, ctx.obj)}\n")
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


# The shells typer writes completion for; `--show-completion`/`--install-completion` take one.
COMPLETION_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
COMPLETION_HELP = {
    "install_completion": "Install completion for SHELL (bash, zsh or fish; default: the shell "
                          "this runs in).",
    "show_completion": "Print the completion script for SHELL (bash, zsh or fish; default: the "
                       "shell this runs in).",
}


def _complete_for_a_named_shell(prog_name: str, args: list[str]) -> None:
    """`--show-completion SHELL` and `--install-completion SHELL`, before the command. typer's
    options take no value: they name the shell they run in and leave the word after them
    unread, so that `--show-completion zsh` printed bash's script in bash. A shell's name
    after either is read here; without one, typer names the shell as before."""
    words = iter(args)
    for word in words:
        if word in ("--db", "--workflows", "-w"):
            next(words, None)
        elif word in ("--show-completion", "--install-completion"):
            shell = next(words, None)
            if shell is None or shell.startswith("-"):
                return
            reads.check_choice(word, shell, COMPLETION_SHELLS)
            _completion_for(prog_name, shell, install=word == "--install-completion")
        elif word == "--" or not word.startswith("-"):
            return


def _completion_for(prog_name: str, shell: str, *, install: bool) -> NoReturn:
    """Print or install `shell`'s completion script, as typer's options do for their shell."""
    from typer import _completion_shared

    complete_var = f"_{prog_name.replace('-', '_').upper()}_COMPLETE"
    if install:
        shell, path = _completion_shared.install(shell=shell, prog_name=prog_name,
                                                 complete_var=complete_var)
        sys.stdout.write(f"{shell} completion installed in {path}\n"
                         "Completion will take effect once you restart the terminal\n")
    else:
        sys.stdout.write(_completion_shared.get_completion_script(
            prog_name=prog_name, complete_var=complete_var, shell=shell) + "\n")
    raise typer.Exit()


class _Command(TyperCommand):
    """Takes the global options after the command too (`wfctl describe ID --db x.db`), as
    git-style tools do. Help that reads as words, whatever typer's version: an argument is shown
    as its NAME (or [NAME] when optional) with its help, never with a Python type beside it."""

    def __init__(self, *args: Any, **settings: Any) -> None:
        super().__init__(*args, **settings)
        self.params.extend(_global_options_after())

    def invoke(self, ctx: typer.Context) -> Any:
        # The files are known only now: a global option after the command overrides the one
        # before it (the later word wins, as for any option given twice).
        root = ctx.find_root()
        paths = {name: given if (given := ctx.params.pop(name)) is not None else root.params[name]
                 for name in GLOBAL_OPTION_NAMES}
        ctx.obj = root.obj = Client(paths["db"], paths["workflows"],
                                    create=self.name in CREATING)
        root.call_on_close(root.obj.close)
        return super().invoke(ctx)

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                required = "  [required]" if param.required else ""
                arguments.append((_argument_name(param), f"{param.help or ''}{required}"))
            elif (record := param.get_help_record(ctx)) is not None:
                options.append(record)
        for title, records in (("Arguments", arguments), ("Options", options)):
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)


def _argument_name(param: Any) -> str:
    return param.metavar or param.name.upper()


DB_HELP = "SQLite file or PostgreSQL URL (created by start or work)."
WORKFLOWS_HELP = "The definitions file."
GLOBAL_OPTION_NAMES = ("db", "workflows")


@functools.cache
def _global_options_after() -> list[Any]:
    """--db and --workflows/-w as every command's own options, built by typer as the
    application's are (a value given is a string; not given, None)."""
    def options(db: str | None = typer.Option(None, "--db", metavar="PATH", help=DB_HELP),
                workflows: str | None = typer.Option(None, "--workflows", "-w", metavar="FILE",
                                                     help=WORKFLOWS_HELP)) -> None:
        """Holds the options."""

    holder = typer.Typer(add_completion=False)
    holder.command()(options)
    return typer.main.get_command(holder).params


# Help is laid out for the terminal's width up to this (click's default stops at 80, which
# cuts the command summaries short).
HELP_WIDTH = 120

# `-h` is `--help` too; subcommands inherit it from the application's context.
HELP_OPTIONS = ["-h", "--help"]

app = typer.Typer(
    cls=_Commands,
    help="Durable workflows declared in YAML, on SQLite or PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    context_settings={"max_content_width": HELP_WIDTH, "help_option_names": HELP_OPTIONS},
)
deadlines_app = typer.Typer(help="Deadline (must complete within) checks.", no_args_is_help=True,
                            rich_markup_mode=None,
                            context_settings={"help_option_names": HELP_OPTIONS})
app.add_typer(deadlines_app, name="deadlines")


def _command(*names: str, **settings: Any) -> Any:
    return app.command(*names, cls=_Command, **settings)


# Schedules (SPEC §12): cli/schedule_commands.py.
_command("schedules")(schedules_command)
schedule_app = typer.Typer(help="One schedule: describe, pause, unpause, trigger, backfill.",
                           no_args_is_help=True, rich_markup_mode=None,
                           context_settings={"help_option_names": HELP_OPTIONS})
app.add_typer(schedule_app, name="schedule")
for _name, _function in SCHEDULE_COMMANDS.items():
    schedule_app.command(_name, cls=_Command)(_function)

# The commands that create the database on first use; every other one needs it to exist.
CREATING = ("start", "work")
# Worker slots are threads or processes; more than this is a typo, not a machine.
MAX_CONCURRENCY = 1024
# A chart wider than this is no picture on any screen (and the columns are built in memory).
MAX_WIDTH = 1000

class OnDuplicate(enum.StrEnum):
    reject = "reject"
    return_existing = "return-existing"


class Isolation(enum.StrEnum):
    thread = "thread"
    process = "process"


class LogFormat(enum.StrEnum):
    text = "text"
    json = "json"


class LogLevel(enum.StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def _choices(choices: type[enum.StrEnum]) -> str:
    """A choice option's placeholder: its values, as click writes them."""
    return "[" + "|".join(choice.value for choice in choices) + "]"


# Placeholders and help built once, here: typer reads them from the commands' defaults.
PLACEHOLDERS = {choices: _choices(choices) for choices in (OnDuplicate, Isolation, LogFormat,
                                                             LogLevel)}
STATUS_HELP = f"Only this status: {', '.join(INSTANCE_STATUSES)}."


def _choice(option: str, choices: Any, *, fold_case: bool = False) -> dict[str, Any]:
    """typer.Option settings for a choice option: a value not among `choices` (values or a
    StrEnum) is a usage error worded as for every choice (reads.check_choice), whatever typer's
    version; the choices complete."""
    values = tuple(str(choice) for choice in choices)

    def check(value: Any) -> Any:
        value = value.lower() if fold_case and isinstance(value, str) else value
        reads.check_choice(option, value, values)
        return value

    return {"callback": check, "autocompletion": lambda incomplete: _starting(values, incomplete)}


CHOICES = {
    "--status": _choice("--status", INSTANCE_STATUSES),
    "--event-type": _choice("--event-type", EVENT_TYPES),
    "--on-duplicate": _choice("--on-duplicate", OnDuplicate),
    "--isolation": _choice("--isolation", Isolation),
    "--log-format": _choice("--log-format", LogFormat),
    "--log-level": _choice("--log-level", LogLevel, fold_case=True),
}


def _client(ctx: typer.Context) -> Client:
    return ctx.obj


def _duration(option: str, value: str | None, *, allow_none: bool = True) -> float | None:
    if value is None:
        return None
    given: Any = value
    try:
        if value.strip().startswith("{"):
            from wfctl.lang import definitions

            given = definitions.yaml_value(value)
        seconds = durations.parse_timeout(given)
    except (durations.DurationError, DefinitionError) as exc:
        _fail(f"{option}: {exc}")
    if seconds is None and not allow_none:
        _fail(f"{option}: expected a duration, not NONE")
    return seconds


def _interval(option: str, value: str, minimum: float = 0.001) -> float:
    try:
        return durations.parse_interval(value, minimum=minimum)
    except durations.DurationError as exc:
        _fail(f"{option}: {exc}")


def _json_object(option: str, text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = jsonvalue.loads(text, option)
    except jsonvalue.JSONValueError as exc:
        _fail(str(exc))
    if not isinstance(value, dict):
        _fail(f"{option}: expected a JSON object (got {type(value).__name__})")
    return value


def _read_input_file(path: Path, payload_size: int) -> str:
    """The text of --input-file ('-' = stdin), which must be UTF-8; never more than a few times
    the payload limit is read (JSON text may be spaced out), so /dev/zero is refused too."""
    most = max(4 * payload_size, 1024 * 1024) if payload_size else -1
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(most + 1 if most > 0 else -1)
        else:
            with path.open("rb") as file:
                data = file.read(most + 1 if most > 0 else -1)
    except IsADirectoryError:
        _fail(f"--input-file: {path} is a folder, not a file")
    except OSError as exc:
        _fail(f"--input-file: cannot read {path}: {exc.strerror or exc}")
    if 0 < most < len(data):
        _fail(f"--input-file: {'stdin' if str(path) == '-' else path} is larger than "
              f"{most} bytes (payload_size limit {payload_size})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(f"--input-file: {'stdin' if str(path) == '-' else path} is not UTF-8 text "
              f"(byte 0x{data[exc.start]:02x} at offset {exc.start})")


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"wfctl {__version__}\n")
        raise typer.Exit()


def _completion_paths(ctx: typer.Context) -> tuple[str, str]:
    """The --db and --workflows of the command line being completed (or their defaults)."""
    before = ctx.find_root().params
    return (ctx.params.get("db") or before.get("db") or os.environ.get("WFCTL_DB", "wfctl.db"),
            ctx.params.get("workflows") or before.get("workflows")
            or os.environ.get("WFCTL_WORKFLOWS", "workflows.yaml"))


def _complete_types(ctx: typer.Context, incomplete: str) -> list[str]:
    """Workflow type names from the definitions file; nothing when it cannot be read."""
    _, workflows = _completion_paths(ctx)
    try:
        names = Client(workflows=workflows).definitions().types
    except Exception:
        return []
    return sorted(name for name in names if name.startswith(incomplete))


def _complete_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """Instance ids from the database, newest first; never creates the database."""
    db, _ = _completion_paths(ctx)
    try:
        with Client(db, create=False) as client:
            return client.instance_ids(incomplete)
    except Exception:
        return []


def _complete_signals(ctx: typer.Context, incomplete: str) -> list[str]:
    """The signals the instance's type waits for (the ID given before NAME)."""
    db, _ = _completion_paths(ctx)
    instance_id = ctx.params.get("instance_id")
    try:
        with Client(db, create=False) as client:
            names = client.signal_names(instance_id)
    except Exception:
        return []
    return [name for name in names if name.startswith(incomplete)]


def _starting(values: tuple[str, ...], incomplete: str) -> list[str]:
    return [value for value in values if value.startswith(incomplete)]


@app.callback()
def main_options(
    db: str = typer.Option("wfctl.db", "--db", envvar="WFCTL_DB", metavar="PATH", help=DB_HELP),
    workflows: str = typer.Option("workflows.yaml", "--workflows", "-w", metavar="FILE",
                                  envvar="WFCTL_WORKFLOWS", help=WORKFLOWS_HELP),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """The global options, before the command; the command opens the files once it has read
    its own options, which may give them again (_Command.invoke)."""


@_command()
def validate(ctx: typer.Context,
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Check the definitions: a table of types with their timeouts and deadlines; warnings.

    Every error is reported, each on its own `Error:` line with file:line (and every one in
    `errors` with --json), not only the first."""
    from wfctl.lang import definitions as definitions_module
    from wfctl.lang import handlers
    from wfctl.show import render

    client = _client(ctx)
    try:
        definitions = definitions_module.load(client.workflows_path, keep_errors=True)
    except DefinitionError as exc:
        errors = [reads.error_message(exc, client)] if len(exc.errors) == 1 else list(exc.errors)
        if as_json:
            # The same document as for a file that parses, so that a script reads one shape.
            _print_json({"valid": False, "workflow_types": {}, "warnings": [], "errors": errors})
        _fail_all(errors)
    handlers.add_search_path(client.workflows_path)
    problems = [*definitions.errors,
                *(f"{definitions.path}:{line}: {path}: {why}"
                  for spec, path, line in definitions.handlers()
                  if (why := handlers.check(spec)) is not None)]
    problems.sort(key=lambda problem: _line_of(problem, definitions.path))
    if as_json:
        _print_json({
            "valid": not problems,
            "workflow_types": {} if definitions.errors else {
                wf.name: {
                    "steps": [s.name for s in wf.steps],
                    "execution_timeout_seconds": durations.whole_seconds(wf.execution_timeout),
                    "run_timeout_seconds": durations.whole_seconds(wf.run_timeout),
                    "deadline_seconds": durations.whole_seconds(wf.deadline),
                    "on_deadline": wf.on_deadline,
                    "workflow_task_timeout_seconds":
                        durations.whole_seconds(wf.workflow_task_timeout),
                    "child_policy": wf.child_policy,
                    "retry_policy": wf.retry.view() if wf.retry else None,
                    "retention_seconds": durations.whole_seconds(wf.retention),
                }
                for wf in definitions.types.values()
            },
            "warnings": list(definitions.warnings),
            "errors": problems,
            **({"schedules": validated_schedules(definitions)} if definitions.schedules else {}),
        })
    else:
        if not definitions.errors:
            render.definitions(render.console(), definitions)
            if definitions.schedules:
                show_validated_schedules(definitions)
        _warn_all(definitions.warnings)
    if problems:
        _fail_all(problems)


def _line_of(problem: str, path: str) -> int:
    """The line a `path:line: …` problem is at, so that problems are listed in the file's order."""
    line = problem[len(path) + 1:].partition(":")[0]
    return int(line) if line.isdigit() else 0


def _warn_all(warnings: Any) -> None:
    """`Warning:` lines on stderr, one each."""
    for warning in warnings:
        sys.stderr.write(f"Warning: {warning}\n")


def _fail_all(errors: list[str]) -> NoReturn:
    """`Error:` lines on stderr, one each, and exit 1."""
    for error in errors[:-1]:
        sys.stderr.write(f"Error: {error}\n")
    _fail(errors[-1])


@_command()
def start(
    ctx: typer.Context,
    workflow_type: str = typer.Argument(..., metavar="TYPE", help="A workflow type.",
                                        autocompletion=_complete_types),
    instance_id: str | None = typer.Argument(None, metavar="ID",
                                             help="Instance id (generated when omitted)."),
    input_json: str | None = typer.Option(None, "--input", metavar="JSON",
                                          help="Input state, a JSON object."),
    input_file: Path | None = typer.Option(None, "--input-file", metavar="FILE",
                                           help="Read the input JSON from a file ('-' = stdin)."),
    execution_timeout: str | None = typer.Option(None, "--execution-timeout", metavar="DURATION",
                                                 help="All runs together, e.g. 2h or NONE."),
    run_timeout: str | None = typer.Option(None, "--run-timeout", metavar="DURATION",
                                           help="Each run, e.g. 30m."),
    deadline: str | None = typer.Option(None, "--deadline", metavar="DURATION",
                                        help="Must complete within, e.g. 24h or P1D."),
    on_duplicate: str = typer.Option(OnDuplicate.reject, "--on-duplicate",
                                     metavar=PLACEHOLDERS[OnDuplicate],
                                     help="Whether a duplicate open id is an error.",
                                     **CHOICES["--on-duplicate"]),
    wait: bool = typer.Option(False, "--wait", help="Follow it live; exit 0 only if it completed."),
    from_file: Path | None = typer.Option(
        None, "--from", metavar="FILE",
        help="Start one instance per line of NDJSON ('-' = stdin): {\"id\", \"input\", "
             "\"deadline\", \"execution_timeout\", \"run_timeout\", \"on_duplicate\"}, all "
             "optional; the options above are the defaults of every line."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Start an instance of a workflow type; prints its ids and deadlines."""
    if from_file is not None:
        if instance_id is not None or input_json is not None or input_file is not None or wait:
            _usage("--from excludes ID, --input, --input-file and --wait")
        defaults: dict[str, Any] = {"on_duplicate": on_duplicate}
        for name, option, value in (("execution_timeout", "--execution-timeout",
                                     execution_timeout),
                                    ("run_timeout", "--run-timeout", run_timeout),
                                    ("deadline", "--deadline", deadline)):
            if value is not None:
                defaults[name] = _duration(option, value)
        batches.start_from(_client(ctx), workflow_type, from_file, defaults, as_json)
        return
    if input_json is not None and input_file is not None:
        _usage("--input and --input-file exclude each other")
    if input_file is not None:
        limit = _client(ctx).definitions().limits.payload_size
        data = _json_object("--input-file", _read_input_file(input_file, limit))
    else:
        data = _json_object("--input", input_json)
    overrides = {}
    for name, option, value in (("execution_timeout", "--execution-timeout", execution_timeout),
                                ("run_timeout", "--run-timeout", run_timeout),
                                ("deadline", "--deadline", deadline)):
        if value is not None:
            overrides[name] = _duration(option, value)
    client = _client(ctx)
    result = client.start(workflow_type, instance_id, input=data,
                          on_duplicate=on_duplicate, **overrides)
    if result["outcome"] != "rejected_duplicate":
        _warn_unimportable(client, workflow_type)
    if wait and result["outcome"] != "rejected_duplicate":
        _follow_until_closed(client, result, as_json)
        return
    if as_json:
        _print_json(result)
    else:
        from wfctl.show import render

        render.started(render.console(), result, client.now())
    if result["outcome"] == "rejected_duplicate":
        _fail(f"instance {result['workflow_instance_id']} is already open; pass "
              "--on-duplicate return-existing to get it, or choose another id")


def _warn_unimportable(client: Client, workflow_type: str) -> None:
    """A `Warning:` line for each handler of the type that cannot be imported here: the
    instance still starts (its workers may run elsewhere, with other modules)."""
    from wfctl.lang import handlers

    definitions = client.definitions()
    if definitions.get(workflow_type) is None:
        return
    _warn_all(f"{definitions.path}:{line}: {path}: {why}"
              for spec, path, line in definitions.handlers(workflow_type)
              if (why := handlers.check(spec)) is not None)


def _follow_until_closed(client: Client, result: dict[str, Any], as_json: bool) -> None:
    from wfctl.show.live import follow_start

    instance_id = result["workflow_instance_id"]
    workflow_type = client.definitions().get(result["workflow_type"])
    # The first activity's queue is where the run's work starts (a workflow with none needs
    # any worker): without a live worker there, following it would show nothing happen.
    queue = workflow_type.first_queue() if workflow_type else None
    if not client.serves(queue):
        where = f"queue {queue}" if queue else "this database"
        sys.stderr.write(f"Warning: no live worker serves {where}; {instance_id} waits until "
                         f"one runs: wfctl work{f' --queue {queue}' if queue else ''}\n")
        sys.stderr.flush()
    try:
        final = follow_start(client, instance_id, quiet=as_json)
    except KeyboardInterrupt:
        # Interrupting the view leaves the workflow running; 130 says it was not followed out.
        sys.stderr.write(f"\nInterrupted: {instance_id} keeps running "
                         f"(wfctl describe {instance_id}; wfctl cancel {instance_id} stops it)\n")
        raise typer.Exit(130) from None
    if as_json:
        _print_json(final)
    if final["status"] != "completed":
        raise typer.Exit(1)


@_command()
def work(
    ctx: typer.Context,
    queue: list[str] = typer.Option(["default"], "--queue", "-q", metavar="QUEUE",
                                    help="Serve this queue (repeatable)."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", min=1, max=MAX_CONCURRENCY,
                                    metavar="N", help="Handlers run at once."),
    once: bool = typer.Option(False, "--once",
                              help="One pass over every ready task, then exit (no deadline check)."),
    deadline_interval: str = typer.Option("60s", "--deadline-interval", metavar="DURATION",
                                          help="Longest gap between deadline checks."),
    poll_interval: str = typer.Option("100ms", "--poll-interval", metavar="DURATION",
                                      help="How often an idle worker looks for new work."),
    max_tasks: int | None = typer.Option(None, "--max-tasks", min=1, metavar="N",
                                         help="Stop after this many activity tasks."),
    worker_lease: str = typer.Option("30s", "--worker-lease", metavar="DURATION",
                                     help="Liveness lease; a lapsed worker's attempts are retried."),
    grace: str = typer.Option("30s", "--grace", metavar="DURATION",
                              help="How long the first SIGTERM lets running handlers finish."),
    isolation: str = typer.Option(
        Isolation.thread, "--isolation", metavar=PLACEHOLDERS[Isolation],
        help="Where handlers run: thread, or process (a child process per attempt, killed when "
             "its attempt times out or is cancelled).", **CHOICES["--isolation"]),
    log_format: str = typer.Option(LogFormat.text, "--log-format",
                                   metavar=PLACEHOLDERS[LogFormat],
                                   help="How each log line is written.",
                                   **CHOICES["--log-format"]),
    log_level: str = typer.Option(LogLevel.info, "--log-level", metavar=PLACEHOLDERS[LogLevel],
                                  help="The least severe level logged.",
                                  **CHOICES["--log-level"]),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", min=1, max=65535, metavar="PORT",
        help="Serve Prometheus metrics at /metrics on this port (all interfaces)."),
) -> None:
    """Run handlers until SIGTERM/SIGINT (the first drains, a second stops at once)."""
    import logging

    from wfctl.cli.streams import handlers_print_to_stderr
    from wfctl.ops import log
    from wfctl.worker import WorkerOptions, install_signal_handlers

    options = WorkerOptions(
        queues=tuple(dict.fromkeys(queue)),
        concurrency=concurrency,
        poll_interval=_interval("--poll-interval", poll_interval),
        deadline_interval=_interval("--deadline-interval", deadline_interval, minimum=1),
        max_tasks=max_tasks,
        worker_lease=_interval("--worker-lease", worker_lease, minimum=1),
        grace=_interval("--grace", grace, minimum=0),
        isolation=isolation,
    )
    log.configure(log_level, log_format)
    server = None
    if metrics_port is not None:
        from prometheus_client import CollectorRegistry

        from wfctl.ops import metrics

        # Listening comes before the database is opened: a port in use stops the command with
        # nothing written.
        registry = CollectorRegistry(auto_describe=False)
        server = metrics.MetricsServer(metrics_port, registry)
        ctx.call_on_close(server.close)
    client = _client(ctx)
    if Path(client.workflows_path).exists():
        client.definitions()
    else:
        log.event("definitions_not_found", logging.WARNING, path=client.workflows_path,
                  message="handler modules are imported from the current folder")
    # Before the worker is made: the processes of `--isolation process` inherit stdout.
    with handlers_print_to_stderr():
        worker = client.worker(options)
        worker.engine.add_listener(log.history_events, ignores=log.unlogged_event_types())
        if server is not None:
            worker.attempt_metrics = metrics.AttemptMetrics(registry)
            registry.register(metrics.StoreCollector(worker.engine.store, worker.clock))
            server.start()
        restore = install_signal_handlers(worker)
        try:
            code = worker.run(once=once)
        finally:
            restore()
    raise typer.Exit(code)


@_command("list")
def list_command(
    ctx: typer.Context,
    status: str | None = typer.Option(None, "--status", metavar="STATUS", help=STATUS_HELP,
                                      **CHOICES["--status"]),
    workflow_type: str | None = typer.Option(
        None, "--type", metavar="TYPE", help="Only this workflow type.",
        autocompletion=_complete_types),
    since: str | None = typer.Option(
        None, "--since", metavar="WHEN",
        help="Created in the last DURATION (1h) or at or after an ISO 8601 date or instant "
             "(2026-12-01, 2026-12-01T16:00:00+00:00; UTC unless an offset is given)."),
    limit: int = typer.Option(50, "--limit", min=1, metavar="N", help="At most this many."),
    watch: bool = typer.Option(False, "--watch", help="Refresh until interrupted."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    schedule: str | None = typer.Option(None, "--schedule", metavar="NAME",
                                        help="Only instances this schedule started."),
) -> None:
    """Instances, newest first, with the nearest deadline of each."""
    reads.list_instances(_client(ctx), status=status,
                         workflow_type=workflow_type, since=since, limit=limit, watch=watch,
                         as_json=as_json, schedule=schedule)


@_command()
def describe(
    ctx: typer.Context,
    instance_id: str = typer.Argument(..., metavar="ID", autocompletion=_complete_ids,
                                      help="The instance to describe."),
    run: int | None = typer.Option(None, "--run", min=1, metavar="N",
                                   help="Show this run (default: the current one)."),
    full_state: bool = typer.Option(False, "--full-state",
                                    help="Show the whole state, however large."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (the state is always whole)."),
) -> None:
    """Everything about one instance: status, every deadline, activities, timers, children."""
    reads.describe(_client(ctx), instance_id=instance_id, run=run, full_state=full_state,
                   as_json=as_json)


@_command()
def history(
    ctx: typer.Context,
    instance_id: str = typer.Argument(..., metavar="ID", autocompletion=_complete_ids,
                                      help="The instance whose events to print."),
    run: int | None = typer.Option(None, "--run", min=1, metavar="N",
                                   help="Only this run (default: the current one)."),
    all_runs: bool = typer.Option(False, "--all-runs", help="Every run, with its number."),
    follow: bool = typer.Option(False, "--follow", "-f",
                                help="Keep printing new events until the workflow closes."),
    event_type: list[str] = typer.Option(
        [], "--event-type", metavar="EVENT", help="Only these event types (repeatable).",
        **CHOICES["--event-type"]),
    no_tasks: bool = typer.Option(False, "--no-tasks",
                                  help="Leave out the WorkflowTask* events of each decision."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The append-only event history: seq, time, event, details."""
    reads.history(_client(ctx), instance_id=instance_id, run=run, all_runs=all_runs,
                  follow=follow, event_type=event_type, no_tasks=no_tasks, as_json=as_json)


@_command()
def retry(
    ctx: typer.Context,
    instance_id: str | None = typer.Argument(None, metavar="ID", autocompletion=_complete_ids,
                                             help="A failed, timed_out, cancelled or "
                                                  "terminated instance (or filters instead)."),
    extend_deadline: str | None = typer.Option(None, "--extend-deadline", metavar="DURATION",
                                               help="New deadline: now + this duration."),
    clear_deadline: bool = typer.Option(False, "--clear-deadline", help="Remove the deadline."),
    keep_deadline: bool = typer.Option(False, "--keep-deadline",
                                       help="Keep the deadline even if it has passed (the run "
                                            "fails by it again; on_deadline does not run "
                                            "again)."),
    status: list[str] = batches.STATUS, workflow_type: list[str] = batches.TYPE,
    schedule: list[str] = batches.SCHEDULE,
    since: str | None = batches.SINCE, dry_run: bool = batches.DRY_RUN, yes: bool = batches.YES,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Run a closed instance again from the step that failed or was stopped (the deadline is
    kept).

    A deadline that has already passed is kept only with --keep-deadline. With filters in place
    of ID, every instance they match.
    """
    given = [flag for flag, value in (("--extend-deadline", extend_deadline is not None),
                                      ("--clear-deadline", clear_deadline),
                                      ("--keep-deadline", keep_deadline)) if value]
    if len(given) > 1:
        _usage(f"{', '.join(given[:-1])} and {given[-1]} exclude each other")
    extend = _duration("--extend-deadline", extend_deadline, allow_none=False)
    client = _client(ctx)
    if batches.is_batch(instance_id, status, workflow_type, schedule, since, dry_run, yes):
        batches.run(client, "retry", status=status, workflow_type=workflow_type,
                    schedule=schedule, since=since, dry_run=dry_run, yes=yes, as_json=as_json,
                    extend_deadline=extend, clear_deadline=clear_deadline,
                    keep_deadline=keep_deadline)
        return
    assert instance_id is not None
    result = client.retry(instance_id, extend_deadline=extend, clear_deadline=clear_deadline,
                          keep_deadline=keep_deadline)
    if as_json:
        _print_json(result)
    else:
        step = f" from step {result['step']}" if result["step"] else ""
        sys.stdout.write(f"Retrying {instance_id}{step}; deadline "
                         f"{result['deadline_change']}: {clock.iso(result['deadline_at']) or 'none'}\n")
    for warning in result["warnings"]:
        sys.stderr.write(f"Warning: {warning}\n")


@_command()
def signal(
    ctx: typer.Context,
    instance_id: str | None = typer.Argument(None, metavar="ID", autocompletion=_complete_ids,
                                             help="The instance to signal (or filters "
                                                  "instead, and NAME alone)."),
    name: str | None = typer.Argument(None, metavar="NAME", autocompletion=_complete_signals,
                                      help="The signal's name, as its wait_for_signal step "
                                           "gives it."),
    data: str | None = typer.Option(None, "--data", metavar="JSON",
                                    help="A JSON object merged into the state."),
    force: bool = typer.Option(False, "--force",
                               help="Deliver it even if no wait_for_signal step of the type "
                                    "waits for NAME."),
    status: list[str] = batches.STATUS, workflow_type: list[str] = batches.TYPE,
    schedule: list[str] = batches.SCHEDULE,
    since: str | None = batches.SINCE, dry_run: bool = batches.DRY_RUN, yes: bool = batches.YES,
    as_json: bool = batches.JSON,
) -> None:
    """Deliver a signal (buffered until a wait_for_signal step takes it).

    With filters in place of ID, to every instance they match: NAME is then the only
    argument."""
    payload = _json_object("--data", data)
    client = _client(ctx)
    filters = bool(status or workflow_type or schedule or since is not None)
    if filters and name is None:
        instance_id, name = None, instance_id
    if name is None:
        _usage("Missing argument 'NAME'.")
    if batches.is_batch(instance_id, status, workflow_type, schedule, since, dry_run, yes):
        batches.run(client, "signal", status=status, workflow_type=workflow_type,
                    schedule=schedule, since=since, dry_run=dry_run, yes=yes, as_json=as_json,
                    name=name, data=payload, force=force)
        return
    assert instance_id is not None
    result = client.signal(instance_id, name, payload, force=force)
    if as_json:
        _print_json(result)
        return
    state = "buffered" if result["buffered"] else "delivered"
    sys.stdout.write(f"Signal {name} {state} to {instance_id}\n")


def _control(action: str) -> Any:
    def command(
        ctx: typer.Context,
        instance_id: str | None = typer.Argument(None, metavar="ID",
                                                 autocompletion=_complete_ids,
                                                 help=f"The instance to {action} (or "
                                                      "filters instead)."),
        status: list[str] = batches.STATUS, workflow_type: list[str] = batches.TYPE,
        schedule: list[str] = batches.SCHEDULE,
        since: str | None = batches.SINCE, dry_run: bool = batches.DRY_RUN,
        yes: bool = batches.YES, as_json: bool = batches.JSON,
    ) -> None:
        if batches.is_batch(instance_id, status, workflow_type, schedule, since, dry_run, yes):
            batches.run(_client(ctx), action, status=status, workflow_type=workflow_type,
                        schedule=schedule,
                        since=since, dry_run=dry_run, yes=yes, as_json=as_json)
            return
        result = getattr(_client(ctx), action)(instance_id)
        if as_json:
            _print_json(result)
            return
        sys.stdout.write(f"{instance_id}: {result['status']}\n")

    return command


def _closing(action: str) -> Any:
    def command(
        ctx: typer.Context,
        instance_id: str | None = typer.Argument(None, metavar="ID",
                                                 autocompletion=_complete_ids,
                                                 help=f"The instance to {action} (or "
                                                      "filters instead)."),
        reason: str | None = typer.Option(None, "--reason", metavar="TEXT",
                                          help="Why; shown by describe and history."),
        status: list[str] = batches.STATUS, workflow_type: list[str] = batches.TYPE,
        schedule: list[str] = batches.SCHEDULE,
        since: str | None = batches.SINCE, dry_run: bool = batches.DRY_RUN,
        yes: bool = batches.YES, as_json: bool = batches.JSON,
    ) -> None:
        if batches.is_batch(instance_id, status, workflow_type, schedule, since, dry_run, yes):
            batches.run(_client(ctx), action, status=status, workflow_type=workflow_type,
                        schedule=schedule,
                        since=since, dry_run=dry_run, yes=yes, as_json=as_json, reason=reason)
            return
        result = getattr(_client(ctx), action)(instance_id, reason)
        if as_json:
            _print_json(result)
            return
        shown = "cancel requested" if result.get("cancel_requested") else result["status"]
        sys.stdout.write(f"{instance_id}: {shown}\n")

    return command


_command("pause", help="No new step starts until resume.")(_control("pause"))
_command("resume", help="Let a paused instance continue.")(_control("resume"))
_command("cancel", help="Cooperative cancel: open work is cancelled at the next decision.")(
    _closing("cancel"))
_command("terminate", help="Immediate stop; open work is cancelled now.")(
    _closing("terminate"))


@deadlines_app.command("check", cls=_Command)
def deadlines_check(ctx: typer.Context,
                    as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """One deadline sweep (for cron): fails every running workflow past its deadline."""
    from wfctl.cli.streams import handlers_print_to_stderr

    client = _client(ctx)
    with handlers_print_to_stderr() as out:
        failed = client.check_deadlines()
        if as_json:
            _print_json({"failed": failed, "count": len(failed)}, out)
            return
        for item in failed:
            error = item["handler_error"]
            note = f"; {item['on_deadline']} raised {error['exception_class']}: " \
                f"{error['message']}" if error else ""
            out.write(f"{item['workflow_instance_id']}: deadline "
                      f"{clock.iso(item['deadline_at'])} exceeded, failed{note}\n")
        out.write(f"{len(failed)} workflow{'s' if len(failed) != 1 else ''} failed by deadline\n")


@_command("metrics")
def metrics_command(ctx: typer.Context) -> None:
    """Print the metrics once, in the Prometheus text format.

    `wfctl work --metrics-port PORT` serves the same at /metrics, with its own histograms of
    schedule-to-start latency and attempt duration.
    """
    sys.stdout.write(_client(ctx).metrics())


@_command()
def prune(
    ctx: typer.Context,
    older_than: str | None = typer.Option(
        None, "--older-than", metavar="DURATION",
        help="Every instance closed longer ago than this, whatever its type's retention."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would go; delete nothing."),
    vacuum: bool = typer.Option(False, "--vacuum",
                                help="Then rebuild the file to give the space back (writers "
                                     "wait while it runs)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Delete closed instances past their retention (or --older-than D) with their history."""
    if dry_run and vacuum:
        _usage("--dry-run and --vacuum exclude each other")
    seconds = None
    if older_than is not None:
        given: Any = older_than
        try:
            if older_than.strip().startswith("{"):
                from wfctl.lang import definitions

                given = definitions.yaml_value(older_than)
            seconds = durations.parse_interval(given, minimum=0)
        except (durations.DurationError, DefinitionError) as exc:
            _fail(f"--older-than: {exc}")
    report = _client(ctx).prune(older_than=seconds, dry_run=dry_run, vacuum=vacuum)
    if as_json:
        _print_json(report)
        return
    sys.stdout.write(_pruned_text(report))


@_command()
def backup(
    ctx: typer.Context,
    path: Path = typer.Argument(..., metavar="PATH", help="The new file (never an existing one)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Copy the SQLite database into a new file, consistent while workers run."""
    result = _client(ctx).backup(path)
    if as_json:
        _print_json(result)
        return
    sys.stdout.write(f"Backed up {_client(ctx).db_path} to {result['path']} "
                     f"({_size(result['size'])})\n")


def _pruned_text(report: dict[str, Any]) -> str:
    """`prune`'s report for a person: counts on two lines, then the ids, one a line."""
    count = report["instances"]
    older_than = report["older_than_seconds"]
    plural = "" if count == 1 else "s"
    if older_than is None:
        which = f"closed instance{plural} past {'its' if count == 1 else 'their'} retention"
    elif older_than == 0:
        which = f"closed instance{plural}"
    else:
        which = f"instance{plural} closed more than {durations.format(older_than)} ago"
    rows = ", ".join(f"{table} {n}" for table, n in report["rows"].items())
    shown = report["workflow_instance_ids"]
    if not count:
        lines = [f"Nothing to prune: no {which}"]
    elif report["dry_run"]:
        lines = [f"Would prune {count} {which} (dry run: nothing deleted)",
                 f"Rows that would go: {rows}"]
    else:
        batches = report["batches"]
        lines = [f"Pruned {count} {which} in {batches} batch{'es' if batches != 1 else ''}",
                 f"Rows deleted: {rows}"]
    if shown:
        lines.append(f"Instances{f' (the first {len(shown)})' if len(shown) < count else ''}:")
        lines.extend(f"  {instance_id}" for instance_id in shown)
    if "file_size_after" in report:
        lines.append(f"Vacuumed: {_size(report['file_size_before'])} -> "
                     f"{_size(report['file_size_after'])}")
    return "\n".join(lines) + "\n"


def _size(size: float) -> str:
    """Bytes as a person reads them: '812 B', '4.0 KiB', '885.2 MiB'."""
    if size < 1024:
        return f"{int(size)} B"
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


@_command("systemd-unit")
def systemd_unit(
    ctx: typer.Context,
    user: str | None = typer.Option(None, "--user", metavar="USER",
                                    help="Run the worker as this user."),
    grace: str = typer.Option("30s", "--grace", metavar="DURATION",
                              help="The worker's drain grace period."),
    queue: list[str] = typer.Option([], "--queue", "-q", metavar="QUEUE",
                                    help="The worker serves this queue (repeatable)."),
    concurrency: int | None = typer.Option(None, "--concurrency", "-c", min=1,
                                           max=MAX_CONCURRENCY, metavar="N",
                                           help="The worker's handlers run at once."),
    isolation: str | None = typer.Option(None, "--isolation", metavar=PLACEHOLDERS[Isolation],
                                         help="Where the worker's handlers run.",
                                         **CHOICES["--isolation"]),
    metrics_port: int | None = typer.Option(None, "--metrics-port", min=1, max=65535,
                                            metavar="PORT",
                                            help="The worker serves Prometheus metrics here."),
    log_format: str | None = typer.Option(None, "--log-format", metavar=PLACEHOLDERS[LogFormat],
                                          help="How the worker writes its log lines.",
                                          **CHOICES["--log-format"]),
    environment_file: str = typer.Option(
        ENVIRONMENT_FILE, "--environment-file", metavar="PATH",
        help="With a PostgreSQL database: the file (mode 600) the unit reads WFCTL_DB from, "
             "so that no password is written into the unit."),
) -> None:
    """Print a systemd service unit (Type=notify) for `wfctl work` on these files."""
    from wfctl.ops import systemd

    client = _client(ctx)
    executable = shutil.which("wfctl") or f"{sys.executable} -m wfctl"
    worker = systemd.WorkerArgs(grace=_interval("--grace", grace, minimum=0),
                                queues=tuple(dict.fromkeys(queue)), concurrency=concurrency,
                                isolation=isolation, metrics_port=metrics_port,
                                log_format=log_format)
    for warning in systemd.unit_warnings(db=client.db_path, workflows=client.workflows_path,
                                         user=user):
        sys.stderr.write(f"Warning: {warning}\n")
    sys.stdout.write(systemd.unit(executable=executable, db=client.db_path,
                                  workflows=client.workflows_path, user=user, worker=worker,
                                  environment_file=environment_file))


@_command()
def demo(folder: Path | None = typer.Option(
        None, "--folder", metavar="DIR",
        help="Keep the demo's database here (default: a new temporary folder)."),
) -> None:
    """Watch a timeout and a deadline fire: the ETL example on a database that is kept."""
    from wfctl.cli import demo as demo_module
    from wfctl.show import render

    out = render.console()
    # Piped, the demo is laid out for COLUMNS (or 80), not for the 500 columns of a table.
    out.width = out.width if out.is_terminal else shutil.get_terminal_size((80, 24)).columns
    demo_module.run(folder or Path(tempfile.mkdtemp(prefix="wfctl-demo-")), out)


@_command("timeline")
def timeline_command(
    ctx: typer.Context,
    instance_id: str = typer.Argument(..., metavar="ID", autocompletion=_complete_ids,
                                      help="The instance to draw."),
    run: int | None = typer.Option(None, "--run", min=1, metavar="N",
                                   help="Draw this run (default: the current one)."),
    all_runs: bool = typer.Option(False, "--all-runs", help="Draw every run, one after another."),
    width: int | None = typer.Option(None, "--width", min=40, max=MAX_WIDTH, metavar="COLUMNS",
                                     help="Draw this wide (default: the terminal's width)."),
) -> None:
    """A picture of a run: a lane per step, attempts as bars, deadlines as markers in time."""
    from wfctl.show import render, timeline

    if run is not None and all_runs:
        _usage("--run and --all-runs exclude each other")
    client = _client(ctx)
    doc = client.describe(instance_id, run)
    events = client.history(instance_id, run=run, all_runs=all_runs)
    out = render.console()
    if width is None:
        # Piped, the chart is drawn for COLUMNS (or 100), not for the 500 columns of a table.
        width = out.width if out.is_terminal else shutil.get_terminal_size((100, 24)).columns
    out.print(timeline.draw(doc, events, now=client.now(), width=width), soft_wrap=True)



@_command("ui")
def ui_command(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", metavar="ADDRESS",
                             help="Listen on this address (another than loopback needs "
                                  "--allow-remote and WFCTL_UI_TOKEN)."),
    port: int = typer.Option(8484, "--port", min=0, max=65535, metavar="PORT",
                             help="Listen on this port (0: any free one)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in a browser."),
    allow_actions: bool = typer.Option(False, "--allow-actions",
                                       help="Offer signal, pause, resume, cancel, terminate "
                                            "and retry (refused by default)."),
    allow_remote: bool = typer.Option(False, "--allow-remote",
                                      help="Allow an address other than loopback."),
) -> None:
    """A web view of the database: instances, one instance with its timeline, its history."""
    reads.ui(_client(ctx), host=host, port=port, open_browser=open_browser,
             allow_actions=allow_actions, allow_remote=allow_remote)
