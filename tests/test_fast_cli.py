"""Plain `describe`, `list` and `history` command lines run without typer: the same output,
errors and exit codes as through the typer application, and only the modules a read needs."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from conftest import at

from wfctl import Client
from wfctl.cli import app, fast, main

pytestmark = pytest.mark.both_backends

REPO = Path(__file__).parent.parent
DEFINITIONS = """
version: 1
workflows:
  loop:
    steps:
      - delay: 10s
      - activity: wfh:loop_counter
      - continue_as_new: {while: more}
  broken:
    steps:
      - activity: wfh:value_error
        name: parse
        non_retryable: [ValueError]
  report:
    deadline: 1d
    steps:
      - wait_for_signal: go
"""
# What a read must not import: typer and rich, the YAML parser (a completed run needs no
# definitions), the migration library, the engine's write machinery and the worker.
NOT_FOR_READS = ("typer", "click", "rich", "pydantic", "yaml", "sqlite_utils", "dateutil",
                 "wfctl.engine", "wfctl.worker", "wfctl.lang.definitions",
                 "wfctl.lang.handlers", "wfctl.show.render", "wfctl.show.live")


@pytest.fixture
def env(make_env):
    """l1: three runs (continue-as-new), completed; b1: failed; r1: waiting on a signal; big:
    waiting, with a state of 40 keys."""
    env = make_env(DEFINITIONS)
    env.start("loop", "l1", input={"until": 3})
    env.start("broken", "b1")
    env.start("report", "r1")
    env.start("report", "big", input={f"key{n:02d}": n for n in range(40)})
    for now in (0, 10, 20, 30):
        env.run(now)
    return env


@pytest.fixture
def both(env, monkeypatch, capsys):
    """both(*args) runs the command line through the fast path, then through the typer
    application; each gives (exit code, stdout, stderr)."""
    # Rendered views say how long ago things were: both look from the same instant.
    monkeypatch.setattr("wfctl.clock.now", lambda: at(3600))
    # On PostgreSQL the views look from the database's clock: that one too.
    monkeypatch.setattr("wfctl.store.postgres.PostgresStore.now", lambda store: at(3600))
    paths = ["--db", env.db, "-w", str(env.folder / "workflows.yaml")]

    def outcome(call) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            call()
        out, err = capsys.readouterr()
        return exited.value.code, out, err

    def run(*args: str, global_options: bool = True) -> tuple[tuple, tuple]:
        argv = [*paths, *args] if global_options else list(args)
        assert fast.parse(argv) is not None, f"{argv} was left to typer"
        monkeypatch.setattr(sys, "argv", ["wfctl", *argv])
        return outcome(main), outcome(lambda: app(args=argv, prog_name="wfctl"))

    return run


@pytest.mark.parametrize("args", [
    ("describe", "l1", "--json"),
    ("describe", "l1"),
    ("describe", "--json", "l1", "--run", "1"),
    ("describe", "l1", "--run=2", "--json", "--json"),
    ("describe", "l1", "--run", "9", "--json"),
    ("describe", "l1", "--run", "9"),
    ("describe", "b1", "--json"),
    ("describe", "b1"),
    ("describe", "r1", "--json"),
    ("describe", "r1"),
    ("describe", "big"),
    ("describe", "big", "--full-state"),
    ("describe", "--full-state", "big", "--json"),
    ("describe", "nope", "--json"),
    ("describe", "nope"),
    ("describe", ""),
    ("list", "--json"),
    ("list",),
    ("list", "--status", "completed", "--json"),
    ("list", "--status=failed"),
    ("list", "--status", "Completed"),
    ("list", "--status", "bogus", "--json"),
    ("list", "--type", "report", "--json"),
    ("list", "--type", "", "--json"),
    ("list", "--since", "2026-04-12", "--limit", "2", "--json"),
    ("list", "--since", "the day after"),
    ("list", "--since", "20h", "--json"),
    ("list", "--since", "6M"),
    ("list", "--since", "2026-04-12T12:00:00", "--json"),
    ("list", "--since=-1d", "--json"),
    ("history", "l1", "--json"),
    ("history", "l1", "--all-runs"),
    ("history", "l1", "--run", "2"),
    ("history", "l1", "--run", "1", "--all-runs"),
    ("history", "l1", "--event-type", "TimerFired", "--event-type=WorkflowStarted", "--json"),
    ("history", "l1", "--event-type", "Bogus"),
    ("history", "l1", "--no-tasks"),
    ("history", "l1", "--no-tasks", "--json"),
    ("history", "l1", "--no-tasks", "--event-type", "WorkflowTaskStarted"),
    ("history", "l1", "--follow", "--no-tasks", "--json"),
    ("history", "l1", "-f"),
    ("history", "l1", "--follow", "--json"),
    ("history", "l1", "--follow", "--all-runs", "--json"),
    ("history", "r1"),
    ("history", "nope", "--json"),
    ("ui", "--host", "0.0.0.0"),
    ("ui", "--host=10.0.0.1", "--allow-remote", "--port", "8080"),
])
def test_a_plain_read_command_line_gives_what_typer_gives(both, args):
    fast_outcome, typer_outcome = both(*args)
    assert fast_outcome == typer_outcome


def test_the_environment_names_the_files_as_with_typer(both, env, monkeypatch):
    monkeypatch.setenv("WFCTL_DB", env.db)
    monkeypatch.setenv("WFCTL_WORKFLOWS", "")
    fast_outcome, typer_outcome = both("describe", "l1", "--json", global_options=False)
    assert fast_outcome == typer_outcome
    assert fast_outcome[0] == 0


@pytest.mark.parametrize(("args", "without_them"), [
    (("describe", "l1", "--json", "--db", "{db}", "-w", "{workflows}"), ("describe", "l1", "--json")),
    (("describe", "--db={db}", "l1", "--workflows", "{workflows}"), ("describe", "l1")),
    (("list", "--status", "completed", "--db", "{db}", "--json"),
     ("list", "--status", "completed", "--json")),
    (("history", "-w", "{workflows}", "l1", "--no-tasks", "--db", "{db}"),
     ("history", "l1", "--no-tasks")),
])
def test_the_global_options_after_the_command_give_what_they_give_before_it(both, env, args,
                                                                              without_them):
    paths = {"db": env.db, "workflows": str(env.folder / "workflows.yaml")}
    after = [arg.format(**paths) for arg in args]
    fast_outcome, typer_outcome = both(*after, global_options=False)
    assert fast_outcome == typer_outcome == both(*without_them)[0]
    assert fast_outcome[0] == 0


def test_a_database_after_the_command_is_the_one_read(both, env, tmp_path):
    fast_outcome, typer_outcome = both("describe", "l1", "--db", str(tmp_path / "none.db"),
                                       global_options=False)
    assert fast_outcome == typer_outcome == (1, "", f"Error: no database at {tmp_path}/none.db\n")


@pytest.mark.parametrize("option", ["", "missing.db", "--db=missing.db"])
def test_a_database_that_cannot_be_read_is_the_same_error(both, env, option):
    args = [option] if option.startswith("--") else ["--db", option]
    fast_outcome, typer_outcome = both(*args, "list", "--json", global_options=False)
    assert fast_outcome == typer_outcome
    assert fast_outcome[0] == 1 and fast_outcome[2].startswith("Error: ")


def test_an_interrupted_read_exits_as_with_typer(both, monkeypatch):
    def interrupted(*args, **options):
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "describe", interrupted)
    fast_outcome, typer_outcome = both("describe", "l1", "--json")
    assert fast_outcome == typer_outcome == (130, "", "")


@pytest.mark.parametrize("argv", [
    [],
    ["--help"],
    ["--version"],
    ["describe", "l1", "--help"],
    ["describe"],
    ["describe", "l1", "l2"],
    ["describe", "-"],
    ["describe", "--", "l1"],
    ["describe", "l1", "--run", "0"],
    ["describe", "l1", "--run", "01"],
    ["describe", "l1", "--run", "+1"],
    ["describe", "l1", "--run", "1", "--run", "2"],
    ["describe", "l1", "--run", "99999999999999999999"],
    ["describe", "l1", "--json=yes"],
    ["describe", "a\udcffb"],
    ["list", "--limit", "0"],
    ["list", "-h"],
    ["history", "l1", "-h"],
    ["describe", "-h"],
    ["-h", "list"],
    ["list", "--since", "-1d"],
    ["list", "--watch=1"],
    ["list", "l1"],
    ["--db", "a.db", "list", "--db", "b.db"],
    ["list", "-w", "a.yaml", "--workflows", "b.yaml"],
    ["list", "-wworkflows.yaml"],
    ["list", "--db"],
    ["history", "l1", "-fx"],
    ["-w=workflows.yaml", "list"],
    ["-wworkflows.yaml", "list"],
    ["--db", "a.db", "--db", "b.db", "list"],
    ["--db", "--json", "list"],
    ["--db"],
    ["start", "loop"],
    ["timeline", "l1"],
])
def test_anything_but_a_plain_read_command_line_is_left_to_typer(argv):
    assert fast.parse(argv) is None


def test_shell_completion_is_left_to_typer(monkeypatch):
    monkeypatch.setenv("_WFCTL_COMPLETE", "complete_bash")
    assert fast.run(["describe", "l1", "--json"]) is None


def test_the_fast_path_knows_each_read_command_as_typer_declares_it():
    group = typer.main.get_command(app)
    for name, command in fast.COMMANDS.items():
        declared = group.commands[name]
        options = {opt: param for param in declared.params if param.param_type_name == "option"
                   for opt in param.opts}
        assert set(command.options) | set(fast.GLOBAL_OPTIONS) == set(options), name
        defaults = inspect.signature(command.body).parameters
        for opt, option in command.options.items():
            param = options[opt]
            assert (option.keyword, option.read is None, option.repeatable) == \
                (param.name, param.is_flag, param.multiple), f"{name} {opt}"
            assert list(defaults[param.name].default or []) == list(param.default or []) \
                if param.multiple else defaults[param.name].default == param.default, \
                f"{name} {opt}"
        arguments = [param.name for param in declared.params
                     if param.param_type_name == "argument"]
        assert arguments == (["instance_id"] if command.takes_id else []), name
    options = {opt: param for param in group.params if param.name in ("db", "workflows")
               for opt in param.opts}
    assert set(fast.GLOBAL_OPTIONS) == set(options)
    for opt, option in fast.GLOBAL_OPTIONS.items():
        param = options[opt]
        assert option.keyword == param.name
        assert fast.GLOBAL_DEFAULTS[param.name] == (param.envvar, param.default)


# What each read imports, in a fresh process

def imported(folder: Path, code: str, *args: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` with `args` as its argv."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('MODULES', *sorted(sys.modules), file=sys.stderr))\n"
              + code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = done.stderr.splitlines()[-1]
    assert line.startswith("MODULES ")
    return set(line.split()[1:])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names))


@pytest.mark.process
@pytest.mark.parametrize("args", [
    ("describe", "l1", "--json"),
    ("describe", "l1", "--run", "3", "--json"),
    ("list", "--json"),
    ("list", "--status", "completed", "--limit", "5", "--json"),
    ("history", "l1", "--all-runs", "--json"),
])
def test_a_json_read_imports_neither_typer_rich_yaml_nor_the_engine(env, args):
    modules = imported(env.folder, "from wfctl.cli import main\nmain()",
                       "--db", env.db, *args)
    assert loaded(modules, NOT_FOR_READS) == []


@pytest.mark.process
def test_describing_an_open_run_reads_its_definitions_and_nothing_more(env):
    modules = imported(env.folder, "from wfctl.cli import main\nmain()",
                       "--db", env.db, "describe", "r1", "--json")
    assert "yaml" in modules
    assert loaded(modules, NOT_FOR_READS) == loaded(modules, ("wfctl.lang.definitions", "yaml"))


@pytest.mark.process
def test_the_python_api_reads_without_the_engine_or_the_worker(env):
    code = ("import wfctl\n"
            f"with wfctl.Client({env.db!r}, create=False) as client:\n"
            "    client.describe('l1'); client.history('l1', all_runs=True); client.list()\n"
            "    client.instance_ids('l')\n")
    assert loaded(imported(env.folder, code), NOT_FOR_READS) == []


@pytest.mark.process
def test_a_read_through_typer_imports_neither_yaml_nor_the_engine(env):
    # --run 03 is for typer to read; it still needs no definitions, engine or worker.
    modules = imported(env.folder, "from wfctl.cli import main\nmain()",
                       "--db", env.db, "describe", "l1", "--run", "03", "--json")
    assert "typer" in modules
    assert loaded(modules, ("yaml", "sqlite_utils", "wfctl.engine", "wfctl.worker",
                            "wfctl.lang.definitions", "wfctl.show.render")) == []


@pytest.mark.process
def test_a_reader_that_goes_away_ends_both_paths_alike(make_env):
    env = make_env(DEFINITIONS)
    for n in range(300):
        env.start("report", f"r{n:03d}")
    env.client.close()
    # Buffered, as in a shell, so that the output does not fit in the pipe.
    child_env = {name: value for name, value in os.environ.items()
                 if name != "PYTHONUNBUFFERED"}
    child_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    outcomes = []
    # --limit 0300 is the same number, read by typer.
    for limit in ("300", "0300"):
        child = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", env.db, "list", "--json",
             "--limit", limit], cwd=env.folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=child_env)
        assert child.stdout.read(10) == b"[\n  {\n    "
        child.stdout.close()
        outcomes.append((child.wait(timeout=30), child.stderr.read()))
        child.stderr.close()
    assert outcomes[0] == outcomes[1] == (1, b"")
