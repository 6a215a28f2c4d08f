"""What the job handlers and the worker keep in the service database besides the queue (`jobs.py`):
the PR's review record (what the bot has posted), maintainers' authorisations of fork heads, the
GPU suite runs, the worker heartbeat, and the App installation a delivery came from. Plain
functions over the models of `db.py`; the handlers and their `JobContext` hold no SQL.

A function given a `sessionmaker` runs its own transaction; one given a `Session` joins the
caller's (which commits it), so several steps can be one transaction.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from reviewbot.service.db import Authorisation, Delivery, Job, ReviewRecord, SuiteRun, WorkerBeat


def review_record(sessions: sessionmaker, repo: str, pr: int) -> ReviewRecord:
    """The PR's review record, created empty when the PR has none yet; detached (a snapshot:
    change it with `save_review_record`)."""
    with sessions.begin() as session:
        record = session.scalar(select(ReviewRecord).where(ReviewRecord.repo == repo, ReviewRecord.pr == pr))
        if record is None:
            record = ReviewRecord(repo=repo, pr=pr, fingerprints=[])
            session.add(record)
            session.flush()
        session.expunge(record)
        return record


def save_review_record(sessions: sessionmaker, repo: str, pr: int, **fields: Any) -> None:
    """Set `fields` (column names of `ReviewRecord`) on the PR's record, which must exist
    (`review_record` makes it)."""
    with sessions.begin() as session:
        record = session.scalar(select(ReviewRecord).where(ReviewRecord.repo == repo, ReviewRecord.pr == pr))
        assert record is not None, f"{repo}#{pr} has no review record"
        for key, value in fields.items():
            setattr(record, key, value)
        record.updated_at = time.time()


def _authorisation(session: Session, repo: str, pr: int, head_sha: str) -> Authorisation | None:
    return session.scalar(
        select(Authorisation).where(
            Authorisation.repo == repo, Authorisation.pr == pr, Authorisation.head_sha == head_sha
        )
    )


def is_authorised(sessions: sessionmaker, repo: str, pr: int, head_sha: str) -> bool:
    """Whether a maintainer allowed the fork PR's code at exactly `head_sha` to run."""
    with sessions() as session:
        return _authorisation(session, repo, pr, head_sha) is not None


def authorise(session: Session, repo: str, pr: int, head_sha: str, granted_by: str) -> bool:
    """Allow the fork PR's code at exactly `head_sha` to run; False when it already was."""
    if _authorisation(session, repo, pr, head_sha) is not None:
        return False
    session.add(Authorisation(repo=repo, pr=pr, head_sha=head_sha, granted_by=granted_by))
    return True


def add_suite_runs(sessions: sessionmaker, job: Job, suites: list[dict[str, Any]]) -> None:
    """Keep one GPU job's suite results (`GpuOutcome.suites`: each has `name` and `status`)."""
    with sessions.begin() as session:
        for suite in suites:
            session.add(
                SuiteRun(
                    job_id=job.id,
                    repo=job.repo,
                    pr=job.pr,
                    head_sha=job.head_sha,
                    suite=suite["name"],
                    status=suite["status"],
                    result=suite,
                )
            )


def record_heartbeat(
    sessions: sessionmaker, worker_id: str, state: str, detail: str, metrics: dict[str, Any], beat_seconds: float
) -> None:
    """Write this process's worker row (`state` running or stopped; `beat_seconds`: how often it
    beats), creating it on the first beat."""
    with sessions.begin() as session:
        row = session.get(WorkerBeat, worker_id)
        if row is None:
            row = WorkerBeat(
                id=worker_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=time.time(),
                beat_seconds=beat_seconds,
            )
            session.add(row)
        row.heartbeat_at, row.state, row.detail, row.metrics = time.time(), state, detail, metrics


def delivery_installation(sessions: sessionmaker, guid: str) -> int | None:
    """The GitHub App installation id of the stored delivery `guid`; None when the delivery is gone
    (pruned) or names none."""
    with sessions() as session:
        delivery = session.scalar(select(Delivery).where(Delivery.guid == guid))
        installation = (delivery.payload.get("installation") or {}) if delivery else {}
    return installation.get("id")
