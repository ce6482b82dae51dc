"""`wfctl validate --json` answers with one document for every kind of problem: `valid: false`
and the errors, exit 1; the same errors as `Error:` lines without --json."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wfctl.cli import app

VALID = """
version: 1
workflows:
  etl:
    execution_timeout: 2h
    steps:
      - activity: {handler}
        name: extract
"""


def validate(folder: Path, text: str | None, *args: str):
    workflows = folder / "workflows.yaml"
    if text is not None:
        workflows.write_text(textwrap.dedent(text))
    return CliRunner().invoke(app, ["--db", str(folder / "wfctl.db"), "-w", str(workflows),
                                    "validate", *args])


def handler_module(folder: Path, body: str) -> str:
    """A module beside workflows.yaml (its folder is on sys.path), named once per test."""
    name = f"handlers_{uuid.uuid4().hex[:12]}"
    (folder / f"{name}.py").write_text(textwrap.dedent(body))
    return name


def test_a_valid_file_is_valid(tmp_path):
    result = validate(tmp_path, VALID.format(handler="wfh:mark"), "--json")

    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["valid"], doc["errors"]) == (True, [])
    assert doc["workflow_types"]["etl"]["execution_timeout_seconds"] == 7200


def broken(folder: Path, kind: str) -> tuple[str | None, str]:
    """Definitions text with one kind of problem, and the error it must give."""
    path = folder / "workflows.yaml"
    if kind == "yaml syntax":
        return "version: 1\nworkflows: [\n", f"{path}:3: invalid YAML: expected the node content"
    if kind == "schema":
        return (VALID.format(handler="wfh:mark").replace("execution_timeout", "execution_timout"),
                f"{path}:5: workflows.etl.execution_timout: unknown key (did you mean "
                "execution_timeout?)")
    if kind == "duration":
        return (VALID.format(handler="wfh:mark").replace("2h", "1d1d"),
                f"{path}:5: workflows.etl.execution_timeout: write 2d: each unit once, largest "
                "first (got '1d1d')")
    if kind == "unknown module":
        return (VALID.format(handler="no_such_module_xyz:f"),
                f"{path}:7: workflows.etl.steps[0]: handler no_such_module_xyz:f: "
                "cannot import 'no_such_module_xyz'")
    if kind == "missing function":
        module = handler_module(folder, "def other(state):\n    return None\n")
        return (VALID.format(handler=f"{module}:extract"),
                f"{path}:7: workflows.etl.steps[0]: handler {module}:extract: "
                f"module '{module}' has no function 'extract'")
    if kind == "not callable":
        module = handler_module(folder, "extract = 42\n")
        return (VALID.format(handler=f"{module}:extract"),
                f"{path}:7: workflows.etl.steps[0]: handler {module}:extract: "
                f"{module}.extract is not callable (it is int 42)")
    if kind == "import raises":
        module = handler_module(folder, "raise RuntimeError('no config')\n")
        return (VALID.format(handler=f"{module}:extract"),
                f"{path}:7: workflows.etl.steps[0]: handler {module}:extract: "
                "importing it raised RuntimeError: no config")
    if kind == "import exits":
        module = handler_module(folder, "import sys\nsys.exit(3)\n")
        return (VALID.format(handler=f"{module}:extract"),
                f"{path}:7: workflows.etl.steps[0]: handler {module}:extract: "
                "importing it raised SystemExit: 3")
    assert kind == "missing file"
    return None, f"{path}: no such file"


KINDS = ["yaml syntax", "schema", "duration", "unknown module", "missing function",
         "not callable", "import raises", "import exits", "missing file"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_error_is_a_document_with_valid_false(tmp_path, kind):
    text, message = broken(tmp_path, kind)

    result = validate(tmp_path, text, "--json")

    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["valid"] is False
    assert len(doc["errors"]) == 1 and doc["errors"][0].startswith(message), doc["errors"]
    assert set(doc) == {"valid", "workflow_types", "warnings", "errors"}
    assert result.stderr.startswith(f"Error: {message}")
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "wfctl.db").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_without_json_every_kind_of_error_is_one_error_line(tmp_path, kind):
    text, message = broken(tmp_path, kind)

    result = validate(tmp_path, text)

    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {message}")
    assert len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stdout + result.stderr


def test_every_handler_that_cannot_be_used_is_listed(tmp_path):
    module = handler_module(tmp_path, "extract = 'text'\n")
    text = VALID.format(handler=f"{module}:extract") + \
        "      - activity: nowhere_xyz:load\n        name: load\n"

    result = validate(tmp_path, text, "--json")

    assert result.exit_code == 1
    errors = json.loads(result.stdout)["errors"]
    assert [error.split(": ", 2)[1] for error in errors] == \
        ["workflows.etl.steps[0]", "workflows.etl.steps[1]"]
    assert "is not callable (it is str 'text')" in errors[0]
    assert result.stderr == "".join(f"Error: {error}\n" for error in errors)


# Every error at once, each where it is written

MANY_ERRORS = """
version: 1
workflows:
  order:
    retention: 1M
    steps:
      - activty: {module}:ship
        start_to_close: 1m
      - activity: {module}:missing
        start_to_clos: 1m
      - parallel:
          - activity: no_such_module_xyz:pack
      - activity: {module}:ship
  other:
    deadline: 6M
    on_deadlin: {module}:late
    steps:
      - wait_for_signl: go
