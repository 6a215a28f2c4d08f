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
import time
import zlib

from sqlalchemy import select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

from reviewbot import logger
from reviewbot.service import events, metrics
from reviewbot.service.db import Delivery
from reviewbot.service.settings import Settings

_PLAIN = {"synchronize_session": False}  # plain UPDATEs: the session's Delivery is not read after them


def ingest(sessions: sessionmaker, settings: Settings, batch: int = 200, gap_s: float = 0.0) -> int:
    """Process up to `batch` unprocessed deliveries, one transaction each, `gap_s` apart (the write
    lock left free for the webhook meanwhile); returns how many this call processed.
    Raises `OperationalError` when the database fails (what was processed before stays done)."""
    with sessions() as session:
        waiting = list(
            session.scalars(
                select(Delivery.seq).where(Delivery.processed.is_(False)).order_by(Delivery.seq).limit(batch)
            )
        )
    done = 0
    for seq in waiting:
        if done and gap_s:
            time.sleep(gap_s)
        done += _ingest_one(sessions, settings, seq)
    return done


def _ingest_one(sessions: sessionmaker, settings: Settings, seq: int) -> bool:
    with sessions.begin() as session:
        taken = session.execute(
            update(Delivery).where(Delivery.seq == seq, Delivery.processed.is_(False)).values(processed=True),
            execution_options=_PLAIN,
        )
        if taken.rowcount != 1:
            return False
        delivery = session.get(Delivery, seq)
        assert delivery is not None, seq
        handler = events.EVENT_HANDLERS.get(delivery.event)
        assert handler is not None, f"delivery {delivery.guid}: no handler for {delivery.event!r} was stored"
        try:
            with session.begin_nested():
                outcome = handler(session, delivery.guid, json.loads(zlib.decompress(delivery.body)), settings)
        except OperationalError:
            raise  # the database, not this delivery: roll back, retried by the caller
        except Exception as exc:  # noqa: BLE001 - the delivery's error boundary: that delivery fails, ingest goes on
            logger.exception("delivery %s %s/%s failed", delivery.guid, delivery.event, delivery.action)
            outcome = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
        values: dict[str, object] = {"outcome": outcome[:200]}
        if outcome.startswith("ignored"):
            values["body"] = b""
        session.execute(update(Delivery).where(Delivery.seq == seq).values(**values), execution_options=_PLAIN)
        metrics.inc("reviewbot_deliveries_processed_total", event=delivery.event, outcome=outcome.split(" ")[0])
        logger.info("delivery %s %s/%s: %s", delivery.guid, delivery.event, delivery.action, outcome)
    return True
