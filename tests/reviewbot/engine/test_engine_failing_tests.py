"""Failing tests in a real review: one finding per failing test (a suite failure that the test plan
also names is reported once), anchored to the test's own file and failing line, with that test's
own message and output from the JUnit report (not the suite log's end)."""

from __future__ import annotations

import pytest
from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity
from reviewbot.render import render_markdown
from reviewbot.review import Review
from tests.reviewbot.toy_pytest import NO_PLUGINS

SHAPES = """
def area(w, h):
    return w * h


def perimeter(w, h):
    return 2 * (w + h)
"""

OLD_TESTS = """
from shapes import area, perimeter


def test_area():
    assert area(2, 3) == 6


class TestPerimeter:
    def test_square(self):
        assert perimeter(1, 1) == 4
"""

NEW_TESTS = """
from shapes import area


def helper(value):
    assert value == 9, "area of 3x3 must be 9"


def test_area_via_helper():
    helper(area(3, 3))


def test_not_named_anywhere():
    raise KeyError("missing-shape")
"""

YML = f"""
suites:
  unit:
    command: python -m pytest -q {NO_PLUGINS} --tb=short tests/test_shapes.py
    timeout_s: 120
    failure_means: Shape formulas are wrong.
"""

PR_BODY = """## Summary
Rework the shape formulas.

## Test plan
- `test_area`
- `tests/test_new.py::test_area_via_helper`
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> Review:
    root = tmp_path_factory.mktemp("failing")
    repo = Repo(root / "r")
    repo.commit({"shapes.py": SHAPES, "tests/test_shapes.py": OLD_TESTS, ".reviewbot.yml": YML}, "base")
    repo.branch("rework")
    repo.commit(
        {"shapes.py": SHAPES.replace("w * h", "w + h").replace("2 * (w + h)", "w + h"), "tests/test_new.py": NEW_TESTS},
        "rework shapes",
    )
    return run_review(repo.path, "main", "rework", pr_body=PR_BODY, suites="unit", log_dir=root / "logs")


def test_each_failing_test_is_one_p0_backed_by_that_test(review: Review) -> None:
    failing = [f for f in review.findings if f.evidence.kind is EvidenceKind.TEST]
    ids = sorted(f.evidence.params["test"] for f in failing)
    assert ids == [
        "tests/test_new.py::test_area_via_helper",
        "tests/test_shapes.py::TestPerimeter::test_square",
        "tests/test_shapes.py::test_area",
    ]
    assert all(f.severity is Severity.P0 for f in failing)
    # test_area fails in the suite and is named in the plan: reported once, as the suite failure.
    assert not [f for f in review.findings if f.rule == "test-plan" and f.qualname == "test_area"]
    (area,) = [f for f in failing if f.qualname == "tests/test_shapes.py::test_area"]
    assert area.rule == "suite-failure"
    assert "test plan names this test" in area.why and "Shape formulas are wrong." in area.why
    rows = {row.test: row.status for row in review.test_plan}
    assert rows == {"test_area": "fails-at-head", "test_area_via_helper": "fails-at-head"}


def test_suite_failures_are_anchored_to_their_own_line_with_their_own_output(review: Review) -> None:
    by_id = {f.qualname: f for f in review.findings if f.rule == "suite-failure"}
    area = by_id["tests/test_shapes.py::test_area"]
    square = by_id["tests/test_shapes.py::TestPerimeter::test_square"]
    assert (area.path, area.line_start, area.line_end) == ("tests/test_shapes.py", 5, 5)
    assert (square.path, square.line_start) == ("tests/test_shapes.py", 10)
    assert area.location == "tests/test_shapes.py:5" and not area.in_diff  # the PR did not touch that file
    assert "5 == 6" in area.details and "2 == 4" not in area.details
    assert "2 == 4" in square.details and "5 == 6" not in square.details
    assert "missing-shape" not in area.details + square.details


def test_a_test_plan_failure_has_a_location_and_an_explanation(review: Review) -> None:
    (plan,) = [f for f in review.findings if f.rule == "test-plan"]
    assert plan.qualname == "test_area_via_helper"
    # The deepest frame in the test's own file: the helper's assertion; the PR adds that file.
    assert (plan.path, plan.line_start) == ("tests/test_new.py", 5) and plan.in_diff
    assert "tests/test_new.py::test_area_via_helper" in plan.message
    assert "area of 3x3 must be 9" in plan.why and "area of 3x3 must be 9" in plan.details
    assert "5 == 6" not in plan.details and "missing-shape" not in plan.details


def test_the_markdown_quotes_each_failure_once_under_its_own_finding(review: Review) -> None:
    text = render_markdown(review)
    for location in ("tests/test_shapes.py:5", "tests/test_shapes.py:10", "tests/test_new.py:5"):
        assert text.count(f"**`{location}`**") == 1, location
    assert text.count("Test output (JUnit)") == 3
    zh = render_markdown(review, "zh")
    assert zh.count("测试输出（JUnit）") == 3 and "PR 的测试计划声称该测试验证了本次改动" in zh
