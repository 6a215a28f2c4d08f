"""Helpers shared by route modules: 404s, repository lookup, validation errors."""

from __future__ import annotations

from typing import Any

from tests.reviewbot.fake_github.router import Request, Response


def not_found() -> Response:
    return Response(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


def unprocessable(message: str, errors: list[Any] | None = None) -> Response:
    return Response(422, {"message": message, "errors": errors or []})


def repo_name(request: Request) -> str:
    return f"{request.params['owner']}/{request.params['repo']}"


def requester(request: Request) -> dict[str, Any]:
    return request.state.user(request.state.authenticated_login, "Bot")
