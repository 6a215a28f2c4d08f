"""The bot's GPU dispatch modes end to end: a real `reviewbot serve` (embedded worker) on 127.0.0.1,
the fake GitHub REST server (plus its Actions routes), a real git repository whose PR head carries
a small real suite, and real runs of `ci/run_regression.py`.

`actions`: `/rerun-gpu` -> workflow_dispatch recorded with the exact inputs -> the test plays the
self-hosted runner (runs `ci/run_regression.py` on that SHA, zips the output as upload-artifact
does) -> `workflow_run` `completed` delivered (built from the shared example
shared/fixtures/github-webhooks/workflow_run/completed.payload.json) -> the bot downloads the
artifact, reads `results.json` and updates the summary and `reviewbot/gpu-regression` once.
Also: a run without results, and a dispatched run that never completes (deadline).
`local`: the worker runs the suite itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.fake_github.routes.actions import (
    actions_state,
    add_workflow,
    complete_run,
    workflow_run_event,
    zip_directory,
)
from tests.reviewbot.service.harness import Service, Upstream, wait_until
from tests.reviewbot.toy_pytest import NO_PLUGINS

REPO_ROOT = Path(__file__).resolve().parents[3]
ACTIONS_ROUTES = "tests.reviewbot.fake_github.routes.actions"
GPU_CONTEXT = "reviewbot/gpu-regression"
MAINTAINER = "maint"
WORKFLOW_INPUTS = {"pr_number": False, "head_sha": True, "suites": False, "request_id": False}

SUITE_TESTS = """import os

import pytest


def test_no_bot_settings_or_credentials_in_reach():
    leaked = [k for k in os.environ if k.startswith(("REVIEWBOT_", "GITHUB_")) and k != "REVIEWBOT_GPUS"]
    assert not leaked, leaked


def test_add(record_testsuite_property):
    record_testsuite_property("bench.add_us", "3.5 us")
    assert 1 + 1 == 2


def test_stability_bound():
    pytest.skip("stability bound max/min < 1.2 is GPU-only (needs CUDA)")
"""
FAILING_TESTS = (
    SUITE_TESTS
    + """

def test_regressed():
    assert [1, 2] == [1, 3], "placement factor changed"
"""
)
REVIEWBOT_YML = f"""suites:
  smoke:
    command: python -m pytest -q {NO_PLUGINS} -p no:cacheprovider tests/test_smoke.py
    timeout_s: 120
    failure_means: the smoke contract broke
"""


class Project:
    """An upstream repo and its fake-GitHub twin; PR heads add the suite."""

    def __init__(self, tmp: Path, github: FakeGitHub, full_name: str, *, workflow: bool = True) -> None:
        self.github = github
        self.full_name = full_name
        self.upstream = Upstream(tmp / full_name.replace("/", "__"))
        self.base_sha = self.upstream.commit({"README.md": "base\n"}, "base")
        github.state.add_repo(full_name, clone_url=str(self.upstream.path))
        github.state.set_permission(full_name, MAINTAINER, "write")
        if workflow:
            add_workflow(github.state, full_name, "gpu-regression.yml", WORKFLOW_INPUTS)

    def open_pull(self, number: int, tests: str) -> str:
        files = {".reviewbot.yml": REVIEWBOT_YML, "tests/test_smoke.py": tests}
        sha = self.upstream.commit(files, f"PR {number}", branch=f"pr-{number}")
        self.upstream.publish_pull(number, sha)
        self.github.state.add_pull(self.full_name, number, sha, self.base_sha, head_ref=f"pr-{number}")
        return sha


def _gpu_statuses(github: FakeGitHub, project: Project, sha: str) -> list[dict[str, Any]]:
    return github.state.statuses_for(project.full_name, sha, GPU_CONTEXT)


def _final_status(github: FakeGitHub, project: Project, sha: str, timeout: float = 90) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        statuses = _gpu_statuses(github, project, sha)
        return statuses[-1] if statuses and statuses[-1]["state"] != "pending" else None

    return wait_until(final, timeout=timeout, what=f"a final {GPU_CONTEXT} status")


def _summary(github: FakeGitHub, project: Project, number: int) -> str:
    comments = [c for c in github.state.comments_on(project.full_name, number) if "reviewbot:summary" in c["body"]]
    assert len(comments) == 1, [c["body"][:80] for c in comments]
    return comments[0]["body"]


def _outcome(service: Service, response: Any) -> str:
    """What the service made of a delivery: stored at once (202), handled by a worker's ingest step."""
    assert response.status_code == 202 and response.json()["outcome"] == "accepted", response.text
    guid = response.json()["delivery"]
    rows = wait_until(
        lambda: service.query("SELECT outcome FROM deliveries WHERE guid = :g AND processed", g=guid),
        what=f"delivery {guid} to be ingested",
    )
    return rows[0].outcome


