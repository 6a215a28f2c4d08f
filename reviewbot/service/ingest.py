"""Deliveries to jobs: run by workers, in arrival order, each delivery exactly once.

The webhook answer only stores the delivery (one INSERT), which keeps it fast under bursts; the
event handlers (`events.py`) then run here, before a worker claims its next job. Several workers
may ingest concurrently: the conditional UPDATE of `processed` hands each delivery to one of them.

Each delivery is its own unit: its handler runs in a savepoint, and an unexpected error marks
that delivery `failed: ...` (the jobs it had begun are rolled back) while the others go on. A
database that cannot be reached or written (`OperationalError`) is not the delivery's fault: the
transaction is rolled back, the delivery stays unprocessed, and the caller retries later.
Deliveries found to be ignored keep only their headers (the body is dropped).
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from typing import Any

from sqlalchemy import Row, select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

from reviewbot.service import events, metrics
from reviewbot.service.db import Delivery
from reviewbot.service.settings import Settings

logger = logging.getLogger(__name__)

_PLAIN = {"synchronize_session": False}  # a plain UPDATE: no Delivery object is loaded in the session


def ingest(sessions: sessionmaker, settings: Settings, batch: int = 200, gap_s: float = 0.0) -> int:
    """Process up to `batch` unprocessed deliveries, one transaction each, `gap_s` apart (the write
    lock left free for the webhook meanwhile); returns how many this call processed.
    Raises `OperationalError` when the database fails (what was processed before stays done)."""
    with sessions() as session:
        waiting = list(
            session.execute(
                select(Delivery.seq, Delivery.guid, Delivery.event, Delivery.action, Delivery.body)
                .where(Delivery.processed.is_(False))
                .order_by(Delivery.seq)
                .limit(batch)
            )
        )
    done = 0
    for row in waiting:
        if done and gap_s:
            time.sleep(gap_s)
        done += _ingest_one(sessions, settings, row)
    return done


class _TakenElsewhere(Exception):
    """Another worker processed the delivery first: this transaction is rolled back."""


def _failure(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"failed: {type(exc).__name__}: {text}"


def _ingest_one(sessions: sessionmaker, settings: Settings, row: Row[Any]) -> bool:
    """The handler's writes and the delivery's `processed` flag commit together; the conditional
    UPDATE of the flag, last, hands the delivery to one worker (another's transaction rolls back)."""
    handler = events.handler_for(row.event)
    assert handler is not None, f"delivery {row.guid}: no handler for {row.event!r} was stored"
    try:  # parsed before the transaction: the write lock is held for the handler's statements only
        payload, outcome = json.loads(zlib.decompress(row.body)), ""
    except (zlib.error, ValueError) as exc:  # the webhook stored it as a JSON object: a damaged row
        payload, outcome = {}, _failure(exc)
    try:
        with sessions.begin() as session:
            if not outcome:
                try:
                    with session.begin_nested():
                        outcome = handler(session, row.guid, payload, settings)
                except OperationalError:
                    raise  # the database, not this delivery: roll back, retried by the caller
                except Exception as exc:  # the delivery's error boundary: it fails, ingest goes on
                    logger.exception("delivery %s %s/%s failed", row.guid, row.event, row.action)
                    outcome = _failure(exc)
            values: dict[str, object] = {"processed": True, "outcome": outcome[:200]}
            if outcome.startswith("ignored"):
                values["body"] = b""
            taken = session.execute(
                update(Delivery).where(Delivery.seq == row.seq, Delivery.processed.is_(False)).values(**values),
                execution_options=_PLAIN,
            )
            if taken.rowcount != 1:
                raise _TakenElsewhere
    except _TakenElsewhere:
        return False
    metrics.inc("reviewbot_deliveries_processed_total", event=row.event, outcome=outcome.split(" ")[0])
    logger.info("delivery %s %s/%s: %s", row.guid, row.event, row.action, outcome)
    return True
