"""A failing test that also fails at the merge base is not a blocker of the change: the engine
re-runs the head's failing tests at the base (`reviewbot.base_failures`), on a real git repo with a
real pytest suite. A regression, and a failing test the change adds, stay P0."""

from __future__ import annotations

from pathlib import Path

from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity
from reviewbot.render import render_markdown
from reviewbot.repo_config import parse_config
from tests.reviewbot.toy_pytest import NO_PLUGINS

CALC = "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a * b  # broken before the change\n"
TESTS = (
    "from calc import add, div\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_div():\n    assert div(6, 3) == 2\n"
)
CONFIG = f"suites:\n  unit:\n    command: python -m pytest -q {NO_PLUGINS} tests/test_calc.py\n    timeout_s: 120\n"


def test_a_test_failing_before_the_change_is_a_note_not_a_blocker(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    repo.commit({"calc.py": CALC, "tests/test_calc.py": TESTS, ".reviewbot.yml": CONFIG}, "base")
    repo.branch("change")
    repo.commit(
        {
            "calc.py": CALC.replace("return a + b", "return a + b + 1"),
            "tests/test_calc.py": TESTS + "\n\ndef test_new():\n    assert add(1, 1) == 2\n",
        },
        "break add, add a test",
    )
    review = run_review(repo.path, "main", "change", suites="static", config=parse_config(CONFIG))
    failures = {f.params["test"]: f for f in review.findings if f.rule == "suite-failure"}
    assert set(failures) == {
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::test_div",
        "tests/test_calc.py::test_new",
    }
    regression, before, added = (
        failures[f"tests/test_calc.py::{name}"] for name in ("test_add", "test_div", "test_new")
    )
    assert regression.severity is Severity.P0 and regression.message_id == "suite-failure.test-failed"
    assert added.severity is Severity.P0, "a failing test the change adds is the change's, not pre-existing"
    assert before.severity is Severity.P4 and before.message_id == "suite-failure.pre-existing"
    assert before.evidence.kind is EvidenceKind.TEST and before.evidence.params == {
        "test": "tests/test_calc.py::test_div",
        "base": "failed",
    }
    assert "failing_at_base" in review.timings
    text = render_markdown(review)
    assert "`tests/test_calc.py::test_div` also failed when re-run at the merge base" in text, text
    assert "and it fails at the merge base too" in text