def _comment_writes(github: FakeGitHub) -> int:
    """Comment creations and edits seen by the fake GitHub (reactions excluded)."""
    return github.state.count_requests("POST", r"/issues/\d+/comments$") + github.state.count_requests(
        "PATCH", r"/issues/comments/\d+$"
    )


def _dispatch_for(github: FakeGitHub, project: Project, sha: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        for dispatch in actions_state(github.state).dispatches:
            if dispatch["repo"] == project.full_name and dispatch["inputs"]["head_sha"] == sha:
                return dispatch
        return None

    return wait_until(found, timeout=90, what=f"a workflow_dispatch for {sha[:12]}")


def _play_runner(project: Project, dispatch: dict[str, Any], out: Path) -> tuple[int, bytes]:
    """What gpu-regression.yml does on the runner: run_regression on the SHA, then zip OUT_DIR."""
    inputs = dispatch["inputs"]
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "ci" / "run_regression.py"),
            "--repo", str(project.upstream.path),
            "--revision", inputs["head_sha"],
            "--suites", inputs["suites"],
            "--out-dir", str(out),
            "--pr-number", inputs["pr_number"],
            "--request-id", inputs["request_id"],
        ],
        check=False,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "REVIEWBOT_GPUS": "0"},
        timeout=180,
    )  # fmt: skip
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    return proc.returncode, zip_directory(files)


@pytest.fixture(scope="module")
def github():
    with FakeGitHub(extra_route_modules=[ACTIONS_ROUTES]) as fake:
        yield fake


@pytest.fixture(scope="module")
def actions_service(github, tmp_path_factory):
    svc = Service(
        tmp_path_factory.mktemp("actions-service"), github, gpu_dispatch="actions", gpu_timeout_seconds=120
    ).start()
    yield svc
    svc.stop()


def test_actions_mode_dispatch_webhook_artifact_review(github, actions_service, tmp_path):
    project = Project(tmp_path, github, "octo/actions-e2e")
    sha = project.open_pull(7, FAILING_TESTS)
    assert actions_service.comment_event(project.full_name, 7, "/rerun-gpu smoke", MAINTAINER).status_code == 202

    dispatch = _dispatch_for(github, project, sha)
    request_id = dispatch["inputs"]["request_id"]
    assert dispatch["workflow"] == "gpu-regression.yml" and dispatch["ref"] == "main"
    assert dispatch["inputs"] == {"pr_number": "7", "head_sha": sha, "suites": "smoke", "request_id": request_id}
    pending = wait_until(
        lambda: [s for s in _gpu_statuses(github, project, sha) if request_id in (s["description"] or "")],
        what="the pending status naming the request",
    )
    assert [s["state"] for s in pending] == ["pending"]

    rc, artifact = _play_runner(project, dispatch, tmp_path / "runner-out")
    assert rc == 1  # one test fails
    run = complete_run(github.state, dispatch, "failure", {"gpu-regression-results": artifact})
    comment_writes_before = _comment_writes(github)
    delivery = "wr-" + request_id
    response = actions_service.deliver(
        "workflow_run", workflow_run_event(github.state, run, github.origin), delivery=delivery
    )
    assert _outcome(actions_service, response) == "queued"

    status = _final_status(github, project, sha)
    assert status["state"] == "failure" and status["description"] == "a GPU suite failed"
    body = _summary(github, project, 7)
    assert f"GitHub Actions run [{run['id']}]" in body
    assert "| `smoke` | failed | 2/4 passed, 1 failing, 1 GPU-only skipped |" in body
    assert "`tests/test_smoke.py::test_regressed` failed (the smoke contract broke)" in body
    assert "placement factor changed" in body
    assert "GPU-only checks not run here (1): `tests/test_smoke.py::test_stability_bound`" in body
    assert "| `smoke` | add_us | 3.5 us |" in body
    assert "no GPU (CPU run: GPU-only assertions skipped)" in body
    # The artifact came from storage without the API token.
    storage = actions_state(github.state).storage_requests
    assert storage and all(r["authorization"] is None for r in storage)

    # A redelivery is acknowledged without processing; the review was updated exactly once.
    again = actions_service.deliver(
        "workflow_run", workflow_run_event(github.state, run, github.origin), delivery=delivery
    )
    assert again.json()["outcome"] == "duplicate"
    actions_service.wait_jobs_settled(project.full_name, 7)
    time.sleep(0.5)
    assert _comment_writes(github) - comment_writes_before == 1
    assert [s["state"] for s in _gpu_statuses(github, project, sha)][-1] == "failure"
    assert len([s for s in _gpu_statuses(github, project, sha) if s["state"] == "failure"]) == 1