"""


def test_every_error_is_reported_with_its_line_and_key_path(tmp_path):
    module = handler_module(tmp_path, "def ship(state):\n    return None\n")
    path = tmp_path / "workflows.yaml"
    expected = [
        f"{path}:5: workflows.order.retention: M is not a unit: minutes are m (1m) and months "
        "are not supported (got '1M')",
        f"{path}:7: workflows.order.steps[0].activty: unknown step kind (did you mean activity?)",
        f"{path}:9: workflows.order.steps[1]: handler {module}:missing: module '{module}' has "
        "no function 'missing'",
        f"{path}:10: workflows.order.steps[1].start_to_clos: unknown key (did you mean "
        "start_to_close?)",
        f"{path}:12: workflows.order.steps[2].parallel[0]: handler no_such_module_xyz:pack: "
        "cannot import 'no_such_module_xyz': No module named 'no_such_module_xyz'",
        f"{path}:15: workflows.other.deadline: M is not a unit: minutes are m (6m) and months "
        "are not supported (got '6M')",
        f"{path}:16: workflows.other.on_deadlin: unknown key (did you mean on_deadline?)",
        f"{path}:18: workflows.other.steps[0].wait_for_signl: unknown step kind (did you mean "
        "wait_for_signal?)",
    ]

    as_text = validate(tmp_path, MANY_ERRORS.format(module=module))
    as_json = validate(tmp_path, None, "--json")

    assert (as_text.exit_code, as_text.stdout) == (1, "")
    assert as_text.stderr == "".join(f"Error: {error}\n" for error in expected)
    assert as_json.exit_code == 1
    doc = json.loads(as_json.stdout)
    assert (doc["valid"], doc["errors"]) == (False, expected)
    assert as_json.stderr == as_text.stderr
    assert not (tmp_path / "wfctl.db").exists()


def test_another_command_names_the_first_error_and_how_many_more(tmp_path):
    module = handler_module(tmp_path, "def ship(state):\n    return None\n")
    validate(tmp_path, MANY_ERRORS.format(module=module))
    path = tmp_path / "workflows.yaml"

    result = CliRunner().invoke(app, ["--db", str(tmp_path / "wfctl.db"), "-w", str(path),
                                      "start", "order"])

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: {path}:5: workflows.order.retention: M is not a unit: minutes are m (1m) and "
        "months are not supported (got '1M') (and 5 more errors: wfctl validate lists them)\n")
    assert not (tmp_path / "wfctl.db").exists()


@pytest.mark.parametrize(("written", "suggested"), [
    ("activty: wfh:mark", "workflows.etl.steps[0].activty: unknown step kind (did you mean "
                          "activity?)"),
    ("activity: wfh:mark\nhearbeat: 5s", "workflows.etl.steps[0].hearbeat: unknown key "
                                         "(did you mean heartbeat?)"),
    ("activity: wfh:mark\nbackoff: {inital: 1s}",
     "workflows.etl.steps[0].backoff.inital: unknown key (did you mean initial?)"),
    ("dealy: 5s", "workflows.etl.steps[0].dealy: unknown step kind (did you mean delay?)"),
    ("activity: wfh:mark\ncolour: blue",
     "workflows.etl.steps[0].colour: unknown key (expected one of: activity, name, "
     "schedule_to_start, start_to_close, schedule_to_close, heartbeat, max_attempts, backoff, "
     "non_retryable, queue)"),
    ("sleep: 5s", "workflows.etl.steps[0]: expected exactly one of activity, delay, "
                  "wait_for_signal, parallel, workflow, continue_as_new (found none)"),
])
def test_an_unknown_key_suggests_the_closest_known_one(tmp_path, written, suggested):
    step = written.replace("\n", "\n        ")
    result = validate(tmp_path, f"version: 1\nworkflows:\n  etl:\n    steps:\n      - {step}\n")

    line = 5 + written.count("\n")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'workflows.yaml'}:{line}: {suggested}\n"


# Settings that cannot be meant: warnings, and still valid

@pytest.mark.parametrize(("settings", "step", "warning"), [
    ("on_deadline: wfh:mark", "",
     "4: workflows.etl.on_deadline: on_deadline is set but the type has no deadline: it runs "
     "only for instances started with --deadline"),
    ("", "heartbeat: 1h\nstart_to_close: 1m",
     "5: workflows.etl.steps[0]: heartbeat (1h) is not shorter than start_to_close (1m): the "
     "heartbeat timeout can never fire"),
    ("", "heartbeat: 1m\nstart_to_close: 1m",
     "5: workflows.etl.steps[0]: heartbeat (1m) is not shorter than start_to_close (1m): the "
     "heartbeat timeout can never fire"),
    ("", "schedule_to_start: 10m\nschedule_to_close: 5m",
     "5: workflows.etl.steps[0]: schedule_to_start (10m) is not shorter than schedule_to_close "
     "(5m): it can never fire"),
    ("", "start_to_close: 5m\nschedule_to_close: 5m",
     "5: workflows.etl.steps[0]: start_to_close (5m) is not shorter than schedule_to_close (5m): "
     "it can never fire"),
    ("retention: 30s", "",
     "4: workflows.etl.retention: retention (30s) is shorter than a minute: a closed instance "
     "is deleted almost at once"),
    ("run_timeout: 1h\nexecution_timeout: 2h", "- wait_for_signal: go\n  timeout: 2h",
     "8: workflows.etl.steps[1]: the signal wait's timeout (2h) is longer than run_timeout (1h): "
     "the run_timeout fires first"),
    ("execution_timeout: 30m", "- wait_for_signal: go\n  timeout: 1h",
     "7: workflows.etl.steps[1]: the signal wait's timeout (1h) is longer than execution_timeout "
     "(30m): the execution_timeout fires first"),
])
def test_settings_that_cannot_be_meant_are_warnings(tmp_path, settings, step, warning):
    """`settings` of the type, `step` the first step's options (or a second step)."""
    lines = ["version: 1", "workflows:", "  etl:"]
    lines += [f"    {line}" for line in settings.splitlines()]
    lines += ["    steps:", "      - activity: wfh:mark"]
    indent = "      " if step.startswith("- ") else "        "
    lines += [f"{indent}{line}" for line in step.splitlines()]
    path = tmp_path / "workflows.yaml"

    as_text = validate(tmp_path, "\n".join(lines) + "\n")
    as_json = validate(tmp_path, None, "--json")

    assert as_text.exit_code == 0, as_text.stderr
    assert "etl" in as_text.stdout
    assert as_text.stderr == f"Warning: {path}:{warning}\n"
    assert as_json.exit_code == 0
    doc = json.loads(as_json.stdout)
    assert (doc["valid"], doc["warnings"], doc["errors"]) == (True, [f"{path}:{warning}"], [])


