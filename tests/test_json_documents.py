"""`describe --json`, `history --json` and `list --json` print, byte for byte, what they printed
when history's instants crossed the store as ISO text: the read models now carry aware UTC
datetimes, and only the JSON edge makes them text.

tests/data/documents/ holds what wfctl printed of five representative instances at commit
7be3ed6, on SQLite, their random ids named by order of appearance (`normalised`): an activity
that misses its heartbeat and is retried, a timer, a signal wait, a signal taken and one
buffered, a child that runs into its deadline and fails its parent, two runs timed out (one
retried, one in its backoff). Since then describe-i1.json adds what describe --json came to
show: the heartbeat-timed-out attempt as its activity's `last_error`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import at

from wfctl import to_json
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.lang import handlers

pytestmark = pytest.mark.both_backends

DOCUMENTS = Path(__file__).parent / "data" / "documents"
DEFINITIONS = """
version: 1
workflows:
  import:
    execution_timeout: 1h
    run_timeout: 30m
    deadline: 2h
    steps:
      - activity: wfh:noop
        name: extract
        start_to_close: 2m
        heartbeat: 20s
        schedule_to_close: 10m
        max_attempts: 3
        backoff: {initial: 10s, coefficient: 2.0, max: 1m}
      - delay: 1m
      - wait_for_signal: approved
        timeout: 2m
      - activity: wfh:noop
        name: load
        schedule_to_start: 5m
  parent:
    steps:
      - workflow: guarded
        name: guarded_child
  guarded:
    deadline: 90s
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:noop
        name: unserved
        queue: nobody
  nightly:
    run_timeout: 1m
    retry: {max_attempts: 2, backoff: [30s], when: [run_timeout]}
    steps:
      - activity: wfh:noop
        name: unserved
        queue: nobody
"""
NAMES = ("i1", "p1", "child", "n1", "n2")


def drive(env: Any) -> list[str]:
    """The five instances, each step at its instant; their ids, in NAMES's order."""
    env.start("import", "i1")
    env.decide(0)
    extract = env.claim(1, worker_id="worker-1")
    env.start("parent", "p1", now=2)
    env.decide(2)
    env.decide(2)
    env.start("nightly", "n1", now=3)
    env.decide(3)
    for second in (6, 16):
        env.engine.record_heartbeat(extract, {"rows": second}, at(second))
    env.sweep(40)
    env.start("nightly", "n2", now=40)
    env.decide(40)
    extract = env.claim(51, worker_id="worker-1")
    env.engine.complete_activity(extract, {"rows": 3}, at(55))
    env.decide(55)
    env.run(65)
    sweep_deadlines(env.engine, "checker", at(95), handlers.call)
    env.decide(95)
    env.run(95)
    env.run(101)
    env.run(115)
    env.clock.set(130)
    env.client.signal("i1", "approved", {"by": "ops"})
    env.decide(130)
    env.clock.set(140)
    env.client.signal("i1", "approved", {"by": "late"})
    child = env.client.list(workflow_type="guarded")[0]["workflow_instance_id"]
    return ["i1", "p1", child, "n1", "n2"]


def normalised(texts: list[str], worker_id: str) -> list[str]:
    """The texts with the worker's id as `worker-0` and each random id (run, activity, timer,
    the child's suffix) named by the order it first appears in: `id01-xxxxxxxxxxx`."""
    names: dict[str, str] = {}

    def name(found: re.Match[str]) -> str:
        return names.setdefault(found.group(0),
                                f"id{len(names) + 1:02}-" + "x" * (len(found.group(0)) - 5))

    pattern = re.compile(r"(?<![0-9a-f])[0-9a-f]{16}(?![0-9a-f])|(?<=guarded_child\.)[0-9a-f]{8}")
    return [pattern.sub(name, text.replace(worker_id, "worker-0")) for text in texts]


@pytest.fixture
def printed(make_env, wfctl) -> dict[str, str]:
    """What `describe --json`, `history --all-runs --json` and `list --json` print of the
    instances, by file name in DOCUMENTS."""
    env = make_env(DEFINITIONS)
    ids = drive(env)
    files, texts = [], []
    for name, instance_id in zip(NAMES, ids, strict=True):
        for command in (("describe",), ("history", "--all-runs")):
            code, out, err = wfctl(env, *command, instance_id, "--json")
            assert (code, err) == (0, ""), err
            files.append(f"{command[0]}-{name}.json")
            texts.append(out)
    code, out, err = wfctl(env, "list", "--json")
    assert (code, err) == (0, ""), err
    files.append("list.json")
    texts.append(out)
    return dict(zip(files, normalised(texts, env.worker.worker_id), strict=True))


def test_the_json_documents_are_printed_as_before_byte_for_byte(printed):
    assert sorted(printed) == sorted(path.name for path in DOCUMENTS.iterdir())
    for name, text in printed.items():
        assert text == (DOCUMENTS / name).read_text(), name


def instants(document: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every value of the document under a key that names an instant (`*_at`, `at`), by path."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            where = f"{path}.{key}" if path else key
            if key.endswith("_at") or key == "at":
                found.append((where, value))
            elif key not in ("state", "input", "result", "data", "details"):
                found += instants(value, where)
    elif isinstance(document, list):
        for index, item in enumerate(document):
            found += instants(item, f"{path}[{index}]")
    return found


def test_the_read_models_carry_every_instant_as_an_aware_utc_datetime(make_env):
    env = make_env(DEFINITIONS)
    ids = drive(env)
    documents = [env.client.list()]
    for instance_id in ids:
        documents += [env.describe(instance_id), env.history(instance_id, all_runs=True)]
    found = [pair for document in documents for pair in instants(document)]

    wrong = [(path, value) for path, value in found
             if value is not None and not (isinstance(value, datetime) and value.tzinfo is UTC)]
    assert wrong == []
    # History's attributes among them, a failure's nested instant too.
    paths = {re.sub(r"\[\d+\]", "[]", path) for path, value in found if value is not None}
    assert {"[].attributes.timeout_at", "[].attributes.heartbeat_deadline_at",
            "[].attributes.retry_available_at", "[].attributes.next_attempt_at",
            "[].attributes.claimed_at", "[].attributes.failure.deadline_at",
            "failure.deadline_at", "[].nearest_deadline.at"} <= paths


def test_a_client_document_printed_by_to_json_is_what_json_prints(make_env, wfctl):
    env = make_env(DEFINITIONS)
    ids = drive(env)
    for instance_id in ids:
        code, out, err = wfctl(env, "describe", instance_id, "--json")
        assert (code, err) == (0, "")
        assert to_json(env.client.describe(instance_id), indent=2) + "\n" == out
    code, out, _ = wfctl(env, "list", "--json")
    assert to_json(env.client.list(), indent=2) + "\n" == out
