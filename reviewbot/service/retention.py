"""Bounded storage: old deliveries, finished jobs and silent workers are deleted.

`prune` deletes, older than the retention period (`delivery_retention_days`): finished jobs (by
when they finished) with their suite runs; processed deliveries no remaining job refers to;
heartbeat rows of workers gone silent. Pending and running jobs, unprocessed deliveries, and the
deliveries of those jobs are never deleted. Deletes go in small batches so that the webhook's
INSERTs never wait long for the write lock. On SQLite the freed pages go back to the file system
(`auto_vacuum=INCREMENTAL` databases) or are reused for new rows.
Workers call `prune` from their heartbeat thread once an hour.
"""

from __future__ import annotations

import dataclasses
import time

from sqlalchemy import delete, exists, func, select
from sqlalchemy.orm import sessionmaker

from reviewbot.service.db import Delivery, Job, SuiteRun, WorkerBeat
from reviewbot.service.jobs import ACTIVE

PRUNE_INTERVAL_SECONDS = 3600.0


@dataclasses.dataclass(frozen=True)
class Pruned:
    jobs: int
    deliveries: int
    workers: int


def prune(sessions: sessionmaker, keep_seconds: float, *, now: float | None = None, batch: int = 500) -> Pruned:
    """Delete what ended more than `keep_seconds` before `now` (see the module docstring)."""
    if keep_seconds <= 0:
        raise ValueError(f"keep_seconds must be positive, got {keep_seconds}")
    cutoff = (time.time() if now is None else now) - keep_seconds
    jobs = deliveries = 0
    while True:
        with sessions.begin() as session:
            ids = list(
                session.scalars(
                    select(Job.id)
                    .where(Job.state.not_in(ACTIVE), func.coalesce(Job.finished_at, Job.created_at) < cutoff)
                    .limit(batch)
                )
            )
            if not ids:
                break
            session.execute(delete(SuiteRun).where(SuiteRun.job_id.in_(ids)))
            jobs += session.execute(delete(Job).where(Job.id.in_(ids))).rowcount
    referenced = exists().where(Job.delivery_id == Delivery.guid)
    while True:
        with sessions.begin() as session:
            seqs = list(
                session.scalars(
                    select(Delivery.seq)
                    .where(Delivery.processed.is_(True), Delivery.received_at < cutoff, ~referenced)
                    .limit(batch)
                )
            )
            if not seqs:
                break
            deliveries += session.execute(delete(Delivery).where(Delivery.seq.in_(seqs))).rowcount
    with sessions.begin() as session:
        workers = session.execute(delete(WorkerBeat).where(WorkerBeat.heartbeat_at < cutoff)).rowcount
    engine = sessions.kw["bind"]
    if engine.dialect.name == "sqlite" and jobs + deliveries:
        raw = engine.raw_connection()
        try:  # executescript steps the pragma to its end (one step frees one page)
            raw.driver_connection.executescript("PRAGMA incremental_vacuum;")
        finally:
            raw.close()
    return Pruned(jobs, deliveries, workers)
