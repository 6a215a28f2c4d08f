"""Helpers shared by route modules: 404s, repository lookup, validation errors."""

from __future__ import annotations

from typing import Any

from tests.reviewbot.fake_github.router import Request, Response


def not_found() -> Response:
    return Response(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})


def unprocessable(message: str, errors: list[Any] | None = None) -> Response:
    return Response(422, {"message": message, "errors": errors or []})


# GitHub refuses a comment (issue, review or review-thread) longer than this many characters
MAX_BODY_CHARS = 65536


def body_too_long(*bodies: str | None) -> Response | None:
    """GitHub's 422 when one of `bodies` is longer than `MAX_BODY_CHARS`, else None."""
    if any(len(body or "") > MAX_BODY_CHARS for body in bodies):
        return unprocessable(
            "Validation Failed",
            [
                {
                    "resource": "IssueComment",
                    "code": "custom",
                    "field": "body",
                    "message": f"body is too long (maximum is {MAX_BODY_CHARS} characters)",
                }
            ],
        )
    return None


def repo_name(request: Request) -> str:
    return f"{request.params['owner']}/{request.params['repo']}"


def requester(request: Request) -> dict[str, Any]:
    return request.state.user(request.state.authenticated_login, "Bot")
