"""The service store on a real SQLite database: the review record, authorisations, suite runs and the
worker heartbeat, as the handlers and the worker loop use them."""

from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import select

from reviewbot.service import jobs, store
from reviewbot.service.db import Delivery, Job, SuiteRun, WorkerBeat, make_sessionmaker, pack_body


@pytest.fixture
def sessions(tmp_path):
    made = make_sessionmaker(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    yield made
    made.kw["bind"].dispose()


def test_the_review_record_is_made_once_per_pr_and_saved_fields_read_back(sessions):
    first = store.review_record(sessions, "octo/store", 7)
    assert (first.head_sha, first.fingerprints, first.static_section) == ("", [], "")
    store.save_review_record(sessions, "octo/store", 7, head_sha="b" * 40, fingerprints=["f1"], p0=True)
    again = store.review_record(sessions, "octo/store", 7)
    assert again.id == first.id
    assert (again.head_sha, again.fingerprints, again.p0) == ("b" * 40, ["f1"], True)
    assert again.updated_at >= first.updated_at
    assert first.head_sha == "", "a record handed out is a snapshot"
    assert store.review_record(sessions, "octo/store", 8).id != first.id
    with pytest.raises(AssertionError, match="no review record"):
        store.save_review_record(sessions, "octo/store", 9, p0=True)


def test_an_authorisation_is_for_one_exact_head_and_granted_once(sessions):
    head, other = "c" * 40, "d" * 40
    assert not store.is_authorised(sessions, "octo/store", 3, head)
    with sessions.begin() as session:
        assert store.authorise(session, "octo/store", 3, head, "maintainer")
        # in the same transaction, as `/rerun-gpu` queues its jobs
        jobs.enqueue(session, "gpu", "octo/store", 3, head)
    with sessions.begin() as session:
        assert not store.authorise(session, "octo/store", 3, head, "someone-else")
    assert store.is_authorised(sessions, "octo/store", 3, head)
    assert not store.is_authorised(sessions, "octo/store", 3, other)
    assert not store.is_authorised(sessions, "octo/store", 4, head)


def test_suite_runs_are_kept_per_job(sessions):
    with sessions.begin() as session:
        job = jobs.enqueue(session, "gpu", "octo/store", 5, "e" * 40)
        assert job is not None
        session.flush()
        session.expunge(job)
    suites = [{"name": "gpu-fast", "status": "passed", "tests": 3}, {"name": "gpu-slow", "status": "failed"}]
    store.add_suite_runs(sessions, job, suites)
    with sessions() as session:
        runs = list(session.scalars(select(SuiteRun).order_by(SuiteRun.id)))
    assert [(r.job_id, r.pr, r.head_sha, r.suite, r.status) for r in runs] == [
        (job.id, 5, "e" * 40, "gpu-fast", "passed"),
        (job.id, 5, "e" * 40, "gpu-slow", "failed"),
    ]
    assert runs[0].result == suites[0]


def test_the_heartbeat_row_is_made_on_the_first_beat_and_updated_after(sessions):
    store.record_heartbeat(sessions, "w-1", "running", "", {"jobs": 1}, 5.0)
    with sessions() as session:
        first = session.get(WorkerBeat, "w-1")
        assert first is not None
        started, beat = first.started_at, first.heartbeat_at
    store.record_heartbeat(sessions, "w-1", "stopped", "jobs: database unavailable", {"jobs": 2}, 5.0)
    with sessions() as session:
        rows = list(session.scalars(select(WorkerBeat)))
    assert len(rows) == 1
    row = rows[0]
    assert (row.state, row.detail, row.metrics, row.pid, row.beat_seconds) == (
        "stopped",
        "jobs: database unavailable",
        {"jobs": 2},
        os.getpid(),
        5.0,
    )
    assert row.started_at == started and row.heartbeat_at >= beat


def test_a_head_counts_as_covered_while_its_job_is_live_or_finished_not_once_superseded(sessions):
    head = "f" * 40
    with sessions.begin() as session:
        assert not jobs.has_job_for_head(session, "octo/store", 6, "review", head)
        jobs.enqueue(session, "review", "octo/store", 6, head)
    with sessions.begin() as session:
        assert jobs.has_job_for_head(session, "octo/store", 6, "review", head)
        assert not jobs.has_job_for_head(session, "octo/store", 6, "gpu", head)
        jobs.stop_pr_jobs(session, "octo/store", 6, "superseded")
    with sessions.begin() as session:
        assert session.scalar(select(Job.state)) == "superseded"
        assert not jobs.has_job_for_head(session, "octo/store", 6, "review", head)


def test_the_installation_of_a_delivery_is_read_from_its_stored_body(sessions):
    with sessions.begin() as session:
        for guid, payload in (("with", {"installation": {"id": 4242}}), ("without", {"action": "opened"})):
            body = pack_body(json.dumps(payload).encode())
            session.add(Delivery(guid=guid, event="pull_request", action="opened", body=body))
    assert store.delivery_installation(sessions, "with") == 4242
    assert store.delivery_installation(sessions, "without") is None
    assert store.delivery_installation(sessions, "pruned") is None
