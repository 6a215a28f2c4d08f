"""The session guard of tests/conftest.py: tests run with a home of their own, and a write to the
real home fails the run naming the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.home_guard import ISOLATED_VARIABLES, changes, isolate, snapshot

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_this_session_runs_in_a_home_of_its_own() -> None:
    home = Path(os.environ["HOME"])
    assert home.name.startswith("reviewbot-tests-home-") and Path.home() == home
    for name in ISOLATED_VARIABLES:
        assert Path(os.environ[name]).is_relative_to(home), name
    assert subprocess.run(["git", "config", "user.email"], capture_output=True, text=True, check=True).stdout == (
        "tests@example.invalid\n"
    )


def _git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    (path / ".gitignore").write_text("ignored/\n")
    return path


def test_changes_name_new_changed_and_removed_paths(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", _git_repo(tmp_path / "repo")
    (home / ".cache" / "tool").mkdir(parents=True)
    (home / ".cache" / "tool" / "old").write_text("1")
    (home / ".profile").write_text("x")
    before = snapshot(home, repo)
    assert changes(before, snapshot(home, repo)) == []
    (home / ".cache" / "tool" / "new").write_text("2")
    (home / ".cache" / "tool" / "old").write_text("changed")
    (home / ".local").mkdir()
    (repo / "ignored").mkdir()
    (repo / "ignored" / "out.txt").write_text("3")
    (repo / "__pycache__").mkdir()  # Python's own cache in the tree is not a test's doing
    (repo / "__pycache__" / "m.pyc").write_text("4")
    (home / ".profile").unlink()
    assert changes(before, snapshot(home, repo)) == [
        f"+ {home}/.cache/tool/new",
        f"~ {home}/.cache/tool/old",
        f"+ {home}/.local",
        f"- {home}/.profile",
        f"+ {repo}/ignored/out.txt",
    ]


def test_isolate_points_every_variable_into_the_home(tmp_path: Path) -> None:
    environ: dict[str, str] = {"HOME": "/root", "PATH": "/bin"}
    isolate(tmp_path, environ)
    assert environ["PATH"] == "/bin" and environ["HOME"] == str(tmp_path)
    assert all(Path(environ[name]).is_relative_to(tmp_path) for name in ISOLATED_VARIABLES)


INNER = """
import os
from pathlib import Path

def test_writes_its_own_home():
    (Path.home() / ".cache" / "fine").write_text("in the session home")

def test_leaks_into_the_real_home():
    Path(os.environ["LEAK_TARGET"]).write_text("leaked")
"""


def test_a_write_to_the_real_home_fails_the_run(tmp_path: Path) -> None:
    real_home = tmp_path / "real-home"
    (real_home / ".cache").mkdir(parents=True)
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text(INNER)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ISOLATED_VARIABLES},
        "HOME": str(real_home),
        "PYTHONPATH": str(REPO_ROOT),
        "LEAK_TARGET": str(real_home / ".cache" / "leak"),
        # the inner run loads the project's conftest by -p; this venv's other pytest plugins add ~1 s
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider", str(inner)]
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert "2 passed" in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout
    assert "tests wrote outside their temp directories" in proc.stdout
    assert f"+ {real_home}/.cache/leak" in proc.stdout
    assert "fine" not in proc.stdout.split("tests wrote outside")[1]
    assert sorted(p.name for p in (real_home / ".cache").iterdir()) == ["leak"]


def test_the_junit_report_asked_for_is_not_a_leak(tmp_path: Path) -> None:
    # the suite runner (reviewbot.suites, ci/run_regression.py) runs pytest in a sandbox whose HOME
    # is its scratch directory and asks for the JUnit report there
    real_home = tmp_path / "real-home"
    (real_home / ".cache").mkdir(parents=True)
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text(INNER)
    report = real_home / "suite.xml"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ISOLATED_VARIABLES},
        "HOME": str(real_home),
        "PYTHONPATH": str(REPO_ROOT),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    argv += [f"--junitxml={report}", "-k", "own_home", str(inner)]
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tests wrote outside" not in proc.stdout and report.is_file()
