"""`suite-failure` (P0-BLOCKER) and `test-plan` findings, from suite runs and the test-plan table.

One finding per failing test: a failed or errored regression test is P0 (its evidence is the
failing test itself), anchored to the deepest traceback line in the test's own file (else the
test's def), with that test's own message and output excerpt from the JUnit report, and the PR's
changed lines it executes (`reviewbot.failure_coverage`; "not measured" with the reason where the
failing tests were not re-run under coverage). A test that
fails in a suite and is also named in the PR's test plan is reported once, as the suite failure,
which says that the plan names it. A failing test whose error is the absence of a package
(`ModuleNotFoundError`) that tests failing at the merge base too also miss is P2, not P0: the
review's environment lacks that package, which shows nothing about the change (a new test module
importing the project). So is one missing a package no file of the head revision provides (a
third-party test dependency the environment lacks, pytorch/torchft's `parameterized`): the test
never ran; if the change added the dependency, the finding asks to declare it. A test that also fails at the merge base (with the base's own
test files, `reviewbot.base_failures`) was failing before the change: it is no finding of the
change; `failing_at_base` lists it per suite for the review's suite summary, and its suite keeps
its failed status. A suite that could not run produces no finding either: the review lists it
plainly as not run, and it never counts as passed.
Test-plan rows: `fails-at-head` is P0, or P4 `test-plan.fails-on-both` when the test fails at the
merge base too (the plan names a test that was failing before: no verification of the change);
`passes-on-both` and `not-found` are P4.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence

from reviewbot.base_failures import FAILING
from reviewbot.diff import FileChange
from reviewbot.failure_coverage import NOTHING_MEASURED, Measured
from reviewbot.findings import Evidence, EvidenceKind, Finding, Severity
from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.closure import SOURCE_DIRS
from reviewbot.repo_config import RepoConfig
from reviewbot.results.schema import SuiteResult
from reviewbot.review import FailingAtBase
from reviewbot.testplan import FAILS_AT_HEAD, NOT_FOUND, PASSES_ON_BOTH, TestPlanRow, locate_test


@dataclasses.dataclass(frozen=True)
class TestAnchor:
    """Anchors failing tests in the head revision: the line to report and whether the PR changed it."""

    git: GitRepo
    head: str
    changes: Sequence[FileChange]

    def anchor(self, path: str, name: str, line: int) -> tuple[int, bool]:
        """(line, in_diff) for test `name` in `path`: `line` when known (> 0), else the test's def
        line at head, else 0 (the finding is then anchored to the file only)."""
        if line <= 0 and path:
            where = locate_test(self.git, self.head, path, name.split("::")[-1])
            line = where[0] if where is not None else 0
        in_diff = line > 0 and any(c.path == path and c.touches(line, line) for c in self.changes)
        return line, in_diff

    def provides(self, module: str) -> bool:
        """Whether a file of the head revision can be top-level module `module`: a directory or a
        file of that name at the root or in a source directory (`src/`, `python/`), a source file
        of an extension included."""
        prefixes = tuple(f"{where}{module}{end}" for where in SOURCE_DIRS for end in ("/", "."))
        return any(path.startswith(prefixes) for path in self.git.list_files(self.head))


def from_suites(
    results: list[SuiteResult],
    config: RepoConfig,
    anchor: TestAnchor,
    planned: Collection[str] = (),
    executed: Measured = NOTHING_MEASURED,
    at_base: Mapping[str, str] | None = None,
) -> list[Finding]:
    """One P0 per failing test id (a test failing in several suites is reported for the first).
    `planned`: node ids of failing tests the PR's test plan names. `executed`: the changed lines
    each failing test executes (or why that is not known). `at_base`: outcomes at the merge base
    of failing tests re-run there; one that failed or errored there too gives no finding (see
    `failing_at_base`)."""
    at_base = at_base or {}
    absent = _absent_at_base(results, at_base)
    findings: list[Finding] = []
    seen: set[str] = set()
    for result in results:
        means = config.suites[result.name].failure_means if result.name in config.suites else ""
        for case in result.failures:
            if case.id in seen or at_base.get(case.id) in FAILING:
                continue
            seen.add(case.id)
            line, in_diff = anchor.anchor(case.path, case.name, case.line)
            params = {"test": case.id, "outcome": case.status, "suite": result.name}
            severity, evidence = Severity.P0, Evidence(EvidenceKind.TEST, "evidence.failing-test", dict(params))
            module = _missing_module(case.message)
            if module in absent:
                severity = Severity.P2
                evidence = Evidence(
                    EvidenceKind.TEST,
                    "evidence.environment-lacks-module",
                    {"module": module, "count": absent[module]},
                    shows_harm=False,
                )
            elif module is not None and not anchor.provides(module):
                severity = Severity.P2
                evidence = Evidence(
                    EvidenceKind.TEST, "evidence.environment-lacks-package", {"module": module}, shows_harm=False
                )
            findings.append(
                Finding(
                    rule="suite-failure",
                    severity=severity,
                    path=case.path or result.name,
                    line_start=line,
                    line_end=line,
                    message_id="suite-failure.test-failed",
                    params=params,
                    extra={
                        "means": means,
                        "failure": case.summary,
                        "command": result.command,
                        "log_path": result.log,
                        "planned": case.id in planned,
                        **executed.params(case.id),
                    },
                    qualname=case.id,
                    in_diff=in_diff,
                    details=case.message or "",
                    evidence=evidence,
                )
            )
    return findings


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def _missing_module(message: str | None) -> str | None:
    """The top-level package of the last `ModuleNotFoundError` in a failure text, if any."""
    found = _MISSING_MODULE.findall(message or "")
    return found[-1].split(".")[0] if found else None


def _absent_at_base(results: list[SuiteResult], at_base: Mapping[str, str]) -> dict[str, int]:
    """Top-level package -> how many tests failing at the merge base too failed on its absence
    (`No module named ...`): a package the review's environment lacks, not one the change
    removed."""
    absent: dict[str, int] = {}
    for case in {case.id: case for result in results for case in result.failures}.values():
        module = _missing_module(case.message)
        if module is not None and at_base.get(case.id) in FAILING:
            absent[module] = absent.get(module, 0) + 1
    return absent


def failing_at_base(results: list[SuiteResult], at_base: Mapping[str, str]) -> list[FailingAtBase]:
    """Per suite of `results` (in their order), its failing tests whose outcome in `at_base` (the
    merge base's, `reviewbot.base_failures`) is failed or errored too; suites with none are left out.
    A test failing in several suites is listed under each."""
    listed: list[FailingAtBase] = []
    for result in results:
        tests = tuple(dict.fromkeys(case.id for case in result.failures if at_base.get(case.id) in FAILING))
        if tests:
            listed.append(FailingAtBase(result.name, tests))
    return listed


_PLAN_MESSAGES = {
    FAILS_AT_HEAD: (Severity.P0, "test-plan.fails-at-head"),
    PASSES_ON_BOTH: (Severity.P4, "test-plan.passes-on-both"),
    NOT_FOUND: (Severity.P4, "test-plan.not-found"),
}


def _plan_evidence(row: TestPlanRow) -> Evidence:
    """What backs a test-plan finding: the failing run (and the merge base's, when it failed there
    too), the runs on both revisions, or the lookup."""
    if row.status == FAILS_AT_HEAD and row.base_outcome in FAILING:
        return Evidence(EvidenceKind.TEST, "evidence.fails-at-base", {"test": row.test_id, "base": row.base_outcome})
    if row.status == FAILS_AT_HEAD:
        params = {"test": row.test_id or row.test, "outcome": row.head_outcome or "failed", "suite": "test plan"}
        return Evidence(EvidenceKind.TEST, "evidence.failing-test", params)
    if row.status == PASSES_ON_BOTH:
        params = {"test": row.test, "base": row.base_outcome, "head": row.head_outcome}
        return Evidence(EvidenceKind.TEST, "evidence.test-plan-ran", params)
    return Evidence(EvidenceKind.PATTERN, "evidence.test-plan-lookup", {"test": row.test})


def from_test_plan(
    rows: list[TestPlanRow], anchor: TestAnchor, reported: Collection[str] = (), executed: Measured = NOTHING_MEASURED
) -> list[Finding]:
    """Findings for test-plan rows; a `fails-at-head` row whose failing test id is in `reported`
    (already a suite-failure finding) gives none; it says which changed lines the test executes.
    A `fails-at-head` row whose `base_outcome` is failed or errored (the engine fills it in from the
    re-run at the merge base) is P4 `test-plan.fails-on-both`, not a blocker."""
    findings: list[Finding] = []
    for row in rows:
        if row.status not in _PLAN_MESSAGES:
            continue
        failing = row.status == FAILS_AT_HEAD
        if failing and row.test_id in reported:
            continue
        severity, message_id = _PLAN_MESSAGES[row.status]
        if failing and row.base_outcome in FAILING:
            severity, message_id = Severity.P4, "test-plan.fails-on-both"
        line, in_diff = anchor.anchor(row.path, row.test, row.line) if row.path else (0, False)
        findings.append(
            Finding(
                rule="test-plan",
                severity=severity,
                path=row.path or "PR description",
                line_start=line,
                line_end=line,
                message_id=message_id,
                params={"test": row.test},
                extra={
                    "detail": row.detail,
                    "test_id": row.test_id,
                    "outcome": row.head_outcome,
                    **(executed.params(row.test_id) if failing else {}),
                },
                qualname=row.test,
                in_diff=in_diff,
                details=row.excerpt,
                evidence=_plan_evidence(row),
            )
        )
    return findings
