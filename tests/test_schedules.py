"""Schedules (SPEC §12) at explicit instants: ticks, overlap policies, catch-up, jitter, daylight
saving, changes of the file, and what the commands show."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wfctl.cli.commands import app
from wfctl.engine import Engine
from wfctl.engine import schedules as ticking
from wfctl.errors import DefinitionError
from wfctl.lang import definitions
from wfctl.lang.schedule_spec import jitter_delay
from wfctl.store import open_store

pytestmark = pytest.mark.both_backends

T0 = datetime(2026, 4, 12, 12, 7, 30, tzinfo=UTC)
TYPES = """\
version: 1
workflows:
  report:
    steps:
      - delay: 1h
schedules:
"""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Ticks:
    """An engine over the test's database, and the schedules of a definitions text."""

    def __init__(self, db: str) -> None:
        self.engine = Engine(open_store(db))
        self.definitions = definitions.parse(TYPES.replace("schedules:\n", ""))

    def define(self, schedules: str) -> None:
        self.definitions = definitions.parse(TYPES + textwrap.indent(textwrap.dedent(schedules),
                                                                     "  "))

    def sync(self, now: datetime, **options: bool) -> None:
        ticking.sync_schedules(self.engine, self.definitions, now, **options)

    def fire(self, now: datetime) -> list[tuple[str, datetime, str | None]]:
        return [(a.action, a.tick_at, a.instance_id)
                for a in ticking.fire_due(self.engine, self.definitions, now)]

    def row(self, name: str):
        with self.engine.store.read() as tx:
            return tx.get_schedule(name)

    def instance(self, instance_id: str):
        with self.engine.store.read() as tx:
            return tx.get_instance(instance_id)

    def actions(self, name: str) -> list[tuple[str, str | None]]:
        with self.engine.store.read() as tx:
            return [(a.action, a.reason) for a in reversed(tx.schedule_actions(name, 100))]


@pytest.fixture
def ticks(db: str) -> Iterator[Ticks]:
    found = Ticks(db)
    yield found
    found.engine.store.close()


EVERY_MINUTE = """\
s:
  workflow: report
  every: 1m
  overlap: {overlap}
"""


def test_every_ticks_at_whole_multiples_from_when_it_is_first_seen(ticks):
    ticks.define("q:\n  workflow: report\n  every: 15m\n")
    ticks.sync(at(0))
    assert ticks.row("q").next_tick_at == datetime(2026, 4, 12, 12, 15, tzinfo=UTC)
    assert ticks.fire(datetime(2026, 4, 12, 12, 14, 59, tzinfo=UTC)) == []
    assert ticks.fire(datetime(2026, 4, 12, 12, 15, 0, 200000, tzinfo=UTC)) == [
        ("started", datetime(2026, 4, 12, 12, 15, tzinfo=UTC), "q-20260412T121500Z")]
    assert ticks.row("q").next_tick_at == datetime(2026, 4, 12, 12, 30, tzinfo=UTC)


def test_a_tick_starts_once_however_often_it_is_looked_at(ticks, db):
    ticks.define(EVERY_MINUTE.format(overlap="allow_all"))
    ticks.sync(at(0))
    other = Ticks(db)
    other.definitions = ticks.definitions
    try:
        assert [a for a, _, _ in ticks.fire(at(31))] == ["started"]
        assert other.fire(at(31)) == []
        assert ticks.fire(at(32)) == []
    finally:
        other.engine.store.close()
    instance = ticks.instance("s-20260412T120800Z")
    assert (instance.schedule_name, instance.schedule_tick_at) == ("s", at(30))


def test_skip_records_the_tick_while_the_last_instance_is_open(ticks):
    ticks.define(EVERY_MINUTE.format(overlap="skip"))
    ticks.sync(at(0))
    ticks.fire(at(30))
    assert ticks.fire(at(90)) == [("skipped", at(90), None)]
    assert ticks.actions("s")[-1] == (
        "skipped", "s-20260412T120800Z is still open (overlap: skip)")
    ticks.engine.terminate("s-20260412T120800Z", "done", at(100))
    assert ticks.fire(at(150)) == [("started", at(150), "s-20260412T121000Z")]