def test_actions_run_without_results_is_a_clear_error(github, actions_service, tmp_path):
    project = Project(tmp_path, github, "octo/actions-noresults")
    sha = project.open_pull(8, SUITE_TESTS)
    actions_service.comment_event(project.full_name, 8, "/rerun-gpu", MAINTAINER)
    dispatch = _dispatch_for(github, project, sha)
    assert dispatch["inputs"]["suites"] == "gpu"  # none named: every suite that asks for a GPU
    run = complete_run(github.state, dispatch, "failure")  # died before uploading anything
    response = actions_service.deliver("workflow_run", workflow_run_event(github.state, run, github.origin))
    assert _outcome(actions_service, response) == "queued"
    status = _final_status(github, project, sha)
    assert status["state"] == "error"
    assert "concluded `failure` without usable results: the run uploaded no `gpu-regression-results` artifact" in (
        _summary(github, project, 8)
    )


def test_dispatch_refused_by_github_is_a_clear_error(github, actions_service, tmp_path):
    project = Project(tmp_path, github, "octo/actions-noworkflow", workflow=False)
    sha = project.open_pull(10, SUITE_TESTS)
    actions_service.comment_event(project.full_name, 10, "/rerun-gpu smoke", MAINTAINER)
    status = _final_status(github, project, sha)
    assert status["state"] == "error"
    assert "Could not dispatch `gpu-regression.yml` on `main`: GitHub answered 404" in _summary(github, project, 10)
    assert not [d for d in actions_state(github.state).dispatches if d["repo"] == project.full_name]


def test_result_for_a_superseded_head_posts_nothing(github, actions_service, tmp_path):
    project = Project(tmp_path, github, "octo/actions-superseded")
    old = project.open_pull(11, SUITE_TESTS)
    actions_service.comment_event(project.full_name, 11, "/rerun-gpu smoke", MAINTAINER)
    dispatch = _dispatch_for(github, project, old)
    new = project.upstream.commit({"README.md": "newer\n"}, "push", branch="pr-11")
    github.state.set_head(project.full_name, 11, new)
    artifact = zip_directory({"results.json": b"{}"})
    run = complete_run(github.state, dispatch, "success", {"gpu-regression-results": artifact})
    response = actions_service.deliver("workflow_run", workflow_run_event(github.state, run, github.origin))
    assert _outcome(actions_service, response) == "queued"
    wait_until(
        lambda: [j for j in actions_service.jobs(project.full_name, 11) if j.kind == "gpu-actions-result"
                 and j.state == "superseded"],
        what="the result job to stop as superseded",
    )  # fmt: skip
    assert {s["state"] for s in _gpu_statuses(github, project, old)} == {"pending"}  # nothing final posted
    fake = actions_state(github.state)
    downloaded_runs = {fake.artifacts[r["artifact"]]["workflow_run"]["id"] for r in fake.storage_requests}
    assert run["id"] not in downloaded_runs


def test_run_cancelled_by_a_newer_dispatch_posts_nothing(github, actions_service, tmp_path):
    """The workflow's concurrency group cancels the older run of a PR; the bot posts nothing for it."""
    project = Project(tmp_path, github, "octo/actions-redispatch")
    sha = project.open_pull(12, SUITE_TESTS)
    actions_service.comment_event(project.full_name, 12, "/rerun-gpu smoke", MAINTAINER)
    first = _dispatch_for(github, project, sha)
    actions_service.comment_event(project.full_name, 12, "/rerun-gpu smoke", MAINTAINER)
    second = wait_until(
        lambda: [d for d in actions_state(github.state).dispatches if d["repo"] == project.full_name][1:],
        what="the second dispatch",
    )[0]
    assert second["inputs"]["request_id"] != first["inputs"]["request_id"]
    cancelled = complete_run(github.state, first, "cancelled")
    response = actions_service.deliver("workflow_run", workflow_run_event(github.state, cancelled, github.origin))
    assert _outcome(actions_service, response) == "queued"
    wait_until(
        lambda: [j for j in actions_service.jobs(project.full_name, 12) if j.kind == "gpu-actions-result"
                 and j.state == "superseded"],
        what="the cancelled run's result job to stop as superseded",
    )  # fmt: skip
    assert {s["state"] for s in _gpu_statuses(github, project, sha)} == {"pending"}


