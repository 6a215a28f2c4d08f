"""Route registry of the fake GitHub server: `@route("GET", r"/repos/{owner}/{repo}")`.

Patterns use `{name}` placeholders matching one path segment; they are compiled to regexes and
the captured values are passed in `Request.params`. The first registered match wins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.reviewbot.fake_github.state import FakeState


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    params: dict[str, str]
    state: FakeState
    origin: str

    def json(self) -> Any:
        return json.loads(self.body or b"{}")

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    content_type: str = "application/json; charset=utf-8"


Handler = Callable[[Request], "Response | Any"]
_ROUTES: list[tuple[str, re.Pattern[str], Handler, str]] = []


def _compile(pattern: str) -> re.Pattern[str]:
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern)
    return re.compile(f"^{regex}$")


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    """Register `handler` for `method` and the path `pattern` (no query string)."""

    def register(handler: Handler) -> Handler:
        _ROUTES.append((method.upper(), _compile(pattern), handler, pattern))
        return handler

    return register


def resolve(method: str, path: str) -> tuple[Handler, dict[str, str]] | None:
    for route_method, regex, handler, _ in _ROUTES:
        if route_method != method:
            continue
        match = regex.match(path)
        if match:
            return handler, match.groupdict()
    return None


def registered() -> list[tuple[str, str]]:
    return [(method, pattern) for method, _, _, pattern in _ROUTES]