def test_buffer_one_starts_one_tick_when_the_open_instance_closes(ticks):
    ticks.define(EVERY_MINUTE.format(overlap="buffer_one"))
    ticks.sync(at(0))
    ticks.fire(at(30))
    assert ticks.fire(at(90)) == [("buffered", at(90), None)]
    assert ticks.fire(at(150)) == [("skipped", at(150), None)]
    assert ticks.fire(at(160)) == []
    ticks.engine.terminate("s-20260412T120800Z", "done", at(170))
    assert ticks.fire(at(171)) == [("started", at(90), "s-20260412T120900Z")]
    assert ticks.row("s").buffered_tick_at is None


def test_allow_all_starts_every_tick(ticks):
    ticks.define(EVERY_MINUTE.format(overlap="allow_all"))
    ticks.sync(at(0))
    ticks.fire(at(30))
    assert ticks.fire(at(90)) == [("started", at(90), "s-20260412T120900Z")]
    assert ticks.instance("s-20260412T120800Z").status == "running"


def test_terminate_other_stops_the_open_instance_then_starts(ticks):
    ticks.define(EVERY_MINUTE.format(overlap="terminate_other"))
    ticks.sync(at(0))
    ticks.fire(at(30))
    assert ticks.fire(at(90)) == [("started", at(90), "s-20260412T120900Z")]
    assert ticks.instance("s-20260412T120800Z").status == "terminated"
    assert "terminated s-20260412T120800Z" in ticks.actions("s")[-1][1]


def test_cancel_other_asks_the_open_instance_to_cancel_then_starts(ticks):
    ticks.define(EVERY_MINUTE.format(overlap="cancel_other"))
    ticks.sync(at(0))
    ticks.fire(at(30))
    assert ticks.fire(at(90)) == [("started", at(90), "s-20260412T120900Z")]
    with ticks.engine.store.read() as tx:
        run = tx.get_run(tx.get_instance("s-20260412T120800Z").current_run_id)
    assert run.cancel_requested is True


def test_after_downtime_ticks_inside_the_window_start_and_older_ones_are_missed(ticks):
    ticks.define("s:\n  workflow: report\n  every: 1m\n  overlap: allow_all\n"
                 "  catchup_window: 3m\n")
    ticks.sync(at(0))
    # Down from just after 12:07:30 until 12:13:10: 12:08 ... 12:10 are before 12:10:10.
    assert [(a, t) for a, t, _ in ticks.fire(at(340))] == [
        ("missed", at(30)), ("missed", at(90)), ("missed", at(150)),
        ("started", at(210)), ("started", at(270)), ("started", at(330))]
    row = ticks.row("s")
    assert (row.missed_count, row.started_count, row.next_tick_at) == (3, 3, at(390))
    assert row.last_lag_seconds == 10
    assert ticks.actions("s")[0] == ("missed", "outside the catch-up window")


def test_a_long_downtime_lists_the_first_missed_ticks_and_counts_the_rest(ticks):
    ticks.define("s:\n  workflow: report\n  every: 1s\n")
    ticks.sync(at(0))
    done = ticks.fire(at(30.5 + 86400))
    missed = [d for d in done if d[0] == "missed"]
    assert len(missed) == ticks_missed_listed() + 1
    # Ticks at 12:07:31 ... a day later: the last 60 are inside the window.
    assert ticks.row("s").missed_count == 86430 - 60
    assert ("missed", "outside the catch-up window, and so were the 86270 ticks after this one "
            "up to the window") in ticks.actions("s")


def ticks_missed_listed() -> int:
    return ticking.MISSED_RECORDED


def test_jitter_delays_each_tick_by_the_same_amount_whoever_computes_it(ticks):
    ticks.define("s:\n  workflow: report\n  every: 1m\n  jitter: 30s\n  overlap: allow_all\n")
    ticks.sync(at(0))
    delay = jitter_delay("s", at(30), 30)
    assert 0 <= delay < 30
    assert delay == jitter_delay("s", at(30), 30)
    assert jitter_delay("s", at(90), 30) != delay
    assert ticks.row("s").due_at == at(30 + delay)
    assert ticks.fire(at(30 + delay) - timedelta(microseconds=1)) == []
    assert [a for a, _, _ in ticks.fire(at(30 + delay))] == ["started"]


DST = """\
n:
  workflow: report
  cron: "30 2 * * *"
  timezone: Europe/Berlin
  overlap: allow_all
"""


