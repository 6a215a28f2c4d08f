"""The job queue, kept in the service database.

Why not huey: a newer push must stop a job that is already *running* (it must post nothing),
a closed PR cancels, and a job whose worker was killed must be picked up again exactly where
the lease says. huey's storage knows nothing of which PR a task belongs to, revoking a running
task is advisory, and a second store (huey's SQLite or Redis) beside the database would let
"delivery persisted" and "job enqueued" disagree after a crash. One table, written in the same
transaction as the delivery, keeps those guarantees; several workers (other processes or hosts,
on PostgreSQL) share it through the conditional UPDATE in `claim`.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from sqlalchemy import or_, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from reviewbot.service.db import Job

ACTIVE = ("pending", "running")
PR_WORK_KINDS = ("review", "gpu")  # stopped by a newer head or a closed PR


class LeaseLost(RuntimeError):
    """Another worker holds the job now (this one's lease expired)."""


def enqueue(
    session: Session,
    kind: str,
    repo: str,
    pr: int,
    head_sha: str = "",
    *,
    args: dict[str, Any] | None = None,
    delivery_id: str | None = None,
) -> Job | None:
    """Add a pending job unless an identical one (kind, PR, head, args) is already pending."""
    args = args or {}
    for existing in session.scalars(
        select(Job).where(
            Job.kind == kind, Job.repo == repo, Job.pr == pr, Job.head_sha == head_sha, Job.state == "pending"
        )
    ):
        if existing.args == args:
            return None
    job = Job(kind=kind, repo=repo, pr=pr, head_sha=head_sha, args=args, delivery_id=delivery_id, state="pending")
    session.add(job)
    return job


def job_for_head(session: Session, repo: str, pr: int, kind: str, head_sha: str) -> Job | None:
    """The newest job of `kind` for the PR's `head_sha` that is pending, running or finished (done
    or failed), or None. A superseded or cancelled one does not count, nor a running one told to
    stop (a late delivery of an older push stops the current head's job, which then ends without
    posting)."""
    covered = select(Job).where(
        Job.repo == repo,
        Job.pr == pr,
        Job.kind == kind,
        Job.head_sha == head_sha,
        Job.state.in_(("pending", "done", "failed")) | ((Job.state == "running") & (Job.stop_reason == "")),
    )
    return session.scalar(covered.order_by(Job.id.desc()).limit(1))


def has_job_for_head(session: Session, repo: str, pr: int, kind: str, head_sha: str) -> bool:
    """Whether :func:`job_for_head` finds one."""
    return job_for_head(session, repo, pr, kind, head_sha) is not None


def latest_head(session: Session, repo: str, pr: int) -> str:
    """The head SHA of the PR's newest review or GPU job ('' when it has none)."""
    newest = select(Job.head_sha).where(Job.repo == repo, Job.pr == pr, Job.kind.in_(PR_WORK_KINDS), Job.head_sha != "")
    return session.scalar(newest.order_by(Job.id.desc()).limit(1)) or ""


def delivered_heads(session: Session, repo: str, pr: int) -> set[str]:
    """Heads of the PR that a stored `pull_request` delivery named (the review jobs it queued)."""
    query = select(Job.head_sha).where(
        Job.repo == repo, Job.pr == pr, Job.kind == "review", Job.delivery_id.is_not(None)
    )
    return set(session.scalars(query))


def pushed_after(session: Session, repo: str, pr: int, moment: str) -> list[str]:
    """Heads of the PR whose recorded `synchronize` delivery says the push happened at or after
    `moment` (ISO 8601 UTC, GitHub's clock and format: they compare as strings)."""
    rows = session.scalars(select(Job).where(Job.repo == repo, Job.pr == pr, Job.kind == "review"))
    pushed = ((job.head_sha, str(job.args.get("pushed_at") or "")) for job in rows)
    return sorted({head for head, at in pushed if at and at >= moment})


def stop_pr_jobs(session: Session, repo: str, pr: int, reason: str, *, keep_head: str | None = None) -> int:
    """Stop the PR's review and GPU jobs (those of `keep_head` excepted): pending ones at once,
    running ones through `stop_reason`, which their worker reads at its next checkpoint."""
    final = "superseded" if reason == "superseded" else "cancelled"
    base = [Job.repo == repo, Job.pr == pr, Job.kind.in_(PR_WORK_KINDS)]
    if keep_head is not None:
        base.append(Job.head_sha != keep_head)
    plain = {"synchronize_session": False}  # no loaded Job of this PR is used after this in the session
    pending = session.execute(
        update(Job)
        .where(*base, Job.state == "pending")
        .values(state=final, stop_reason=reason, finished_at=time.time()),
        execution_options=plain,
    )
    running = session.execute(
        update(Job).where(*base, Job.state == "running").values(stop_reason=reason), execution_options=plain
    )
    return pending.rowcount + running.rowcount


def claim(sessions: sessionmaker, worker_id: str, lease_s: float, exclusive_kinds: Collection[str]) -> Job | None:
    """Take the oldest pending job whose retry time has come (`lease_until` of a pending job), or
    a running one whose lease expired (its worker died). The worker decides from `attempts` when
    to give up (and tells the PR).

    A job of `exclusive_kinds` (the kinds that write the PR's summary comment: the worker passes
    `registry.pr_exclusive_kinds()`) waits while another job of `exclusive_kinds` of the same PR
    runs and has not been told to stop, or is of the same head even if told to stop (its last write
    may still land after the new job's): two writers could each create a summary comment. Jobs of
    other kinds neither wait nor hold a PR.

    Atomic across workers: the final UPDATE is conditional on the job still being claimable. On
    SQLite the whole transaction holds the write lock (`BEGIN IMMEDIATE`). On PostgreSQL the
    candidates are read `FOR UPDATE SKIP LOCKED` (a job another worker is taking is skipped) and
    a PR-exclusive job is taken only under a transaction-scoped advisory lock of its PR (tried, not
    waited for), so two workers never both find the PR idle and start two of its jobs.
    """
    now = time.time()
    claimable = or_(Job.state == "pending", Job.state == "running") & (Job.lease_until < now)
    with sessions.begin() as session:
        candidates = select(Job).where(claimable).order_by(Job.id).limit(50).with_for_update(skip_locked=True)
        for job in list(session.scalars(candidates)):
            if job.kind in exclusive_kinds and (
                not _lock_pr(session, job) or _pr_busy(session, job, now, exclusive_kinds)
            ):
                continue
            claimed = session.execute(
                update(Job)
                .where(Job.id == job.id, claimable)
                .values(
                    state="running",
                    worker_id=worker_id,
                    lease_until=now + lease_s,
                    attempts=Job.attempts + 1,
                    started_at=now,
                )
            )
            if claimed.rowcount == 1:
                session.flush()
                session.refresh(job)
                session.expunge(job)
                return job
    return None


def _lock_pr(session: Session, job: Job) -> bool:
    """PostgreSQL: try the PR's advisory lock until the end of the transaction (SQLite: the
    transaction already holds the database's write lock)."""
    if session.get_bind().dialect.name != "postgresql":
        return True
    key = f"reviewbot-pr:{job.repo}#{job.pr}"
    return bool(session.scalar(text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key}))


