"""Bad input of every kind is one `Error:` line on stderr, exit 1 (2 for usage), no traceback,
and nothing written: bad paths, folders, foreign and newer databases, undecodable bytes, deep
nesting, NaN and Infinity, absurd durations and numbers."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pg
import pytest
from typer.testing import CliRunner

from wfctl.cli import app
from wfctl.store.schema import migrations

pytestmark = pytest.mark.both_backends
REPO = Path(__file__).parent.parent

DEFINITIONS = """
version: 1
workflows:
  etl:
    steps:
      - activity: wfh:mark
      - wait_for_signal: go
"""


class Cli:
    """wfctl on a folder with workflows.yaml; `--db` is the test's database (`wfctl.db` there,
    or a PostgreSQL URL) unless given."""

    def __init__(self, folder: Path, db: str, backend: str) -> None:
        self.folder = folder
        self.db = db
        self.backend = backend
        self.workflows = folder / "workflows.yaml"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))
        self.runner = CliRunner()
        self.fresh = self.snapshot()

    def __call__(self, *args: str, db: Path | str | None = None, workflows: Path | None = None,
                 input: bytes | str | None = None):
        return self.runner.invoke(
            app, ["--db", str(db if db is not None else self.db),
                  "-w", str(workflows or self.workflows), *args], input=input)

    def snapshot(self) -> dict[str, str]:
        """What the database holds: each file beside it and the digest of its bytes, or each
        table of the PostgreSQL database and the digest of its rows."""
        if self.backend == "postgres":
            return pg.contents(self.db)
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
                for path in sorted(self.folder.glob(Path(self.db).name + "*")) if path.is_file()}

    def assert_nothing_written(self) -> None:
        """Not even an empty database file; on PostgreSQL, the database as it was made."""
        assert self.snapshot() == self.fresh


def refused(result, message: str, code: int = 1) -> None:
    """One `Error:` line, exactly `message`, the exit code, no traceback, nothing on stdout."""
    assert "Traceback" not in result.stderr
    assert result.stderr == f"Error: {message}\n"
    assert result.exit_code == code
    assert result.stdout == ""


@pytest.fixture
def cli(tmp_path: Path, db: str, backend: str) -> Cli:
    return Cli(tmp_path, db, backend)


@pytest.fixture
def started(cli: Cli) -> Cli:
    """A database holding one running instance, a1."""
    assert cli("start", "etl", "a1").exit_code == 0
    return cli


# --db: paths that are not a database

READS = [["list"], ["describe", "a1"], ["describe", "a1", "--json"], ["history", "a1"],
         ["deadlines", "check"], ["signal", "a1", "go"], ["pause", "a1"], ["resume", "a1"],
         ["cancel", "a1"], ["terminate", "a1"], ["retry", "a1"], ["timeline", "a1"]]


@pytest.mark.sqlite_only        # a missing file
@pytest.mark.parametrize("args", READS)
def test_a_command_on_a_missing_database_says_so_and_creates_nothing(cli, args):
    refused(cli(*args), f"no database at {cli.db}")
    assert list(cli.folder.iterdir()) == [cli.workflows]


@pytest.mark.sqlite_only        # a path
@pytest.mark.parametrize("args", [["list"], ["start", "etl"]])
def test_a_database_in_a_missing_folder(cli, args):
    db = cli.folder / "nofolder" / "w.db"
    message = f"no database at {db}" if args == ["list"] else \
        f"cannot create {db}: {db.parent}: no such folder"
    refused(cli(*args, db=db), message)
    assert not db.parent.exists()


@pytest.mark.sqlite_only        # a path
def test_a_database_below_a_file(cli):
    db = cli.workflows / "w.db"
    refused(cli("start", "etl", db=db), f"cannot open {db}: a part of the path is not a folder")


@pytest.mark.sqlite_only        # a path
@pytest.mark.parametrize("args", [["list"], ["start", "etl"]])
def test_a_folder_is_not_a_database(cli, args):
    refused(cli(*args, db=cli.folder), f"{cli.folder} is a folder, not a database file")


@pytest.mark.sqlite_only        # a path
def test_an_empty_path_is_not_a_database(cli):
    refused(cli("start", "etl", db=""), "no database path given")


@pytest.mark.sqlite_only        # an empty file
def test_an_empty_file_is_no_database_to_read_but_becomes_one_on_start(cli):
    Path(cli.db).touch()
    refused(cli("list"), f"no database at {cli.db} (the file is empty)")
    assert Path(cli.db).stat().st_size == 0
    assert cli("start", "etl", "a1").exit_code == 0
    assert json.loads(cli("list", "--json").stdout)[0]["workflow_instance_id"] == "a1"


@pytest.mark.sqlite_only        # a file that is not SQLite
@pytest.mark.parametrize("args", [["list"], ["describe", "a1", "--json"], ["start", "etl"],
                                  ["work", "--once"]])
def test_a_file_that_is_not_sqlite_is_refused_untouched(cli, args):
    Path(cli.db).write_bytes(b"not a database at all\n" * 100)
    before = cli.snapshot()
    refused(cli(*args), f"{cli.db} is not a wfctl database (not an SQLite file)")
    assert cli.snapshot() == before


@pytest.mark.sqlite_only        # writes into the SQLite file
@pytest.mark.parametrize("args", [["list"], ["start", "etl"], ["work", "--once"]])
def test_another_programs_sqlite_database_is_refused_untouched(cli, args):
    conn = sqlite3.connect(cli.db)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    before = cli.snapshot()
    refused(cli(*args),
            f"{cli.db} is not a wfctl database (an SQLite database with other tables)")
    assert cli.snapshot() == before


def made_newer(db: str, *, user_version: int | None, extra: tuple[str, ...] = ()) -> None:
    conn = sqlite3.connect(db)
    if user_version is not None:
        conn.execute(f"PRAGMA user_version = {user_version}")
    conn.executemany("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                     "VALUES ('wfctl', ?, 'later')", [(name,) for name in extra])
    conn.commit()
    conn.close()


@pytest.mark.sqlite_only        # writes into the SQLite file
@pytest.mark.parametrize("args", [["list"], ["describe", "a1", "--json"], ["start", "etl"],
                                  ["signal", "a1", "go"], ["work", "--once"],
                                  ["deadlines", "check"]])
def test_a_database_of_a_newer_wfctl_is_refused_and_never_written(started, args):
    known = migrations.version
    made_newer(started.db, user_version=known + 2,
               extra=("m900_from_the_future", "m901_from_the_future"))
    before = started.snapshot()
    refused(started(*args), f"{started.db} was written by a newer wfctl "
                            f"(schema {known + 2}; this wfctl knows up to {known})")
    assert started.snapshot() == before


@pytest.mark.sqlite_only        # writes into the SQLite file
def test_a_newer_database_without_user_version_is_known_by_its_migrations(started):
    known = migrations.version
    made_newer(started.db, user_version=0, extra=("m900_from_the_future",))
    refused(started("list"), f"{started.db} was written by a newer wfctl "
                             f"(schema {known + 1}; this wfctl knows up to {known})")


def test_describe_json_of_an_unknown_id_in_an_existing_database_is_a_document(started):
    result = started("describe", "nope", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"found": False, "reason": "instance_not_found"}
    assert result.stderr == "Error: no instance 'nope'\n"


def test_a_missing_definitions_file_says_how_to_point_at_one(cli):
    missing = cli.folder / "nope.yaml"
    refused(cli("start", "etl", workflows=missing),
            f"{missing}: no such file (pass --workflows FILE or set WFCTL_WORKFLOWS)")
    cli.assert_nothing_written()


# Input and signal data

def test_input_and_input_file_together_are_a_usage_error(cli):
    (cli.folder / "in.json").write_text("{}")
    refused(cli("start", "etl", "--input", "{}", "--input-file", str(cli.folder / "in.json")),
            "--input and --input-file exclude each other", code=2)
    cli.assert_nothing_written()


@pytest.mark.parametrize(("content", "message"), [
    (b'{"a": "\xff\xfe"}', "--input-file: {path} is not UTF-8 text (byte 0xff at offset 7)"),
    (b'{"x": NaN}', "--input-file: NaN is not a JSON number"),
    (b'{"x": [1, -Infinity]}', "--input-file: -Infinity is not a JSON number"),
    (b'{"a": "\\udcff"}',
     "--input-file at key 'a': text with a lone surrogate is not valid Unicode"),
    (b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}",
     "--input-file is nested more than 200 levels deep"),
    (b"[1, 2]", "--input-file: expected a JSON object (got list)"),
    (b"", "--input-file: invalid JSON: Expecting value (line 1 column 1)"),
], ids=["undecodable", "nan", "infinity", "surrogate", "deep", "list", "empty"])
def test_input_files_that_are_no_json_object(cli, content, message):
    path = cli.folder / "in.json"
    path.write_bytes(content)
    refused(cli("start", "etl", "--input-file", str(path)), message.replace("{path}", str(path)))
    cli.assert_nothing_written()


def test_an_endless_input_file_is_not_read_to_its_end(cli):
    cli.workflows.write_text(textwrap.dedent(DEFINITIONS).replace(
        "workflows:", "limits: {payload_size: 1000}\nworkflows:"))
    refused(cli("start", "etl", "--input-file", "/dev/zero"),
            "--input-file: /dev/zero is larger than 1048576 bytes (payload_size limit 1000)")
    cli.assert_nothing_written()


def test_input_from_stdin_must_be_utf8_too(cli):
    refused(cli("start", "etl", "--input-file", "-", input=b'{"a": "\xff"}'),
            "--input-file: stdin is not UTF-8 text (byte 0xff at offset 7)")
    cli.assert_nothing_written()


@pytest.mark.parametrize(("name", "message"), [
    ("missing.json", "--input-file: cannot read {path}: No such file or directory"),
    (".", "--input-file: {path} is a folder, not a file"),
])
def test_input_files_that_cannot_be_read(cli, name, message):
    path = cli.folder / name
    refused(cli("start", "etl", "--input-file", str(path)), message.replace("{path}", str(path)))
    cli.assert_nothing_written()


@pytest.mark.parametrize(("text", "message"), [
    ('{"x": NaN}', "--input: NaN is not a JSON number"),
    ('{"x": Infinity}', "--input: Infinity is not a JSON number"),
    ('{"a": "\\udcff"}', "--input at key 'a': text with a lone surrogate is not valid Unicode"),
    ('{"\\udfff": 1}', "--input: key '\\udfff' is text with a lone surrogate, not valid Unicode"),
    ('{"x": ' + "9" * 4301 + "}", "--input: an integer of more than 4300 digits is not accepted"),
    ('{"d": ' + "[" * 5000 + "]" * 5000 + "}", "--input is nested more than 200 levels deep"),
], ids=["nan", "infinity", "surrogate", "surrogate-key", "long-integer", "deep"])
def test_input_that_is_no_strict_json_is_refused(cli, text, message):
    refused(cli("start", "etl", "--input", text), message)
    cli.assert_nothing_written()


@pytest.mark.parametrize(("text", "message"), [
    ('{"x": NaN}', "--data: NaN is not a JSON number"),
    ('{"x": -Infinity}', "--data: -Infinity is not a JSON number"),
    ('{"a": {"\\udfff": 1}}',
     "--data at key 'a': key '\\udfff' is text with a lone surrogate, not valid Unicode"),
    ('{"x": -' + "9" * 4301 + "}", "--data: an integer of more than 4300 digits is not accepted"),
    ('{"d": ' + "[" * 300 + "]" * 300 + "}", "--data is nested more than 200 levels deep"),
], ids=["nan", "infinity", "surrogate-key", "long-integer", "deep"])
def test_signal_data_that_is_no_strict_json_is_refused(started, text, message):
    before = started.snapshot()
    refused(started("signal", "a1", "go", "--data", text), message)
    assert started.snapshot() == before


@pytest.mark.sqlite_only        # a 0.1 file held NaN
def test_describe_json_never_prints_nan_even_from_an_old_database(started):
    # wfctl 0.1 stored NaN it was given; printing it would not be JSON.
    conn = sqlite3.connect(started.db)
    conn.execute("""UPDATE runs SET state = '{"x": NaN}'""")
    conn.commit()
    conn.close()
    refused(started("describe", "a1", "--json"),
            "the document at key 'state.x': nan is not a JSON number; it cannot be printed "
            "as JSON")


# Durations

EXPECTED = ("expected a duration: seconds (3600), a unit string with each unit once, largest "
            "first (90s, 5m, 2h30m, 1d12h, 250ms), ISO 8601 (PT2H30M, P1D, P1Y), a mapping "
            "({hours: 2, minutes: 30}) or NONE")


@pytest.mark.parametrize(("value", "message"), [
    ("NaN", f"{EXPECTED} (got 'NaN')"),
    ("nan", f"{EXPECTED} (got 'nan')"),
    (".nan", f"{EXPECTED} (got '.nan')"),
    ("inf", f"{EXPECTED} (got 'inf')"),
    ("1e999", f"{EXPECTED} (got '1e999')"),
    ("-5", "must be at least 1 second (got -5)"),
    ("9" * 30, f"must be at most 1 year (got {'9' * 30})"),
    ("1d1d", "write 2d: each unit once, largest first (got '1d1d')"),
    ("1m1h", "write 1h1m: each unit once, largest first (got '1m1h')"),
    ("１s", f"{EXPECTED} (got '１s')"),
    ("1 h", "write 1h: a duration has no blanks inside (got '1 h')"),
    ("P1M", "months are not a fixed length: use days, weeks or P1Y (got 'P1M')"),
    ("6M", "M is not a unit: minutes are m (6m) and months are not supported (got '6M')"),
    ("2H", "units are lower-case: 2h (got '2H')"),
    ("pt1h", "ISO 8601 durations are upper-case: PT1H (got 'pt1h')"),
    ("P2Y", "must be at most 1 year (got P2Y)"),
    ("{hours: .nan}", "hours must be a number of at least 0 (got nan)"),
    ("{hours: " + "[" * 3000, "invalid YAML: nested more than 64 levels deep"),
], ids=lambda value: value[:20] if isinstance(value, str) else None)
def test_absurd_durations_on_the_command_line_are_refused(cli, value, message):
    refused(cli("start", "etl", "--deadline", value), f"--deadline: {message}")
    cli.assert_nothing_written()


@pytest.mark.parametrize(("args", "message"), [
    (["work", "--once", "--poll-interval", "NaN"], f"--poll-interval: {EXPECTED} (got 'NaN')"),
    (["work", "--once", "--grace", "1e999"], f"--grace: {EXPECTED} (got '1e999')"),
    (["systemd-unit", "--grace", "nan"], f"--grace: {EXPECTED} (got 'nan')"),
    (["retry", "a1", "--extend-deadline", "inf"], f"--extend-deadline: {EXPECTED} (got 'inf')"),
])
def test_absurd_intervals_are_refused(started, args, message):
    before = started.snapshot()
    refused(started(*args), message)
    assert started.snapshot() == before


@pytest.mark.parametrize(("value", "message"), [
    ("NaN", f"{EXPECTED} (got 'NaN')"),
    (".nan", f"{EXPECTED} (got nan)"),
    (".inf", "must be at most 1 year (got inf)"),
    ("-1", "must be at least 1 second (got -1)"),
    ("1d1d", "write 2d: each unit once, largest first (got '1d1d')"),
    ("6M", "M is not a unit: minutes are m (6m) and months are not supported (got '6M')"),
    ("1D", "units are lower-case: 1d (got '1D')"),
])
def test_validate_refuses_absurd_durations_naming_file_and_line(cli, value, message):
    cli.workflows.write_text(textwrap.dedent(DEFINITIONS).replace(
        "  etl:\n", f"  etl:\n    deadline: {value}\n"))
    for args in (["validate"], ["start", "etl"]):
        refused(cli(*args), f"{cli.workflows}:5: workflows.etl.deadline: {message}")
    cli.assert_nothing_written()


# Definitions files that are not definitions

@pytest.mark.parametrize(("content", "message"), [
    (b"- a\n- b\n", "{path}:1: expected a mapping of sections (got a list)"),
    (b"just text\n", "{path}:1: expected a mapping of sections (got 'just text')"),
    (b"version: 1\nworkflows: " + b"[" * 5000 + b"]" * 5000 + b"\n",
     "{path}:2: invalid YAML: nested more than 64 levels deep"),
    (b"version: 1\n\xff\xfe\n", "{path}:2: not UTF-8 text (byte 0xff at offset 11)"),
], ids=["list", "scalar", "deep", "undecodable"])
def test_definitions_that_are_no_definitions(cli, content, message):
    cli.workflows.write_bytes(content)
    refused(cli("validate"), message.replace("{path}", str(cli.workflows)))


def test_a_billion_laughs_is_refused_quickly(cli):
    lines = ["version: 1", "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for name, previous in zip("bcdefghi", "abcdefgh", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    lines.append("workflows: *i")
    cli.workflows.write_text("\n".join(lines) + "\n")
    # The first node past the bound, f, is on line 7: 9**5 values and more.
    refused(cli("validate"), f"{cli.workflows}:7: invalid YAML: aliases expand the document "
                             "to more than 100000 values")


@pytest.mark.parametrize("args", [["validate"], ["start", "etl"]])
def test_a_folder_or_a_binary_file_is_no_definitions_file(cli, args):
    refused(cli(*args, workflows=cli.folder), f"{cli.folder} is a folder, not a definitions file")
    binary = cli.folder / "program"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)))
    refused(cli(*args, workflows=binary), f"{binary}:1: not UTF-8 text (byte 0x80 at offset 8)")
    cli.assert_nothing_written()


# Numbers, ids and choices

def test_huge_numbers_are_not_a_crash(started):
    huge = "9" * 30
    result = started("list", "--limit", huge, "--json")
    assert (result.exit_code, len(json.loads(result.stdout))) == (0, 1)
    refused(started("describe", "a1", "--run", huge), f"a1 has no run {huge} (it has 1)")
    refused(started("history", "a1", "--run", huge), f"a1 has no run {huge} (it has 1)")


@pytest.mark.parametrize(("args", "fragment"), [
    (["work", "--once", "--concurrency", "9" * 30],
     "Invalid value for '--concurrency' / '-c': Input should be less than or equal to 1024"),
    (["work", "--once", "--concurrency", "0"], "Invalid value for '--concurrency' / '-c'"),
    (["timeline", "a1", "--width", "9" * 30],
     "Invalid value for '--width': Input should be less than or equal to 1000"),
    (["list", "--limit", "0"], "Invalid value for '--limit'"),
    (["list", "--status", "bogus"], "--status: 'bogus' is not one of running, waiting, "),
    (["start", "etl", "--on-duplicate", "bogus"],
     "--on-duplicate: 'bogus' is not one of reject, return-existing"),
    (["work", "--once", "--isolation", "bogus"], "--isolation: 'bogus' is not one of thread, process"),
    (["history", "a1", "--event-type", "Bogus"], "--event-type: 'Bogus' is not one of WorkflowStarted"),
    (["history", "a1", "--run", "1", "--all-runs"], "--run and --all-runs exclude each other"),
    (["retry", "a1", "--extend-deadline", "1h", "--clear-deadline"],
     "--extend-deadline and --clear-deadline exclude each other"),
])
def test_usage_errors_exit_2_with_one_error_line(started, args, fragment):
    before = started.snapshot()
    result = started(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and fragment in errors[0]
    assert started.snapshot() == before


@pytest.mark.parametrize(("args", "message"), [
    (["start", "etl", ""], "invalid instance id '': 1 to 200 characters, no spaces"),
    (["start", "etl", "a b"], "invalid instance id 'a b': 1 to 200 characters, no spaces"),
    (["signal", "a1", ""], "a signal name must not be empty"),
    (["describe", ""], "no instance ''"),
    (["describe", "'; DROP TABLE instances; --"], "no instance \"'; DROP TABLE instances; --\""),
    (["list", "--since", "9" * 40], f"--since: must be at most 1 year (got {'9' * 40})"),
    (["list", "--since", "0001-01-01T00:00+14:00"],
     "--since: expected a duration back from now (1h: the last hour) or an ISO 8601 date or "
     "instant (2026-12-01, 2026-12-01T16:00:00+00:00) (got '0001-01-01T00:00+14:00')"),
    (["list", "--since", "9999-12-31T23:59:59-14:00"],
     "--since: expected a duration back from now (1h: the last hour) or an ISO 8601 date or "
     "instant (2026-12-01, 2026-12-01T16:00:00+00:00) (got '9999-12-31T23:59:59-14:00')"),
])
def test_odd_ids_and_values_are_reported_errors(started, args, message):
    before = started.snapshot()
    refused(started(*args), message)
    assert started.snapshot() == before


# Real processes: bytes on the command line, and a read-only file

def run_wfctl(folder: Path, db: str, *args: str | bytes, preexec_fn=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "wfctl", "--db", db,
         "-w", str(folder / "workflows.yaml"), *args],
        cwd=folder, env=env, capture_output=True, timeout=60, preexec_fn=preexec_fn)


def refused_by_process(result: subprocess.CompletedProcess, message: str, code: int = 1) -> None:
    stderr = result.stderr.decode("utf-8", "backslashreplace")
    assert "Traceback" not in stderr
    assert stderr == f"Error: {message}\n"
    assert (result.returncode, result.stdout) == (code, b"")


@pytest.mark.process
def test_undecodable_bytes_on_the_command_line_are_one_error_line(started):
    started("cancel", "a1")
    before = started.snapshot()
    cases = [
        (["start", "etl", b"a\xffb"], "instance id: text with a lone surrogate is not valid Unicode"),
        (["start", "etl", "--input", b'{"a": "\xff"}'],
         "--input at key 'a': text with a lone surrogate is not valid Unicode"),
        (["describe", b"a\xff"], "instance id: text with a lone surrogate is not valid Unicode"),
        (["signal", "a1", b"go\xff"], "signal name: text with a lone surrogate is not valid Unicode"),
        (["terminate", "a1", "--reason", b"\xff"],
         "reason: text with a lone surrogate is not valid Unicode"),
        (["list", "--type", b"\xff"],
         "workflow type: text with a lone surrogate is not valid Unicode"),
    ]
    for args, message in cases:
        refused_by_process(run_wfctl(started.folder, started.db, *args), message)
    assert started.snapshot() == before


def without_file_permission_override() -> None:
    """Run as root without CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER, so that file
    modes hold for the child as they do for any other user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2, 3):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) refused")


