"""Session-wide: every test runs with its home and caches in a session temp directory, and the run
fails when the user's real home (`~/.cache`, the entries of `~`) or the repository's untracked
files changed during it (`tests/home_guard.py`), naming the paths.

On a machine where other programs write to `~/.cache` while the tests run, those writes fail the
run too: the check cannot tell who wrote.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.home_guard import changes, isolate, snapshot

REPO_ROOT = Path(__file__).resolve().parents[1]
_state: dict[str, object] = {}


def pytest_configure(config: pytest.Config) -> None:
    real_home = Path(os.environ.get("HOME") or os.path.expanduser("~"))
    session_home = Path(tempfile.mkdtemp(prefix="reviewbot-tests-home-"))
    _state.update(real_home=real_home, session_home=session_home, before=snapshot(real_home, REPO_ROOT))
    isolate(session_home, os.environ)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if "before" not in _state:
        return
    real_home = _state["real_home"]
    assert isinstance(real_home, Path)
    found = changes(_state["before"], snapshot(real_home, REPO_ROOT))  # type: ignore[arg-type]
    _state["changes"] = found
    if found:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    found = _state.get("changes")
    if found:
        terminalreporter.section("tests wrote outside their temp directories", red=True)
        for line in found:  # type: ignore[union-attr]
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    session_home = _state.pop("session_home", None)
    if isinstance(session_home, Path):
        shutil.rmtree(session_home)
