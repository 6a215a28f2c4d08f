"""GitHub Actions endpoints of the fake GitHub: workflows, workflow_dispatch, runs, artifacts.

Load with `FakeGitHub(extra_route_modules=["tests.reviewbot.fake_github.routes.actions"])`.
State lives in `state.extra["actions"]` (`actions_state(state)`). A test plays the Actions
runner: it reads the recorded dispatch, produces the artifact (a real zip), registers the
completed run with `complete_run`, and delivers `workflow_run_event(...)` to the bot.

The artifact download behaves like GitHub's: `/actions/artifacts/{id}/zip` answers 302 to a
signed storage URL, and storage refuses requests that carry an Authorization header (as Azure
blob storage does with the SAS URLs GitHub hands out), recording every attempt.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

from tests.reviewbot.fake_github.router import Request, Response, route
from tests.reviewbot.fake_github.routes.common import not_found, repo_name, unprocessable
from tests.reviewbot.fake_github.state import API_ORIGIN, FakeState
from tests.reviewbot.fake_github.webhooks import load_payload

STORAGE_PREFIX = "/_storage/artifacts/"


@dataclass
class ActionsState:
    workflows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    dispatches: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    artifacts: dict[int, dict[str, Any]] = field(default_factory=dict)
    storage_requests: list[dict[str, Any]] = field(default_factory=list)


def actions_state(state: FakeState) -> ActionsState:
    with state.lock:
        return state.extra.setdefault("actions", ActionsState())


def add_workflow(state: FakeState, full_name: str, file_name: str, inputs: dict[str, bool]) -> dict[str, Any]:
    """A workflow with `workflow_dispatch` inputs (name -> required)."""
    workflow_id = state.next_id()
    workflow = {
        "id": workflow_id,
        "node_id": f"W_{workflow_id}",
        "name": file_name.rsplit(".", 1)[0],
        "path": f".github/workflows/{file_name}",
        "state": "active",
        "url": f"{API_ORIGIN}/repos/{full_name}/actions/workflows/{workflow_id}",
        "html_url": f"https://github.com/{full_name}/blob/main/.github/workflows/{file_name}",
        "badge_url": f"https://github.com/{full_name}/workflows/x/badge.svg",
        "created_at": state.now(),
        "updated_at": state.now(),
        "_inputs": dict(inputs),
        "_repo": full_name,
        "_file": file_name,
    }
    with state.lock:
        actions_state(state).workflows[(full_name, file_name)] = workflow
    return workflow


def _workflow(request: Request) -> dict[str, Any] | None:
    wanted = request.params["workflow_id"]
    for (name, file_name), workflow in actions_state(request.state).workflows.items():
        if name == repo_name(request) and wanted in (file_name, str(workflow["id"])):
            return workflow
    return None


@route("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}")
def get_workflow(request: Request) -> Response | dict[str, Any]:
    return _workflow(request) or not_found()


@route("POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches")
def create_dispatch(request: Request) -> Response:
    workflow = _workflow(request)
    if workflow is None:
        return not_found()
    data = request.json()
    repo = request.state.repos[repo_name(request)]
    if data.get("ref") != repo["default_branch"]:
        return unprocessable(f"No ref found for: {data.get('ref')}")
    inputs = data.get("inputs") or {}
    declared = workflow["_inputs"]
    unexpected = sorted(set(inputs) - set(declared))
    if unexpected:
        return unprocessable(f"Unexpected inputs provided: {json.dumps(unexpected)}")
    for name, required in declared.items():
        if required and not inputs.get(name):
            return unprocessable(f"Required input '{name}' not provided")
    if any(not isinstance(v, str) for v in inputs.values()):
        return unprocessable("inputs must be strings")
    actions_state(request.state).dispatches.append(
        {"repo": repo_name(request), "workflow": workflow["_file"], "ref": data["ref"], "inputs": dict(inputs)}
    )
    return Response(204, None)


@route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}")
def get_run(request: Request) -> Response | dict[str, Any]:
    run = actions_state(request.state).runs.get(int(request.params["run_id"]))
    if run is None or run["_repo"] != repo_name(request):
        return not_found()
    return run


@route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts")
def list_run_artifacts(request: Request) -> Response | dict[str, Any]:
    run_id = int(request.params["run_id"])
    if run_id not in actions_state(request.state).runs:
        return not_found()
    artifacts = [a for a in actions_state(request.state).artifacts.values() if a["workflow_run"]["id"] == run_id]
    return {"total_count": len(artifacts), "artifacts": artifacts}


@route("GET", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip")
def download_artifact(request: Request) -> Response:
    artifact = actions_state(request.state).artifacts.get(int(request.params["artifact_id"]))
    if artifact is None or artifact["_repo"] != repo_name(request):
        return not_found()
    if not request.headers.get("Authorization"):
        return Response(401, {"message": "Requires authentication"})
    location = f"{request.origin}{STORAGE_PREFIX}{artifact['id']}.zip?sig=signed-for-test"
    return Response(302, None, {"Location": location})


@route("GET", STORAGE_PREFIX + "{blob}")
def storage(request: Request) -> Response:
    authorization = request.headers.get("Authorization")
    artifact_id = int(request.params["blob"].split(".", 1)[0])
    actions_state(request.state).storage_requests.append({"artifact": artifact_id, "authorization": authorization})
    if authorization:
        return Response(
            400,
            raw=b"<Error>Authentication information is not given in the correct format</Error>",
            content_type="application/xml",
        )
    artifact = actions_state(request.state).artifacts.get(artifact_id)
    if artifact is None:
        return Response(404, raw=b"<Error>BlobNotFound</Error>", content_type="application/xml")
    return Response(200, raw=artifact["_zip"], content_type="application/zip")


def zip_directory(files: dict[str, bytes]) -> bytes:
    """A zip as upload-artifact makes it from a directory: paths relative to that directory."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            archive.writestr(name, data)
    return buffer.getvalue()