def test_settings_that_can_be_meant_are_not_warned_of(tmp_path):
    result = validate(tmp_path, """
        version: 1
        defaults:
          retention: 1m
        workflows:
          etl:
            run_timeout: 1h
            deadline: 1d
            on_deadline: wfh:mark
            steps:
              - activity: wfh:mark
                heartbeat: 59s
                schedule_to_start: 1m
                start_to_close: 1m
                schedule_to_close: 2m
              - wait_for_signal: go
                timeout: 1h
    """)

    assert (result.exit_code, result.stderr) == (0, "")


def test_a_schedule_to_close_that_spans_several_attempts_is_not_warned_of(tmp_path):
    result = validate(tmp_path, """
        version: 1
        defaults:
          activity:
            schedule_to_start: 30s
            start_to_close: 5m
            schedule_to_close: 10m
            max_attempts: 3
        workflows:
          etl:
            steps:
              - activity: wfh:mark
              - activity: wfh:mark
                name: again
                schedule_to_start: 1m
                start_to_close: 1m
                schedule_to_close: 1h
    """)

    assert (result.exit_code, result.stderr) == (0, "")
    assert "etl" in result.stdout


def test_a_warning_under_defaults_is_given_once_not_for_every_step(tmp_path):
    result = validate(tmp_path, """
        version: 1
        defaults:
          activity:
            heartbeat: 5m
            start_to_close: 1m
        workflows:
          etl:
            steps:
              - activity: wfh:mark
              - activity: wfh:mark
                name: again
    """)

    assert result.exit_code == 0
    assert result.stderr == (
        f"Warning: {tmp_path / 'workflows.yaml'}:5: defaults.activity: heartbeat (5m) is not "
        "shorter than start_to_close (1m): the heartbeat timeout can never fire\n")


