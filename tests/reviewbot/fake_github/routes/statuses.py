"""Commit statuses and check runs."""

from __future__ import annotations

from typing import Any

from tests.reviewbot.fake_github.router import Request, Response, route
from tests.reviewbot.fake_github.routes.common import not_found, repo_name, requester, unprocessable

STATES = ("error", "failure", "pending", "success")


@route("POST", "/repos/{owner}/{repo}/statuses/{sha}")
def create_status(request: Request) -> Response:
    name = repo_name(request)
    if name not in request.state.repos:
        return not_found()
    data = request.json()
    if data.get("state") not in STATES:
        return unprocessable("Validation Failed", [{"field": "state", "code": "invalid"}])
    status = {
        "id": request.state.next_id(),
        "state": data["state"],
        "context": data.get("context", "default"),
        "description": data.get("description"),
        "target_url": data.get("target_url"),
        "creator": requester(request),
        "created_at": request.state.now(),
        "url": f"https://api.github.com/repos/{name}/statuses/{request.params['sha']}",
        "_repo": name,
        "_sha": request.params["sha"],
    }
    request.state.statuses.append(status)
    return Response(201, status)


@route("GET", "/repos/{owner}/{repo}/statuses/{sha}")
@route("GET", "/repos/{owner}/{repo}/commits/{sha}/statuses")
def list_statuses(request: Request) -> list[dict[str, Any]]:
    """Newest first, as GitHub lists them."""
    return list(reversed(request.state.statuses_for(repo_name(request), request.params["sha"])))


@route("POST", "/repos/{owner}/{repo}/check-runs")
def create_check_run(request: Request) -> Response:
    name = repo_name(request)
    if name not in request.state.repos:
        return not_found()
    data = request.json()
    if not data.get("name") or not data.get("head_sha"):
        return unprocessable("Validation Failed", [{"field": "name/head_sha", "code": "missing_field"}])
    run_id = request.state.next_id()
    run = {
        "id": run_id,
        "name": data["name"],
        "head_sha": data["head_sha"],
        "status": data.get("status", "queued"),
        "conclusion": data.get("conclusion"),
        "output": data.get("output") or {},
        "url": f"https://api.github.com/repos/{name}/check-runs/{run_id}",
        "html_url": f"https://github.com/{name}/runs/{run_id}",
        "_repo": name,
    }
    request.state.check_runs[run_id] = run
    return Response(201, run)


@route("PATCH", "/repos/{owner}/{repo}/check-runs/{run_id}")
def update_check_run(request: Request) -> Response | dict[str, Any]:
    run = request.state.check_runs.get(int(request.params["run_id"]))
    if run is None or run["_repo"] != repo_name(request):
        return not_found()
    data = request.json()
    for key in ("status", "conclusion", "output", "name"):
        if key in data:
            run[key] = data[key]
    return run


@route("GET", "/repos/{owner}/{repo}/commits/{sha}/check-runs")
def list_check_runs(request: Request) -> dict[str, Any]:
    name = repo_name(request)
    wanted = request.arg("check_name")
    runs = [
        r
        for r in request.state.check_runs.values()
        if r["_repo"] == name and r["head_sha"] == request.params["sha"] and wanted in (None, r["name"])
    ]
    return {"total_count": len(runs), "check_runs": runs}
