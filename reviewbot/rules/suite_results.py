"""`suite-failure` (P0-BLOCKER) and `test-plan` findings, from suite runs and the test-plan table.

A failed or errored regression test is P0 with its id and the log tail. A suite that could not run
produces no finding: the review lists it plainly as not run, and it never counts as passed.
Test-plan rows: `fails-at-head` is P0; `passes-on-both` and `not-found` are P4.
"""

from __future__ import annotations

from reviewbot.findings import PATTERN_ONLY, Evidence, EvidenceKind, Finding, Severity
from reviewbot.repo_config import RepoConfig
from reviewbot.suites import SuiteResult
from reviewbot.testplan import FAILS_AT_HEAD, NOT_FOUND, PASSES_ON_BOTH, TestPlanRow


def from_suites(results: list[SuiteResult], config: RepoConfig) -> list[Finding]:
    findings: list[Finding] = []
    for result in results:
        means = config.suites[result.name].failure_means if result.name in config.suites else ""
        for case in result.failures:
            path = case.id.split("::")[0] if "::" in case.id else result.name
            findings.append(
                Finding(
                    rule="suite-failure",
                    severity=Severity.P0,
                    path=path,
                    line_start=0,
                    line_end=0,
                    message_id="suite-failure.test-failed",
                    params={"test": case.id, "outcome": case.outcome, "suite": result.name},
                    extra={
                        "means": means,
                        "failure": case.message,
                        "command": result.command,
                        "log_path": result.log_path,
                    },
                    qualname=case.id,
                    in_diff=False,
                    details=result.log_tail,
                    evidence=Evidence(
                        EvidenceKind.TEST,
                        "evidence.failing-test",
                        {"test": case.id, "outcome": case.outcome, "suite": result.name},
                    ),
                )
            )
    return findings


_PLAN_MESSAGES = {
    FAILS_AT_HEAD: (Severity.P0, "test-plan.fails-at-head"),
    PASSES_ON_BOTH: (Severity.P4, "test-plan.passes-on-both"),
    NOT_FOUND: (Severity.P4, "test-plan.not-found"),
}


def from_test_plan(rows: list[TestPlanRow]) -> list[Finding]:
    findings: list[Finding] = []
    for row in rows:
        if row.status not in _PLAN_MESSAGES:
            continue
        severity, message_id = _PLAN_MESSAGES[row.status]
        findings.append(
            Finding(
                rule="test-plan",
                severity=severity,
                path=row.path or "PR description",
                line_start=0,
                line_end=0,
                message_id=message_id,
                params={"test": row.test},
                extra={"detail": row.detail},
                qualname=row.test,
                in_diff=False,
                evidence=Evidence(
                    EvidenceKind.TEST,
                    "evidence.failing-test",
                    {"test": row.test, "outcome": row.head_outcome or "failed", "suite": "test plan"},
                )
                if row.status == FAILS_AT_HEAD
                else PATTERN_ONLY,
            )
        )
    return findings
