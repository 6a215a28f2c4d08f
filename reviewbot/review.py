"""The result of one review: what changed (`ChangeSummary`), the findings, the cache-key change,
suite and test-plan results, the failing tests that fail at the merge base too (`FailingAtBase`:
not findings, listed in the suite summary), the signals of unreviewed generated code, and the
`Verdict` derived from them. The engine builds a `Review`; the renderer, the CLI and the service read it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from reviewbot import messages
from reviewbot.findings import Finding, Severity
from reviewbot.keychange import KeyChange
from reviewbot.results.schema import SuiteResult
from reviewbot.testplan import TestPlanRow


@dataclasses.dataclass(frozen=True)
class FileStat:
    path: str
    old_path: str | None
    status: str
    lines_added: int
    lines_removed: int


@dataclasses.dataclass
class ChangeSummary:
    title: str
    body: str
    branch: str
    base: str
    head: str
    merge_base: str
    commits: list[tuple[str, str]]
    areas: list[str]
    files: list[FileStat]

    @property
    def lines_added(self) -> int:
        return sum(f.lines_added for f in self.files)

    @property
    def lines_removed(self) -> int:
        return sum(f.lines_removed for f in self.files)


@dataclasses.dataclass(frozen=True)
class Signal:
    """Deterministic evidence of unreviewed generated code. `kind`: over-broad-handlers,
    unused-parameters, docs-contradict-code, silent-gates, boilerplate-guards."""

    kind: str
    count: int
    locations: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Note:
    """A line at the top of the review: what it did not check, or checked differently, and why.
    `message_id` names a `review-note.*` text of the message catalogs."""

    message_id: str
    params: dict[str, str] = dataclasses.field(default_factory=dict)

    def text(self, language: str = "en") -> str:
        return messages.render(self.message_id, self.params, language).message


@dataclasses.dataclass(frozen=True)
class FailingAtBase:
    """The failing tests of one suite that fail at the merge base too (`reviewbot.base_failures`):
    failures the change did not cause. They are no findings of the change and do not block; the
    review lists them under its suite results (the first `SHOWN` ids, then how many more), and the
    suite keeps its failed status. `tests`: node ids, in the suite's order, never empty; an id
    without `::` is a test module that could not be collected (`reviewbot.results.junit.case_id`):
    the text says how many of them ran no test."""

    SHOWN = 10

    suite: str
    tests: tuple[str, ...]

    def text(self, language: str = "en") -> str:
        params = {
            "suite": self.suite,
            "count": len(self.tests),
            "tests": self.tests[: self.SHOWN],
            "more": max(0, len(self.tests) - self.SHOWN),
            "modules": sum("::" not in test for test in self.tests),
        }
        return messages.render("suite-summary.fails-at-base", params, language).message

    def to_json(self) -> dict[str, Any]:
        return {"suite": self.suite, "count": len(self.tests), "tests": list(self.tests)}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """`failing_at_base`: how many failing tests (distinct node ids) fail at the merge base too; they
    never make the verdict blocking."""

    blocking: bool
    counts: dict[str, int]
    suites_not_run: int
    failing_at_base: int = 0

    def failing_at_base_text(self, language: str = "en") -> str:
        """The line under the verdict that says how many failures predate the change ("" for none)."""
        if not self.failing_at_base:
            return ""
        return messages.render("suite-summary.total-at-base", {"count": self.failing_at_base}, language).message


@dataclasses.dataclass
class Review:
    summary: ChangeSummary
    findings: list[Finding]
    key_change: KeyChange | None
    suite_results: list[SuiteResult]
    test_plan: list[TestPlanRow]
    signals: list[Signal]
    language: str
    suites_mode: str
    timings: dict[str, float]
    notes: list[Note] = dataclasses.field(default_factory=list)
    # the suites the configuration names (run or not): says why none ran when none did
    suites_configured: list[str] = dataclasses.field(default_factory=list)
    # per suite, its failing tests that fail at the merge base too (suites without any left out)
    failing_at_base: list[FailingAtBase] = dataclasses.field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        counts = Counter(f.severity.value for f in self.findings)
        return Verdict(
            blocking=counts[Severity.P0.value] > 0,
            counts={sev.value: counts[sev.value] for sev in Severity},
            suites_not_run=sum(1 for r in self.suite_results if not r.ran),
            failing_at_base=len({test for f in self.failing_at_base for test in f.tests}),
        )

    @property
    def blocking(self) -> bool:
        return self.verdict.blocking

    @property
    def invalidates_cache(self) -> bool:
        return self.key_change is not None and self.key_change.invalidates

    def to_json(self) -> dict[str, Any]:
        verdict = self.verdict
        return {
            "verdict": {
                "blocking": verdict.blocking,
                "counts": verdict.counts,
                "suites_not_run": verdict.suites_not_run,
                "failing_at_base": verdict.failing_at_base,
            },
            "summary": {
                **{k: v for k, v in dataclasses.asdict(self.summary).items() if k != "files"},
                "files": [dataclasses.asdict(f) for f in self.summary.files],
                "lines_added": self.summary.lines_added,
                "lines_removed": self.summary.lines_removed,
            },
            "findings": [f.to_json() for f in self.findings],
            "key_change": self.key_change.to_json() if self.key_change else None,
            "invalidates_cache": self.invalidates_cache,
            "suite_results": [r.to_json() for r in self.suite_results],
            "failing_at_base": [f.to_json() for f in self.failing_at_base],
            "test_plan": [r.to_json() for r in self.test_plan],
            "signals": [dataclasses.asdict(s) for s in self.signals],
            "language": self.language,
            "suites_mode": self.suites_mode,
            "timings": self.timings,
            "notes": [note.text(self.language) for note in self.notes],
            "suites_configured": self.suites_configured,
        }
