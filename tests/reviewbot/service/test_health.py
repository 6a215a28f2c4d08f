"""Honest health, against real `reviewbot serve` processes (SQLite file database): `/healthz` and
the webhook answer 503 with the reason when the database file is deleted while open, read-only
after a restart, or full; serve's worker process is restarted when it dies, and workers' heartbeats
are reported.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess

import pytest

from tests.reviewbot.service.harness import Service, wait_until
from tests.reviewbot.service.scenario import Project, good_core


@pytest.fixture
def fresh_service(github, tmp_path):
    """A service of the test's own (these tests break its database)."""
    (tmp_path / "svc").mkdir()
    services: list[Service] = []

    def make(**settings) -> Service:
        svc = Service(tmp_path / "svc", github, **settings)
        services.append(svc)
        return svc

    yield make
    for svc in services:
        svc.stop()


def closed_event(project: Project, number: int, filler: int = 0) -> dict:
    """A signed-able `pull_request` `closed` delivery; `filler` bytes of incompressible PR body."""
    from tests.reviewbot.fake_github.webhooks import pull_request_event

    payload = pull_request_event(
        "closed", project.github.state.pulls[(project.full_name, number)], project.github.origin
    )
    payload["pull_request"]["body"] = base64.b64encode(os.urandom(filler)).decode()
    return payload


def test_deleted_database_file_is_reported_and_nothing_more_is_acknowledged(fresh_service, github, tmp_path):
    service = fresh_service().start()
    probe = service.client.head("/healthz")
    assert (probe.status_code, probe.content) == (200, b"")
    project = Project(tmp_path, github, "octo/deleted-db")
    project.open_pull(1, good_core())
    assert service.deliver("pull_request", closed_event(project, 1)).status_code == 202
    for suffix in ("", "-wal", "-shm"):
        os.unlink(f"{service.db_path}{suffix}")
    response = service.deliver("pull_request", closed_event(project, 1))
    assert response.status_code == 503, response.text
    assert "was deleted while open" in response.json()["reason"]
    health = service.client.get("/healthz")
    assert health.status_code == 503
    assert f"database file {service.db_path} was deleted while open" in health.json()["reason"]
    probe = service.client.head("/healthz")  # a load balancer's probe: the status, no body
    assert (probe.status_code, probe.content) == (503, b"")


def test_read_only_database_after_a_restart_is_a_503_until_it_is_writable_again(fresh_service, github, tmp_path):
    service = fresh_service().start()
    project = Project(tmp_path, github, "octo/read-only-db")
    project.open_pull(1, good_core())
    service.stop()
    subprocess.run(["chattr", "+i", str(service.db_path)], check=True)  # read-only even for root
    try:
        service = fresh_service().start(healthy=False)
        health = service.client.get("/healthz")
        assert health.status_code == 503
        assert "attempt to write a readonly database" in health.json()["reason"]
        response = service.deliver("pull_request", closed_event(project, 1))
        assert response.status_code == 503 and "readonly database" in response.json()["reason"], response.text
    finally:
        subprocess.run(["chattr", "-i", str(service.db_path)], check=True)
    # writable again: the next probe reconnects; the failed store stays reported until a delivery is stored
    assert "could not be stored" in service.client.get("/healthz").json()["reason"]
    assert service.deliver("pull_request", closed_event(project, 1)).status_code == 202
    wait_until(lambda: service.health_status() == 200, timeout=30, what="/healthz to recover")


def test_full_database_refuses_deliveries_with_503_and_says_so(fresh_service, github, tmp_path):
    service = fresh_service(database_max_mb=1).start()
    project = Project(tmp_path, github, "octo/full-db")
    project.open_pull(1, good_core())
    codes = [service.deliver("pull_request", closed_event(project, 1, filler=300_000)).status_code for _ in range(6)]
    assert codes[0] == 202 and codes[-1] == 503, codes
    refused = service.deliver("pull_request", closed_event(project, 1, filler=300_000))
    assert refused.status_code == 503 and "database or disk is full" in refused.json()["reason"]
    health = service.client.get("/healthz")
    assert health.status_code == 503
    assert "the last delivery could not be stored" in health.json()["reason"]
    assert "database or disk is full" in health.json()["reason"]
    assert service.server is not None and service.server.poll() is None


