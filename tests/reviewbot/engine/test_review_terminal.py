"""`reviewbot review` for a person at a terminal: plain text (no HTML), coloured by severity on a
real terminal (a pty) unless NO_COLOR or TERM=dumb; the saved file stays GitHub markdown."""

from __future__ import annotations

import errno
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot.render.terminal import SEVERITY_COLOURS, to_terminal, wants_colour
from reviewbot.severity import Severity
from tests.reviewbot.toy_pytest import NO_PLUGINS

ROOT = Path(__file__).resolve().parents[3]
BASE = "def run(fn):\n    return fn()\n"
FALLBACK = BASE + "\n\ndef fallback(fn):\n    try:\n        return fn()\n    except Exception:\n        return None\n"
SUITE = f"suites:\n  unit:\n    command: python -m pytest -q {NO_PLUGINS} tests/test_mod.py\n    timeout_s: 120\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("term") / "r")
    repo.commit({"pkg/mod.py": BASE}, "base")
    repo.branch("feature")
    repo.commit(
        {
            "pkg/mod.py": FALLBACK,
            "tests/test_mod.py": "def test_fallback_propagates():\n    assert False, 'fallback hid the error'\n",
            ".reviewbot.yml": SUITE,
        },
        "add fallback",
    )
    repo.checkout("main")
    return repo


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _argv(repo: Repo, *args: str) -> list[str]:
    return [sys.executable, "-m", "reviewbot", "review", "--repo", str(repo.path), "--head", "feature", *args]


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run with stdout on a pseudo-terminal; (exit code, what it printed)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError as exc:  # EIO: the terminal's other side closed
            assert exc.errno == errno.EIO, exc
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=120), b"".join(chunks).decode().replace("\r\n", "\n")


def _latest_saved(repo: Repo) -> str:
    saved = sorted((repo.path / ".reviewbot" / "reviews").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    return saved[-1].read_text()


def test_text_format_has_no_html_and_the_saved_file_stays_markdown(repo: Repo) -> None:
    proc = subprocess.run(
        _argv(repo, "--suites", "unit", "--format", "text"), capture_output=True, text=True, env=_env(), check=False
    )
    assert proc.returncode == 1, proc.stderr  # the failing test confirms the blocker
    out = proc.stdout
    for markup in ("<!--", "<sub>", "</sub>", "<details>", "<summary>", "```", "| --- |", "**", "`", "\033["):
        assert markup not in out, markup
    assert out.startswith("Review: ")
    assert "Verdict: BLOCKING" in out and "P0-BLOCKER (1)" in out
    assert "Test output (JUnit):" in out and "fallback hid the error" in out  # the <details> block, opened
    # the suite table in aligned columns
    header = next(line for line in out.splitlines() if line.startswith("Suite ") and "Result" in line)
    row = next(line for line in out.splitlines() if line.startswith("unit "))
    assert row.index("failed") == header.index("Result")
    saved = _latest_saved(repo)
    assert saved.startswith("<!-- reviewbot:review -->") and "<details><summary>" in saved


def test_markdown_is_the_default_when_not_on_a_terminal(repo: Repo) -> None:
    proc = subprocess.run(_argv(repo, "--suites", "none"), capture_output=True, text=True, env=_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("<!-- reviewbot:review -->") and "<sub>" in proc.stdout


def test_on_a_terminal_text_is_the_default_coloured_by_severity(repo: Repo) -> None:
    rc, out = _on_a_terminal(_argv(repo, "--suites", "none"), _env(TERM="xterm-256color"))
    assert rc == 0
    assert "<!--" not in out and "<sub>" not in out
    assert f"{SEVERITY_COLOURS[Severity.P2]}P2-MAINTAIN\033[0m" in out  # the unconfirmed broad handler


@pytest.mark.parametrize("env", [{"NO_COLOR": "1", "TERM": "xterm"}, {"TERM": "dumb"}])
def test_no_color_and_dumb_terminals_get_plain_text(repo: Repo, env: dict[str, str]) -> None:
    rc, out = _on_a_terminal(_argv(repo, "--suites", "none"), _env(**env))
    assert rc == 0
    assert "P2-MAINTAIN" in out and "\033[" not in out and "<!--" not in out


def test_markdown_format_on_a_terminal_stays_markdown(repo: Repo) -> None:
    rc, out = _on_a_terminal(_argv(repo, "--suites", "none", "--format", "markdown"), _env(TERM="xterm"))
    assert rc == 0
    assert out.startswith("<!-- reviewbot:review -->") and "\033[" not in out


def test_to_terminal_aligns_wide_cells_and_unescapes_pipes() -> None:
    md = "## T\n\n| a | b |\n| --- | --- |\n| `中文` | x \\| y |\n| long cell | z |\n\n<sub>foot</sub>\n"
    lines = to_terminal(md).splitlines()
    assert lines == ["T", "", "a          b", "中文       x | y", "long cell  z", "", "foot"]


def test_wants_colour_only_for_terminals(tmp_path: Path) -> None:
    with open(tmp_path / "f", "w") as not_a_tty:
        assert not wants_colour(not_a_tty, {"TERM": "xterm"})
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as tty:
        assert wants_colour(tty, {"TERM": "xterm"})
        assert wants_colour(tty, {"TERM": "xterm", "NO_COLOR": ""})  # empty means unset (no-color.org)
        assert not wants_colour(tty, {"TERM": "xterm", "NO_COLOR": "1"})
        assert not wants_colour(tty, {"TERM": "dumb"})
    os.close(leader)
