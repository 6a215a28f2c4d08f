"""A failing test that also fails at the merge base is no finding of the change: the engine re-runs
the head's failing tests at the base (`reviewbot.base_failures`), on a real git repo with a real
pytest suite, and the review lists them in its suite summary (Markdown, both languages, and JSON)
without blocking. A regression, and a failing test the change adds, stay P0. A test-plan test that
fails on both revisions is a P4 note on the plan, not a blocker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity
from reviewbot.render import render_markdown
from reviewbot.render.terminal import to_terminal
from reviewbot.repo_config import parse_config
from reviewbot.review import FailingAtBase
from tests.reviewbot.toy_pytest import NO_PLUGINS

CALC = "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a * b  # broken before the change\n"
TESTS = (
    "from calc import add, div\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_div():\n    assert div(6, 3) == 2\n"
)
# twelve more tests that fail at the base and at head: the summary shows ten of the thirteen
MANY = (
    "\n\nimport pytest\n\n\n@pytest.mark.parametrize('n', range(12))\ndef test_many(n):\n    assert div(n, 1) == -1\n"
)
CONFIG = f"suites:\n  unit:\n    command: python -m pytest -q {NO_PLUGINS} tests/test_calc.py\n    timeout_s: 120\n"
DIV = "tests/test_calc.py::test_div"


def test_a_regression_and_an_added_test_block_a_failure_from_before_is_listed(tmp_path: Path) -> None:
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
    assert set(failures) == {"tests/test_calc.py::test_add", "tests/test_calc.py::test_new"}
    regression, added = failures["tests/test_calc.py::test_add"], failures["tests/test_calc.py::test_new"]
    assert regression.severity is Severity.P0 and regression.message_id == "suite-failure.test-failed"
    assert regression.evidence.kind is EvidenceKind.TEST
    assert added.severity is Severity.P0, "a failing test the change adds is the change's, not from before"
    assert review.failing_at_base == [FailingAtBase("unit", (DIV,))]
    assert review.blocking and review.verdict.failing_at_base == 1
    (unit,) = review.suite_results
    assert unit.status == "failed", "a failure from before still fails the suite"
    assert "failing_at_base" in review.timings
    text = render_markdown(review)
    assert "1 failing test(s) fail at the merge base too" in text, text
    assert f"- `unit`: 1 failing test(s) fail at the merge base too (failing before this change): `{DIV}`\n" in text
    assert "| `unit` | failed |" in text
    data = review.to_json()
    assert data["failing_at_base"] == [{"suite": "unit", "count": 1, "tests": [DIV]}]
    assert data["verdict"]["failing_at_base"] == 1 and data["verdict"]["blocking"]
    assert DIV not in {f["qualname"] for f in data["findings"]}


@pytest.fixture(scope="module")
def before_only(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """A change that breaks no test, on a base whose `test_div` and twelve `test_many` cases fail."""
    repo = Repo(tmp_path_factory.mktemp("before") / "repo")
    repo.commit({"calc.py": CALC, "tests/test_calc.py": TESTS + MANY, ".reviewbot.yml": CONFIG}, "base")
    repo.branch("change")
    repo.commit({"calc.py": CALC + "\n\ndef neg(a):\n    return -a\n"}, "add neg")
    return repo


def test_failures_that_all_predate_the_change_give_no_finding_and_do_not_block(before_only: Repo) -> None:
    review = run_review(before_only.path, "main", "change", suites="static", config=parse_config(CONFIG))
    assert not [f for f in review.findings if f.rule in ("suite-failure", "test-plan")], review.findings
    assert not review.blocking
    many = tuple(f"tests/test_calc.py::test_many[{n}]" for n in range(12))
    assert review.failing_at_base == [FailingAtBase("unit", (DIV, *many))]
    assert review.verdict.failing_at_base == 13
    (unit,) = review.suite_results
    assert unit.status == "failed" and unit.ran
    text = render_markdown(review)
    assert "**Verdict: not blocking**" in text
    assert "13 failing test(s) fail at the merge base too: they were failing before this change" in text
    shown = ", ".join(f"`{test}`" for test in (DIV, *many[:9]))
    line = (
        f"- `unit`: 13 failing test(s) fail at the merge base too (failing before this change): {shown}, and 3 more\n"
    )
    assert line in text, text
    assert "test_many[9]" not in text.split("### 3.")[1].split("**Timing**")[0], "past the cap: counted, not named"
    zh = render_markdown(review, "zh")
    assert "有 13 个失败的测试在合并基点上同样失败" in zh
    assert (
        f"- `unit`：13 个失败的测试在合并基点上同样失败（本次改动之前就已失败）：`{DIV}`、" in zh
        and "，另有 3 个" in zh
    )
    assert "unit: 13 failing test(s) fail at the merge base too" in to_terminal(text)
    data = json.loads(json.dumps(review.to_json()))
    assert data["failing_at_base"] == [{"suite": "unit", "count": 13, "tests": [DIV, *many]}]
    assert data["verdict"] == {
        "blocking": False,
        "counts": {sev.value: 0 for sev in Severity},
        "suites_not_run": 0,
        "failing_at_base": 13,
    }


PLAN = "## Summary\nAdd neg.\n\n## Test plan\n- `tests/test_calc.py::test_div` passes\n"


def test_a_test_plan_test_failing_on_both_revisions_is_a_note_on_the_plan(before_only: Repo) -> None:
    review = run_review(before_only.path, "main", "change", pr_body=PLAN, suites="static", config=parse_config(CONFIG))
    (row,) = review.test_plan
    assert (row.status, row.head_outcome, row.base_outcome) == ("fails-at-head", "failed", "failed")
    (note,) = [f for f in review.findings if f.rule in ("suite-failure", "test-plan")]
    assert note.rule == "test-plan" and note.severity is Severity.P4
    assert note.message_id == "test-plan.fails-on-both"
    assert note.evidence.kind is EvidenceKind.TEST and note.evidence.params == {"test": DIV, "base": "failed"}
    assert not review.blocking
    text = render_markdown(review)
    assert "| `test_div` | fails-at-head | failed | failed |" in text
    assert f"test-plan test `{DIV}` failed at head, and at the merge base too" in text
    assert f"`{DIV}` also failed when re-run at the merge base with the base's own tests" in text


def test_a_test_plan_test_is_re_run_at_the_base_without_a_suite(before_only: Repo) -> None:
    review = run_review(before_only.path, "main", "change", pr_body=PLAN, suites="static", config=parse_config(""))
    assert not review.suite_results and not review.failing_at_base
    (note,) = [f for f in review.findings if f.rule == "test-plan"]
    assert (note.severity, note.message_id) == (Severity.P4, "test-plan.fails-on-both")
    assert not review.blocking


def test_a_test_plan_test_the_change_breaks_stays_a_blocker(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    repo.commit({"calc.py": CALC, "tests/test_calc.py": TESTS}, "base")
    repo.branch("change")
    repo.commit({"calc.py": CALC.replace("return a + b", "return a - b")}, "break add")
    body = "## Test plan\n- `tests/test_calc.py::test_add`\n"
    review = run_review(repo.path, "main", "change", pr_body=body, suites="static", config=parse_config(""))
    (row,) = review.test_plan
    assert (row.status, row.base_outcome) == ("fails-at-head", "passed")
    (finding,) = [f for f in review.findings if f.rule == "test-plan"]
    assert (finding.severity, finding.message_id) == (Severity.P0, "test-plan.fails-at-head")
    assert review.blocking and not review.failing_at_base


# found on Lightning-AI/litgpt: its test modules import `lightning`, which the review's environment
# lacks, so every module fails to be collected at head and at the base (49 P0s before); a module
# the change adds fails the same way (P0 before) and the injection said "no test executes" it
PKG = "import missing_dependency_xyz\n\n\ndef half(x):\n    return x / 2\n"
OLD_TEST = "from pkg import half\n\n\ndef test_half():\n    assert half(4) == 2\n"
WITH_HANDLER = PKG + (
    "\n\ndef checked(x):\n    try:\n        return half(x)\n    except Exception:\n        return 0\n"
)
ENV_CONFIG = f"suites:\n  unit:\n    command: python -m pytest -q {NO_PLUGINS} tests\n    timeout_s: 120\n"


def test_modules_the_environment_cannot_import_are_from_before_or_unconfirmed(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    repo.commit(
        {
            "pkg/__init__.py": PKG,
            "tests/test_old.py": OLD_TEST,
            "tests/test_older.py": OLD_TEST.replace("test_half", "test_half_again"),
            ".reviewbot.yml": ENV_CONFIG,
        },
        "base",
    )
    repo.branch("change")
    repo.commit(
        {"pkg/__init__.py": WITH_HANDLER, "tests/test_new.py": OLD_TEST.replace("half(4)", "half(8) / 2")}, "add"
    )
    said: list[str] = []
    review = run_review(
        repo.path, "main", "change", suites="static", config=parse_config(ENV_CONFIG), progress=said.append
    )
    assert review.failing_at_base == [FailingAtBase("unit", ("tests/test_old.py", "tests/test_older.py"))]
    # found on xdit-project/xDiT: the experiment ran the suite once per handler to see the same
    # import errors; it now says why from the suite's own run
    assert not [line for line in said if line.startswith("exception injection: AssertionError at")], said
    # found on xdit-project/xDiT (`diffusers` missing): the line called the modules "failing tests"
    # and did not say that none of their tests ran
    line = review.failing_at_base[0].text("en")
    assert line.endswith(
        "`tests/test_older.py`; 2 of them are test modules that could not be collected (imported), here and "
        "at the merge base: none of their tests ran"
    ), line
    assert "其中 2 个是无法收集（导入）的测试模块" in review.failing_at_base[0].text("zh")
    # modules that ran no test have no time to show: no timing table (xDiT's listed them at 0.00 s)
    assert "**Timing**" not in render_markdown(review), render_markdown(review)
    (new,) = [f for f in review.findings if f.rule == "suite-failure"]
    assert new.params["test"] == "tests/test_new.py" and new.severity is Severity.P2
    assert new.evidence.message_id == "evidence.environment-lacks-module" and not new.evidence.confirmed
    assert new.evidence.text("en") == (
        "unconfirmed: the review's environment lacks `missing_dependency_xyz` (No module named "
        "'missing_dependency_xyz'), and 2 test(s) failing at the merge base too fail on the same absence: "
        "this failure shows nothing about the change"
    )
    assert not review.blocking
    (handler,) = [f for f in review.findings if f.rule == "broad-except"]
    assert handler.evidence.text("en").endswith(
        "the exception injection experiment could not run: suite unit: 3 test module(s) could not be "
        "imported (ModuleNotFoundError: No module named 'missing_dependency_xyz')"
    ), handler.evidence.text("en")


def test_a_new_test_missing_a_package_the_repository_does_not_provide_is_unconfirmed(tmp_path: Path) -> None:
    # found on pytorch/torchft: a test module the change adds imports `parameterized`, a test
    # dependency the review's environment lacks and no base test uses: a P0 blocker before. Near
    # miss: a new test importing a module of the repository's own package that does not exist
    config = f"suites:\n  unit:\n    command: python -m pytest -q {NO_PLUGINS} tests\n    timeout_s: 120\n"
    repo = Repo(tmp_path / "repo")
    repo.commit({"pkg/__init__.py": "def half(x):\n    return x / 2\n", "tests/test_old.py": OLD_TEST}, "base")
    repo.branch("change")
    repo.commit(
        {
            "tests/test_params.py": "import absent_test_helper_xyz\n\n" + OLD_TEST,
            "tests/test_ops.py": "from pkg.ops import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
        },
        "add",
    )
    review = run_review(repo.path, "main", "change", suites="static", config=parse_config(config))
    found = {f.params["test"]: f for f in review.findings if f.rule == "suite-failure"}
    assert set(found) == {"tests/test_params.py", "tests/test_ops.py"}
    params = found["tests/test_params.py"]
    assert params.severity is Severity.P2 and not params.evidence.confirmed
    assert params.evidence.message_id == "evidence.environment-lacks-package"
    assert "lacks `absent_test_helper_xyz`" in params.evidence.text("en")
    assert "absent_test_helper_xyz" in params.evidence.text("zh")
    ops = found["tests/test_ops.py"]
    assert (ops.severity, ops.evidence.message_id) == (Severity.P0, "evidence.failing-test")
    assert review.blocking
