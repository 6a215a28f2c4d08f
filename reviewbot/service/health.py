"""What `/healthz` reports: the database takes a write and a read, the SQLite file the server has
open is still the one at its path, and the workers send heartbeats.

Each check yields problems, one line each saying what is wrong; any problem makes `/healthz`
answer 503 with them in the body (`reason`). The webhook checks the file identity after each
commit too: a delivery written into a deleted database file is not acknowledged.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
import uuid
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from reviewbot.service import db, jobs

STALE_BEATS = 3  # a worker silent for this many of its heartbeat intervals is `missing`
REPORTED_SECONDS = 86400.0  # workers silent for longer are not listed (retention deletes them later)


def first_line(exc: BaseException) -> str:
    """The driver's message of a database error, without SQLAlchemy's statement and link."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip()
    return text.splitlines()[0][:300] if text else type(inner).__name__


@dataclasses.dataclass(frozen=True)
class FileIdentity:
    """The SQLite file an engine opened, as (device, inode) at opening."""

    path: str
    device: int
    inode: int

    @classmethod
    def of(cls, engine: Engine) -> FileIdentity | None:
        """None for databases that are not a SQLite file (PostgreSQL, in-memory SQLite)."""
        path = db.sqlite_path(engine)
        if path is None:
            return None
        stat = os.stat(path)
        return cls(os.path.abspath(path), stat.st_dev, stat.st_ino)

    def problem(self) -> str | None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return (
                f"database file {self.path} was deleted while open: what is written now is lost; "
                "restore it or restart the service"
            )
        if (stat.st_dev, stat.st_ino) != (self.device, self.inode):
            return (
                f"database file {self.path} was replaced while open (inode {self.inode} opened, {stat.st_ino} "
                "now at the path): restart the service"
            )
        return None


@dataclasses.dataclass(frozen=True)
class OwnWorker:
    """The worker process `serve` runs (see `supervisor.py`): its pid while it runs, else None."""

    pid: int | None
    restarts: int
    note: str


class StoreOutcome:
    """The webhook's last attempt to store a delivery: a failure (disk full, read-only, a database
    that went away) stays a problem of `/healthz` until a later delivery is stored."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failure: tuple[float, str] | None = None

    def failed(self, reason: str) -> None:
        with self._lock:
            self._failure = (time.time(), reason)

    def stored(self) -> None:
        with self._lock:
            self._failure = None

    def problem(self) -> str | None:
        with self._lock:
            if self._failure is None:
                return None
            when, reason = self._failure
        return f"the last delivery could not be stored ({time.time() - when:.0f} s ago): {reason}"


_probe_lock = threading.Lock()


def probe_database(engine: Engine) -> str | None:
    """Write a fresh value into `service_meta` and read it back (a committed write, then a read)."""
    key = f"healthz:{socket.gethostname()}:{os.getpid()}"[:64]
    nonce = uuid.uuid4().hex
    table = db.ServiceMeta.__table__
    with _probe_lock:
        try:
            with engine.begin() as conn:
                if conn.execute(update(table).where(table.c.key == key).values(value=nonce)).rowcount == 0:
                    conn.execute(insert(table).values(key=key, value=nonce))
            with engine.connect() as conn:
                read = conn.scalar(select(table.c.value).where(table.c.key == key))
        except DBAPIError as exc:
            engine.dispose()  # fresh connections next time: a repaired database (writable again) is seen
            return f"database write/read failed: {first_line(exc)}"
    if read != nonce:
        return f"database read back {read!r} after writing {nonce!r}"
    return None


def workers(engine: Engine, own: OwnWorker | None, heartbeat_s: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Every worker heard from in the last day (id, host, pid, state, seconds since its last
    heartbeat, detail), and the problems of `own`: not running, no heartbeat yet, heartbeat older
    than `STALE_BEATS` intervals, or a detail (a loop that cannot reach the database).

    `state` is the row's (`running`, `stopped`), except that a worker whose row says `running` but
    whose last heartbeat is older than `STALE_BEATS` of its own intervals (`beat_seconds`; serve's
    `heartbeat_s` for a row of an older worker without one) is `missing`: a worker killed
    (`kill -9`, its host gone) never writes `stopped`."""
    now = time.time()
    table = db.WorkerBeat.__table__
    with engine.connect() as conn:
        rows = list(
            conn.execute(
                select(table)
                .where((table.c.state == "running") | (table.c.heartbeat_at > now - REPORTED_SECONDS))
                .order_by(table.c.heartbeat_at.desc())
            )
        )
    host = socket.gethostname()
    listed = [
        {
            "id": row.id,
            "host": row.host,
            "pid": row.pid,
            "state": "missing"
            if row.state == "running" and now - row.heartbeat_at > STALE_BEATS * (row.beat_seconds or heartbeat_s)
            else row.state,
            "last_heartbeat_s": round(now - row.heartbeat_at, 1),
            "heartbeat_interval_s": row.beat_seconds,
            "detail": row.detail,
            "serves_this_server": own is not None and (row.host, row.pid) == (host, own.pid),
        }
        for row in rows
    ]
    problems: list[str] = []
    if own is not None:
        if own.pid is None:
            problems.append(f"worker process not running: {own.note}")
        else:
            mine = [w for w in listed if w["serves_this_server"] and w["state"] != "stopped"]
            if not mine:
                problems.append(f"worker process {own.pid} has not sent a heartbeat yet")
            elif mine[0]["state"] == "missing":
                problems.append(f"worker process {own.pid}: last heartbeat {mine[0]['last_heartbeat_s']} s ago")
            elif mine[0]["detail"]:
                problems.append(f"worker process {own.pid}: {mine[0]['detail']}")
    return listed, problems


def report(
    engine: Engine,
    identity: FileIdentity | None,
    store: StoreOutcome,
    own: OwnWorker | None,
    heartbeat_s: float,
) -> tuple[bool, dict[str, Any]]:
    """(healthy, the JSON body of /healthz)."""
    problems: list[str] = []
    if identity is not None and (problem := identity.problem()):
        problems.append(problem)
    if problem := store.problem():
        problems.append(problem)
    if problem := probe_database(engine):
        problems.append(problem)
    body: dict[str, Any] = {"database": engine.url.render_as_string(hide_password=True)}
    if not problems:
        try:
            listed, worker_problems = workers(engine, own, heartbeat_s)
            with engine.connect() as conn:
                body["active_jobs"] = conn.scalar(
                    select(func.count()).select_from(db.Job).where(db.Job.state.in_(jobs.ACTIVE))
                )
        except DBAPIError as exc:
            listed, worker_problems = [], [f"database read failed: {first_line(exc)}"]
        body["workers"] = listed
        problems += worker_problems
    if own is not None:
        body["worker_process"] = dataclasses.asdict(own)
    body.update(ok=not problems, reason="; ".join(problems))
    return not problems, body
