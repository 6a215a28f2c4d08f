"""Bounded storage, on SQLite and PostgreSQL: ignored events keep only their headers, delivery
bodies are kept compressed, and pruning deletes old deliveries with their finished jobs (never
pending work); a restarted worker prunes by itself; pruned SQLite pages go back to the disk; a
database of the previous schema is refused."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import zlib

import pytest
from sqlalchemy import select

from reviewbot.service import retention
from reviewbot.service.db import Delivery, Job, SuiteRun, WorkerBeat, make_sessionmaker, pack_body
from tests.reviewbot.fake_github.webhooks import load_payload
from tests.reviewbot.service.harness import REPO_ROOT, Service, wait_until
from tests.reviewbot.service.postgres import BACKENDS
from tests.reviewbot.service.scenario import Project, good_core

DAY = 86400.0


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    return request.param


def test_ignored_events_keep_only_headers_and_bodies_are_kept_compressed(service, github, project):
    ignored = service.deliver("installation", load_payload("installation", "created.payload", github.origin))
    assert ignored.status_code == 202
    project.open_pull(1, good_core())
    no_command = service.comment_event(project.full_name, 1, "Looks good to me", "alice")
    assert service.outcome(no_command) == "ignored-no-command"
    opened = service.pull_event("opened", project.full_name, 1)
    service.wait_jobs_settled(project.full_name, 1)
    rows = {
        row.guid: row
        for row in service.query(
            "SELECT guid, event, headers, body, outcome FROM deliveries WHERE guid IN (:a, :b, :c)",
            a=ignored.request.headers["X-GitHub-Delivery"],
            b=no_command.request.headers["X-GitHub-Delivery"],
            c=opened.request.headers["X-GitHub-Delivery"],
        )
    }
    for response in (ignored, no_command):
        row = rows[response.request.headers["X-GitHub-Delivery"]]
        assert bytes(row.body) == b"", row.outcome
        headers = row.headers if isinstance(row.headers, dict) else json.loads(row.headers)
        assert headers["x-github-event"] == row.event
        assert headers["x-github-delivery"] == row.guid
    kept = rows[opened.request.headers["X-GitHub-Delivery"]]
    raw = zlib.decompress(bytes(kept.body))
    assert raw == opened.request.body
    assert len(bytes(kept.body)) < len(raw) / 4


def test_prune_deletes_old_finished_work_and_keeps_what_is_pending(tmp_path, database_url):
    url = database_url or f"sqlite:///{tmp_path / 'prune.sqlite3'}"
    sessions = make_sessionmaker(url)
    now = time.time()
    old, recent = now - 20 * DAY, now - 1 * DAY
    body = pack_body(b'{"action": "opened"}')
    with sessions.begin() as session:
        for guid, received, processed in (
            ("old-done", old, True),
            ("old-pending-job", old, True),
            ("old-unprocessed", old, False),
            ("recent-done", recent, True),
            ("old-no-job", old, True),
        ):
            session.add(Delivery(guid=guid, event="pull_request", received_at=received, body=body, processed=processed))
        finished = {"state": "done", "created_at": old, "finished_at": old + 60}
        session.add(Job(kind="review", repo="o/r", pr=1, delivery_id="old-done", **finished))
        session.add(
            Job(kind="review", repo="o/r", pr=2, delivery_id="old-pending-job", state="pending", created_at=old)
        )
        session.add(Job(kind="review", repo="o/r", pr=3, delivery_id="recent-done", **finished))
        session.add(Job(kind="gpu", repo="o/r", pr=4, state="failed", created_at=recent, finished_at=recent))
        session.flush()
        gpu_old = Job(kind="gpu", repo="o/r", pr=5, **finished)
        session.add(gpu_old)
        session.flush()
        session.add(SuiteRun(job_id=gpu_old.id, repo="o/r", pr=5, head_sha="a" * 40, suite="s", status="passed"))
        session.add(WorkerBeat(id="gone", host="h", pid=1, heartbeat_at=old))
        session.add(WorkerBeat(id="alive", host="h", pid=2, heartbeat_at=now))
    pruned = retention.prune(sessions, 14 * DAY, now=now)
    assert (pruned.jobs, pruned.deliveries, pruned.workers) == (3, 2, 1)
    with sessions() as session:
        deliveries = set(session.scalars(select(Delivery.guid)))
        remaining_jobs = {(job.pr, job.state) for job in session.scalars(select(Job))}
        assert session.scalar(select(SuiteRun.id)) is None
        assert set(session.scalars(select(WorkerBeat.id))) == {"alive"}
    # the old finished job went, so its delivery went too; pending work and its delivery stay
    assert deliveries == {"old-pending-job", "old-unprocessed", "recent-done"}
    assert remaining_jobs == {(2, "pending"), (4, "failed")}
    with pytest.raises(ValueError, match="positive"):
        retention.prune(sessions, 0)
    sessions.kw["bind"].dispose()


def test_a_restarted_worker_prunes_expired_rows(github, tmp_path, database_url):
    (tmp_path / "svc").mkdir()
    service = Service(tmp_path / "svc", github, database_url, delivery_retention_days=1 / DAY)
    project = Project(tmp_path, github, f"octo/prune-{os.getpid()}-{time.monotonic_ns()}")
    try:
        service.start()
        project.open_pull(1, good_core())
        service.pull_event("opened", project.full_name, 1)
        service.wait_jobs_settled(project.full_name, 1)
        assert service.query("SELECT COUNT(*) AS n FROM deliveries")[0].n >= 1
        service.stop()
        time.sleep(1.5)  # older than the retention (1 s) now; the worker prunes only at its start
        service.client = type(service.client)(base_url=service.url, timeout=30)
        service.start()  # its worker prunes at the start of its loop, which may follow /healthz's 200
        wait_until(
            lambda: service.query("SELECT COUNT(*) AS n FROM deliveries")[0].n == 0,
            timeout=30,
            what="the restarted worker's prune of the expired deliveries",
        )
        assert service.jobs(project.full_name, 1) == []
    finally:
        service.stop()


def test_pruned_sqlite_pages_go_back_to_the_file_system(tmp_path):
    path = tmp_path / "size.sqlite3"
    sessions = make_sessionmaker(f"sqlite:///{path}")
    old = time.time() - 30 * DAY
    with sessions.begin() as session:
        for index in range(300):
            session.add(
                Delivery(
                    guid=f"d{index}", event="pull_request", received_at=old, body=os.urandom(20_000), processed=True
                )
            )
    sessions.kw["bind"].dispose()  # checkpoint the WAL into the file
    full = path.stat().st_size
    assert full > 300 * 20_000
    assert retention.prune(sessions, 14 * DAY).deliveries == 300
    sessions.kw["bind"].dispose()
    assert path.stat().st_size < full / 10


def test_a_database_of_the_previous_schema_is_refused_in_one_line(tmp_path):
    """A database made before the schema carried a version (no `service_meta`) is not half-used."""
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE deliveries (seq INTEGER PRIMARY KEY, guid TEXT, body TEXT)")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "REVIEWBOT_WEBHOOK_SECRET": "x",
        "REVIEWBOT_GITHUB_TOKEN": "t",
        "REVIEWBOT_DATABASE_URL": f"sqlite:///{path}",
    }
    for command in ("serve", "worker"):
        done = subprocess.run(
            [sys.executable, "-m", "reviewbot", command],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith(
            f"reviewbot {command}: database sqlite:///{path} has service schema 1, this reviewbot needs"
        )
