"""`ci/run_regression.py` on CPU: real suites (pytest in a worktree of the revision, through the
engine's suite runner) in a temp git repository, run as the workflow runs it (a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviewbot.repo_config import parse_config
from reviewbot.results import RegressionResults
from reviewbot.results.run import select_suites
from tests.reviewbot.toy_pytest import NO_PLUGINS

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "ci" / "run_regression.py"

GOOD_TESTS = """import pytest


def test_contract(record_testsuite_property):
    record_testsuite_property("bench.median_ms", 1.5)
    assert sum([1, 2]) == 3


def test_stability_bound():
    pytest.skip("max/min < 1.2 is GPU-only: needs CUDA")
"""
BROKEN_GOOD_TESTS = GOOD_TESTS.replace("== 3", "== 4")
BAD_TESTS = """def test_key_stable():
    assert {"a": 1} == {"a": 2}, "cache key changed"
"""
SLOW_TESTS = """import time


def test_slow():
    time.sleep(60)
"""
CONFIG = f"""suites:
  good:
    command: python -m pytest -q {NO_PLUGINS} -p no:cacheprovider tests/test_good.py
    gpus: 1
    timeout_s: 120
    failure_means: the harness contract broke
  bad:
    command: python -m pytest -q {NO_PLUGINS} -p no:cacheprovider tests/test_bad.py
    failure_means: differently placed inputs share a key
  slow:
    command: python -m pytest -q {NO_PLUGINS} -p no:cacheprovider tests/test_slow.py
    timeout_s: 2
  crash:
    command: python -c "raise SystemExit(3)"
"""


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, str]:
    """Two commits: the first has the good suite passing; HEAD breaks it (so --revision matters)."""
    path = tmp_path_factory.mktemp("project")
    _git(path, "init", "-q", "-b", "main")
    files = {
        ".reviewbot.yml": CONFIG,
        "tests/test_good.py": GOOD_TESTS,
        "tests/test_bad.py": BAD_TESTS,
        "tests/test_slow.py": SLOW_TESTS,
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "suites")
    first = _git(path, "rev-parse", "HEAD")
    (path / "tests/test_good.py").write_text(BROKEN_GOOD_TESTS)
    _git(path, "commit", "-q", "-am", "break good")
    return path, first


def _run(repo: Path, out: Path, *args: str, gpus: str = "0") -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT), "REVIEWBOT_GPUS": gpus}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--repo", str(repo), "--out-dir", str(out), *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_cpu_run_of_a_gpu_suite_passes_and_reports_gpu_only_skips(repo, tmp_path):
    path, first = repo
    out = tmp_path / "out"
    proc = _run(path, out, "--revision", first, "--suites", "good", "--cpu", "--request-id", "r-1", "--pr-number", "4")
    assert proc.returncode == 0, proc.stderr
    results = RegressionResults.read(out / "results.json")
    assert results.revision == first and results.request_id == "r-1" and results.pr_number == 4
    assert results.environment.gpu_count == 0 and results.environment.torch
    (suite,) = results.suites
    assert (suite.name, suite.status, suite.gpus) == ("good", "passed", 1)
    assert [(t.id, t.status, t.gpu_only) for t in suite.tests] == [
        ("tests/test_good.py::test_contract", "passed", False),
        ("tests/test_good.py::test_stability_bound", "skipped", True),
    ]
    assert [(b.name, b.value) for b in suite.bench] == [("median_ms", 1.5)]
    assert (out / suite.junit_xml).is_file() and (out / suite.log).is_file()
    assert "GPU-ONLY SKIP tests/test_good.py::test_stability_bound" in proc.stderr
    assert "PASSED: 1 suites: 1 passed" in proc.stderr
    # The user's checkout (HEAD, where the suite is broken) was not touched or used.
    assert "== 4" in (path / "tests/test_good.py").read_text()
    assert _git(path, "worktree", "list").count("\n") == 0


def test_gpu_suite_on_a_machine_without_gpu_is_not_run_and_fails_the_run(repo, tmp_path):
    path, first = repo
    proc = _run(path, tmp_path / "out", "--revision", first, "--suites", "good")
    assert proc.returncode == 1
    (suite,) = RegressionResults.read(tmp_path / "out" / "results.json").suites
    assert suite.status == "not-run" and suite.detail == "needs 1 GPU(s), this machine has 0"


def test_every_failure_kind_fails_the_run(repo, tmp_path):
    path, _ = repo
    out = tmp_path / "out"
    proc = _run(path, out, "--suites", "all", gpus="1")
    assert proc.returncode == 1
    data = json.loads((out / "results.json").read_text())
    statuses = {s["name"]: s["status"] for s in data["suites"]}
    assert statuses == {"good": "failed", "bad": "failed", "slow": "timeout", "crash": "error"}
    suites = {s.name: s for s in RegressionResults.read(out / "results.json").suites}
    assert suites["bad"].tests[0].status == "failed" and "cache key changed" in suites["bad"].tests[0].message
    assert suites["bad"].failure_meaning == "differently placed inputs share a key"
    assert suites["slow"].detail.startswith("killed after the 2s time limit")
    assert suites["crash"].detail.startswith("exited with code 3")
    assert "FAILED: 4 suites: 2 failed, 1 timeout, 1 error" in proc.stderr


def test_bad_arguments_exit_2(repo, tmp_path):
    path, _ = repo
    unknown = _run(path, tmp_path / "a", "--suites", "good,nope")
    assert unknown.returncode == 2
    assert "unknown suite(s) nope; configured: good, bad, slow, crash" in unknown.stderr
    missing = _run(path, tmp_path / "b", "--revision", "0" * 40)
    assert missing.returncode == 2 and "is not a commit" in missing.stderr
    assert not (tmp_path / "a" / "results.json").exists()


def test_suite_selection_keywords():
    config = parse_config(CONFIG)
    assert select_suites(config, "all") == ["good", "bad", "slow", "crash"]
    assert select_suites(config, "gpu") == ["good"]
    assert select_suites(config, "cpu") == ["bad", "slow", "crash"]
    assert select_suites(config, "crash, good,crash") == ["crash", "good"]
    with pytest.raises(ValueError, match="no suite named"):
        select_suites(config, " , ")


def test_import_path_needs_only_pyyaml_beyond_torch():
    """The H200 image has torch, pytest and pyyaml but not the bot's service extras: the runner
    must start with those blocked."""
    blocked = ("github", "fastapi", "uvicorn", "unidiff", "sqlalchemy", "jinja2", "requests", "junitparser")
    code = (
        f"import sys\nfor m in {blocked!r}: sys.modules[m] = None\n"
        "import runpy\nsys.argv = ['run_regression', '--help']\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--out-dir" in proc.stdout and "--cpu" in proc.stdout