def test_workflow_runs_not_dispatched_by_the_bot_are_ignored(github, actions_service, tmp_path):
    project = Project(tmp_path, github, "octo/actions-push")
    push_run = complete_run(
        github.state,
        {"repo": project.full_name, "workflow": "gpu-regression.yml", "ref": "main", "inputs": {"head_sha": "a" * 40}},
        "success",
        display_title="gpu-regression push " + "a" * 40,
    )
    response = actions_service.deliver("workflow_run", workflow_run_event(github.state, push_run, github.origin))
    assert _outcome(actions_service, response) == "ignored-not-dispatched-by-bot"
    unknown = complete_run(
        github.state,
        {"repo": project.full_name, "workflow": "gpu-regression.yml", "ref": "main",
         "inputs": {"head_sha": "a" * 40, "pr_number": "1", "request_id": "999-deadbeef"}},
        "success",
    )  # fmt: skip
    response = actions_service.deliver("workflow_run", workflow_run_event(github.state, unknown, github.origin))
    assert _outcome(actions_service, response) == "ignored-unknown-request"
    broken = workflow_run_event(github.state, unknown, github.origin)
    del broken["workflow_run"]["id"]
    response = actions_service.deliver("workflow_run", broken)
    assert response.status_code == 400, response.text
    assert response.json()["reason"] == "payload lacks workflow_run.id"
    broken["workflow_run"] = "completed"
    response = actions_service.deliver("workflow_run", broken)
    assert response.status_code == 400, response.text
    assert response.json()["reason"] == "payload field workflow_run must be an object, not the string 'completed'"
    broken = workflow_run_event(github.state, unknown, github.origin)
    broken["workflow_run"]["display_title"] = ["req-999-deadbeef"]
    response = actions_service.deliver("workflow_run", broken)
    assert response.status_code == 400, response.text
    assert response.json()["reason"] == "payload field workflow_run.display_title must be a string, not an array"
    assert not [j for j in actions_service.jobs(project.full_name, 1)]
    assert actions_service.client.get("/healthz").status_code == 200, "the service keeps serving"


def test_actions_dispatch_that_never_completes_times_out(tmp_path):
    with FakeGitHub(extra_route_modules=[ACTIONS_ROUTES]) as fake:
        service = Service(tmp_path / "svc", fake, gpu_dispatch="actions", gpu_timeout_seconds=2)
        (tmp_path / "svc").mkdir()
        service.start()
        try:
            project = Project(tmp_path, fake, "octo/actions-timeout")
            sha = project.open_pull(9, SUITE_TESTS)
            service.comment_event(project.full_name, 9, "/rerun-gpu smoke", MAINTAINER)
            dispatch = _dispatch_for(fake, project, sha)
            status = _final_status(fake, project, sha, timeout=60)
            assert status["state"] == "error"
            body = _summary(fake, project, 9)
            assert "No result from `gpu-regression.yml`" in body and dispatch["inputs"]["request_id"] in body
            assert "limit 2s" in body
        finally:
            service.stop()


def test_local_mode_runs_the_suite_on_the_worker(tmp_path):
    with FakeGitHub() as fake:
        (tmp_path / "svc").mkdir()
        service = Service(tmp_path / "svc", fake, gpu_dispatch="local", gpus="0").start()
        try:
            project = Project(tmp_path, fake, "octo/local-e2e")
            sha = project.open_pull(5, SUITE_TESTS)
            service.comment_event(project.full_name, 5, "/rerun-gpu smoke", MAINTAINER)
            status = _final_status(fake, project, sha)
            body = _summary(fake, project, 5)
            assert status["state"] == "success", body
            assert f"This worker's run at `{sha[:12]}`: **all suites passed**." in body
            assert "| `smoke` | passed | 2/3 passed, 1 GPU-only skipped |" in body
            assert "| `smoke` | add_us | 3.5 us |" in body
            runs = service.query("SELECT suite, status, head_sha FROM suite_runs")
            assert [(r.suite, r.status, r.head_sha) for r in runs] == [("smoke", "passed", sha)]
            results = list((tmp_path / "svc" / "work" / "gpu-runs").glob("*/results.json"))
            assert len(results) == 1 and json.loads(results[0].read_text())["revision"] == sha
        finally:
            service.stop()