def as_an_ordinary_user():
    if os.geteuid() != 0:
        return None
    try:
        subprocess.run(["true"], preexec_fn=without_file_permission_override, check=True)
    except (subprocess.SubprocessError, OSError):
        pytest.skip("running as root and not permitted to drop capabilities")
    return without_file_permission_override


@pytest.mark.sqlite_only        # file modes
@pytest.mark.process
@pytest.mark.parametrize("folder_writable", [True, False])
def test_a_read_only_database_is_read_and_refuses_writes(started, folder_writable):
    started("work", "--once")
    preexec = as_an_ordinary_user()
    for leftover in started.folder.glob("wfctl.db-*"):
        leftover.unlink()
    Path(started.db).chmod(0o444)
    if not folder_writable:
        started.folder.chmod(0o555)
    try:
        before = started.snapshot()
        read = run_wfctl(started.folder, started.db, "describe", "a1", "--json", preexec_fn=preexec)
        assert read.returncode == 0, read.stderr
        assert json.loads(read.stdout)["workflow_instance_id"] == "a1"
        listed = run_wfctl(started.folder, started.db, "list", "--json", preexec_fn=preexec)
        assert [row["workflow_instance_id"] for row in json.loads(listed.stdout)] == ["a1"]
        for args in (["start", "etl", "a2"], ["signal", "a1", "go"], ["cancel", "a1"],
                     ["deadlines", "check"]):
            refused_by_process(run_wfctl(started.folder, started.db, *args, preexec_fn=preexec),
                               f"{started.db}: the database is read-only")
        # Not even an empty -wal or -shm beside it.
        assert started.snapshot() == before == {"wfctl.db": before["wfctl.db"]}
    finally:
        started.folder.chmod(0o755)
