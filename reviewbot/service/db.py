"""The service database (SQLAlchemy 2): deliveries, jobs, reviews, suite runs, GPU authorisations,
worker heartbeats and the schema version.

SQLite by default (WAL journal, `synchronous=FULL` so a committed delivery survives a power
loss, busy timeout, so the webhook server and workers in other processes share one file);
PostgreSQL (`postgresql+psycopg://...`) for several hosts. Times are UNIX seconds (float) to keep
comparisons portable across backends. The schema carries a version (`service_meta`); a database
made by another version is refused with `SchemaMismatch` rather than half-used.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

SCHEMA_VERSION = "2"


class SchemaMismatch(ValueError):
    """The database was created by another version of the service."""


class Base(DeclarativeBase):
    pass


def pack_body(raw: bytes) -> bytes:
    """A delivery body as stored: the raw bytes, zlib-compressed (GitHub's JSON shrinks about 10x)."""
    return zlib.compress(raw, 3)


class Delivery(Base):
    """One accepted webhook delivery: its `X-GitHub-*` headers and its body as received.

    The webhook answer only inserts this row; a worker turns unprocessed rows into jobs in `seq`
    order (`ingest.py`) and records the `outcome` (queued, covered, draft, ignored-..., failed: ...).
    `body` is the raw JSON compressed by `pack_body`; it is empty for events the service ignores
    (only the headers are kept) and for deliveries that turned out to be ignored at ingest.
    Rows are deleted after `delivery_retention_days` with their finished jobs (`retention.py`).
    """

    __tablename__ = "deliveries"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    guid: Mapped[str] = mapped_column(String(64), unique=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64), default="")
    received_at: Mapped[float] = mapped_column(Float, default=time.time, index=True)
    headers: Mapped[dict] = mapped_column(JSON, default=dict)
    body: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    processed: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    outcome: Mapped[str] = mapped_column(String(200), default="")

    @property
    def payload(self) -> dict[str, Any]:
        """The parsed body; only for deliveries whose body is kept (asserted)."""
        assert self.body, f"delivery {self.guid}: its body is not kept"
        return json.loads(zlib.decompress(self.body))


class Job(Base):
    """A unit of work. `state`: pending, running, done, failed, superseded, cancelled.

    A running job holds a lease (`lease_until`; a pending job is not claimed before it: the
    retry time after an error); `stop_reason` set while it runs asks it to stop
    without posting (a newer head, or the PR closed). `kind` selects the handler in `worker.py`.
    """

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_repo_pr", "repo", "pr"),)
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
    summary_comment_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
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


class WorkerBeat(Base):
    """A worker process's heartbeat, written every `worker_heartbeat_seconds` (`beat_seconds`, so
    /healthz can tell a silent worker from a slow-beating one; NULL in rows of workers older than
    the column) by its heartbeat thread; `state` is running or stopped, `detail` says why a worker
    is unwell (a loop that cannot reach the database), `metrics` its counters (summed into serve's
    /metrics)."""

    __tablename__ = "workers"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Float, default=time.time)
    heartbeat_at: Mapped[float] = mapped_column(Float, default=time.time)
    beat_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    state: Mapped[str] = mapped_column(String(16), default="running")
    detail: Mapped[str] = mapped_column(Text, default="")
    metrics: Mapped[dict] = mapped_column(JSON, default=dict)  # `metrics.snapshot()` at the heartbeat


class ServiceMeta(Base):
    """Key-value rows: `schema_version`, and `healthz` (written and read back by each `/healthz`)."""

    __tablename__ = "service_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text, default="")


# Nullable columns added to a table after its schema version: a database of that version made
# before gets them when a process opens it (`_check_schema`); processes of the older code go on
# using the table without them. (table, column, SQL type)
ADDED_COLUMNS = (("workers", "beat_seconds", "FLOAT"),)

# Key of the PostgreSQL advisory lock under which a process creates the schema of a new database.
_SCHEMA_LOCK_KEY = 0x7265766965770001


def _schema_ready(conn: Connection) -> bool:
    """True when the database has every table at this schema version; False when tables are
    missing (a new database); `SchemaMismatch` for a database made by another version."""
    tables = set(inspect(conn).get_table_names())
    if "deliveries" not in tables:
        return False
    version = None
    if "service_meta" in tables:
        version = conn.scalar(select(ServiceMeta.value).where(ServiceMeta.key == "schema_version"))
    if version != SCHEMA_VERSION:
        raise SchemaMismatch(
            f"database {conn.engine.url.render_as_string(hide_password=True)} has service schema "
            f"{version or '1'}, this reviewbot needs {SCHEMA_VERSION}: move it aside or point "
            "database_url at a new one (deliveries are only kept for the retention period anyway)"
        )
    if not set(Base.metadata.tables) <= tables:
        return False
    return not _missing_columns(conn)


