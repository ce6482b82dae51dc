"""The web view's answers, asked of its App directly (no socket): the JSON twins are the CLI's
documents, values are escaped, changes are refused unless allowed, and guarded when allowed."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
from html import unescape
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import at, wait_until
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli.commands import app as cli_app
from wfctl.show import timeline
from wfctl.store import SQLiteStore
from wfctl.ui import pages
from wfctl.ui.app import CSP, App, Response
from wfctl.ui.server import Watcher

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  pipeline:
    execution_timeout: 1h
    deadline: 30m
    steps:
      - activity: wfh:mark
        name: extract
        start_to_close: 5m
      - wait_for_signal: approved
      - activity: wfh:mark
        name: load
  flaky:
    steps:
      - activity: wfh:value_error
        name: parse
        non_retryable: [ValueError]
"""
EVIL = "<script>window.pwned=1</script>"


@pytest.fixture
def env(make_env):
    return make_env(DEFINITIONS)


def ui(env: Any, **options: Any) -> App:
    options.setdefault("hosts", App.loopback_hosts(8484))
    return App(env.client, database="wfctl.db", **options)


def get(app: App, target: str, **headers: str) -> Response:
    return app.handle("GET", target, {"Host": "127.0.0.1:8484", **headers})


def post(app: App, target: str, form: dict[str, str], **headers: str) -> Response:
    return app.handle("POST", target, {"Host": "127.0.0.1:8484", **headers},
                      urlencode(form).encode())


def cli_json(env: Any, *args: str) -> Any:
    result = CliRunner().invoke(cli_app, ["--db", env.db, "-w", str(env.folder / "workflows.yaml"),
                                          *args, "--json"])
    return json.loads(result.stdout)


