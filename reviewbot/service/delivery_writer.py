"""The webhook's writes: deliveries are inserted by one thread, in group commits.

Request handlers `submit` a delivery row and wait for its commit. The writer thread takes every
row waiting, inserts them in one transaction (`ON CONFLICT (guid) DO NOTHING`, so a redelivery is
told apart per row), commits, checks that the database file is still the one at its path, and
then answers each waiting request. One transaction per burst instead of one per request keeps
the webhook's share of the database's write lock small.

SQLite has one writer at a time and no fair queue for it: SQLite's own wait sleeps 1, 2, 5 ... 100
ms between tries, and a worker that keeps taking the lock back could starve it. So the writer's
engine does not wait inside SQLite: it tries again every `poll_s` (0.5 ms) until `lock_wait_s`,
and workers leave the lock free for a moment between their transactions (`worker.py`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from reviewbot.service import health
from reviewbot.service.db import Delivery

logger = logging.getLogger(__name__)

BATCH = 200


class StoreFailed(RuntimeError):
    """The delivery is not durably stored; the message is the reason (a 503 body)."""


class DeliveryWriter:
    def __init__(
        self,
        engine: Engine,
        identity: health.FileIdentity | None,
        *,
        poll_s: float = 0.0005,
        lock_wait_s: float = 30.0,
    ) -> None:
        """`engine`: on SQLite, one made with `lock_wait_ms=0` (this writer polls for the lock)."""
        self.engine = engine
        self.identity = identity
        self.poll_s = poll_s
        self.lock_wait_s = lock_wait_s
        dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(engine.dialect.name)
        if dialect is None:
            raise ValueError(f"database {engine.dialect.name!r} is not supported (SQLite or PostgreSQL)")
        table = Delivery.__table__
        self._insert = dialect.insert(table).on_conflict_do_nothing(index_elements=["guid"]).returning(table.c.seq)
        self._queue: queue.SimpleQueue[tuple[dict[str, Any], concurrent.futures.Future[bool]]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="delivery-writer", daemon=True)
        self._thread.start()

    def submit(self, row: dict[str, Any]) -> concurrent.futures.Future[bool]:
        """A future of True (stored), False (a delivery with this guid was stored before), or
        `StoreFailed`."""
        future: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self._queue.put((row, future))
        return future

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(batch)
            except Exception as exc:  # the batch's error boundary: its requests get 503, the writer lives on
                logger.exception("delivery writer")
                self._fail(batch, f"internal error: {type(exc).__name__}")

    def _write(self, batch: list[tuple[dict[str, Any], concurrent.futures.Future[bool]]]) -> None:
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            try:
                with self.engine.begin() as conn:
                    stored = [conn.execute(self._insert, row).first() is not None for row, _ in batch]
                break
            except OperationalError as exc:
                if "database is locked" in str(exc.orig) and time.monotonic() < deadline:
                    time.sleep(self.poll_s)
                    continue
                self.engine.dispose()  # fresh connections next time: a repaired database (writable again) is seen
                self._fail(batch, f"database: {health.first_line(exc)}")
                return
            except DBAPIError as exc:
                self._fail(batch, f"database: {health.first_line(exc)}")
                return
        problem = self.identity.problem() if self.identity is not None else None
        if problem:
            self._fail(batch, problem)
            return
        for (_, future), new in zip(batch, stored, strict=True):
            future.set_result(new)

    @staticmethod
    def _fail(batch: list[tuple[dict[str, Any], concurrent.futures.Future[bool]]], reason: str) -> None:
        logger.error("%d deliveries not stored: %s", len(batch), reason)
        for _, future in batch:
            future.set_exception(StoreFailed(reason))
