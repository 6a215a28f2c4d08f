"""Dispatched GitHub Actions runs, kept in the service database (table `gpu_dispatches`).

One row per dispatch, keyed by the request id the workflow echoes into its run name and into
`results.json`. `state`: dispatching (row written, POST not yet confirmed), dispatched (waiting
for the `workflow_run` webhook), completed, timed-out, superseded (a newer dispatch of the
same PR exists; its result is not posted). The table has its own metadata and is created on
first use, so the service's schema does not need to know about it.
"""

from __future__ import annotations

import time

from sqlalchemy import Float, Integer, String, Text, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

STATES = ("dispatching", "dispatched", "completed", "timed-out", "superseded")


class _Base(DeclarativeBase):
    pass


class GpuDispatch(_Base):
    __tablename__ = "gpu_dispatches"
    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    service_request: Mapped[str] = mapped_column(String(64), index=True)  # the service's id (its gpu job)
    repo: Mapped[str] = mapped_column(String(200))
    pr: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64))
    suites: Mapped[str] = mapped_column(String(1000), default="all")
    state: Mapped[str] = mapped_column(String(16), default="dispatching")
    dispatched_at: Mapped[float] = mapped_column(Float, default=time.time)
    deadline: Mapped[float] = mapped_column(Float)
    run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    run_url: Mapped[str] = mapped_column(String(500), default="")
    conclusion: Mapped[str] = mapped_column(String(32), default="")
    note: Mapped[str] = mapped_column(Text, default="")


def ensure_table(session: Session) -> None:
    """Create the table if missing (checkfirst; cheap after the first call on a connection)."""
    _Base.metadata.create_all(session.connection(), checkfirst=True)


def get(session: Session, request_id: str) -> GpuDispatch | None:
    ensure_table(session)
    return session.get(GpuDispatch, request_id)


def by_service_request(session: Session, service_request: str) -> GpuDispatch | None:
    ensure_table(session)
    return session.scalar(select(GpuDispatch).where(GpuDispatch.service_request == service_request))


def newer_dispatch_exists(session: Session, record: GpuDispatch) -> bool:
    """Whether the same PR was dispatched again after `record` (its result is then stale)."""
    ensure_table(session)
    newer = session.scalar(
        select(GpuDispatch.request_id).where(
            GpuDispatch.repo == record.repo,
            GpuDispatch.pr == record.pr,
            GpuDispatch.dispatched_at > record.dispatched_at,
            GpuDispatch.request_id != record.request_id,
        )
    )
    return newer is not None
