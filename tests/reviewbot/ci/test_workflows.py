"""The workflows: structure lint (ci/workflow_lint.py, standing in for actionlint) and the GPU
workflow's security properties asserted on its YAML."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
WORKFLOWS = REPO / ".github" / "workflows"
GPU_WORKFLOW = WORKFLOWS / "gpu-regression.yml"

_spec = importlib.util.spec_from_file_location("workflow_lint", REPO / "ci" / "workflow_lint.py")
assert _spec is not None and _spec.loader is not None
workflow_lint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(workflow_lint)


@pytest.fixture(scope="module")
def gpu() -> dict[str, Any]:
    return workflow_lint.load_workflow(GPU_WORKFLOW)


def _job(gpu: dict[str, Any]) -> dict[str, Any]:
    assert list(gpu["jobs"]) == ["regression"]
    return gpu["jobs"]["regression"]


def _step(gpu: dict[str, Any], needle: str) -> dict[str, Any]:
    steps = [s for s in _job(gpu)["steps"] if needle in s.get("run", "") or needle in s.get("uses", "")]
    assert len(steps) == 1, needle
    return steps[0]


def test_every_workflow_passes_the_lint() -> None:
    paths = sorted(WORKFLOWS.glob("*.yml"))
    assert GPU_WORKFLOW in paths
    assert {p: workflow_lint.lint_workflow(p) for p in paths} == {p: [] for p in paths}
    proc = subprocess.run(
        [sys.executable, str(REPO / "ci" / "workflow_lint.py")], check=False, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(paths)} workflow(s) checked, 0 problem(s)" in proc.stderr


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda w: w["jobs"]["regression"].update(runs_on="x"), "unknown key 'runs_on'"),
        (lambda w: w["concurrency"].update({"cancel_in_progress": True}), "unknown key 'cancel_in_progress'"),
        (lambda w: w["jobs"]["regression"]["env"].update(X="${{ runner.temp }}"), "context 'runner' is not available"),
        (lambda w: w.update({"run-name": "${{ env.X }}"}), "context 'env' is not available"),
        (
            lambda w: w["jobs"]["regression"]["env"].update(X="${{ inputs.head_shaa }}"),
            "inputs.head_shaa is not a declared",
        ),
        (lambda w: w["jobs"]["regression"]["steps"][0].update(uses="actions/checkout@v4"), "either run or uses"),
        (lambda w: w["jobs"]["regression"]["steps"][0].update(run="echo ${{ github.sha"), "unclosed"),
        (lambda w: w["jobs"]["regression"]["steps"][1].update(uses="actions/checkout"), "does not match"),
        (lambda w: w["jobs"]["regression"].update(needs=["build"]), "no job named 'build'"),
        (lambda w: w["on"].update(pull_request_target=None), "unknown key 'pull_request_target'"),
        (lambda w: w.update(permissions={"contents": "admin"}), "matches none of the allowed forms"),
    ],
)
def test_lint_catches_broken_workflows(tmp_path: Path, gpu: dict[str, Any], edit, problem: str) -> None:
    broken = json.loads(json.dumps(gpu))  # deep copy
    edit(broken)
    path = tmp_path / "broken.yml"
    path.write_text(json.dumps(broken))  # JSON is YAML
    problems = workflow_lint.lint_workflow(path)
    assert any(problem in p for p in problems), problems


def test_no_workflow_runs_pull_request_target_or_sees_secrets_with_pr_code() -> None:
    for path in WORKFLOWS.glob("*.yml"):
        workflow = workflow_lint.load_workflow(path)
        assert "pull_request_target" not in workflow["on"], path.name
        assert "workflow_run" not in workflow["on"], path.name  # would run with secrets after a PR's workflow
    text = GPU_WORKFLOW.read_text()
    assert "secrets." not in text and "secrets:" not in text
    assert "GITHUB_TOKEN" not in text and "github.token" not in text


def test_triggers_and_dispatch_inputs(gpu: dict[str, Any]) -> None:
    assert set(gpu["on"]) == {"workflow_dispatch", "push"}
    assert gpu["on"]["push"] == {"branches": ["main"]}
    inputs = gpu["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"pr_number", "head_sha", "suites", "request_id"}
    assert inputs["head_sha"]["required"] is True
    assert inputs["suites"]["default"] == "all"
    assert all(spec["type"] == "string" for spec in inputs.values())
    # The bot finds its run by the request id in the run name (workflow_run.display_title).
    assert "req-{2}" in gpu["run-name"] and "inputs.request_id" in gpu["run-name"]


def test_permissions_are_read_only(gpu: dict[str, Any]) -> None:
    assert gpu["permissions"] == {"contents": "read"}
    assert _job(gpu)["permissions"] == {"contents": "read"}


def test_runner_labels_configurable_with_self_hosted_gpu_default(gpu: dict[str, Any]) -> None:
    runs_on = _job(gpu)["runs-on"]
    match = re.fullmatch(r"\$\{\{ fromJSON\(vars\.GPU_RUNNER_LABELS \|\| '(.*)'\) \}\}", runs_on)
    assert match, runs_on
    assert json.loads(match.group(1)) == ["self-hosted", "gpu"]


def test_concurrency_group_per_pr_cancels_superseded_runs(gpu: dict[str, Any]) -> None:
    concurrency = gpu["concurrency"]
    assert concurrency["cancel-in-progress"] is True
    assert "format('pr-{0}', inputs.pr_number)" in concurrency["group"]
    assert concurrency["group"].startswith("gpu-regression-")


def test_checkout_is_exactly_the_requested_sha_without_credentials(gpu: dict[str, Any]) -> None:
    job = _job(gpu)
    assert job["env"]["REVISION"] == "${{ inputs.head_sha || github.sha }}"
    checkout = _step(gpu, "actions/checkout@")
    assert checkout["with"]["ref"] == "${{ env.REVISION }}"
    assert checkout["with"]["persist-credentials"] is False
    steps = job["steps"]
    confirm = steps.index(checkout) + 1
    assert steps[confirm]["run"].strip() == 'test "$(git rev-parse HEAD)" = "$REVISION"'


def test_pr_code_steps_take_inputs_through_env_only(gpu: dict[str, Any]) -> None:
    """No ${{ }} inside any run script (script injection); no step-level env can carry a secret."""
    for step in _job(gpu)["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], step["name"]
        for value in step.get("env", {}).values():
            assert "secrets" not in str(value) and "token" not in str(value).lower()
    run = _step(gpu, "ci/run_regression.py")
    assert '--revision "$REVISION"' in run["run"] and '--suites "$SUITES"' in run["run"]
    assert run["env"] == {"OUT_DIR": "${{ runner.temp }}/gpu-regression-out"}


def test_results_and_logs_uploaded_even_on_failure(gpu: dict[str, Any]) -> None:
    upload = _step(gpu, "actions/upload-artifact@")
    assert upload["if"] == "always()"
    assert upload["with"]["name"] == "gpu-regression-results"
    assert upload["with"]["path"] == _step(gpu, "ci/run_regression.py")["env"]["OUT_DIR"]
    steps = _job(gpu)["steps"]
    assert steps.index(upload) == len(steps) - 1


@pytest.mark.parametrize(
    ("env", "ok"),
    [
        ({"REVISION": "a" * 40, "PR_NUMBER": "12", "SUITES": "all", "REQUEST_ID": "r-1"}, True),
        ({"REVISION": "a" * 40, "PR_NUMBER": "", "SUITES": "aot,fsdp_skip", "REQUEST_ID": ""}, True),
        ({"REVISION": "main", "PR_NUMBER": "12", "SUITES": "all", "REQUEST_ID": ""}, False),
        ({"REVISION": "a" * 40, "PR_NUMBER": "12; rm -rf /", "SUITES": "all", "REQUEST_ID": ""}, False),
        ({"REVISION": "a" * 40, "PR_NUMBER": "1", "SUITES": "all $(id)", "REQUEST_ID": ""}, False),
        ({"REVISION": "a" * 40, "PR_NUMBER": "1", "SUITES": "all", "REQUEST_ID": "x" * 65}, False),
    ],
)
def test_input_validation_step_runs_and_rejects_bad_inputs(gpu: dict[str, Any], env: dict[str, str], ok: bool) -> None:
    validate = _job(gpu)["steps"][0]
    assert validate["name"] == "Validate inputs"
    proc = subprocess.run(
        ["bash", "-c", validate["run"]], check=False, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True
    )
    assert (proc.returncode == 0) is ok, proc.stderr