def test_a_local_time_that_does_not_exist_fires_once_at_the_next_real_instant(ticks):
    ticks.define(DST)
    # 2026-03-29 in Berlin: 02:00 CET is followed by 03:00 CEST; 02:30 never happens.
    ticks.sync(datetime(2026, 3, 28, 12, tzinfo=UTC))
    first = ticks.row("n").next_tick_at
    assert first == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert [a for a, _, _ in ticks.fire(first)] == ["started"]
    assert ticks.row("n").next_tick_at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)


def test_a_local_time_that_happens_twice_fires_once(ticks):
    ticks.define(DST)
    # 2026-10-25 in Berlin: 02:30 CEST (00:30 UTC), then 02:30 CET (01:30 UTC) again.
    ticks.sync(datetime(2026, 10, 24, 12, tzinfo=UTC))
    assert ticks.row("n").next_tick_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert len(ticks.fire(datetime(2026, 10, 25, 0, 30, tzinfo=UTC))) == 1
    assert ticks.fire(datetime(2026, 10, 25, 1, 30, 30, tzinfo=UTC)) == []
    assert ticks.row("n").next_tick_at == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_a_changed_spec_ticks_from_when_the_change_is_seen(ticks):
    ticks.define("s:\n  workflow: report\n  cron: '0 * * * *'\n")
    ticks.sync(at(0))
    assert ticks.row("s").next_tick_at == datetime(2026, 4, 12, 13, tzinfo=UTC)
    ticks.define("s:\n  workflow: report\n  every: 15m\n")
    ticks.sync(at(600))
    assert ticks.row("s").next_tick_at == datetime(2026, 4, 12, 12, 30, tzinfo=UTC)
    assert [a for a, _, _ in ticks.fire(at(1350))] == ["started"]


def test_a_schedule_removed_from_the_file_stops_ticking_and_keeps_its_record(ticks):
    ticks.define(EVERY_MINUTE.format(overlap="allow_all"))
    ticks.sync(at(0))
    ticks.fire(at(30))
    ticks.define("t:\n  workflow: report\n  every: 1h\n")
    ticks.sync(at(40), remove_missing=True)
    assert ticks.fire(at(100)) == []
    assert ticks.row("s").removed_at == at(40)
    assert ticks.instance("s-20260412T120800Z") is not None


def test_paused_in_the_file_and_by_command(ticks):
    ticks.define("s:\n  workflow: report\n  every: 1m\n  paused: true\n")
    ticks.sync(at(0))
    assert ticks.fire(at(100)) == []
    ticks.define("s:\n  workflow: report\n  every: 1m\n  paused: false\n")
    ticks.sync(at(100))
    assert ticks.row("s").next_tick_at == at(150)
    ticking.set_paused(ticks.engine, ticks.definitions, "s", True, "maintenance", at(110))
    assert (ticks.row("s").paused, ticks.row("s").paused_reason) == (True, "maintenance")
    ticks.sync(at(120))
    assert ticks.row("s").paused is True
    assert ticks.fire(at(200)) == []
    ticking.set_paused(ticks.engine, ticks.definitions, "s", False, None, at(300))
    assert ticks.row("s").next_tick_at == at(330)


def test_trigger_and_backfill_apply_the_overlap_policy(ticks):
    ticks.define(EVERY_MINUTE.format(overlap="skip"))
    ticks.sync(at(0))
    started = ticking.start_ticks(ticks.engine, ticks.definitions, "s", [at(5)], "triggered",
                                  at(5))
    assert [(a.action, a.instance_id) for a in started] == [("started", "s-20260412T120735Z")]
    ticks_range = ticking.backfill_ticks(ticks.definitions.schedules["s"], at(-300), at(-100))
    assert ticks_range == [at(-270), at(-210), at(-150)]
    done = ticking.start_ticks(ticks.engine, ticks.definitions, "s", ticks_range, "backfill",
                               at(6), overlap="allow_all")
    assert [a.action for a in done] == ["started"] * 3
    again = ticking.start_ticks(ticks.engine, ticks.definitions, "s", ticks_range, "backfill",
                                at(7), overlap="allow_all")
    assert [a.action for a in again] == ["skipped"] * 3
    assert again[0].reason == "instance s-20260412T120300Z already exists"


