"""Test-plan verification: the tests a PR body names, run at head and (if changed) against base.

The plan is the bullets under a heading containing "Test plan" (markdown `#` heading, bold line, or
`Test plan:`), up to the next heading. Test names are backticked items or bare `test_*` words;
`path::name` items keep their path. For each named test:

- `not-found` (P4): no `def <name>` in a test file at head;
- `fails-at-head` (P0): it fails or errors at head (P4 when it fails at the merge base too, where
  the engine re-runs it, `reviewbot.base_failures`: the plan names a test that was failing before);
- `fails-then-passes`: the PR adds or changes it, it passes at head and fails with the base
  revision's code and the head's test files (proof it catches the change);
- `passes-on-both` (P4): the PR adds or changes it and it also passes against the base code, so it
  does not test the change;
- `passes` : it passes at head and the PR does not touch it (no claim either way);
- `not-run`: the runner could not run it (reason given; never counted as passed).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

from reviewbot import pysource
from reviewbot.diff import FileChange
from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import SuiteConfig
from reviewbot.results.schema import SuiteResult, TestResult
from reviewbot.suites import AfterSuite, ProgressFn, run_suites

HEADING = re.compile(r"^\s*(#{1,6}\s*|\*\*|__)?\s*test[ -]?plan\b.*$", re.IGNORECASE)
NEXT_HEADING = re.compile(r"^\s*(#{1,6}\s|\*\*[^*]+\*\*\s*$)")
BULLET = re.compile(r"^\s*([-*+]|\d+[.)])\s+(.*)$")
BACKTICK = re.compile(r"`([^`]+)`")
BARE_TEST = re.compile(r"\b(test_\w+)")

FAILS_THEN_PASSES = "fails-then-passes"
PASSES_ON_BOTH = "passes-on-both"
FAILS_AT_HEAD = "fails-at-head"
NOT_FOUND = "not-found"
PASSES = "passes"
NOT_RUN = "not-run"
PLAN_TIMEOUT_S = 600.0  # the default time limit of one test-plan run


@dataclasses.dataclass(frozen=True)
class PlannedTest:
    name: str
    path_hint: str | None


@dataclasses.dataclass
class TestPlanRow:
    test: str
    status: str
    path: str = ""
    changed_by_pr: bool = False
    head_outcome: str = ""
    base_outcome: str = ""
    detail: str = ""
    # For `fails-at-head`: the failing case's node id, its failing line and its own output excerpt.
    test_id: str = ""
    line: int = 0
    excerpt: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def parse_test_plan(body: str) -> list[PlannedTest]:
    lines = body.splitlines()
    tests: list[PlannedTest] = []
    seen: set[str] = set()
    inside = False
    for line in lines:
        if HEADING.match(line):
            inside = True
            continue
        if inside and NEXT_HEADING.match(line):
            break
        if not inside:
            continue
        bullet = BULLET.match(line)
        if not bullet:
            continue
        text = bullet.group(2)
        candidates = [c.strip() for c in BACKTICK.findall(text)]
        names = []
        for cand in candidates:
            last = cand.split("::")[-1].split("[")[0].strip()
            if re.fullmatch(r"test_?\w*|Test\w*", last) or "::" in cand:
                names.append((last, cand.split("::")[0] if "::" in cand else None))
        stripped = BACKTICK.sub(" ", text)
        names += [(m, None) for m in BARE_TEST.findall(stripped)]
        for name, hint in names:
            if name not in seen:
                seen.add(name)
                tests.append(PlannedTest(name, hint))
    return tests


def _test_files(git: GitRepo, rev: str) -> list[str]:
    return [
        f
        for f in git.list_files(rev)
        if f.endswith(".py") and (f.rsplit("/", 1)[-1].startswith("test_") or f.endswith("_test.py"))
    ]


def _locate(git: GitRepo, rev: str, files: list[str], test: PlannedTest) -> tuple[str, int, int] | None:
    """(path, first line, last line) of the test's def at `rev`."""
    candidates = [test.path_hint] if test.path_hint in files else files
    for path in candidates:
        where = locate_test(git, rev, path, test.name)
        if where is not None:
            return path, *where
    return None


