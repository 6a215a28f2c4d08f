"""The webhook endpoint (FastAPI): verify, persist, enqueue, answer.

Order of checks: body size (413), signature over the raw bytes (401, nothing stored), JSON and
the fields the event needs (400 with the reason), redelivery (200, not processed again). A
delivery is stored together with the jobs it causes in one transaction before the 2xx answer,
so nothing acknowledged is lost if the process dies right after.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from reviewbot.service import events, gpu_dispatch, jobs, metrics
from reviewbot.service.db import Delivery, Job, make_sessionmaker
from reviewbot.service.settings import Settings


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def _answer(event: str, outcome: str, status: int, **body: Any) -> JSONResponse:
    metrics.inc("reviewbot_webhook_deliveries_total", event=event or "none", outcome=outcome)
    return JSONResponse({"outcome": outcome, **body}, status_code=status)


class _TooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(
    settings: Settings, sessions: sessionmaker | None = None, *, embedded_worker: bool | None = None
) -> FastAPI:
    secret = settings.secret("webhook_secret")
    if not secret:
        raise ValueError(
            "webhook_secret (or webhook_secret_file) is required: deliveries cannot be verified without it"
        )
    gpu_dispatch.load_plugins()
    sessions = sessions or make_sessionmaker(settings.database_url)
    engine = sessions.kw["bind"]
    run_worker = settings.embedded_worker if embedded_worker is None else embedded_worker

    workers: list[Any] = []

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if run_worker:
            from reviewbot.service.worker import Worker

            workers.append(Worker(settings, sessions, name="embedded"))
            workers[0].start_thread()
        yield
        for worker in workers:
            worker.stop()

    app = FastAPI(title="reviewbot", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/webhook")
    async def webhook(request: Request) -> JSONResponse:
        event = request.headers.get("x-github-event", "")
        try:
            body = await _read_body(request, settings.max_body_bytes)
        except _TooLarge:
            return _answer(event, "too-large", 413, reason=f"body over {settings.max_body_bytes} bytes")
        if not signature_ok(secret, body, request.headers.get("x-hub-signature-256")):
            return _answer(event, "bad-signature", 401, reason="missing or wrong X-Hub-Signature-256")
        delivery_id = request.headers.get("x-github-delivery", "")
        if not event or not delivery_id:
            return _answer(event, "bad-request", 400, reason="missing X-GitHub-Event or X-GitHub-Delivery header")
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return _answer(event, "bad-request", 400, reason=f"malformed JSON: {exc}")
        if not isinstance(payload, dict):
            return _answer(event, "bad-request", 400, reason="payload is not a JSON object")
        try:
            events.validate(event, payload)
        except events.BadPayload as exc:
            return _answer(event, "bad-request", 400, reason=str(exc))
        return await run_in_threadpool(_store, event, delivery_id, payload, body)

    insert_delivery = Delivery.__table__.insert()  # built once: SQLAlchemy reuses its compiled form

    def _store(event: str, delivery_id: str, payload: dict[str, Any], body: bytes) -> JSONResponse:
        """One INSERT: the delivery's guid is unique, so a redelivery fails it and is answered 200."""
        known = event in events.EVENT_HANDLERS
        outcome = "accepted" if known else "pong" if event == "ping" else "ignored-event"
        row = {
            "guid": delivery_id,
            "event": event,
            "action": str(payload.get("action", ""))[:64],
            "received_at": time.time(),
            "body": body.decode(),
            "processed": not known,
            "outcome": outcome,
        }
        try:
            with engine.begin() as conn:
                conn.execute(insert_delivery, row)
        except IntegrityError:
            return _answer(event, "duplicate", 200, delivery=delivery_id)
        for worker in workers:
            worker.wake.set()
        return _answer(event, outcome, 200 if event == "ping" else 202, delivery=delivery_id)

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        """503 when the embedded worker thread died (an unexpected error): restart the process; the
        job it held is claimed again when its lease runs out."""
        with sessions() as session:
            session.execute(text("SELECT 1"))
            active = session.scalar(select(func.count()).select_from(Job).where(Job.state.in_(jobs.ACTIVE)))
        worker_alive = all(worker.alive for worker in workers)
        return JSONResponse(
            {"ok": worker_alive, "active_jobs": active, "embedded_worker": run_worker, "worker_alive": worker_alive},
            status_code=200 if worker_alive else 503,
        )

    @app.get("/metrics")
    def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    return app
