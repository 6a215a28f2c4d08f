"""Session-wide: every test runs with its home and caches in a session temp directory, and the run
fails when the user's real home (`~/.cache`, the entries of `~`) or the repository's untracked
files changed during it (`tests/home_guard.py`), naming the paths; the `--junitxml` report the run
was asked for is not a change.

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
    found = [
        line
        for line in changes(_state["before"], snapshot(real_home, REPO_ROOT))  # type: ignore[arg-type]
        if line[2:] not in _run_outputs(session.config)
    ]
    _state["changes"] = found
    if found:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _run_outputs(config: pytest.Config) -> set[str]:
    """What pytest writes for the run itself, asked on its command line (the `--junitxml` report:
    the suite runner puts it in the sandbox's home)."""
    xmlpath = config.getoption("xmlpath", None)
    return {os.path.abspath(os.path.expanduser(xmlpath))} if xmlpath else set()


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
