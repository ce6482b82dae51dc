"""Batch actions: retry, cancel, terminate, pause, resume and signal with list's filters in
place of an ID; --dry-run, confirmation, skipped and failed instances, short transactions."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_project import CliProject
from conftest import at

from wfctl import Client
from wfctl.cli import batches
from wfctl.engine import bulk
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
  approval:
    steps:
      - wait_for_signal: approved
        timeout: 1h
      - activity: wfh:mark
        name: after
"""


@pytest.fixture
def cli(tmp_path: Path, db: str) -> CliProject:
    cli = CliProject(tmp_path, db, DEFINITIONS)
    for n in (1, 2, 3):
        cli("start", "order", f"o-{n}")
    cli("start", "approval", "a-1")
    cli("terminate", "o-3")
    return cli


def test_dry_run_lists_the_matches_with_status_and_nearest_deadline_and_changes_nothing(cli):
    code, doc = cli.json("cancel", "--type", "order", "--dry-run")

    assert code == 0
    assert doc["matched"] == 3
    rows = {row["workflow_instance_id"]: row for row in doc["instances"]}
    assert set(rows) == {"o-1", "o-2", "o-3"}
    assert rows["o-1"]["status"] == "running"
    assert rows["o-1"]["nearest_deadline"]["kind"] == "deadline"
    assert rows["o-3"]["nearest_deadline"] is None
    assert cli.status("o-1") == "running"

    text = cli("cancel", "--type", "order", "--status", "running", "--dry-run")
    assert text.exit_code == 0
    assert text.stdout.endswith("Would cancel 2 instances (dry run: nothing changed)\n")
    assert "o-1" in text.stdout and "deadline" in text.stdout


def test_a_script_without_yes_is_refused_and_nothing_changes(cli):
    result = cli("pause", "--status", "running")

    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("Error: pause would act on 3 instances matched by the filters: "
                             "pass --yes to go ahead (--dry-run lists them)\n")
    assert cli.status("o-1") == "running"


def test_a_terminal_is_asked_and_no_changes_nothing(cli, monkeypatch):
    monkeypatch.setattr(batches, "asks", lambda: True)

    declined = cli("pause", "--type", "order", "--status", "running", input="n\n")
    assert declined.exit_code == 1
    assert declined.stdout == "Pause 2 instances? [y/N]: n\n"
    assert cli.status("o-1") == "running"

    accepted = cli("pause", "--type", "order", "--status", "running", input="y\n")
    assert accepted.exit_code == 0
    assert accepted.stdout.endswith("pause: 2 paused of 2 matched; 0 skipped, 0 failed\n")
    assert (cli.status("o-1"), cli.status("o-2")) == ("paused", "paused")


def test_yes_acts_on_every_match_and_json_reports_it(cli):
    code, doc = cli.json("cancel", "--status", "running", "--type", "order", "--yes",
                         "--reason", "bad batch")

    assert (code, doc) == (0, {"matched": 2, "done": 2, "skipped": [], "failed": []})
    for instance_id in ("o-1", "o-2"):
        assert cli.json("describe", instance_id)[1]["run"]["cancel_requested"] is True
    assert cli.json("describe", "a-1")[1]["run"]["cancel_requested"] is False


def test_a_repeated_filter_means_any_of_its_values(cli):
    code, doc = cli.json("pause", "--type", "order", "--type", "approval", "--status",
                         "running", "--status", "waiting", "--yes")

    assert (code, doc["matched"], doc["done"]) == (0, 3, 3)
    assert cli.status("a-1") == "paused"


def test_each_action_skips_an_instance_it_can_no_longer_act_on_with_the_reason(cli):
    code, doc = cli.json("terminate", "--type", "order", "--yes")

    assert code == 0
    assert (doc["matched"], doc["done"]) == (3, 2)
    assert doc["skipped"] == [{"id": "o-3", "reason": "cannot terminate o-3: it is terminated "
                                                      "(a closed instance accepts only describe, "
                                                      "history and retry)"}]

    code, doc = cli.json("resume", "--type", "order", "--yes")
    assert (doc["done"], len(doc["skipped"])) == (0, 3)