def text_of(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_each_page_has_a_json_twin_with_exactly_the_clis_document(env):
    env.start("pipeline", "order-1")
    env.run(1)
    env.start("flaky", "order-2", now=2)
    env.run(3)
    app = ui(env)
    assert get(app, "/api/instances").json() == cli_json(env, "list")
    assert get(app, "/api/instances?status=failed").json() == cli_json(env, "list", "--status",
                                                                        "failed")
    for instance in ("order-1", "order-2"):
        assert get(app, f"/api/instances/{instance}").json() == cli_json(env, "describe",
                                                                         instance)
        assert get(app, f"/api/instances/{instance}/history").json() == \
            cli_json(env, "history", instance)
    missing = get(app, "/api/instances/nobody")
    assert missing.status == 404
    assert missing.json() == cli_json(env, "describe", "nobody")


def test_the_list_filters_as_list_does_and_pages_on_from_the_last_row_shown(env):
    for n in range(230):
        env.start("pipeline", f"p-{n:03}", now=n)
    app = ui(env)
    first = get(app, "/")
    assert first.status == 200
    assert first.text.count('href="/instances/p-') == 100
    assert 'href="/instances/p-229"' in first.text and "older →" in first.text
    # Each "older" link names the last row shown; following them reads every row once.
    seen, page = [], first
    while True:
        seen += re.findall(r'href="/instances/(p-\d+)"', page.text)
        older = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        if older is None:
            break
        page = get(app, unescape(older.group(1)))
        assert page.status == 200 and "← newest" in page.text
    assert seen == [f"p-{n:03}" for n in range(229, -1, -1)]
    assert page.text.count('href="/instances/p-') == 30
    assert get(app, unescape(older_link(first))).text == get(app, unescape(older_link(first))).text
    api = get(app, "/api/instances?" + urlencode({"limit": 5, "before": f"{at(200)},p-200"}))
    assert [row["workflow_instance_id"] for row in api.json()] == \
        ["p-199", "p-198", "p-197", "p-196", "p-195"]
    for bad in ("p-200", "yesterday,p-1", "2026-04-12T12:00:00,p-1"):
        refused = get(app, "/?" + urlencode({"before": bad}))
        assert refused.status == 400 and "Error: before: expected the created_at" in \
            unescape(refused.text)
    assert "No instances match" in get(app, "/?status=failed").text


def older_link(page: Response) -> str:
    return re.search(r'<a rel="next" href="([^"]+)"', page.text).group(1)


def cli_run(env: Any, *args: str) -> Any:
    return CliRunner().invoke(cli_app, ["--db", env.db, "-w", str(env.folder / "workflows.yaml"),
                                        *args])


def test_since_means_what_list_since_means_and_is_refused_in_its_words(env):
    # 2026-04-12 11:00 and 13:00 UTC; this machine's zone plays no part.
    env.start("pipeline", "early", now=-3600)
    env.start("pipeline", "late", now=3600)
    app = ui(env)
    env.clock.set(3600 + 60)

    def ids(since: str) -> list[str]:
        return [row["workflow_instance_id"]
                for row in get(app, "/api/instances?" + urlencode({"since": since})).json()]

    for given in ("2026-04-12T12:00:00", "2026-04-12T12:00", "2026-04-12T13:30:00+02:00",
                  "2026-04-12", "2026-04-13"):
        assert ids(given) == [row["workflow_instance_id"]
                              for row in cli_json(env, "list", "--since", given)], given
    assert ids("2026-04-12T12:00:00") == ["late"]        # naive: UTC, as list reads it
    assert ids("2m") == ["late"] and ids("3h") == ["late", "early"]
    assert "early" not in get(app, "/?since=2026-04-12T12:00").text
    for bad in ("yesterday-ish", "2026-13-01", "-1h"):
        refused = get(app, "/?" + urlencode({"since": bad}))
        cli = cli_run(env, "list", "--since", bad)
        assert refused.status == 400 and cli.exit_code == 1
        message = cli.stderr.removeprefix("Error: --since: ").strip()
        assert f"Error: since: {message}" in unescape(refused.text), bad
        assert get(app, "/api/instances?" + urlencode({"since": bad})).json() == \
            {"error": f"since: {message}"}


def test_the_instance_page_shows_time_activities_and_the_timelines_markers(env):
    env.start("pipeline", "order-1")
    env.run(1)
    page = get(app := ui(env), "/instances/order-1")
    assert page.status == 200
    text = text_of(page.text)
    for words in ("execution timeout", "deadline", "held while waiting", "extract",
                  "start-to-close 5m", "Timeline"):
        assert words in text
    svg = re.search(r'<svg class="timeline".*?</svg>', page.text, re.S).group(0)
    # The model is the terminal's: the same lanes, the same run deadlines.
    doc = env.describe("order-1")
    run = timeline.runs(doc, env.history("order-1"), now=env.client.now())[0]
    for lane in run.lanes:
        assert f">{lane.name}</text>" in svg
    # Every deadline is a marker with its letter: on the axis, or in the margin past it.
    letters = set(re.findall(r'<g class="marker (?:deadline|hit|now)[^"]*".*?<text[^>]*>(\w)',
                             svg, re.S))
    assert letters == {marker.letter for marker in run.markers} | {"N"} == {"E", "D", "N"}
    assert 'class="bar completed"' in svg
    assert get(app, "/instances/order-1/history?event_type=ActivityCompleted").text.count(
        "<tr class=\"ev") == 1


def test_a_failure_shows_its_traceback_and_a_timeout_stands_out_in_history(env):
    env.start("flaky", "order-2")
    env.run(1)
    app = ui(env)
    page = get(app, "/instances/order-2").text
    assert "Traceback (most recent call last)" in unescape(page)
    assert "ValueError" in page
    history = get(app, "/instances/order-2/history").text
    assert re.search(r'<tr class="ev failure">.*?ActivityFailed', history, re.S)


def test_every_value_is_escaped_and_every_response_carries_the_policy(env):
    env.start("pipeline", EVIL, input={"note": EVIL, EVIL: 1})
    app = ui(env)
    for target in ("/", f"/instances/{EVIL}", f"/instances/{EVIL}/history",
                   f"/api/instances/{EVIL}", "/nope", "/static/ui.js"):
        response = get(app, target)
        assert response.status in (200, 404), target
        assert "<script>window" not in response.text, target
        assert ("Content-Security-Policy", CSP) in response.headers
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in get(app, "/").text
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP


def test_without_allow_actions_every_change_is_refused_and_none_is_offered(env):
    env.start("pipeline", "order-1")
    app = ui(env)
    assert "<form method=\"post\"" not in get(app, "/instances/order-1").text
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        refused = app.handle(method, "/instances/order-1/pause", {"Host": "127.0.0.1:8484"},
                             urlencode({"csrf": app.csrf, "confirmed": "yes"}).encode())
        assert refused.status == 405
    assert env.describe("order-1")["status"] == "running"


def test_an_action_needs_the_csrf_token_and_a_confirmation_and_is_recorded(env):
    env.start("pipeline", "order-1")
    env.run(1)
    app = ui(env, allow_actions=True)
    page = get(app, "/instances/order-1").text
    assert 'action="/instances/order-1/signal"' in page and "<option>approved</option>" in page
    forged = post(app, "/instances/order-1/pause", {"confirmed": "yes", "csrf": "guess"})
    assert forged.status == 403
    elsewhere = post(app, "/instances/order-1/pause", {"confirmed": "yes", "csrf": app.csrf},
                     Origin="http://evil.example")
    assert elsewhere.status == 403
    asked = post(app, "/instances/order-1/pause", {"csrf": app.csrf})
    assert asked.status == 200 and "Yes, pause" in asked.text
    assert env.describe("order-1")["status"] == "waiting"
    done = post(app, "/instances/order-1/pause", {"csrf": app.csrf, "confirmed": "yes"},
                Origin="http://127.0.0.1:8484")
    assert done.status == 303
    assert ("Location", "/instances/order-1?done=pause") in done.headers
    assert env.describe("order-1")["status"] == "paused"
    post(app, "/instances/order-1/resume",
         {"csrf": app.csrf, "confirmed": "yes", "reason": "approved by ops"})
    unknown = post(app, "/instances/order-1/signal",
                   {"csrf": app.csrf, "confirmed": "yes", "name": "rejected"})
    assert unknown.status == 409 and "waits for approved" in unknown.text
    post(app, "/instances/order-1/signal",
         {"csrf": app.csrf, "confirmed": "yes", "name": "approved", "data": '{"by": "ops"}'})
    post(app, "/instances/order-1/terminate",
         {"csrf": app.csrf, "confirmed": "yes", "reason": "wrong order"})
    assert env.event_types("order-1")[-1] == "WorkflowTerminated"
    assert env.events("order-1", "WorkflowTerminated")[0]["attributes"]["reason"] == \
        "wrong order (from the web view)"
    # Every action says it came from the web view, after the reason given.
    assert [(e["event_type"], e["attributes"].get("signal"), e["attributes"]["reason"])
            for e in env.history("order-1") if e["event_type"] in (
                "WorkflowPaused", "WorkflowResumed", "SignalReceived")] == [
        ("WorkflowPaused", None, "from the web view"),
        ("WorkflowResumed", None, "approved by ops (from the web view)"),
        ("SignalReceived", "approved", "from the web view")]
    lines = text_of(get(app, "/instances/order-1/history").text)
    assert "reason=approved by ops (from the web view)" in lines
    env.start("flaky", "order-2", now=2)
    env.run(3)
    assert 'action="/instances/order-2/retry"' in get(app, "/instances/order-2").text
    vague = post(app, "/instances/order-2/retry",
                 {"csrf": app.csrf, "confirmed": "yes", "deadline": "extend", "extend": ""})
    assert vague.status == 409 and "extend the deadline by how long?" in vague.text
    retried = post(app, "/instances/order-2/retry",
                   {"csrf": app.csrf, "confirmed": "yes", "deadline": "extend", "extend": "2h"})
    assert retried.status == 303
    assert env.describe("order-2")["status"] == "running"
    retry_event = env.events("order-2", "WorkflowRetried")[0]["attributes"]
    assert (retry_event["deadline_change"], retry_event["reason"]) == \
        ("extended", "from the web view")
    assert "reason: from the web view" in text_of(get(app, "/instances/order-2/history").text)


def test_a_token_guards_every_request_and_the_host_must_be_this_machine(env):
    env.start("pipeline", "order-1")
    app = ui(env, token="s3cret")
    assert get(app, "/").status == 401
    assert get(app, "/api/instances").status == 401
    assert get(app, "/", Authorization="Bearer wrong").status == 401
    assert get(app, "/api/instances", Authorization="Bearer s3cret").status == 200
    entered = get(app, "/instances/order-1?token=s3cret&run=1")
    assert entered.status == 303
    assert ("Location", "/instances/order-1?run=1") in entered.headers
    cookie = dict(entered.headers)["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert get(app, "/", Cookie=cookie.split(";")[0]).status == 200
    rebound = app.handle("GET", "/", {"Host": "attacker.example:8484",
                                      "Cookie": cookie.split(";")[0]})
    assert rebound.status == 400


def test_the_watcher_moves_its_version_when_another_connection_commits(env, db):
    watcher = Watcher(Client(db, env.folder / "workflows.yaml"), interval=0.05)
    watcher.start()
    try:
        wait_until(watcher.ready.is_set, "the watcher to look once")
        before = watcher.changes()["version"]
        env.start("pipeline", "order-1")
        wait_until(lambda: watcher.changes()["version"] > before, "the watcher to notice")
    finally:
        watcher.stop()
        watcher.client.close()


def test_the_database_password_appears_nowhere(env, backend, db):
    if backend != "postgres":
        assert get(ui(env), "/").status == 200
        return
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(db)
    secret_url = urlunsplit(parts._replace(netloc=f"{parts.username or 'postgres'}:hunter2@"
                                                  f"{parts.hostname}:{parts.port}"))
    client = Client(secret_url, env.folder / "workflows.yaml")
    try:
        app = App(client, database=client.store.path, hosts=App.loopback_hosts(8484))
        for target in ("/", "/api/instances", "/nope"):
            response = get(app, target)
            assert "hunter2" not in response.text
            assert all("hunter2" not in value for _, value in response.headers)
    finally:
        client.close()


def test_the_command_refuses_another_address_without_allow_remote_and_a_token(env):
    runner = CliRunner()
    base = ["--db", env.db, "-w", str(env.folder / "workflows.yaml"), "ui"]
    result = runner.invoke(cli_app, [*base, "--host", "0.0.0.0"], env={"WFCTL_UI_TOKEN": ""})
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --host 0.0.0.0 is not this machine alone")
    result = runner.invoke(cli_app, [*base, "--host", "0.0.0.0", "--allow-remote"],
                           env={"WFCTL_UI_TOKEN": ""})
    assert result.exit_code == 2
    assert result.stderr == "Error: --allow-remote needs a token in WFCTL_UI_TOKEN\n"


@pytest.mark.sqlite_only
def test_a_page_of_the_list_is_read_through_an_index_however_deep(tmp_path):
    store = SQLiteStore(tmp_path / "w.db")
    with store.read() as tx:
        statements: list[str] = []
        tx.conn.set_trace_callback(statements.append)
        for status, workflow_type in ((None, None), ("running", None), (None, "pipeline")):
            tx.list_instances(status=status, workflow_type=workflow_type, since=at(-60),
                              limit=101, before=(at(0), "p-1"))
        tx.conn.set_trace_callback(None)
        plans = [[row["detail"] for row in tx.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
                 for sql in statements]
    store.close()
    assert len(plans) == 3
    for plan in plans:
        assert plan[0].startswith("SEARCH i USING INDEX instances_") and "created_at<" in \
            plan[0], plan
        assert not any("TEMP B-TREE" in detail or detail.startswith("SCAN")
                       for detail in plan), plan


def test_the_time_panel_holds_the_deadline_as_describe_says_and_lists_pending_signals(env):
    env.start("pipeline", "order-1")
    env.run(1)                                  # extract done: waiting for `approved`
    app = ui(env)

    def time_panel() -> str:
        page = get(app, "/instances/order-1").text
        return text_of(re.search(r'<section aria-labelledby="h-time">.*?</section>', page,
                                 re.S).group(0))

    assert re.search(r"held while waiting: due in [\dhms ]+, cannot fire while waiting\s",
                     time_panel())
    env.client.pause("order-1")
    assert re.search(r"held while paused: due in [\dhms ]+, cannot fire while paused\s",
                     time_panel())
    env.client.signal("order-1", "approved")
    env.client.signal("order-1", "nudge", force=True)
    page = get(app, "/instances/order-1").text
    signals = text_of(re.search(r'<section aria-labelledby="h-signals">.*?</section>', page,
                                re.S).group(0))
    assert "received, not yet consumed" in signals
    assert [name for name in ("approved", "nudge") if name in signals] == ["approved", "nudge"]
    assert "2026-04-12T12:00:00.000+00:00" in signals
    assert "deadline held while" not in text_of(page)       # not under "More" either
    env.client.resume("order-1")
    env.decide(2)                               # takes `approved`: running again
    panel = time_panel()
    assert "held while" not in panel and "deadline" in panel
    page = get(app, "/instances/order-1").text
    assert "approved" not in text_of(re.search(r'<section aria-labelledby="h-signals">.*?'
                                               r'</section>', page, re.S).group(0))


def test_a_page_lists_the_oldest_fifty_pending_signals_and_counts_the_rest(env):
    env.start("pipeline", "order-1")
    for n in range(53):
        env.client.signal("order-1", f"s{n:02d}", force=True)
    app = ui(env)

    page = get(app, "/instances/order-1").text
    signals = text_of(re.search(r'<section aria-labelledby="h-signals">.*?</section>', page,
                                re.S).group(0))

    assert "s49" in signals and "s50" not in signals
    assert "… 3 more ( JSON  lists them all)" in signals
    assert len(json.loads(get(app, "/api/instances/order-1").body)["pending_signals"]) == 53


def test_the_page_takes_whether_the_deadline_is_held_from_describe():
    doc = {"execution_timeout_seconds": None, "deadline_seconds": 1800,
           "deadline_at": at(1800), "deadline_held_while": None,
           "run": {"status": "waiting", "run_timeout_seconds": None, "closed_at": None,
                   "execution_deadline_at": None, "run_deadline_at": None}}
    now = at(60)
    assert [row.state for row in pages.time_rows(doc, now)] == ["none", "none", "open"]
    held = pages.time_rows({**doc, "deadline_held_while": "paused"}, now)[2]
    assert (held.state, held.note) == ("held", "held while paused: due in 29m, cannot fire "
                                               "while paused")
    passed = pages.time_rows({**doc, "deadline_held_while": "waiting"}, at(1805))[2]
    assert passed.note == "held while waiting: passed 5s ago, fails it once it runs again"


def test_the_command_starts_without_typer_and_stops_on_sigterm(env):
    env.start("pipeline", "order-1")
    # Any import of typer fails in this process: `wfctl ui` must not need it to start.
    script = ("import sys; sys.modules['typer'] = None; from wfctl.cli import main; "
              "sys.argv[0] = 'wfctl'; main()")
    process = subprocess.Popen(
        [sys.executable, "-c", script, "--db", env.db, "-w", str(env.folder / "workflows.yaml"),
         "ui", "--port", "0", "--allow-actions"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "WFCTL_UI_TOKEN": ""})
    try:
        line = process.stdout.readline()
        address = re.search(r"http://127\.0\.0\.1:(\d+)/ \(actions allowed;", line)
        assert address, f"printed {line!r}; stderr: {process.stderr.read()}"
        connection = http.client.HTTPConnection("127.0.0.1", int(address.group(1)), timeout=30)
        connection.request("GET", "/api/instances",
                           headers={"Host": f"127.0.0.1:{address.group(1)}"})
        listed = json.loads(connection.getresponse().read())
        connection.close()
        assert [row["workflow_instance_id"] for row in listed] == ["order-1"]
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0 and out.endswith("wfctl ui: stopped\n"), err


SCHEDULED = DEFINITIONS + """
schedules:
  nightly:
    workflow: pipeline
    cron: "0 3 * * 1-5"
    timezone: Europe/Berlin
  heartbeat:
    workflow: flaky
    every: 15m
    paused: true
"""


def test_the_schedules_page_lists_each_schedule_in_words_with_its_next_tick(make_env):
    env = make_env(SCHEDULED)
    app = ui(env)
    [action] = env.client.trigger("nightly")
    env.start("pipeline", "by-hand")
    page = get(app, "/schedules")
    assert page.status == 200 and 'href="/schedules"' in page.text
    rows = [" ".join(text_of(row).split())
            for row in re.findall(r"<tr>(.*?)</tr>", page.text, re.S)][1:]
    assert rows == [
        "heartbeat instances flaky Every 15m every 15m UTC - - - yes",
        "nightly instances pipeline At 03:00, Monday through Friday (Europe/Berlin) 0 3 * * 1-5 "
        "Europe/Berlin 2026-04-13T01:00:00.000+00:00 2026-04-13 03:00:00 CEST in 13h "
        f"started {action['instance_id']} ( 2026-04-12T12:00:00.000+00:00 ) no"]
    assert '<span class="countdown green" data-at="2026-04-13T01:00:00.000+00:00">in 13h</span>' \
        in page.text
    assert get(app, "/api/schedules").json() == cli_json(env, "schedules")
    # Each schedule links to the list of the instances it started.
    listed = get(app, "/?schedule=nightly")
    assert 'href="/?schedule=nightly"' in page.text and listed.status == 200
    assert re.findall(r'href="/instances/([^"]+)"', listed.text) == [action["instance_id"]]
    assert [row["workflow_instance_id"] for row in get(app, "/api/instances?schedule=nightly")
            .json()] == [action["instance_id"]]