def locate_test(git: GitRepo, rev: str, path: str, name: str) -> tuple[int, int] | None:
    """(first line, last line) of the def or class `name` in `path` at `rev`; None if `path` does
    not exist there, does not parse, or defines no `name`. A parametrised id (`name[...]`) is
    looked up by its function name."""
    name = name.split("[")[0]
    text = git.read(rev, path)
    if text is None or name not in text:
        return None
    tree = pysource.parse(text)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node.lineno, node.end_lineno or node.lineno
    return None


def _outcome(result: SuiteResult, path: str, name: str) -> TestResult | None:
    """The worst outcome among the cases of test `name` (parametrised ids included), preferring `path`."""
    matches = [c for c in result.tests if c.name.split("[")[0] == name]
    in_path = [c for c in matches if c.id.split("::")[0] == path]
    matches = in_path or matches
    for outcome in ("error", "failed", "passed", "skipped"):
        for case in matches:
            if case.status == outcome:
                return case
    return None


def verify_test_plan(
    git: GitRepo,
    merge_base: str,
    head: str,
    body: str,
    changes: list[FileChange],
    *,
    log_dir: Path | None = None,
    timeout_s: float = PLAN_TIMEOUT_S,
    progress: ProgressFn,
    after_head: AfterSuite | None = None,
) -> list[TestPlanRow]:
    """The PR body's test plan checked at `head` (and, for tests the PR changed, against the base
    code). `after_head` is called after the head run, in its worktree (the engine measures which
    changed lines the failing tests execute)."""
    planned = parse_test_plan(body)
    if not planned:
        return []
    files = _test_files(git, head)
    changed = {c.path: c for c in changes}
    rows: list[TestPlanRow] = []
    located: list[tuple[TestPlanRow, str]] = []
    for test in planned:
        where = _locate(git, head, files, test)
        if where is None:
            rows.append(TestPlanRow(test.name, NOT_FOUND, detail="no test with this name at head"))
            continue
        path, start, end = where
        change = changed.get(path)
        touched = change is not None and (change.status == "added" or change.touches(start, end))
        row = TestPlanRow(test.name, NOT_RUN, path=path, changed_by_pr=touched)
        rows.append(row)
        located.append((row, path))
    if not located:
        return rows
    selector = " or ".join(sorted({row.test for row, _ in located}))
    paths = " ".join(sorted({p for _, p in located}))
    suite = SuiteConfig(
        "test-plan", f"python -m pytest -q -p no:cacheprovider {paths} -k '{selector}'", timeout_s=timeout_s
    )
    progress(f"test plan: running {len(located)} named test(s) at head")
    (head_result,) = run_suites(git.path, head, [suite], log_dir=log_dir, progress=progress, after_suite=after_head)
    needs_base = [(row, p) for row, p in located if row.changed_by_pr]
    base_result = None
    if needs_base and head_result.ran:
        overlay = {p: git.read(head, p) or "" for p in sorted({p for _, p in needs_base})}
        for conftest in [f for f in git.list_files(head) if f.endswith("conftest.py")]:
            overlay[conftest] = git.read(head, conftest) or ""
        base_suite = SuiteConfig("test-plan-base", suite.command, timeout_s=timeout_s)
        progress(f"test plan: running {len(needs_base)} changed test(s) against the base code")
        (base_result,) = run_suites(
            git.path, merge_base, [base_suite], log_dir=log_dir, overlay=overlay, progress=progress
        )
    for row, path in located:
        if not head_result.ran:
            row.status, row.detail = NOT_RUN, f"suite runner: {head_result.status} ({head_result.detail})"
            continue
        case = _outcome(head_result, path, row.test)
        if case is None:
            row.status, row.detail = NOT_RUN, "not collected by pytest at head"
            continue
        row.head_outcome = case.status
        if case.failed:
            row.status, row.detail = FAILS_AT_HEAD, case.summary
            row.test_id, row.line, row.excerpt = case.id, case.line, case.message or ""
            continue
        if case.status == "skipped":
            row.status, row.detail = NOT_RUN, f"skipped at head: {case.message or ''}"
            continue
        if not row.changed_by_pr:
            row.status = PASSES
            continue
        if base_result is None or (not base_result.ran and not base_result.tests):
            reason = base_result.detail if base_result else "not run"
            row.status, row.detail = NOT_RUN, f"could not run against the base code: {reason}"
            continue
        base_case = _outcome(base_result, path, row.test)
        row.base_outcome = base_case.status if base_case else "error"
        row.status = FAILS_THEN_PASSES if row.base_outcome in ("failed", "error") else PASSES_ON_BOTH
    return rows
