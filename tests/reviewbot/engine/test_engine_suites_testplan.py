"""The suite runner with a real tiny pytest suite, and test-plan verification (fails-then-passes,
passes-on-both, fails-at-head, not-found) on crafted branches."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot import suites
from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity
from reviewbot.render import render_markdown
from reviewbot.repo_config import SuiteConfig, parse_config
from reviewbot.review import FailingAtBase
from reviewbot.suites import run_suites
from reviewbot.testplan import parse_test_plan
from tests.reviewbot.toy_pytest import NO_PLUGINS

CALC = """
def add(a, b):
    return a - b


def mul(a, b):
    return a * b
"""

TESTS = """
from calc import mul


def test_mul():
    assert mul(2, 3) == 6


def test_mul_fails():
    assert mul(2, 2) == 5
"""

YML = f"""
suites:
  unit:
    command: python -m pytest -q {NO_PLUGINS} tests/test_calc.py
    timeout_s: 120
    failure_means: The calculator is wrong.
  slow:
    command: python -c "import time; time.sleep(30)"
    timeout_s: 2
  gpu:
    command: python -m pytest -q {NO_PLUGINS} tests/test_calc.py
    gpus: 1
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("suites") / "r")
    repo.commit({"calc.py": CALC, "tests/test_calc.py": TESTS, ".reviewbot.yml": YML}, "base")
    repo.branch("fix-add")
    repo.commit(
        {
            "calc.py": CALC.replace("return a - b", "return a + b"),
            "tests/test_add.py": """
        from calc import add, mul


        def test_add_fixed():
            assert add(2, 3) == 5


        def test_mul_again():
            assert mul(1, 1) == 1


        def test_add_broken():
            assert add(1, 1) == 3
        """,
        },
        "fix add",
    )
    repo.checkout("main")
    return repo


PR_BODY = """## Summary
Fix `add`.

## Test plan
- `tests/test_add.py::test_add_fixed` fails before, passes after
- test_mul_again
- `test_add_broken`
- `test_does_not_exist`
- `test_mul` still passes

## Notes
- `test_ignored_after_heading`
"""


def test_parse_test_plan_reads_bullets_under_the_heading_only() -> None:
    names = [t.name for t in parse_test_plan(PR_BODY)]
    assert names == ["test_add_fixed", "test_mul_again", "test_add_broken", "test_does_not_exist", "test_mul"]
    assert parse_test_plan("**Test plan**\n* ran `test_x` and test_y\n")[1].name == "test_y"


def test_runner_runs_in_a_worktree_with_junit_logs_timeouts_and_gpu_checks(repo: Repo, tmp_path: Path) -> None:
    (repo.path / "calc.py").write_text("raise SystemExit('dirty checkout must not be used')\n")
    try:
        config = parse_config((repo.path / ".reviewbot.yml").read_text())
        results = run_suites(
            repo.path, "main", ["unit", "slow", "gpu"], config=config, log_dir=tmp_path, gpus_available=0
        )
    finally:
        repo.git("checkout", "--", "calc.py")
    unit, slow, gpu = results
    assert unit.status == "failed" and unit.ran
    assert unit.counts() == {"passed": 1, "failed": 1, "error": 0, "skipped": 0}
    assert [t.id for t in unit.failures] == ["tests/test_calc.py::test_mul_fails"]
    assert Path(unit.junit_xml).is_file() and Path(unit.log).is_file()
    assert "test_mul_fails" in unit.log_tail
    assert slow.status == "timeout" and not slow.ran and "2s" in slow.detail
    assert gpu.status == "not-run" and gpu.detail == "needs 1 GPU(s), this machine has 0"
    assert repo.git("worktree", "list").count("\n") == 1  # temp worktrees removed


def test_runner_reports_a_command_that_runs_no_tests_plainly(repo: Repo, tmp_path: Path) -> None:
    (result,) = run_suites(
        repo.path,
        "main",
        [SuiteConfig("empty", f"python -m pytest -q {NO_PLUGINS} tests/nothing_here.py")],
        log_dir=tmp_path,
    )
    assert result.status == "error" and not result.passed
    assert "exited with code 4" in result.detail


def test_a_suite_that_runs_no_tests_says_the_error_that_stopped_it(repo: Repo, tmp_path: Path) -> None:
    # the reviewed project's dependency is missing from the environment the suite runs in
    (result,) = run_suites(
        repo.path,
        "main",
        [SuiteConfig("unit", f"python -m pytest -q {NO_PLUGINS} tests/test_calc.py")],
        log_dir=tmp_path,
        overlay={"tests/conftest.py": "import no_such_dependency\n"},
    )
    assert result.status == "error" and not result.tests
    assert result.detail.startswith(f"exited with code {result.returncode} without running tests: ")
    assert result.detail.endswith("ModuleNotFoundError: No module named 'no_such_dependency'"), result.detail
    (missing,) = run_suites(repo.path, "main", [SuiteConfig("tool", 'sh -c "no_such_tool_h14"')], log_dir=tmp_path)
    assert missing.status == "error" and missing.detail.endswith("no_such_tool_h14: not found"), missing.detail


