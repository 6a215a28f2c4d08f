"""The fake GitHub HTTP server: a `ThreadingHTTPServer` on 127.0.0.1 in a background thread."""

from __future__ import annotations

import importlib
import json
import threading
import time
import urllib.parse
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.reviewbot.fake_github.router import Request, Response, registered, resolve
from tests.reviewbot.fake_github.state import API_ORIGIN, FakeState, Recorded, public

ROUTE_MODULES: tuple[str, ...] = (
    "tests.reviewbot.fake_github.routes.users",
    "tests.reviewbot.fake_github.routes.repos",
    "tests.reviewbot.fake_github.routes.pulls",
    "tests.reviewbot.fake_github.routes.issues",
    "tests.reviewbot.fake_github.routes.statuses",
    "tests.reviewbot.fake_github.routes.apps",
)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _serve(self) -> None:
        fake = self.server.fake
        parsed = urllib.parse.urlsplit(self.path)
        path = parsed.path
        if fake.path_prefix and path.startswith(fake.path_prefix):
            path = path[len(fake.path_prefix) :] or "/"
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        method = self.command
        fault = fake.state.take_fault(method, path)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        response: Response
        if fault is not None and fault.status is not None and not fault.apply_then_fail:
            response = Response(
                fault.status, fault.body or {"message": f"injected {fault.status}"}, dict(fault.headers)
            )
        else:
            response = self._dispatch(method, path, parsed.query, body)
            if fault is not None and fault.status is not None:
                response = Response(
                    fault.status, fault.body or {"message": f"injected {fault.status}"}, dict(fault.headers)
                )
        with fake.state.lock:
            fake.state.requests.append(Recorded(method, path, response.status, body))
        self._write(response)

    def _dispatch(self, method: str, path: str, query: str, body: bytes) -> Response:
        fake = self.server.fake
        found = resolve(method, path)
        if found is None:
            return Response(404, {"message": "Not Found", "documentation_url": "fake-github: no route"})
        handler, params = found
        request = Request(
            method,
            path,
            urllib.parse.parse_qs(query),
            dict(self.headers.items()),
            body,
            params,
            fake.state,
            fake.origin,
        )
        with fake.state.lock:
            result = handler(request)
        return result if isinstance(result, Response) else Response(200, result)

    def _write(self, response: Response) -> None:
        if response.raw is not None:
            payload = response.raw
        elif response.body is None:
            payload = b""
        else:
            payload = self.server.fake.rewrite(json.dumps(public(response.body))).encode()
        self.send_response(response.status)
        headers = {
            "Content-Type": response.content_type,
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "4999",
            **response.headers,
        }
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGitHub


class FakeGitHub:
    """Start with `with FakeGitHub() as gh:`; `gh.base_url` is PyGithub's `base_url`."""

    def __init__(self, extra_route_modules: Iterable[str] = (), path_prefix: str = "") -> None:
        for name in (*ROUTE_MODULES, *extra_route_modules):
            importlib.import_module(name)
        self.state = FakeState()
        self.path_prefix = path_prefix
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        host, port = self._server.server_address[:2]
        self.origin = f"http://{host}:{port}"
        self.base_url = f"{self.origin}{path_prefix}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-github", daemon=True)

    def rewrite(self, text: str) -> str:
        """Point api.github.com URLs at this server."""
        return text.replace(API_ORIGIN, self.base_url)

    def start(self) -> FakeGitHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @staticmethod
    def routes() -> list[tuple[str, str]]:
        return registered()
