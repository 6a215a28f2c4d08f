"""A failing test's finding says which of the PR's changed lines the test executes: the engine re-runs
the failing tests under coverage.py (per-test contexts) in the suite's worktree, in the full suites
modes only."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.failure_coverage import Executed
from reviewbot.findings import Finding
from reviewbot.review import Review
from tests.reviewbot.toy_pytest import NO_PLUGINS

PRICING = """
def net(price, rate):
    return price * (1 - rate)


def gross(price, vat):
    return price * (1 + vat)


def rounded(value):
    return round(value, 2)
"""

# The head breaks `net` (lines 2-3) and `rounded` (line 11, which no test calls).
PRICING_HEAD = """
def net(price, rate):
    discount = price * rate
    return price + discount


def gross(price, vat):
    return price * (1 + vat)


def rounded(value):
    return round(value, 3)
"""

TESTS = """
from pricing import gross, net


def test_net():
    assert net(100, 0.25) == 75


def test_gross():
    assert gross(100, 0.5) == 150


def test_unrelated():
    assert sorted(open("data.txt").read().split()) == ["1", "2"], "own message of the unrelated failure"
"""

# The head adds a number to a data file: `test_unrelated` fails at head only, and runs no changed
# Python line (a failure at the merge base too would be no finding at all).
DATA, DATA_HEAD = "2 1\n", "2 1 3\n"

# Added by the PR, outside the suite: only the test plan runs it.
EXTRA_TESTS = """
from pricing import net


def test_net_half():
    assert net(10, 0.5) == 5
"""

PR_BODY = """Rework discounts.

## Test plan
- `test_net_half`
"""

YML = f"""
suites:
  unit:
    command: python -m pytest -q {NO_PLUGINS} --tb=short tests/test_pricing.py
    timeout_s: 120
    failure_means: Prices are wrong.
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("coverage") / "r")
    repo.commit(
        {"pricing.py": PRICING, "tests/test_pricing.py": TESTS, "data.txt": DATA, ".reviewbot.yml": YML}, "base"
    )
    repo.branch("pr")
    repo.commit(
        {"pricing.py": PRICING_HEAD, "tests/extra/test_extra.py": EXTRA_TESTS, "data.txt": DATA_HEAD},
        "rework discounts",
    )
    return repo


@pytest.fixture(scope="module")
def measured(repo: Repo, tmp_path_factory: pytest.TempPathFactory) -> Review:
    return run_review(repo.path, "main", "pr", pr_body=PR_BODY, suites="unit", log_dir=tmp_path_factory.mktemp("logs"))


def _failure(review: Review, test: str) -> Finding:
    (finding,) = [f for f in review.findings if f.rule == "suite-failure" and f.qualname == test]
    return finding


def test_the_failing_test_names_the_changed_lines_it_executes(measured: Review) -> None:
    net = _failure(measured, "tests/test_pricing.py::test_net")
    assert net.location == "tests/test_pricing.py:5"
    assert "125.0 == 75" in net.details and "own message" not in net.details
    assert net.extra["changed_run"] == "pricing.py:2-3" and net.extra["not_measured"] == ""
    assert "It executes changed lines: pricing.py:2-3." in net.why
    assert "它执行了这些改动行：pricing.py:2-3" in net.text("zh").why


def test_a_failure_that_runs_no_changed_line_says_so(measured: Review) -> None:
    unrelated = _failure(measured, "tests/test_pricing.py::test_unrelated")
    assert unrelated.location == "tests/test_pricing.py:13"
    assert "own message of the unrelated failure" in unrelated.details and "125.0" not in unrelated.details
    assert unrelated.extra["changed_run"] == "" and unrelated.extra["not_measured"] == ""
    assert "It executes none of the changed Python lines." in unrelated.why
    assert [r.status for r in measured.suite_results] == ["failed"]  # the re-run changes no result
    assert not [f for f in measured.findings if f.qualname == "tests/test_pricing.py::test_gross"]


def test_a_failing_test_plan_test_names_them_too(measured: Review) -> None:
    (plan,) = [f for f in measured.findings if f.rule == "test-plan"]
    assert plan.location == "tests/extra/test_extra.py:5" and plan.qualname == "test_net_half"
    assert "15.0 == 5" in plan.details
    # The test file is new, so its own lines are changed lines too.
    assert plan.extra["changed_run"] == "pricing.py:2-3, tests/extra/test_extra.py:5"
    assert plan.why.startswith("It executes changed lines: pricing.py:2-3, tests/extra/test_extra.py:5.")


def test_static_mode_does_not_re_run_and_says_not_measured(repo: Repo, tmp_path: Path) -> None:
    review = run_review(repo.path, "main", "pr", suites="static", log_dir=tmp_path)
    net = _failure(review, "tests/test_pricing.py::test_net")
    assert net.extra["not_measured"] == "suites mode `static` does not re-run failing tests under coverage"
    assert "Changed lines it executes: not measured (suites mode `static`" in net.why
    assert not list(tmp_path.glob("*.coverage*"))


def test_spans_of_executed_lines() -> None:
    executed = Executed({"b.py": (40,), "a.py": (12, 13, 14, 20, 22, 23)})
    assert executed.describe() == "a.py:12-14, a.py:20, a.py:22-23, b.py:40"
    assert Executed(not_measured="timed out").describe() == ""
