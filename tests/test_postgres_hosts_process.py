"""Real `wfctl work` processes on several (simulated) hosts sharing one PostgreSQL database: every
step runs once, wake-ups cross processes, and a killed worker, a lost LISTEN connection or a
server restart loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pg
import psycopg
import pytest
from test_supervision_process import REPO, Project, log_lines, wait_until

pytestmark = pytest.mark.process

STEPS = ["extract", "transform", "load"]


@pytest.fixture
def project(tmp_path: Path, pg_url: str) -> Iterator[Project]:
    project = Project(tmp_path, db=pg_url)
    yield project
    project.close()


def start_workers(project: Project, hosts: list[str], *args: str) -> list[subprocess.Popen]:
    """`wfctl work` on each of these hosts (`WFCTL_HOST_ID`), started side by side; returns
    once every one has registered."""
    started = []
    for host in hosts:
        environment = {**os.environ, "WFCTL_HOST_ID": host, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        environment.pop("NOTIFY_SOCKET", None)
        with project.log_path(len(project.workers)).open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "wfctl", "--db", str(project.db), "-w",
                 str(project.workflows), "work", *args],
                cwd=project.folder, env=environment, stdout=subprocess.DEVNULL, stderr=stderr)
        project.workers.append(process)
        started.append(process)
    wait_until(lambda: {p.pid for p in started} <= project.live_worker_pids(),
               "every worker registered", timeout=30)
    return started


def completed(project: Project, ids: list[str]) -> bool:
    """Whether every one of these workflows completed (one query, however many they are)."""
    done = project.client.list(status="completed", limit=len(ids) + 1)
    return {row["workflow_instance_id"] for row in done} >= set(ids)


def assert_well_formed(project: Project, instance_id: str) -> None:
    """One history, seq 1..n, started then the three steps in order, each scheduled, started
    and completed once, then completed."""
    events = project.client.history(instance_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), instance_id
    types = [e["event_type"] for e in events]
    assert (types[0], types[-1]) == ("WorkflowStarted", "WorkflowCompleted"), instance_id
    for kind in ("ActivityScheduled", "ActivityStarted", "ActivityCompleted"):
        assert [e["attributes"]["step"] for e in events if e["event_type"] == kind] == STEPS, \
            (instance_id, kind)


def stop(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    assert [worker.wait(15) for worker in workers] == [0] * len(workers)


def start_latency(project: Project, instance_id: str) -> float:
    """Seconds from the start of a one-step workflow to its step starting, as its history
    records them (the client and the worker both read the database server's clock)."""
    project.start("one", instance_id)
    wait_until(lambda: project.events(instance_id, "ActivityStarted"), f"{instance_id} started")
    started = project.events(instance_id, "WorkflowStarted")[0]["at"]
    claimed = project.events(instance_id, "ActivityStarted")[0]["at"]
    return (claimed - started).total_seconds()


def listening_sessions(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN %'")]


def test_four_workers_on_four_hosts_run_every_step_of_300_workflows_exactly_once(project):
    ids = [f"p{n:03d}" for n in range(300)]
    for instance_id in ids:
        project.start("pipeline", instance_id)

    workers = start_workers(project, [f"host-{n}" for n in range(4)], "--concurrency", "4")

    # The ledger is read while they run (the database is left to them); then the outcome.
    wait_until(lambda: len(project.calls()) >= 3 * len(ids), "every step run", timeout=90)
    wait_until(lambda: completed(project, ids), "every pipeline completed")

    ledger = Counter((wf, step) for wf, step, _, _, _ in project.calls())
    assert ledger == {(wf, step): 1 for wf in ids for step in STEPS}
    assert {attempt for _, _, attempt, _, _ in project.calls()} == {1}
    ran_in = Counter(pid for _, _, _, pid, _ in project.calls())
    assert set(ran_in) == {w.pid for w in workers}, ran_in
    for instance_id in ids:
        assert_well_formed(project, instance_id)
    with project.client.engine.store.read() as tx:
        hosts = {row.pid: row.host_id for row in tx.live_workers()}
    assert hosts == {w.pid: f"host-{n}" for n, w in enumerate(workers)}
    stop(workers)


def test_a_worker_killed_mid_step_has_its_work_retried_by_a_worker_on_another_host_after_its_lease(
        project):
    doomed, survivor = start_workers(project, ["host-a", "host-b"], "--concurrency", "2",
                                     "--worker-lease", "2s")
    ids = [f"p{n}" for n in range(8)]
    for instance_id in ids:
        project.start("pipeline", instance_id, _sleep=0.3)
    wait_until(lambda: any(pid == doomed.pid for *_, pid, _ in project.calls()),
               "the doomed worker running a step")
    with project.client.engine.store.read() as tx:
        lease_expires_at = tx.get_worker(next(w.worker_id for w in tx.live_workers()
                                              if w.pid == doomed.pid)).lease_expires_at

    doomed.kill()
    doomed.wait()

    wait_until(lambda: completed(project, ids), "every pipeline completed", timeout=20)
    retried = [e for i in ids for e in project.events(i, "ActivityRetryScheduled")]
    assert retried and {e["attributes"]["reason"] for e in retried} == {"worker_lost"}
    # The survivor is on another host: it waited for the lease, whatever the pid said.
    assert min(e["at"] for e in retried) >= lease_expires_at
    for wf in ids:
        for step in STEPS:
            runs = [(attempt, pid) for w, s, attempt, pid, _ in project.calls()
                    if (w, s) == (wf, step)]
            attempts = [attempt for attempt, _ in runs]
            # Each attempt ran once at most, in order, and one retry at most was needed; an
            # attempt the doomed worker had claimed for a slot that had not taken it up yet
            # when it was killed never ran at all.
            assert attempts == sorted(set(attempts)) and attempts[-1] <= 2, (wf, step, runs)
            # Each step ran once to its end: in the survivor, or in the worker before its kill.
            assert all(pid == doomed.pid for _, pid in runs[:-1]), (wf, step, runs)
        assert_well_formed_after_retries(project, wf)
    stop([survivor])


def test_a_lock_on_the_workers_outlasting_several_leases_runs_no_step_twice(project):
    # Neither worker can renew its lease meanwhile, nor the other find it lost: after the lock
    # each has a lease's time to renew before its lease tells anything again.
    workers = start_workers(project, ["host-a", "host-b"], "--concurrency", "2",
                            "--worker-lease", "1s")
    ids = [f"p{n}" for n in range(6)]
    for instance_id in ids:
        project.start("pipeline", instance_id, _sleep=0.2)
    wait_until(lambda: len(project.calls()) >= 4, "the pipelines under way")

    with psycopg.connect(project.db) as blocker:
        blocker.execute("LOCK TABLE workers IN EXCLUSIVE MODE")
        time.sleep(3.5)

    wait_until(lambda: completed(project, ids), "every pipeline completed", timeout=15)
    ledger = Counter((wf, step) for wf, step, _, _, _ in project.calls())
    assert ledger == {(wf, step): 1 for wf in ids for step in STEPS}
    assert [e for i in ids for e in project.events(i, "ActivityRetryScheduled")] == []
    for worker in workers:
        log = project.log(worker)
        assert not log_lines(log, "activity_result_discarded"), log
        assert not log_lines(log, "worker_lease_lapsed"), log
    stop(workers)


def assert_well_formed_after_retries(project: Project, instance_id: str) -> None:
    events = project.client.history(instance_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), instance_id
    assert [e["attributes"]["step"] for e in events
            if e["event_type"] == "ActivityCompleted"] == STEPS, instance_id
    assert events[-1]["event_type"] == "WorkflowCompleted"


def test_wake_ups_resume_after_the_listening_connection_is_terminated(project, pg_url):
    # Polling every 2 s: a start picked up far sooner was heard, not polled for.
    [worker] = start_workers(project, ["host-a"], "--concurrency", "2", "--poll-interval", "2s")
    wait_until(lambda: listening_sessions(pg_url), "the worker listening")
    time.sleep(1.2)     # the slots idle, waiting out their own poll
    assert start_latency(project, "before") < 0.5
    [listener] = listening_sessions(pg_url)

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (listener,))

    wait_until(lambda: listening_sessions(pg_url) not in ([], [listener]),
               "the worker listening again")
    time.sleep(1.2)
    assert start_latency(project, "after") < 0.5
    log = project.log(worker)
    [lost] = log_lines(log, "database_unavailable")
    assert " WARNING " in lost and "reason=unreachable" in lost, lost
    assert len(log_lines(log, "database_available")) == 1
    stop([worker])


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[tuple[pg.Cluster, str]]:
    """A cluster of this test's own, since it is restarted (the session's is shared)."""
    cluster = pg.Cluster()
    try:
        # The server's own connection does not outlive the restart: the cluster goes whole.
        yield cluster, pg.Server(cluster.url).create()
    finally:
        cluster.stop()


def test_workers_reconnect_after_a_server_restart_and_every_workflow_completes(
        tmp_path, own_cluster):
    cluster, url = own_cluster
    project = Project(tmp_path, db=url)
    try:
        workers = start_workers(project, ["host-a", "host-b"], "--concurrency", "2")
        ids = [f"p{n:02d}" for n in range(20)]
        for instance_id in ids:
            project.start("pipeline", instance_id, _sleep=0.02)
        wait_until(lambda: len(project.calls()) >= 10, "the pipelines under way")

        project.client.close()
        cluster.restart()

        wait_until(lambda: completed(project, ids), "every pipeline completed", timeout=30)
        assert all(w.poll() is None for w in workers), "the workers are still alive"
        for wf in ids:
            assert_well_formed_after_retries(project, wf)
        completions = Counter((wf, step) for wf in ids for e in
                              project.events(wf, "ActivityCompleted")
                              for step in [e["attributes"]["step"]])
        assert completions == {(wf, step): 1 for wf in ids for step in STEPS}
        for worker in workers:
            log = project.log(worker)
            assert len(log_lines(log, "database_unavailable")) == 1, log
            assert len(log_lines(log, "database_available")) == 1, log
        start_latency(project, "after-restart")
        stop(workers)
    finally:
        project.close()