def test_an_oversized_junit_report_is_an_error_not_parsed(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(suites, "MAX_JUNIT_BYTES", 1 << 20)
    write = "import sys; open(sys.argv[1], 'w').write('<testsuite>' + ' ' * (2 << 20) + '</testsuite>')"
    (result,) = run_suites(repo.path, "main", [SuiteConfig("huge", f'python -c "{write}" {{junit}}')], log_dir=tmp_path)
    assert result.status == "error" and not result.tests
    assert result.detail == "its JUnit report is larger than 1 MiB: not read", result.detail
    assert result.junit_xml is None and not (tmp_path / "huge.xml").exists()


def test_the_review_says_why_no_suite_ran(repo: Repo, tmp_path: Path) -> None:
    gpu_only = parse_config("suites:\n  gpu_a: {command: pytest, gpus: 1}\n  gpu_b: {command: pytest, gpus: 2}\n")
    text = render_markdown(run_review(repo.path, "main", "fix-add", suites="static", config=gpu_only))
    assert (
        "No suites were run: mode `static` runs only the suites that need no GPU, and every configured suite "
        "(gpu_a, gpu_b) needs one" in text
    )
    none = render_markdown(run_review(repo.path, "main", "fix-add", suites="static", config=parse_config("")))
    assert "No suites were run: none is configured (`suites` in .reviewbot.yml)." in none
    assert "No suites were run (mode `none`)." in render_markdown(
        run_review(repo.path, "main", "fix-add", suites="none", config=gpu_only)
    )


def test_test_plan_verification_and_suite_findings(repo: Repo, tmp_path: Path) -> None:
    review = run_review(repo.path, "main", "fix-add", pr_body=PR_BODY, suites="unit", log_dir=tmp_path)
    rows = {row.test: row for row in review.test_plan}
    assert rows["test_add_fixed"].status == "fails-then-passes"
    assert (rows["test_add_fixed"].head_outcome, rows["test_add_fixed"].base_outcome) == ("passed", "failed")
    assert rows["test_mul_again"].status == "passes-on-both"
    assert rows["test_add_broken"].status == "fails-at-head"
    assert rows["test_does_not_exist"].status == "not-found"
    assert rows["test_mul"].status == "passes" and not rows["test_mul"].changed_by_pr
    plan = {(f.qualname, f.severity) for f in review.findings if f.rule == "test-plan"}
    assert plan == {
        ("test_mul_again", Severity.P4),
        ("test_add_broken", Severity.P0),
        ("test_does_not_exist", Severity.P4),
    }
    # each evidence line says what was seen: the two runs, the failing run, the static lookup
    evidence = {f.qualname: f.evidence for f in review.findings if f.rule == "test-plan"}
    assert evidence["test_mul_again"].kind is EvidenceKind.TEST and evidence["test_mul_again"].confirmed
    assert (
        evidence["test_mul_again"].text("en")
        == "`test_mul_again` ran against the base code (passed) and at head (passed)"
    )
    assert evidence["test_add_broken"].kind is EvidenceKind.TEST
    assert evidence["test_does_not_exist"].text("en") == (
        "unconfirmed: no test named `test_does_not_exist` in the head revision's files (a static lookup)"
    )
    # test_mul_fails fails at the base too: no finding of the change, listed with its suite
    assert not [f for f in review.findings if f.rule == "suite-failure"]
    assert review.failing_at_base == [FailingAtBase("unit", ("tests/test_calc.py::test_mul_fails",))]
    assert review.blocking  # the test plan's test_add_broken fails at head
    text = render_markdown(review)
    assert "| `test_add_fixed` | fails-then-passes | passed | failed |" in text
    assert "| `unit` | failed |" in text
    assert "- `unit`: 1 failing test(s) fail at the merge base too (failing before this change):" in text


def test_gpu_suite_that_could_not_run_is_never_counted_as_passed(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEWBOT_GPUS", "0")
    review = run_review(repo.path, "main", "fix-add", suites="gpu", log_dir=tmp_path)
    (result,) = review.suite_results
    assert result.status == "not-run"
    assert review.verdict.suites_not_run == 1
    text = render_markdown(review)
    assert "1 suite(s) could not run" in text and "needs 1 GPU(s)" in text