def _missing_columns(conn: Connection) -> list[tuple[str, str, str]]:
    """The entries of `ADDED_COLUMNS` whose column the database's table lacks (every table exists)."""
    inspector = inspect(conn)
    return [
        (table, column, sql_type)
        for table, column, sql_type in ADDED_COLUMNS
        if column not in {c["name"] for c in inspector.get_columns(table)}
    ]


def _check_schema(engine: Engine) -> None:
    """Create the tables of a new database, add `ADDED_COLUMNS` to one made before them; refuse
    one made by another schema version.

    Processes started together on a new database (serve and its workers) create it one at a time:
    the tables and the version row are written in one transaction under the database's write lock
    (SQLite's `BEGIN IMMEDIATE`, a PostgreSQL advisory lock), and the check is made again under
    it. A database already at this version is only read (a read-only file still opens)."""
    with engine.connect() as conn:
        if _schema_ready(conn):
            return
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
        if _schema_ready(conn):
            return
        Base.metadata.create_all(conn)
        for table, column, sql_type in _missing_columns(conn):
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}"))
        if conn.scalar(select(ServiceMeta.value).where(ServiceMeta.key == "schema_version")) is None:
            conn.execute(ServiceMeta.__table__.insert(), {"key": "schema_version", "value": SCHEMA_VERSION})


def sqlite_path(engine: Engine) -> str | None:
    """The file of a file-backed SQLite engine, else None (PostgreSQL, in-memory SQLite)."""
    if engine.dialect.name != "sqlite" or engine.url.database in (None, "", ":memory:"):
        return None
    return engine.url.database


OPEN_WAIT_MS = 30000
"""How long opening a SQLite database waits for the write lock, whatever the engine's own
`lock_wait_ms`: switching a new file to WAL and checking or creating the schema are one-time steps
that processes started together must take in turn, not fail."""


def _switch_to_wal(cursor: sqlite3.Cursor) -> None:
    """`PRAGMA journal_mode=WAL` on a file not yet in it, tried again for `OPEN_WAIT_MS`: connections
    switching a new file at once get 'database is locked' without SQLite's busy handler waiting."""
    deadline = time.monotonic() + OPEN_WAIT_MS / 1000
    if cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        return
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")  # an in-memory database stays in "memory"
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _sqlite_engine(url: str, max_bytes: int, lock_wait_ms: int, durable: bool) -> Engine:
    engine = create_engine(url, connect_args={"timeout": lock_wait_ms / 1000, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # transactions begin in `_begin_immediate`
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(lock_wait_ms)}")
        if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:  # a new database: pruning gives pages back
            cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
        _switch_to_wal(cursor)
        cursor.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        if max_bytes:
            page_size = cursor.execute("PRAGMA page_size").fetchone()[0]
            cursor.execute(f"PRAGMA max_page_count={max(1, max_bytes // page_size)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:  # type: ignore[no-untyped-def]
        # Take the write lock up front: a deferred transaction that later writes can fail
        # with SQLITE_BUSY at once instead of waiting out the busy timeout.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def make_engine(url: str, *, max_bytes: int = 0, lock_wait_ms: int = 30000, durable: bool = True) -> Engine:
    """SQLite only: `max_bytes` (0: unlimited): writes that would grow the file past it fail as
    'database or disk is full', which the service answers with 503 (a cap on disk use);
    `lock_wait_ms`: how long a transaction waits for the write lock before 'database is locked'
    (SQLite's own wait sleeps 1, 2, 5 ... 100 ms between tries; 0 for a caller that polls itself);
    opening waits `OPEN_WAIT_MS` at least, so a worker writing at that moment does not fail it;
    `durable`: each commit is on disk when it returns (`synchronous=FULL`). Workers use False
    (`NORMAL`: no fsync while holding the write lock): a power loss may then undo their last
    commits, never a delivery the webhook acknowledged; an undone ingest or job runs again."""
    if not url.startswith("sqlite"):
        engine = create_engine(url, pool_pre_ping=True)
        _check_schema(engine)
        return engine
    engine = _sqlite_engine(url, max_bytes, lock_wait_ms, durable)
    if lock_wait_ms >= OPEN_WAIT_MS:
        _check_schema(engine)
        return engine
    opener = _sqlite_engine(url, max_bytes, OPEN_WAIT_MS, durable)
    try:
        _check_schema(opener)
    finally:
        opener.dispose()
    return engine


def make_sessionmaker(url: str, *, max_bytes: int = 0, durable: bool = True) -> sessionmaker:
    """Raises `SchemaMismatch` for a database of another schema version (see `make_engine`)."""
    return sessionmaker(make_engine(url, max_bytes=max_bytes, durable=durable), expire_on_commit=False)
