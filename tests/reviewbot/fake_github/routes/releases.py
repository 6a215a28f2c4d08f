"""Releases: list (drafts included, as for a token with push access), create, get, update, by tag.

As on GitHub, `GET /releases/tags/{tag}` does not see drafts, and creating a second release
with an existing `tag_name` is refused with 422 `already_exists`. Releases live in
`state.extra["releases"]` (`{id: release}`).
"""

from __future__ import annotations

from typing import Any

from tests.reviewbot.fake_github.router import Request, Response, route
from tests.reviewbot.fake_github.routes.common import not_found, repo_name, requester, unprocessable
from tests.reviewbot.fake_github.state import API_ORIGIN, FakeState

_EDITABLE = ("tag_name", "name", "body", "draft", "prerelease", "target_commitish")


def releases_of(state: FakeState, full_name: str) -> list[dict[str, Any]]:
    """The releases of `full_name`, oldest first (tests assert on these)."""
    with state.lock:
        store = state.extra.setdefault("releases", {})
        return [r for _, r in sorted(store.items()) if r["_repo"] == full_name]


def _release(request: Request) -> dict[str, Any] | None:
    release = request.state.extra.setdefault("releases", {}).get(int(request.params["release_id"]))
    if release is None or release["_repo"] != repo_name(request):
        return None
    return release


@route("GET", "/repos/{owner}/{repo}/releases")
def list_releases(request: Request) -> Response | list[dict[str, Any]]:
    name = repo_name(request)
    if name not in request.state.repos:
        return not_found()
    return list(reversed(releases_of(request.state, name)))


@route("POST", "/repos/{owner}/{repo}/releases")
def create_release(request: Request) -> Response:
    name = repo_name(request)
    if name not in request.state.repos:
        return not_found()
    data = request.json()
    tag = data.get("tag_name")
    if not tag:
        return unprocessable(
            "Validation Failed", [{"resource": "Release", "field": "tag_name", "code": "missing_field"}]
        )
    if any(r["tag_name"] == tag for r in releases_of(request.state, name)):
        return unprocessable(
            "Validation Failed", [{"resource": "Release", "field": "tag_name", "code": "already_exists"}]
        )
    state = request.state
    release_id = state.next_id()
    draft = bool(data.get("draft", False))
    release = {
        "id": release_id,
        "url": f"{API_ORIGIN}/repos/{name}/releases/{release_id}",
        "html_url": f"https://github.com/{name}/releases/tag/{tag}",
        "upload_url": f"https://uploads.github.com/repos/{name}/releases/{release_id}/assets{{?name,label}}",
        "tag_name": tag,
        "target_commitish": data.get("target_commitish") or state.repos[name]["default_branch"],
        "name": data.get("name") or tag,
        "body": data.get("body", ""),
        "draft": draft,
        "prerelease": bool(data.get("prerelease", False)),
        "author": requester(request),
        "created_at": state.now(),
        "published_at": None if draft else state.now(),
        "assets": [],
        "_repo": name,
        "_edits": 0,
    }
    state.extra.setdefault("releases", {})[release_id] = release
    return Response(201, release)


@route("GET", "/repos/{owner}/{repo}/releases/tags/{tag}")
def get_release_by_tag(request: Request) -> Response | dict[str, Any]:
    for release in releases_of(request.state, repo_name(request)):
        if release["tag_name"] == request.params["tag"] and not release["draft"]:
            return release
    return not_found()


@route("GET", "/repos/{owner}/{repo}/releases/{release_id}")
def get_release(request: Request) -> Response | dict[str, Any]:
    return _release(request) or not_found()


@route("PATCH", "/repos/{owner}/{repo}/releases/{release_id}")
def update_release(request: Request) -> Response | dict[str, Any]:
    release = _release(request)
    if release is None:
        return not_found()
    data = request.json()
    for key in _EDITABLE:
        if key in data:
            release[key] = data[key]
    if not release["draft"] and release["published_at"] is None:
        release["published_at"] = request.state.now()
    release["_edits"] += 1
    return release
