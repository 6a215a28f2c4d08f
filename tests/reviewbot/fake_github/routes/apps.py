"""GitHub App endpoints: the app itself and installation access tokens (JWT checked for shape only)."""

from __future__ import annotations

import secrets
from typing import Any

from tests.reviewbot.fake_github.router import Request, Response, route


def _bearer_jwt(request: Request) -> bool:
    auth = request.headers.get("Authorization", "")
    return auth.startswith("Bearer ") and auth.count(".") == 2


@route("GET", "/app")
def get_app(request: Request) -> Response | dict[str, Any]:
    if not _bearer_jwt(request):
        return Response(401, {"message": "A JSON web token could not be decoded"})
    slug = request.state.authenticated_login.removesuffix("[bot]")
    return {"id": 1, "slug": slug, "name": slug, "owner": request.state.user("owner")}


@route("POST", "/app/installations/{installation_id}/access_tokens")
def create_installation_token(request: Request) -> Response:
    if not _bearer_jwt(request):
        return Response(401, {"message": "A JSON web token could not be decoded"})
    token = f"ghs_{secrets.token_hex(16)}"
    request.state.installation_tokens.append(token)
    return Response(
        201, {"token": token, "expires_at": "2099-01-01T00:00:00Z", "permissions": {}, "repository_selection": "all"}
    )
