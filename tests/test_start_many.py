"""`wfctl start TYPE --from FILE|-` and `Client.start_many`: every line checked before any
starts, the duplicate policy per line, the outcomes in input order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_project import CliProject
from conftest import at

from wfctl.errors import InvalidInput

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  order:
    deadline: 1h
    steps:
      - activity: wfh:mark
        name: charge
"""


@pytest.fixture
def cli(tmp_path: Path, db: str) -> CliProject:
    return CliProject(tmp_path, db, DEFINITIONS)


def test_each_line_starts_an_instance_with_its_input_and_options(cli):
    path = cli.lines("starts.ndjson",
                     '{"id": "o-1", "input": {"amount": 5}}',
                     '{"id": "o-2", "deadline": "2h", "run_timeout": 600}',
                     '{"input": {"amount": 7}, "execution_timeout": "NONE"}')

    result = cli("start", "order", "--from", path)

    assert (result.exit_code, result.stdout) == (0, "3 lines: 3 started new\n")
    one = json.loads(cli("describe", "o-1", "--json").stdout)
    two = json.loads(cli("describe", "o-2", "--json").stdout)
    assert (one["state"], one["deadline_seconds"]) == ({"amount": 5}, 3600)
    assert (two["deadline_seconds"], two["run"]["run_timeout_seconds"]) == (7200, 600)
    listed = json.loads(cli("list", "--json").stdout)
    assert len(listed) == 3


def test_json_prints_one_outcome_a_line_in_input_order(cli):
    cli("start", "order", "o-2")
    path = cli.lines("starts.ndjson", '{"id": "o-3"}', '{"id": "o-2"}',
                     '{"id": "o-1", "on_duplicate": "return-existing"}', '{"id": "o-1"}')

    result = cli("start", "order", "--from", path, "--json")

    outcomes = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(o["workflow_instance_id"], o["outcome"]) for o in outcomes] == [
        ("o-3", "started_new"), ("o-2", "rejected_duplicate"),
        ("o-1", "started_new"), ("o-1", "rejected_duplicate")]
    assert result.exit_code == 1
    assert result.stderr == ("Error: 2 instances not started: lines 2, 4 (an open instance has "
                             "the id; --on-duplicate return-existing, or \"on_duplicate\" on a "
                             "line, returns it instead)\n")


def test_the_options_on_the_command_line_are_every_lines_defaults(cli):
    cli("start", "order", "o-1")
    path = cli.lines("starts.ndjson", '{"id": "o-1"}', '{"id": "o-2", "deadline": "3h"}',
                     '{"id": "o-3", "on_duplicate": "reject"}')

    result = cli("start", "order", "--from", path, "--deadline", "2h",
                 "--on-duplicate", "return-existing")

    assert (result.exit_code, result.stdout) == \
        (0, "3 lines: 2 started new, 1 returned existing active\n")
    assert json.loads(cli("describe", "o-2", "--json").stdout)["deadline_seconds"] == 10800
    assert json.loads(cli("describe", "o-3", "--json").stdout)["deadline_seconds"] == 7200


def test_dash_reads_the_lines_from_stdin(cli):
    result = cli("start", "order", "--from", "-", "--json",
                 input='{"id": "o-1"}\n{"id": "o-2"}\n')

    assert result.exit_code == 0, result.stderr
    assert [json.loads(line)["workflow_instance_id"] for line in result.stdout.splitlines()] \
        == ["o-1", "o-2"]


@pytest.mark.parametrize(("lines", "error"), [
    (['{"id": "o-1"}', '{"id": "o-2", "dedline": "1h"}'],
     "starts.ndjson:2: unknown key 'dedline' (known: id, input, deadline, execution_timeout, "
     "run_timeout, on_duplicate)"),
    (['{"id": "o-1"}', '{"id": "o-2",'],
     "starts.ndjson:2: invalid JSON: Expecting property name enclosed in double quotes "
     "(line 1 column 14)"),
    (['["o-1"]'], "starts.ndjson:1: expected a JSON object (got list)"),
    (['{"id": "o-1"}', '', '{"id": "o-2"}'],
     "starts.ndjson:2: an empty line (one JSON object a line)"),
    (['{"id": "o 1"}'], "starts.ndjson:1: invalid instance id 'o 1': 1 to 200 characters, "
                        "no spaces"),
    (['{"id": "o-1", "deadline": "0s"}'],
     "starts.ndjson:1: deadline: must be at least 1 second (got 0s)"),
    (['{"id": "o-1", "input": [1]}'],
     "starts.ndjson:1: input must be a JSON object (got list)"),
    (['{"id": "o-1", "on_duplicate": "ignore"}'],
     "starts.ndjson:1: on_duplicate must be reject or return-existing (got 'ignore')"),
    (['{"id": "o-1", "input": {"x": NaN}}'],
     "starts.ndjson:1: NaN is not a JSON number"),
])
def test_a_bad_line_is_named_and_nothing_starts(cli, nothing_written, lines, error):
    path = cli.lines("starts.ndjson", *lines)

    result = cli("start", "order", "--from", path)

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"Error: {error}\n".replace("starts.ndjson", path)
    assert nothing_written()


def test_a_line_that_is_not_utf8_is_named(cli, nothing_written):
    path = cli.folder / "starts.ndjson"
    path.write_bytes(b'{"id": "o-1"}\n{"id": "o-\xff"}\n')

    result = cli("start", "order", "--from", str(path))

    assert result.exit_code == 1
    assert result.stderr == f"Error: {path}:2: not UTF-8 text (byte 0xff at column 11)\n"
    assert nothing_written()


def test_from_excludes_an_id_and_the_input_options(cli, nothing_written):
    path = cli.lines("starts.ndjson", '{"id": "o-1"}')

    result = cli("start", "order", "o-9", "--from", path)

    assert (result.exit_code, result.stderr) == \
        (2, "Error: --from excludes ID, --input, --input-file and --wait\n")
    assert nothing_written()


def test_start_many_starts_past_one_transaction_and_keeps_the_order(make_env):
    env = make_env(DEFINITIONS)
    env.clock.set(10)

    outcomes = env.client.start_many("order", ({"id": f"o-{n}"} for n in range(2500)),
                                     deadline="30m")

    assert [o["workflow_instance_id"] for o in outcomes] == [f"o-{n}" for n in range(2500)]
    assert {o["outcome"] for o in outcomes} == {"started_new"}
    assert {o["deadline_at"] for o in outcomes} == {at(10 + 1800)}
    assert env.client.count(workflow_type="order") == 2500
    assert env.event_types("o-2499") == ["WorkflowStarted", "WorkflowTaskScheduled"]


def test_start_many_refuses_a_bad_start_by_its_number_before_starting_any(make_env):
    env = make_env(DEFINITIONS)

    with pytest.raises(InvalidInput) as refused:
        env.client.start_many("order", [{"id": "o-1"}, {"id": "o-2", "input": "x"}])

    assert str(refused.value) == "starts:2: input must be a JSON object (got str)"
    assert env.client.count() == 0


def test_a_duplicate_within_the_list_follows_its_own_policy(make_env):
    env = make_env(DEFINITIONS)

    outcomes = env.client.start_many("order", [
        {"id": "o-1", "input": {"n": 1}},
        {"id": "o-1", "on_duplicate": "return-existing"},
        {"id": "o-1"},
    ])

    assert [o["outcome"] for o in outcomes] == \
        ["started_new", "returned_existing_active", "rejected_duplicate"]
    assert env.describe("o-1")["state"] == {"n": 1}