def test_killed_worker_process_is_reported_and_restarted(fresh_service, github, tmp_path):
    service = fresh_service().start()
    first = service.client.get("/healthz").json()["worker_process"]
    assert first["restarts"] == 0 and first["pid"]
    os.kill(first["pid"], signal.SIGKILL)
    down = wait_until(
        lambda: (r := service.client.get("/healthz")).status_code == 503 and r.json(), timeout=10, what="a 503"
    )
    assert "worker process not running: exited with code -9" in down["reason"]
    wait_until(lambda: service.health_status() == 200, timeout=30, what="the restarted worker's heartbeat")
    again = service.client.get("/healthz").json()["worker_process"]
    assert again["restarts"] == 1 and again["pid"] not in (None, first["pid"])
    # the killed worker's row still says `running` (it never wrote `stopped`): /healthz calls it
    # missing once it missed 3 of its beats (0.5 s here); it was listed as running until pruned
    killed = wait_until(
        lambda: [w for w in service.client.get("/healthz").json()["workers"] if w["pid"] == first["pid"]],
        timeout=10,
        what="the killed worker's row",
    )
    assert killed[0]["state"] == "missing", killed
    assert killed[0]["heartbeat_interval_s"] == 0.5
    project = Project(tmp_path, github, "octo/after-restart")
    project.open_pull(1, good_core())
    service.pull_event("opened", project.full_name, 1)
    [job] = service.wait_jobs_settled(project.full_name, 1)
    assert job.state == "done", service.log()


def test_external_workers_heartbeats_are_listed(fresh_service, github, tmp_path):
    service = fresh_service(embedded_worker="false").start()
    assert service.client.get("/healthz").json()["workers"] == []
    worker = service.start_worker()
    listed = wait_until(
        lambda: [w for w in service.client.get("/healthz").json()["workers"] if w["pid"] == worker.pid],
        timeout=30,
        what="the worker's heartbeat",
    )
    assert listed[0]["state"] == "running" and listed[0]["last_heartbeat_s"] < 5
    assert listed[0]["serves_this_server"] is False
    worker.terminate()
    assert worker.wait(timeout=30) == 0
    [row] = [w for w in service.client.get("/healthz").json()["workers"] if w["pid"] == worker.pid]
    assert row["state"] == "stopped"
    assert service.client.get("/healthz").status_code == 200  # external workers come and go
    # one beating every 2 s is running for 6 s of silence; killed, it stays `running` in its row
    slow = service.start_worker(worker_heartbeat_seconds=2)
    listed = wait_until(
        lambda: [w for w in service.client.get("/healthz").json()["workers"] if w["pid"] == slow.pid],
        timeout=30,
        what="the slow worker's heartbeat",
    )
    assert listed[0]["state"] == "running"
    service.kill(slow)
    [row] = wait_until(
        lambda: [
            w
            for w in service.client.get("/healthz").json()["workers"]
            if w["pid"] == slow.pid and w["state"] != "running"
        ],
        timeout=30,
        what="the killed worker to be missing",
    )
    assert (row["state"], row["heartbeat_interval_s"]) == ("missing", 2.0), row
    assert service.client.get("/healthz").status_code == 200  # listed, not judged


def test_a_database_blip_while_a_job_runs_keeps_its_lease_renewing(fresh_service, github, tmp_path):
    """The job's lease thread meets a database that refuses writes for a moment: it says so and
    renews at its next beat, so the job is not claimed a second time by the other job thread."""
    service = fresh_service(worker_threads=2, job_lease_seconds=6).start()
    project = Project(tmp_path, github, "octo/db-blip")
    _, head = project.open_pull(1, good_core())
    held = github.state.add_fault("POST", rf"/repos/{project.full_name}/statuses/{head}$", delay=5)
    service.pull_event("opened", project.full_name, 1)
    wait_until(lambda: held.times == 0, what="the review to start writing")
    # The database and its write-ahead log refuse writes; the shared-memory index (-shm) stays
    # writable: SQLite maps it, and a store into a mapped page of an immutable file is a SIGBUS
    # that kills the worker, which is no blip a real database has.
    files = [f"{service.db_path}{suffix}" for suffix in ("", "-wal") if os.path.exists(f"{service.db_path}{suffix}")]
    subprocess.run(["chattr", "+i", *files], check=True)
    try:
        wait_until(lambda: "lease not renewed, trying again" in service.log(), timeout=10, what="a failed renewal")
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)
    [job] = service.wait_jobs_settled(project.full_name, 1)
    assert (job.state, job.attempts) == ("done", 1), service.log()
    assert "Exception in thread" not in service.log()
    assert "exited with code" not in service.log(), service.log()  # the blip did not kill the worker