def test_batch_retry_applies_its_deadline_options_to_every_instance(make_env):
    env = make_env(DEFINITIONS)
    for n in (1, 2):
        env.start("order", f"o-{n}")
        env.client.terminate(f"o-{n}")
    env.clock.set(100)

    report = env.client.batch("retry", status="terminated", extend_deadline="2h",
                              reason="redo")

    assert report == {"matched": 2, "done": 2, "skipped": [], "failed": []}
    for n in (1, 2):
        doc = env.describe(f"o-{n}")
        assert (doc["status"], doc["deadline_at"]) == ("running", at(100 + 7200))
        retried = env.events(f"o-{n}", "WorkflowRetried")[0]["attributes"]
        assert (retried["deadline_change"], retried["reason"]) == ("extended", "redo")


def test_an_instance_that_stopped_qualifying_after_the_listing_is_skipped(make_env, monkeypatch):
    env = make_env(DEFINITIONS)
    for n in (1, 2):
        env.start("order", f"o-{n}")
    listed = Client._matching

    def listing_then_pause(client, *args):
        rows = listed(client, *args)
        client.pause("o-1")
        return rows

    monkeypatch.setattr(Client, "_matching", listing_then_pause)

    report = env.client.batch("cancel", status="running")

    assert report == {"matched": 2, "done": 1, "failed": [],
                      "skipped": [{"id": "o-1", "reason": "it is paused now, not running"}]}


def test_batch_signal_takes_the_name_alone_and_a_rerun_skips_what_it_did(cli):
    cli("start", "approval", "a-2")
    assert cli("work", "--once").exit_code == 0
    code, doc = cli.json("signal", "--type", "approval", "--status", "waiting", "approved",
                         "--yes")
    assert (code, doc) == (0, {"matched": 2, "done": 2, "skipped": [], "failed": []})

    code, again = cli.json("signal", "--type", "approval", "approved", "--yes")

    assert again["done"] == 0
    assert again["skipped"] == [
        {"id": f"a-{n}", "reason": "a signal approved is already waiting to be taken"}
        for n in (2, 1)]


def test_an_action_refused_for_another_reason_is_a_failure(cli):
    result = cli("signal", "--type", "order", "--status", "running", "approved", "--yes")

    assert result.exit_code == 1
    assert result.stdout.startswith("signal: 0 signalled of 2 matched; 0 skipped, 2 failed\n")
    assert "  failed o-1: o-1 (order) has no wait_for_signal step for 'approved': its type " \
        "waits for no signal (--force delivers it anyway)\n" in result.stdout
    assert result.stderr == "Error: signal failed on 2 instances of 2\n"


@pytest.mark.parametrize(("args", "error"), [
    (("cancel", "o-1", "--status", "running"),
     "give an ID or filters (--status, --type, --schedule, --since), not both"),
    (("cancel",), "give an ID, or filters (--status, --type, --schedule, --since) to act on every "
                  "instance they match"),
    (("pause", "o-1", "--yes"), "--yes is for filters in place of an ID"),
    (("resume", "--status", "bogus", "--yes"),
     "--status: 'bogus' is not one of running, waiting, paused, completed, failed, timed_out, "
     "cancelled, terminated"),
])
def test_usage_errors_exit_2(cli, args, error):
    result = cli(*args)

    assert (result.exit_code, result.stderr) == (2, f"Error: {error}\n")


def test_since_narrows_the_batch_to_recent_instances(make_env):
    env = make_env(DEFINITIONS)
    env.start("order", "old", now=0)
    env.start("order", "new", now=3600)
    env.clock.set(3700)

    report = env.client.batch("pause", since=at(1800))

    assert (report["matched"], report["done"]) == (1, 1)
    assert env.describe("new")["status"] == "paused"
    assert env.describe("old")["status"] == "running"


def test_a_batch_needs_a_filter(make_env):
    env = make_env(DEFINITIONS)

    with pytest.raises(InvalidInput) as refused:
        env.client.batch("cancel")

    assert str(refused.value) == ("a batch needs at least one filter: status, workflow_type, "
                                  "schedule or since")


def test_each_transaction_stops_taking_instances_once_its_budget_is_spent(make_env):
    env = make_env(DEFINITIONS)
    env.client.start_many("order", [{"id": f"o-{n}"} for n in range(5)])
    ids = [f"o-{n}" for n in range(5)]
    pauses = []

    report = bulk.act_on_many(env.engine, ids, lambda instance_id, now:
                              env.engine.pause(instance_id, now),
                              lambda c, instance: None, env.clock, pause=pauses.append,
                              budget=0)

    assert (report.done, len(report.transactions), pauses) == (5, 5, [0, 0, 0, 0])
    assert {env.describe(i)["status"] for i in ids} == {"paused"}
