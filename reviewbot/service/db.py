"""The service database (SQLAlchemy 2): deliveries, jobs, reviews, suite runs, GPU authorisations.

SQLite by default (WAL journal, busy timeout, so the webhook server and workers in other
processes share one file); any SQLAlchemy URL works (PostgreSQL for several hosts).
Times are UNIX seconds (float) to keep comparisons portable across backends.
"""

from __future__ import annotations

import json
import time

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker


class Base(DeclarativeBase):
    pass


class Delivery(Base):
    """One accepted webhook delivery, stored as received (the raw JSON body).

    The webhook answer only inserts this row; a worker turns unprocessed rows into jobs in `seq`
    order (`ingest.py`) and records the `outcome` (queued, draft, ignored-..., cancelled N).
    """

    __tablename__ = "deliveries"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    guid: Mapped[str] = mapped_column(String(64), unique=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64), default="")
    received_at: Mapped[float] = mapped_column(Float, default=time.time)
    body: Mapped[str] = mapped_column(Text)
    processed: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    outcome: Mapped[str] = mapped_column(String(64), default="")

    @property
    def payload(self) -> dict:
        return json.loads(self.body)


class Job(Base):
    """A unit of work. `state`: pending, running, done, failed, superseded, cancelled.

    A running job holds a lease (`lease_until`; a pending job is not claimed before it: the
    retry time after an error); `stop_reason` set while it runs asks it to stop
    without posting (a newer head, or the PR closed). `kind` selects the handler in `worker.py`.
    """

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    repo: Mapped[str] = mapped_column(String(200))
    pr: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64), default="")
    state: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    stop_reason: Mapped[str] = mapped_column(String(64), default="")
    args: Mapped[dict] = mapped_column(JSON, default=dict)
    delivery_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker_id: Mapped[str] = mapped_column(String(128), default="")
    lease_until: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[float] = mapped_column(Float, default=time.time)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")


class ReviewRecord(Base):
    """What the bot has posted on one PR: the summary comment and the inline fingerprints."""

    __tablename__ = "reviews"
    __table_args__ = (UniqueConstraint("repo", "pr"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64), default="")
    summary_comment_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    summary_sha256: Mapped[str] = mapped_column(String(64), default="")
    fingerprints: Mapped[list] = mapped_column(JSON, default=list)
    p0: Mapped[bool] = mapped_column(Boolean, default=False)
    gpu_section: Mapped[str] = mapped_column(Text, default="")
    static_section: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[float] = mapped_column(Float, default=time.time)


class SuiteRun(Base):
    """One suite's result for one head SHA (GPU dispatch)."""

    __tablename__ = "suite_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"))
    repo: Mapped[str] = mapped_column(String(200))
    pr: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64))
    suite: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32))
    result: Mapped[dict] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float, default=time.time)


class Authorisation(Base):
    """A maintainer's `/rerun-gpu` on a fork PR: PR code at exactly `head_sha` may run."""

    __tablename__ = "authorisations"
    __table_args__ = (UniqueConstraint("repo", "pr", "head_sha"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(200))
    pr: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64))
    granted_by: Mapped[str] = mapped_column(String(200))
    granted_at: Mapped[float] = mapped_column(Float, default=time.time)


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            dbapi_connection.isolation_level = None  # transactions begin in `_begin_immediate`
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin_immediate(connection) -> None:  # type: ignore[no-untyped-def]
            # Take the write lock up front: a deferred transaction that later writes can fail
            # with SQLITE_BUSY at once instead of waiting out the busy timeout.
            connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        engine = create_engine(url, pool_pre_ping=True)
    Base.metadata.create_all(engine)
    return engine


def make_sessionmaker(url: str) -> sessionmaker:
    return sessionmaker(make_engine(url), expire_on_commit=False)
