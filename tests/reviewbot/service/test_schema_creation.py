"""Several service processes starting at once on a new database: each finds or creates the
schema, none fails (`serve` and its `reviewbot worker` processes are started together by one
deployment). Eight starters meet at a barrier and open a fresh database at the same moment."""

from __future__ import annotations

import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from reviewbot.service.db import make_engine
from tests.reviewbot.service import postgres

STARTERS = 8
SQLITE_ROUNDS = 100


@pytest.fixture(params=postgres.BACKENDS)
def new_database_urls(request, tmp_path) -> list[str]:
    """Fresh databases of the backend, each round of the test takes one: SQLite's race (starters
    switching a new file to WAL at once, which failed about one starter in 800) needs many rounds."""
    if request.param == "sqlite":
        return [f"sqlite:///{tmp_path / f'new-{n}.sqlite3'}" for n in range(SQLITE_ROUNDS)]
    server = request.getfixturevalue("postgres_server")
    return [server.create_database("schema") for _ in range(3)]


def _hold_the_write_lock(path: str, seconds: float) -> threading.Timer:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(seconds, lambda: (holder.execute("COMMIT"), holder.close()))
    release.start()
    return release


def _open_at_a_barrier(barrier: threading.Barrier, url: str) -> Engine:
    barrier.wait()
    return make_engine(url)


def test_processes_starting_together_on_a_new_database_all_open_it(new_database_urls):
    for url in new_database_urls:
        barrier = threading.Barrier(STARTERS)
        with ThreadPoolExecutor(STARTERS) as pool:
            futures = [pool.submit(_open_at_a_barrier, barrier, url) for _ in range(STARTERS)]
            errors = [f.exception(timeout=120) for f in futures if f.exception(timeout=120) is not None]
            assert not errors, f"{len(errors)} of {STARTERS} starters failed on {url}: {errors[0]!r}"
            for future in futures:
                future.result().dispose()


def test_a_database_made_before_an_added_column_gets_it_from_the_starters(new_database_urls):
    """`workers.beat_seconds` came after schema version 2: a database of that version made without
    it is given it (once, under the lock) by the processes opening it together, and keeps its rows."""
    url = new_database_urls[0]
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE workers DROP COLUMN beat_seconds"))
        conn.execute(
            text(
                "INSERT INTO workers (id, host, pid, started_at, heartbeat_at, state, detail, metrics) "
                "VALUES ('old', 'h', 1, 0, 0, 'running', '', '{}')"
            )
        )
    engine.dispose()
    barrier = threading.Barrier(STARTERS)
    with ThreadPoolExecutor(STARTERS) as pool:
        engines = [
            f.result(timeout=120) for f in [pool.submit(_open_at_a_barrier, barrier, url) for _ in range(STARTERS)]
        ]
    with engines[0].connect() as conn:
        assert "beat_seconds" in {c["name"] for c in inspect(conn).get_columns("workers")}
        assert list(conn.execute(text("SELECT id, beat_seconds FROM workers"))) == [("old", None)]
    for opened in engines:
        opened.dispose()


def test_an_engine_that_polls_for_the_lock_opens_while_a_worker_writes(tmp_path):
    """The webhook's delivery writer polls for SQLite's write lock itself (`lock_wait_ms=0`), but
    opening it checks the schema, which a worker's write in progress must delay, not fail."""
    path = tmp_path / "service.sqlite3"
    url = f"sqlite:///{path}"
    make_engine(url).dispose()
    release = _hold_the_write_lock(str(path), 0.5)
    started = time.monotonic()
    engine = make_engine(url, lock_wait_ms=0)
    assert time.monotonic() - started >= 0.4
    release.join()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(OperationalError, match="database is locked"), engine.begin():
        pass  # the opened engine still polls: no wait once open
    holder.execute("COMMIT")
    holder.close()
    with engine.begin() as conn:
        assert conn.scalar(text("SELECT count(*) FROM workers")) == 0
    engine.dispose()


def test_an_in_memory_database_opens_with_its_schema():
    """An in-memory SQLite database cannot use WAL (its journal stays "memory"): opening it must
    not wait for a switch that never happens."""
    engine = make_engine("sqlite://")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "memory"
        assert "workers" in inspect(conn).get_table_names()
    engine.dispose()