# start: handlers that cannot be imported here are warned of; it still starts

@pytest.mark.both_backends
def test_start_warns_of_each_handler_it_cannot_import_and_still_starts(tmp_path, db):
    module = handler_module(tmp_path, "def ship(state):\n    return None\n")
    path = tmp_path / "workflows.yaml"
    path.write_text(textwrap.dedent(f"""
        version: 1
        workflows:
          order:
            deadline: 1h
            on_deadline: {module}:late
            steps:
              - activity: nosuchmod:fn
              - activity: {module}:ship
              - parallel:
                  - activity: {module}:pack
                  - activity: {module}:ship
          other:
            steps:
              - activity: elsewhere_xyz:fn
    """))

    result = CliRunner().invoke(app, ["--db", db, "-w", str(path), "start", "order", "o-1"])

    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Started order o-1")
    assert result.stderr == (
        f"Warning: {path}:6: workflows.order.on_deadline: handler {module}:late: module "
        f"'{module}' has no function 'late'\n"
        f"Warning: {path}:8: workflows.order.steps[0]: handler nosuchmod:fn: cannot import "
        "'nosuchmod': No module named 'nosuchmod'\n"
        f"Warning: {path}:11: workflows.order.steps[2].parallel[0]: handler {module}:pack: "
        f"module '{module}' has no function 'pack'\n")
    listed = CliRunner().invoke(app, ["--db", db, "-w", str(path), "list", "--json"])
    assert [row["workflow_instance_id"] for row in json.loads(listed.stdout)] == ["o-1"]


@pytest.mark.both_backends
def test_start_says_nothing_more_when_every_handler_imports(tmp_path, db):
    path = tmp_path / "workflows.yaml"
    path.write_text(textwrap.dedent(VALID.format(handler="wfh:mark")))

    result = CliRunner().invoke(app, ["--db", db, "-w", str(path), "start", "etl", "e-1"])

    assert (result.exit_code, result.stderr) == (0, "")
