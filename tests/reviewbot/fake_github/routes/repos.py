"""Repositories, collaborator permissions and commits."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path
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


@route("GET", "/repos/{owner}/{repo}/contents/{path}")
def get_contents(request: Request) -> Response | dict[str, Any]:
    """A file at the repository's top level, at `?ref=` (a SHA or branch; default branch without
    it), read from the git repository its `clone_url` names (a local path); 404 when it is not
    there, as GitHub answers for a missing file."""
    name = repo_name(request)
    repo = request.state.repos.get(name)
    if repo is None or not Path(repo["clone_url"]).is_dir():
        return not_found()
    path, ref = request.params["path"], request.arg("ref") or repo["default_branch"]
    shown = subprocess.run(["git", "-C", repo["clone_url"], "show", f"{ref}:{path}"], check=False, capture_output=True)
    if shown.returncode != 0:
        return not_found()
    content = shown.stdout
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(content),
        "name": path,
        "path": path,
        "content": base64.b64encode(content).decode(),
        "sha": hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest(),  # git's blob id
        "url": f"https://api.github.com/repos/{name}/contents/{path}?ref={ref}",
        "html_url": f"https://github.com/{name}/blob/{ref}/{path}",
    }