@pytest.mark.parametrize(("schedule", "error"), [
    ("s:\n  workflow: report\n  cron: '61 * * * *'\n",
     "workflows.yaml:9: schedules.s.cron: invalid cron expression '61 * * * *': Bad minute"),
    ("s:\n  workflow: report\n  every: 1m\n  timezone: Mars/Base\n",
     "workflows.yaml:10: schedules.s.timezone: unknown time zone 'Mars/Base' (expected an IANA "
     "name such as Europe/Berlin or UTC)"),
    ("s:\n  workflow: report\n  every: 1h\n  id: 'x-{tick:%Y%m%d}'\n",
     "workflows.yaml:10: schedules.s.id: id template 'x-{tick:%Y%m%d}' gives two ticks the same "
     "id ('x-20260101', at 2026-01-01T01:00:00+00:00 and 2026-01-01T02:00:00+00:00): its "
     "{tick} format must tell every tick apart"),
    ("s:\n  workflow: report\n  every: 1h\n  id: 'x-{when}'\n",
     "workflows.yaml:10: schedules.s.id: invalid id template 'x-{when}': unknown field {when} "
     "(it may use {schedule} and {tick} or {tick:FORMAT})"),
    ("s:\n  workflow: report\n  every: 1h\n  overlap: queue\n",
     "workflows.yaml:10: schedules.s.overlap: expected one of skip, buffer_one, allow_all, "
     "cancel_other, terminate_other (got 'queue')"),
    ("s:\n  workflow: nope\n  every: 1h\n",
     "workflows.yaml:8: schedules.s.workflow: unknown workflow type 'nope' (defined: report)"),
])
def test_a_bad_schedule_is_an_error_at_its_line(schedule, error, backend):
    with pytest.raises(DefinitionError) as caught:
        definitions.parse(TYPES + textwrap.indent(schedule, "  "))
    assert caught.value.errors == (error,)


NIGHTLY = TYPES + """\
  nightly:
    workflow: report
    cron: "0 3 * * 1-5"
    timezone: Europe/Berlin
    id: "nightly-{tick:%Y%m%d}"
    input: {kind: nightly}
    overlap: allow_all
"""


