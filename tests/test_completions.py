"""Shell completion: the shipped scripts are current, each shell gets its own, names complete
from data."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.store import open_store

pytestmark = pytest.mark.both_backends

REPO = Path(__file__).parent.parent
# The scripts at the repository's top level, and their copies in the package, for the wheel.
COMPLETIONS = REPO / "completions"
PACKAGED = REPO / "wfctl" / "completions"
SHELLS = ("bash", "zsh", "fish")
DEFINITIONS = """
version: 1
workflows:
  data_import:
    steps:
      - activity: wfh:noop
  data_export:
    steps:
      - activity: wfh:noop
  cleanup:
    steps:
      - activity: wfh:noop
"""


def generated(shell: str) -> str:
    """The script the app itself gives for `shell` (the `source_<shell>` completion instruction).

    A zsh completion file must start with `#compdef`, so the blank lines around it are dropped.
    """
    result = CliRunner().invoke(app, [], prog_name="wfctl",
                                env={"_WFCTL_COMPLETE": f"source_{shell}"})
    assert result.exit_code == 0, result.output
    return result.stdout.strip() + "\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_shipped_completion_script_is_current(shell):
    path = COMPLETIONS / f"wfctl.{shell}"
    if os.environ.get("WFCTL_UPDATE_COMPLETIONS"):
        for folder in (COMPLETIONS, PACKAGED):
            (folder / f"wfctl.{shell}").write_text(generated(shell))
    assert path.read_text() == generated(shell), (
        f"{path} is out of date: run WFCTL_UPDATE_COMPLETIONS=1 pytest tests/test_completions.py")


def test_the_package_holds_the_same_scripts_as_the_top_level_folder():
    assert sorted(path.name for path in PACKAGED.iterdir()) == \
        sorted(path.name for path in COMPLETIONS.iterdir()) == [f"wfctl.{shell}" for shell in
                                                                sorted(SHELLS)]
    for path in COMPLETIONS.iterdir():
        assert (PACKAGED / path.name).read_bytes() == path.read_bytes(), (
            f"{PACKAGED / path.name} differs from {path}: run WFCTL_UPDATE_COMPLETIONS=1 "
            "pytest tests/test_completions.py")


def test_the_zsh_script_can_be_autoloaded():
    assert (COMPLETIONS / "wfctl.zsh").read_text().startswith("#compdef wfctl\n")


def in_bash(command: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`command` run by bash, as a user types it there: typer names the shell it runs in."""
    env = {**os.environ, "HOME": str(home), "SHELL": "/bin/bash",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", None)
    return subprocess.run(["bash", "-c", f'"{sys.executable}" -m wfctl {command}'], env=env,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.process
@pytest.mark.parametrize("shell", SHELLS)
def test_show_completion_prints_the_named_shells_script(tmp_path, shell):
    done = in_bash(f"--show-completion {shell}", tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (COMPLETIONS / f"wfctl.{shell}").read_text()


@pytest.mark.process
def test_show_completion_without_a_shell_prints_the_script_of_the_shell_it_runs_in(tmp_path):
    done = in_bash("--show-completion", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (COMPLETIONS / "wfctl.bash").read_text().strip()


@pytest.mark.process
@pytest.mark.parametrize(("shell", "installed", "rc_file"), [
    ("bash", ".bash_completions/wfctl.sh", ".bashrc"),
    ("zsh", ".zfunc/_wfctl", ".zshrc"),
    ("fish", ".config/fish/completions/wfctl.fish", None),
])
def test_install_completion_installs_the_named_shells_script(tmp_path, shell, installed,
                                                             rc_file):
    done = in_bash(f"--install-completion {shell}", tmp_path)

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"{shell} completion installed in {tmp_path / installed}\n"
                           "Completion will take effect once you restart the terminal\n")
    script = (tmp_path / installed).read_text()
    assert script.strip() == (COMPLETIONS / f"wfctl.{shell}").read_text().strip()
    # Only the named shell's start-up file is touched.
    assert sorted(path.name for path in tmp_path.iterdir() if path.is_file()) == \
        ([rc_file] if rc_file else [])


@pytest.mark.parametrize("option", ["--show-completion", "--install-completion"])
def test_a_shell_wfctl_has_no_completion_for_is_a_usage_error(monkeypatch, tmp_path, option):
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(app, [option, "tcsh"], prog_name="wfctl")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"Error: {option}: 'tcsh' is not one of bash, zsh, fish, "
                             "powershell, pwsh\n")
    assert list(tmp_path.iterdir()) == []


def test_install_completion_is_offered_in_help():
    result = CliRunner().invoke(app, ["--help"], prog_name="wfctl")
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout


# completing names: the bash protocol, as the shipped script speaks it

def complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash would offer for the last word of `words` (the cursor is at its end)."""
    parts = words.split(" ")
    result = CliRunner().invoke(app, [], prog_name="wfctl", env={
        "_WFCTL_COMPLETE": "complete_bash", "COMP_WORDS": words,
        "COMP_CWORD": str(len(parts) - 1), **(env or {})})
    assert result.exit_code == 0, result.output
    return result.stdout.split()


@pytest.fixture
def files(tmp_path: Path, db: str) -> tuple[str, Path]:
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(DEFINITIONS))
    with Client(db, workflows) as client:
        for instance_id in ("import-1", "import-2", "export-1"):
            client.start("data_import", instance_id)
    return db, workflows


def test_type_names_complete_from_the_definitions(files):
    _, workflows = files
    assert complete(f"wfctl -w {workflows} start data_") == ["data_export", "data_import"]
    assert complete(f"wfctl -w {workflows} start ") == ["cleanup", "data_export", "data_import"]
    assert complete(f"wfctl -w {workflows} list --type c") == ["cleanup"]


def test_type_names_come_from_wfctl_workflows_too(files):
    _, workflows = files
    assert complete("wfctl start cl", {"WFCTL_WORKFLOWS": str(workflows)}) == ["cleanup"]


@pytest.mark.parametrize("command", ["describe", "history", "retry", "signal", "pause",
                                     "resume", "cancel", "terminate"])
def test_instance_ids_complete_from_the_database(files, command):
    db, _ = files
    assert complete(f"wfctl --db {db} {command} import-") == ["import-1", "import-2"]
    assert complete(f"wfctl --db {db} {command} ") == ["export-1", "import-1", "import-2"]


def test_names_complete_from_the_files_named_after_the_command_too(files):
    db, workflows = files
    assert complete(f"wfctl describe --db {db} import-") == ["import-1", "import-2"]
    assert complete(f"wfctl start -w {workflows} data_") == ["data_export", "data_import"]


def test_instance_ids_come_from_wfctl_db_too(files):
    db, _ = files
    assert complete("wfctl describe exp", {"WFCTL_DB": str(db)}) == ["export-1"]


def test_signal_names_complete_from_the_instances_type(tmp_path, db):
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent("""
        version: 1
        workflows:
          order:
            steps:
              - wait_for_signal: shipped
              - wait_for_signal: paid
              - wait_for_signal: shipped_again
          plain:
            steps:
              - activity: wfh:noop
    """))
    with Client(db, workflows) as client:
        client.start("order", "o-2")
        client.start("plain", "p-1")

    assert complete(f"wfctl --db {db} signal o-2 ") == ["paid", "shipped", "shipped_again"]
    assert complete(f"wfctl --db {db} signal o-2 sh") == ["shipped", "shipped_again"]
    assert complete(f"wfctl --db {db} signal p-1 ") == []
    assert complete(f"wfctl --db {db} signal nosuch ") == []


IDS = ["a%b", "a%c", "axb", "a_b", "a_", "aXb", "a\\b", "a\\", "ab", "é-1", "é-2", "éa", "e-1",
       "日本-1", "日本", "z\U0010ffff", "z\U0010ffffa", "z\U0010ffff\U0010ffff", "z\ud7ffa",
       "z\ue000", "zz"]


@pytest.mark.parametrize("prefix", ["", "a", "a%", "a_", "a\\", "é", "日本", "z\U0010ffff",
                                    "z\ud7ff", "\U0010ffff", "none"])
def test_instance_ids_are_exactly_those_starting_with_the_prefix(db, prefix):
    store = open_store(db)
    created = datetime(2026, 1, 1, tzinfo=UTC)
    with store.write() as tx:
        tx.put_definitions("d", "workflows.yaml", "version: 1", created)
        for instance_id in IDS:
            tx.insert_instance({
                "workflow_instance_id": instance_id, "workflow_type": "t",
                "definitions_digest": "d", "status": "completed", "current_run_id": "r",
                "run_count": 1, "child_policy": "abandon", "created_at": created,
                "updated_at": created})

    with store.read() as tx:
        found = tx.instance_ids(prefix, 100)
        assert tx.instance_ids(prefix, 2) == found[:2]
    store.close()

    assert found == sorted(instance_id for instance_id in IDS if instance_id.startswith(prefix))


@pytest.mark.sqlite_only        # a missing file
def test_completing_never_creates_a_database(tmp_path):
    db = tmp_path / "none.db"
    assert complete(f"wfctl --db {db} describe ") == []
    assert not db.exists()


def test_statuses_event_types_and_log_options_complete():
    assert complete("wfctl list --status t") == ["timed_out", "terminated"]
    assert complete("wfctl history x --event-type ActivityT") == ["ActivityTimedOut"]
    assert complete("wfctl work --log-format j") == ["json"]
    assert complete("wfctl work --log-level w") == ["warning"]


def test_commands_complete():
    assert complete("wfctl de") == ["describe", "demo", "deadlines"]


def test_zsh_and_fish_protocols_answer_too(files):
    db, _ = files
    zsh = CliRunner().invoke(app, [], prog_name="wfctl", env={
        "_WFCTL_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": f"wfctl --db {db} describe ex"})
    fish = CliRunner().invoke(app, [], prog_name="wfctl", env={
        "_WFCTL_COMPLETE": "complete_fish", "_TYPER_COMPLETE_FISH_ACTION": "get-args",
        "_TYPER_COMPLETE_ARGS": f"wfctl --db {db} describe ex"})
    assert '"export-1"' in zsh.stdout
    assert fish.stdout.split() == ["export-1"]


@pytest.mark.process
def test_bash_completes_ids_through_the_shipped_script(files, tmp_path):
    db, _ = files
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "wfctl").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m wfctl "$@"\n')
    (bin_dir / "wfctl").chmod(0o755)
    script = (f"source {COMPLETIONS / 'wfctl.bash'}; "
              f"COMP_WORDS=(wfctl --db {db} describe import-); COMP_CWORD=4; "
              "_wfctl_completion wfctl; printf '%s\\n' \"${COMPREPLY[@]}\"")

    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})

    assert done.stdout.split() == ["import-1", "import-2"], done.stderr