def _pr_busy(session: Session, job: Job, now: float, exclusive_kinds: Collection[str]) -> bool:
    """Whether another job of `exclusive_kinds` of the job's PR is running under a live lease and
    has not been told to stop, or is of the same head (told to stop, it may still be sending its
    last write: a `pending` status landing after the new job's final one would stay)."""
    running = select(Job.id).where(
        Job.repo == job.repo,
        Job.pr == job.pr,
        Job.kind.in_(sorted(exclusive_kinds)),
        Job.id != job.id,
        Job.state == "running",
        Job.lease_until >= now,
        (Job.stop_reason == "") | (Job.head_sha == job.head_sha),
    )
    return session.scalar(running.limit(1)) is not None


def renew(sessions: sessionmaker, job_id: int, worker_id: str, lease_s: float) -> str:
    """Extend the lease; returns the job's stop reason ('' while it should go on)."""
    with sessions.begin() as session:
        job = session.get(Job, job_id)
        assert job is not None, job_id
        if job.worker_id != worker_id or job.state != "running":
            raise LeaseLost(f"job {job_id} is now {job.state} under {job.worker_id!r}")
        job.lease_until = time.time() + lease_s
        return job.stop_reason


def retry_later(sessions: sessionmaker, job_id: int, worker_id: str, error: str, delay_s: float) -> None:
    """Put a job that failed back to pending; it is not claimed for `delay_s` seconds."""
    with sessions.begin() as session:
        job = session.get(Job, job_id)
        assert job is not None, job_id
        if job.worker_id != worker_id:
            raise LeaseLost(f"job {job_id} was taken over by {job.worker_id!r}")
        if job.stop_reason:  # superseded or cancelled meanwhile: no retry
            job.state, job.finished_at = ("superseded" if job.stop_reason == "superseded" else "cancelled"), time.time()
        else:
            job.state = "pending"
        job.error, job.worker_id, job.lease_until = error, "", time.time() + delay_s


def finish(sessions: sessionmaker, job_id: int, worker_id: str, state: str, error: str = "") -> None:
    with sessions.begin() as session:
        job = session.get(Job, job_id)
        assert job is not None, job_id
        if job.worker_id != worker_id:
            raise LeaseLost(f"job {job_id} was taken over by {job.worker_id!r}")
        job.state, job.error, job.finished_at, job.lease_until = state, error, time.time(), 0.0
