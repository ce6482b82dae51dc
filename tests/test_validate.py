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
                f"{path}:5: workflows.etl.execution_timeout: expected a duration")
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
