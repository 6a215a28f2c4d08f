"""Deliveries to jobs: run by workers, in arrival order, each delivery exactly once.

The webhook answer only stores the delivery (one INSERT), which keeps it fast under bursts; the
event handlers (`events.py`) then run here, before a worker claims its next job. Several workers
may ingest concurrently: the conditional UPDATE of `processed` hands each delivery to one of them.
"""

from __future__ import annotations

import json

from sqlalchemy import select, update
from sqlalchemy.orm import sessionmaker

from reviewbot import logger
from reviewbot.service import events, metrics
from reviewbot.service.db import Delivery
from reviewbot.service.settings import Settings


def ingest(sessions: sessionmaker, settings: Settings, batch: int = 200) -> int:
    """Process up to `batch` unprocessed deliveries; returns how many this call processed."""
    done = 0
    with sessions.begin() as session:
        waiting = list(
            session.scalars(select(Delivery).where(Delivery.processed.is_(False)).order_by(Delivery.seq).limit(batch))
        )
        for delivery in waiting:
            taken = session.execute(
                update(Delivery)
                .where(Delivery.seq == delivery.seq, Delivery.processed.is_(False))
                .values(processed=True)
            )
            if taken.rowcount != 1:
                continue
            handler = events.EVENT_HANDLERS.get(delivery.event)
            assert handler is not None, f"delivery {delivery.guid}: no handler for {delivery.event!r} was stored"
            outcome = handler(session, delivery.guid, json.loads(delivery.body), settings)
            session.execute(update(Delivery).where(Delivery.seq == delivery.seq).values(outcome=outcome))
            metrics.inc("reviewbot_deliveries_processed_total", event=delivery.event, outcome=outcome.split(" ")[0])
            logger.info("delivery %s %s/%s: %s", delivery.guid, delivery.event, delivery.action, outcome)
            done += 1
    return done
