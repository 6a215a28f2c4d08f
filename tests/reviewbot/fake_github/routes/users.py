"""`/user` (the authenticated account) and `/users/{login}`."""

from __future__ import annotations

from typing import Any

from tests.reviewbot.fake_github.router import Request, route
from tests.reviewbot.fake_github.routes.common import requester


@route("GET", "/user")
def get_authenticated_user(request: Request) -> dict[str, Any]:
    return requester(request)


@route("GET", "/users/{login}")
def get_user(request: Request) -> dict[str, Any]:
    return request.state.user(request.params["login"])
