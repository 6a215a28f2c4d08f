"""Repositories, collaborator permissions and commits."""

from __future__ import annotations

from typing import Any

from tests.reviewbot.fake_github.router import Request, Response, route
from tests.reviewbot.fake_github.routes.common import not_found, repo_name


@route("GET", "/repos/{owner}/{repo}")
def get_repo(request: Request) -> Response | dict[str, Any]:
    return request.state.repos.get(repo_name(request)) or not_found()


@route("GET", "/repos/{owner}/{repo}/collaborators/{login}/permission")
def get_permission(request: Request) -> Response | dict[str, Any]:
    name = repo_name(request)
    if name not in request.state.repos:
        return not_found()
    login = request.params["login"]
    permission = request.state.permissions.get((name, login), "none")
    return {"permission": permission, "role_name": permission, "user": request.state.user(login)}


@route("GET", "/repos/{owner}/{repo}/commits/{sha}")
def get_commit(request: Request) -> Response | dict[str, Any]:
    name = repo_name(request)
    if name not in request.state.repos:
        return not_found()
    sha = request.params["sha"]
    return {
        "sha": sha,
        "url": f"https://api.github.com/repos/{name}/commits/{sha}",
        "commit": {"message": "", "tree": {"sha": sha}},
        "files": [],
        "parents": [],
    }
