"""The vocabulary names every status, timeout kind and failure category the records hold."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest

from wfctl import vocabulary
from wfctl.lang import definitions
from wfctl.store import SQLiteStore

V01 = Path(__file__).parent / "data" / "v01.db"


@pytest.mark.parametrize(("table", "column", "words"), [
    ("instances", "status", vocabulary.INSTANCE_STATUSES),
    ("runs", "status", vocabulary.RUN_STATUSES),
    ("activities", "status", vocabulary.ACTIVITY_STATUSES),
    ("workflow_tasks", "status", vocabulary.WORKFLOW_TASK_STATUSES),
    ("timers", "status", vocabulary.TIMER_STATUSES),
    ("failures", "failure_category", vocabulary.FAILURE_CATEGORIES),
    ("failures", "timeout_kind", vocabulary.TIMEOUT_KINDS),
    ("instances", "child_policy", vocabulary.CHILD_POLICIES),
])
def test_a_database_holds_only_words_of_the_vocabulary(table, column, words):
    conn = sqlite3.connect(f"{V01.as_uri()}?mode=ro&immutable=1", uri=True)
    found = {value for (value,) in conn.execute(f"SELECT DISTINCT {column} FROM {table}")}
    conn.close()

    assert found - {None} <= set(words)
    assert found - {None}


def test_every_status_closes_a_run_with_its_own_event():
    assert set(vocabulary.RUN_CLOSED_EVENT) == set(vocabulary.CLOSED_RUN)
    assert set(vocabulary.RUN_CLOSED_EVENT.values()) <= set(vocabulary.EVENT_TYPES)
    assert set(vocabulary.CHILD_CLOSED_EVENT.values()) <= set(vocabulary.EVENT_TYPES)


def test_each_timeout_goes_by_the_names_the_yaml_the_retry_policy_and_the_store_use(tmp_path):
    yaml = "version: 1\nworkflows:\n  w:\n" + "".join(
        f"    {t.yaml_key}: {n + 1}m\n" for n, t in enumerate(vocabulary.WORKFLOW_TIMEOUTS)
    ) + "    steps:\n      - activity: handlers:fetch\n" + "".join(
        f"        {t.yaml_key}: {n + 1}s\n" for n, t in enumerate(vocabulary.ACTIVITY_TIMEOUTS))
    wf = definitions.parse(yaml, "workflows.yaml").types["w"]
    policy = wf.steps[0].options.retry_policy()
    store = SQLiteStore(tmp_path / "w.db")
    with store.read() as tx:
        columns = {table: {row["name"] for row in tx.conn.execute(f"PRAGMA table_info({table})")}
                   for table in ("activities", "runs")}
    store.close()

    for n, timeout in enumerate(vocabulary.ACTIVITY_TIMEOUTS):
        assert policy[timeout.policy_key] == n + 1, timeout
        assert timeout.column in columns["activities"], timeout
        assert set(timeout.counts_while) <= set(vocabulary.OPEN_ACTIVITY), timeout
    for n, timeout in enumerate(vocabulary.WORKFLOW_TIMEOUTS):
        assert getattr(wf, timeout.yaml_key) == 60 * (n + 1), timeout
        assert timeout.column in columns["runs"], timeout
    assert {t.kind for t in vocabulary.ACTIVITY_TIMEOUTS_SHOWN} == \
        set(vocabulary.ACTIVITY_TIMEOUT_KINDS)


def test_no_module_but_the_vocabulary_spells_a_timeout_label():
    # A list pairing each label with its column, written out again elsewhere, drifts from the
    # table: every module reads the labels from `vocabulary.TIMEOUTS`. ("heartbeat" is its
    # kind too, which any module may name.)
    labels = {t.label for t in vocabulary.TIMEOUTS.values()} - set(vocabulary.TIMEOUTS)
    package = Path(vocabulary.__file__).parent
    spelled = sorted(
        (str(path.relative_to(package)), node.lineno, node.value)
        for path in package.rglob("*.py") if path.name != "vocabulary.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and node.value in labels)
    assert labels and spelled == []
