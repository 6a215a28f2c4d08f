"""serve's HTTP/1.1 protocol: uvicorn's h11 protocol with deadlines for what a connection waits on.

uvicorn has no header timeout: a connection that sends nothing, or part of a request line and its
headers, is held for as long as its sender likes (each one a socket and a file descriptor, and
enough of them run serve out of either); its keep-alive timer, armed only after an answer, is
stopped by any byte. Nor does it bound the rest of a body that the webhook answered before reading
it all (a 401 on a missing signature, a 413): a sender trickling that body, a byte now and then,
holds the connection. Here a connection must

- complete a request's headers within `header_timeout_s` of its opening, of the previous answer or
  of the previous request's end, and
- end the body of a request answered before its end within `body_timeout_s` of that answer,

or it is closed, without an answer, and logged in one line. (Such an answer does not close the
connection at once: the client, still sending, could then get a reset instead of the answer.) A
body not yet answered has the webhook's own deadline, `body_timeout_seconds` too, which answers 408
(`app.py`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)


class DeadlineProtocol(H11Protocol):
    """`H11Protocol` that closes a connection whose request headers, or whose already-answered
    body, do not arrive in time. One deadline at a time, for what the connection waits on now."""

    def __init__(self, *args: Any, header_timeout_s: float, body_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timeouts = {"headers": header_timeout_s, "body": body_timeout_s}
        self._waiting_for: str | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def _awaited(self) -> str | None:
        """'headers' before a request's headers are in, 'body' while the client still sends the
        body of a request already answered, else None (the webhook is reading or answering)."""
        state = self.conn.their_state
        if state is h11.IDLE:
            return "headers"
        if state is h11.SEND_BODY and self.cycle is not None and self.cycle.response_complete:
            return "body"
        return None

    def _sync_deadline(self) -> None:
        """Arm the deadline of what the connection waits on now, unless it is already armed."""
        awaited = None if self.transport.is_closing() else self._awaited()
        if awaited == self._waiting_for:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._waiting_for = awaited
        if awaited is not None:
            self._deadline = self.loop.call_later(self._timeouts[awaited], self._late)

    def _late(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        peer = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        timeout = self._timeouts[self._waiting_for or "headers"]
        what = (
            "sent no complete request headers"
            if self._waiting_for == "headers"
            else "did not end the body of a request already answered"
        )
        logger.warning("connection from %s %s within %g s: closed", peer, what, timeout)
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._sync_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._sync_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)


def protocol(header_timeout_s: float, body_timeout_s: float) -> Callable[..., DeadlineProtocol]:
    """What uvicorn's `Config(http=...)` takes: it makes one protocol per connection."""
    return functools.partial(DeadlineProtocol, header_timeout_s=header_timeout_s, body_timeout_s=body_timeout_s)
