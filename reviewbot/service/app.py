"""The webhook endpoint (FastAPI): verify, persist, answer.

Order of checks, the first ones before any of the body is read: declared size (413), the
`X-Hub-Signature-256` header's presence and form (401), the `X-GitHub-Event` and
`X-GitHub-Delivery` headers (400). The body then streams through the HMAC into a spool (memory up
to 1 MiB, a temporary file beyond) and is refused as soon as it passes `max_body_bytes` (413);
a wrong signature is 401 with nothing stored; a sender that disconnects before the body ends is
logged in one line and counted (`disconnected`), nothing stored; a body still incomplete
`body_timeout_seconds` after the headers is answered 408 and its connection closed (one line,
counted `timeout`, nothing stored): a sender stalled mid-body cannot hold a connection and its
spool. Then UTF-8 JSON of an object (400), the fields and types the event's handler needs (400
with the reason), the INSERT (a redelivery: 200, not processed again; a database that cannot take
the write: 503 with the reason). The 202 comes only after the row is committed (durably: SQLite
`synchronous=FULL`) into the database file that is still at its path. A body over 256 KiB is
parsed in the thread pool, so it never stalls the event loop; rows are written by the delivery
writer's group commits (`delivery_writer.py`). Jobs are derived from stored deliveries by the
worker (`ingest.py`), in its own process by default (`supervisor.py`). The deadlines of a
request's headers, and of the rest of a body answered before its end, are the connection's
(`http_protocol.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from starlette.requests import ClientDisconnect

from reviewbot.service import events, health, metrics, plugins
from reviewbot.service.db import WorkerBeat, make_engine, pack_body
from reviewbot.service.delivery_writer import DeliveryWriter, StoreFailed
from reviewbot.service.settings import Settings
from reviewbot.service.supervisor import WorkerProcess

logger = logging.getLogger(__name__)

SPOOL_IN_MEMORY = 1024 * 1024
INLINE_CHECK_BYTES = 256 * 1024  # larger bodies are parsed in the thread pool, off the event loop
_SIGNATURE = re.compile(r"sha256=[0-9a-f]{64}")
_EVENT = re.compile(r"[a-z_]{1,64}")
_DELIVERY = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
KEPT_HEADERS = (
    "x-github-event",
    "x-github-delivery",
    "x-github-hook-id",
    "x-github-hook-installation-target-id",
    "x-github-hook-installation-target-type",
    "user-agent",
    "content-length",
)


def _answer(event: str, outcome: str, status: int, **body: Any) -> JSONResponse:
    label = event if events.handler_for(event) is not None or event == "ping" else "other"  # bounded label values
    metrics.inc("reviewbot_webhook_deliveries_total", event=label, outcome=outcome)
    return JSONResponse({"outcome": outcome, **body}, status_code=status)


class _TooLarge(Exception):
    pass


async def _receive(request: Request, secret: bytes, limit: int, timeout_s: float) -> bytes | None:
    """The body, or None when its HMAC does not match `X-Hub-Signature-256`; `_TooLarge` as soon as
    more than `limit` bytes arrived; `TimeoutError` when the body has not ended `timeout_s` after
    this call. Only a body whose signature matches is read back from the spool."""
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    size = 0
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise _TooLarge
                mac.update(chunk)
                spool.write(chunk)
        expected = "sha256=" + mac.hexdigest()
        if not hmac.compare_digest(expected.encode(), request.headers["x-hub-signature-256"].encode()):
            return None
        spool.seek(0)
        return spool.read()


def create_app(settings: Settings) -> FastAPI:
    """`SchemaMismatch` for a database of another schema version, `OperationalError` for one that
    cannot be opened."""
    secret = settings.secret("webhook_secret")
    if not secret:
        raise ValueError(
            "webhook_secret (or webhook_secret_file) is required: deliveries cannot be verified without it"
        )
    plugins.load()
    engine = make_engine(settings.database_url, max_bytes=settings.database_max_mb << 20)
    identity = health.FileIdentity.of(engine)
    store = health.StoreOutcome()
    writer = DeliveryWriter(
        make_engine(settings.database_url, max_bytes=settings.database_max_mb << 20, lock_wait_ms=0)
        if engine.dialect.name == "sqlite"
        else engine,
        identity,
    )
    worker = WorkerProcess(settings) if settings.embedded_worker else None

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if worker is not None:
            worker.start()
        yield
        if worker is not None:
            await run_in_threadpool(worker.stop)

    app = FastAPI(title="reviewbot", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/webhook")
    async def webhook(request: Request) -> JSONResponse:
        headers = request.headers
        event = headers.get("x-github-event", "")
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > settings.max_body_bytes:
            return _answer(event, "too-large", 413, reason=f"body over {settings.max_body_bytes} bytes")
        if not _SIGNATURE.fullmatch(headers.get("x-hub-signature-256", "")):
            return _answer(event, "bad-signature", 401, reason="missing or wrong X-Hub-Signature-256")
        delivery_id = headers.get("x-github-delivery", "")
        if not event or not delivery_id:
            return _answer(event, "bad-request", 400, reason="missing X-GitHub-Event or X-GitHub-Delivery header")
        if not _EVENT.fullmatch(event) or not _DELIVERY.fullmatch(delivery_id):
            return _answer(event, "bad-request", 400, reason="malformed X-GitHub-Event or X-GitHub-Delivery header")
        try:
            body = await _receive(request, secret.encode(), settings.max_body_bytes, settings.body_timeout_seconds)
        except _TooLarge:
            return _answer(event, "too-large", 413, reason=f"body over {settings.max_body_bytes} bytes")
        except ClientDisconnect:  # the sender gave up mid-body (GitHub's 10 s limit): nothing was stored
            logger.warning("delivery %s (%s): the sender disconnected before the body ended", delivery_id, event)
            return _answer(event, "disconnected", 400, reason="the sender disconnected before the body ended")
        except TimeoutError:  # a stalled sender: its connection (and spool) is given back
            logger.warning(
                "delivery %s (%s): the body did not end within %g s: answered 408, connection closed",
                delivery_id,
                event,
                settings.body_timeout_seconds,
            )
            answer = _answer(
                event, "timeout", 408, reason=f"the body did not end within {settings.body_timeout_seconds:g} s"
            )
            answer.headers["connection"] = "close"  # uvicorn closes it after the answer: the rest is never read
            return answer
        if body is None:
            return _answer(event, "bad-signature", 401, reason="missing or wrong X-Hub-Signature-256")
        kept = {name: headers[name] for name in KEPT_HEADERS if name in headers}
        if len(body) <= INLINE_CHECK_BYTES:  # parsing takes well under a millisecond: no thread hop
            checked = _check(event, delivery_id, kept, body)
        else:
            checked = await run_in_threadpool(_check, event, delivery_id, kept, body)
        if isinstance(checked, JSONResponse):
            return checked
        try:
            new = await asyncio.wrap_future(writer.submit(checked))
        except StoreFailed as exc:
            store.failed(str(exc))
            return _answer(event, "unavailable", 503, reason=str(exc))
        store.stored()
        if not new:
            return _answer(event, "duplicate", 200, delivery=delivery_id)
        return _answer(event, checked["outcome"], 200 if event == "ping" else 202, delivery=delivery_id)

    def _check(event: str, delivery_id: str, headers: dict[str, str], body: bytes) -> dict[str, Any] | JSONResponse:
        """The row to store, or the 400 answer. Events without a handler keep only their headers."""
        try:
            payload = json.loads(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return _answer(event, "bad-request", 400, reason=f"body is not UTF-8: {exc.reason} at byte {exc.start}")
        except RecursionError:
            return _answer(event, "bad-request", 400, reason="malformed JSON: nested too deeply")
        except ValueError as exc:  # json.JSONDecodeError, or an integer too long to convert
            return _answer(event, "bad-request", 400, reason=f"malformed JSON: {exc}")
        if not isinstance(payload, dict):
            return _answer(event, "bad-request", 400, reason="payload is not a JSON object")
        try:
            events.validate(event, payload)
        except events.BadPayload as exc:
            return _answer(event, "bad-request", 400, reason=str(exc))
        known = events.handler_for(event) is not None
        action = payload.get("action")
        return {
            "guid": delivery_id,
            "event": event,
            "action": action if isinstance(action, str) and _EVENT.fullmatch(action) else "",
            "received_at": time.time(),
            "headers": headers,
            "body": pack_body(body) if known else b"",
            "processed": not known,
            "outcome": "accepted" if known else "pong" if event == "ping" else "ignored-event",
        }

    @app.api_route("/healthz", methods=["GET", "HEAD"])
    def healthz() -> JSONResponse:
        """503 with the reason when the database cannot take a write and a read, its file was deleted
        or replaced, or serve's own worker process is down or silent. HEAD (load balancers' probe)
        answers the same status without the body."""
        ok, body = health.report(
            engine, identity, store, worker.status() if worker else None, settings.worker_heartbeat_seconds
        )
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics")
    def prometheus() -> PlainTextResponse:
        """serve's metrics plus the workers' (as of their last heartbeats); serve's alone, with a
        comment saying why, when the database cannot be read."""
        try:
            with engine.connect() as conn:
                others = [snap for (snap,) in conn.execute(select(WorkerBeat.metrics)) if snap]
            text = metrics.render(others)
        except DBAPIError as exc:
            text = metrics.render() + f"# workers' metrics not read: {health.first_line(exc)}\n"
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return app