def complete_run(
    state: FakeState,
    dispatch: dict[str, Any],
    conclusion: str,
    artifacts: dict[str, bytes] | None = None,
    *,
    display_title: str | None = None,
) -> dict[str, Any]:
    """Register a completed run of `dispatch` and, when `artifacts` maps artifact names to zip
    bytes, its artifacts. The run name follows gpu-regression.yml's `run-name`."""
    full_name = dispatch["repo"]
    inputs = dispatch["inputs"]
    run_id = state.next_id()
    workflow = actions_state(state).workflows[(full_name, dispatch["workflow"])]
    title = display_title or (
        f"gpu-regression pr-{inputs.get('pr_number', '')} {inputs['head_sha']} req-{inputs.get('request_id', '')}"
    )
    base = f"{API_ORIGIN}/repos/{full_name}/actions/runs/{run_id}"
    run = {
        "id": run_id,
        "name": workflow["name"],
        "display_title": title,
        "path": workflow["path"],
        "workflow_id": workflow["id"],
        "run_number": len(actions_state(state).runs) + 1,
        "run_attempt": 1,
        "event": "workflow_dispatch",
        "status": "completed",
        "conclusion": conclusion,
        "head_branch": dispatch["ref"],
        "head_sha": "f" * 40,  # the ref's commit, not the tested one: the bot must not rely on it
        "url": base,
        "html_url": f"https://github.com/{full_name}/actions/runs/{run_id}",
        "artifacts_url": f"{base}/artifacts",
        "jobs_url": f"{base}/jobs",
        "logs_url": f"{base}/logs",
        "workflow_url": workflow["url"],
        "pull_requests": [],
        "created_at": state.now(),
        "updated_at": state.now(),
        "repository": state.repos[full_name],
        "_repo": full_name,
    }
    with state.lock:
        actions_state(state).runs[run_id] = run
        for name, data in (artifacts or {}).items():
            artifact_id = state.next_id()
            actions_state(state).artifacts[artifact_id] = {
                "id": artifact_id,
                "node_id": f"A_{artifact_id}",
                "name": name,
                "size_in_bytes": len(data),
                "url": f"{API_ORIGIN}/repos/{full_name}/actions/artifacts/{artifact_id}",
                "archive_download_url": f"{API_ORIGIN}/repos/{full_name}/actions/artifacts/{artifact_id}/zip",
                "expired": False,
                "created_at": state.now(),
                "updated_at": state.now(),
                "expires_at": state.now(),
                "workflow_run": {"id": run_id, "head_sha": run["head_sha"], "head_branch": run["head_branch"]},
                "_repo": full_name,
                "_zip": data,
            }
    return run


def workflow_run_event(state: FakeState, run: dict[str, Any], origin: str) -> dict[str, Any]:
    """A `workflow_run` `completed` delivery for `run`, based on the published example
    (shared/fixtures/github-webhooks/workflow_run/completed.payload.json)."""
    payload = load_payload("workflow_run", "completed.payload")
    example = payload["workflow_run"]
    example.update({k: copy.deepcopy(v) for k, v in run.items() if not k.startswith("_") and k != "repository"})
    example["repository"] = dict(example.get("repository") or {}, full_name=run["_repo"])
    repo = state.repos[run["_repo"]]
    payload["repository"] = dict(payload["repository"], **{k: repo[k] for k in ("id", "name", "full_name", "url")})
    payload["repository"]["owner"] = dict(payload["repository"]["owner"], login=repo["owner"]["login"])
    payload.pop("installation", None)
    return json.loads(json.dumps(payload).replace(API_ORIGIN, origin))
