"""`suite-failure` (P0-BLOCKER) and `test-plan` findings, from suite runs and the test-plan table.

A failed or errored regression test is P0 with its id and the log tail. A suite that could not run
produces no finding: the review lists it plainly as not run, and it never counts as passed.
Test-plan rows: `fails-at-head` is P0; `passes-on-both` and `not-found` are P4.
"""

from __future__ import annotations

from reviewbot.findings import Finding, Severity
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
                    message=f"regression test `{case.id}` {case.outcome} in suite `{result.name}`",
                    why=(means + " " if means else "") + f"Failure: {case.message or '(no message)'}",
                    fix=f"Run `{result.command}` at this revision (log: {result.log_path}) and fix the regression "
                    "before merging.",
                    message_zh=f"回归测试 `{case.id}` 在套件 `{result.name}` 中 {case.outcome}",
                    why_zh=(means + " " if means else "") + f"失败信息：{case.message or '（无）'}",
                    fix_zh=f"在此版本上运行 `{result.command}`（日志：{result.log_path}），合并前修复该回归。",
                    qualname=case.id,
                    in_diff=False,
                    details=result.log_tail,
                )
            )
    return findings


def from_test_plan(rows: list[TestPlanRow]) -> list[Finding]:
    findings: list[Finding] = []
    for row in rows:
        if row.status == FAILS_AT_HEAD:
            sev, msg, why, fix = (
                Severity.P0,
                f"test-plan test `{row.test}` fails at head",
                f"The PR says this test verifies it, but it fails: {row.detail or '(no message)'}",
                "Fix the code or the test so that it passes at head.",
            )
            zh = (
                f"测试计划中的 `{row.test}` 在 head 上失败",
                f"PR 声称该测试验证了改动，但它失败了：{row.detail or '（无）'}",
                "修复代码或测试，使其在 head 上通过。",
            )
        elif row.status == PASSES_ON_BOTH:
            sev, msg, why, fix = (
                Severity.P4,
                f"test-plan test `{row.test}` passes on both base and head: it does not test the change",
                "A test that passes without the change cannot show that the change works or guard against regressing it.",
                "Make the test exercise the new behaviour so that it fails against the base code.",
            )
            zh = (
                f"测试计划中的 `{row.test}` 在 base 和 head 上都通过：它没有测试本次改动",
                "不依赖改动也能通过的测试无法证明改动有效，也无法防止回退。",
                "让测试覆盖新行为，使其在 base 代码上失败。",
            )
        elif row.status == NOT_FOUND:
            sev, msg, why, fix = (
                Severity.P4,
                f"test-plan test `{row.test}` not found at head",
                "The PR description names a test that does not exist, so the claimed verification did not happen.",
                "Correct the name in the test plan or add the test.",
            )
            zh = (
                f"在 head 上找不到测试计划中的 `{row.test}`",
                "PR 描述中提到的测试并不存在，所声称的验证并未发生。",
                "更正测试计划中的名字，或补上该测试。",
            )
        else:
            continue
        findings.append(
            Finding(
                rule="test-plan",
                severity=sev,
                path=row.path or "PR description",
                line_start=0,
                line_end=0,
                message=msg,
                why=why,
                fix=fix,
                message_zh=zh[0],
                why_zh=zh[1],
                fix_zh=zh[2],
                qualname=row.test,
                in_diff=False,
            )
        )
    return findings