def run(path: Path, db: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--db", db, "-w", str(path), *args])
    return result.exit_code, result.stdout, result.stderr


def test_the_commands_show_and_steer_a_schedule(tmp_path, db):
    path = tmp_path / "workflows.yaml"
    path.write_text(NIGHTLY)
    Ticks(db).engine.store.close()
    code, out, _ = run(path, db, "schedules", "--json")
    assert code == 0
    [listed] = json.loads(out)
    assert {key: listed[key] for key in ("name", "workflow", "spec", "description", "timezone",
                                         "paused", "last_action")} == {
        "name": "nightly", "workflow": "report", "spec": "0 3 * * 1-5",
        "description": "At 03:00, Monday through Friday (Europe/Berlin)",
        "timezone": "Europe/Berlin", "paused": False, "last_action": None}
    code, out, _ = run(path, db, "schedule", "trigger", "nightly", "--json")
    [action] = json.loads(out)
    assert action["action"] == "started"
    code, out, _ = run(path, db, "schedule", "describe", "nightly", "--json")
    doc = json.loads(out)
    assert len(doc["next_ticks"]) == 5
    assert [datetime.fromisoformat(t).astimezone(UTC).hour for t in doc["next_ticks"]] in \
        ([1] * 5, [2] * 5, [1, 1, 1, 1, 2], [2, 1, 1, 1, 1])
    assert doc["actions"] == [{"tick_at": action["tick_at"], "action": "started",
                               "instance_id": action["instance_id"], "reason": "triggered"}]
    code, out, _ = run(path, db, "describe", action["instance_id"], "--json")
    assert json.loads(out)["schedule"] == {"name": "nightly", "tick_at": action["tick_at"]}
    code, out, _ = run(path, db, "list", "--schedule", "nightly", "--json")
    assert [row["workflow_instance_id"] for row in json.loads(out)] == [action["instance_id"]]
    code, out, _ = run(path, db, "list", "--schedule", "other", "--json")
    assert json.loads(out) == []
    assert run(path, db, "schedule", "pause", "nightly", "--reason", "holidays")[:2] == \
        (0, "nightly: paused\n")
    code, out, _ = run(path, db, "schedules", "--json")
    assert json.loads(out)[0]["paused"] is True and json.loads(out)[0]["next_tick_at"] is None
    assert run(path, db, "schedule", "pause", "nightly") == \
        (1, "", "Error: schedule nightly is already paused\n")
    assert run(path, db, "schedule", "describe", "nope")[0::2] == \
        (1, "Error: no schedule 'nope'\n")
    assert run(path, db, "schedule", "backfill", "nightly", "--from", "2026-04-13",
               "--to", "2026-04-12")[0::2] == (1, "Error: --from must not be after --to\n")
    code, out, _ = run(path, db, "schedule", "backfill", "nightly", "--from",
                       "2026-04-10T00:00:00+00:00", "--to", "2026-04-14T00:00:00+00:00")
    assert out == ("2026-04-10T01:00:00.000+00:00: started nightly-20260410 (backfill)\n"
                   "2026-04-13T01:00:00.000+00:00: started nightly-20260413 (backfill)\n")


def test_validate_shows_each_schedules_next_tick(tmp_path, backend):
    path = tmp_path / "workflows.yaml"
    path.write_text(NIGHTLY)
    code, out, _ = run(path, str(tmp_path / "w.db"), "validate", "--json")
    assert code == 0
    shown = json.loads(out)["schedules"]["nightly"]
    assert shown["description"] == "At 03:00, Monday through Friday (Europe/Berlin)"
    assert datetime.fromisoformat(shown["next_tick_at"]) > datetime.now(UTC)


def test_metrics_count_each_schedules_ticks_by_outcome_and_the_lag_of_its_last_start(ticks):
    from wfctl.ops import metrics

    ticks.define(EVERY_MINUTE.format(overlap="skip"))
    ticks.sync(at(0))
    ticks.fire(at(30.25))
    ticks.fire(at(90))
    text = metrics.exposition(ticks.engine.store, lambda: at(91))
    assert 'wfctl_schedule_ticks_total{outcome="started",schedule="s"} 1.0' in text
    assert 'wfctl_schedule_ticks_total{outcome="skipped",schedule="s"} 1.0' in text
    assert 'wfctl_schedule_ticks_total{outcome="missed",schedule="s"} 0.0' in text
    assert 'wfctl_schedule_last_start_lag_seconds{schedule="s"} 0.25' in text


def test_a_batch_action_takes_the_instances_a_schedule_started(tmp_path, db):
    path = tmp_path / "workflows.yaml"
    path.write_text(NIGHTLY)
    Ticks(db).engine.store.close()
    code, out, _ = run(path, db, "schedule", "trigger", "nightly", "--json")
    assert [action["action"] for action in json.loads(out)] == ["started"]
    assert run(path, db, "start", "report", "by-hand")[0] == 0

    code, out, _ = run(path, db, "cancel", "--schedule", "nightly", "--yes", "--json")

    assert (code, json.loads(out)) == (0, {"matched": 1, "done": 1, "skipped": [], "failed": []})
    code, out, _ = run(path, db, "describe", "by-hand", "--json")
    assert json.loads(out)["run"]["cancel_requested"] is False
    assert run(path, db, "cancel", "--schedule", "other", "--dry-run", "--json")[:2] == \
        (0, '{\n  "matched": 0,\n  "instances": []\n}\n')


@pytest.mark.sqlite_only        # file modes
@pytest.mark.process
def test_a_read_only_database_lists_the_schedules_it_holds(tmp_path, db):
    from test_bad_input import as_an_ordinary_user, run_wfctl

    path = tmp_path / "workflows.yaml"
    path.write_text(NIGHTLY)
    Ticks(db).engine.store.close()
    assert run(path, db, "schedules", "--json")[0] == 0
    preexec = as_an_ordinary_user()
    for leftover in tmp_path.glob("*.db-*"):
        leftover.unlink()
    Path(db).chmod(0o444)
    before = Path(db).read_bytes()
    # A schedule the database has not recorded yet cannot be: the listing is what it holds.
    path.write_text(NIGHTLY + "  hourly:\n    workflow: report\n    every: 1h\n")

    listed = run_wfctl(tmp_path, db, "schedules", "--json", preexec_fn=preexec)
    described = run_wfctl(tmp_path, db, "schedule", "describe", "nightly", "--json",
                          preexec_fn=preexec)

    assert (listed.returncode, listed.stderr) == (0, b"")
    assert [row["name"] for row in json.loads(listed.stdout)] == ["nightly"]
    assert (described.returncode, described.stderr) == (0, b"")
    assert json.loads(described.stdout)["description"] == \
        "At 03:00, Monday through Friday (Europe/Berlin)"
    assert Path(db).read_bytes() == before
