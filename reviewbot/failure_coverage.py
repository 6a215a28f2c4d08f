"""Which of the PR's changed lines each failing test executes, measured with coverage.py.

After a suite (or the test plan's run at head) reports failing tests, `FailureCoverage` re-runs
only those tests (their node ids), in the same worktree and box the suite ran in, under
`coverage run` with a per-test dynamic context: a small pytest plugin, written to the box's
scratch directory, switches coverage's context to each test's node id when its setup starts.
Lines run while collecting (module imports) belong to no test. The run has the suite's own time
limit. Each test's executed lines are then intersected with the head lines the PR adds or modifies.

Each failing test gets an `Executed`: the changed lines it ran, none of them, or "not measured"
with the reason (the re-run timed out or wrote no data, the test did not run again). The re-run
uses this interpreter, which has coverage.py (the `bot` extra). The engine measures only in the
suites modes that run the revision's suites in full (`all` or named suites), not in `none` or
`static`; `Measured` is what the findings read.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from coverage import CoverageData
from coverage.exceptions import DataError

from reviewbot.diff import FileChange
from reviewbot.repo_config import SuiteConfig
from reviewbot.results.junit import parse_junit_xml
from reviewbot.results.schema import SuiteResult
from reviewbot.sandbox import Box, SandboxError, child_env

PLUGIN = "reviewbot_test_context"
_PLUGIN_SOURCE = '''"""Written by reviewbot: coverage.py's dynamic context is the running test's node id."""
import coverage


def pytest_runtest_setup(item):
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(item.nodeid)
'''
MAX_TESTS = 50  # failing tests re-run per suite; more are "not measured"


@dataclasses.dataclass(frozen=True)
class Executed:
    """What one failing test executed of the changed lines: `lines` per path (sorted), or
    `not_measured` saying why nothing is known (then `lines` is empty)."""

    lines: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    not_measured: str = ""

    def describe(self) -> str:
        """``path:12-14, path:40``, or "" when it ran none of them (or was not measured)."""
        return ", ".join(f"{path}:{span}" for path in sorted(self.lines) for span in _spans(self.lines[path]))


NOT_RE_RUN = Executed(not_measured="the failing tests were not re-run under coverage")


@dataclasses.dataclass(frozen=True)
class Measured:
    """What the findings say per failing test: `by_test` (node id -> `Executed`), else `unmeasured`."""

    by_test: Mapping[str, Executed] = dataclasses.field(default_factory=dict)
    unmeasured: Executed = NOT_RE_RUN

    def params(self, test: str) -> dict[str, str]:
        """The message parameters `changed_run` and `not_measured` for failing test `test`."""
        executed = self.by_test.get(test, self.unmeasured)
        return {"changed_run": executed.describe(), "not_measured": executed.not_measured}


NOTHING_MEASURED = Measured()


def _spans(lines: Sequence[int]) -> list[str]:
    spans: list[str] = []
    start = prev = lines[0]
    for line in [*lines[1:], None]:
        if line is not None and line == prev + 1:
            prev = line
            continue
        spans.append(f"{start}-{prev}" if prev > start else str(start))
        if line is not None:
            start = prev = line
    return spans


class FailureCoverage:
    """Called by the suite runner after each suite (`run_suites(after_suite=...)`); `by_test` maps a
    failing test's node id to what it executed of `changes`."""

    def __init__(self, changes: Sequence[FileChange]) -> None:
        self.changed = {c.path: frozenset(c.added_lines) for c in changes if c.added_lines and c.is_python}
        self.by_test: dict[str, Executed] = {}

    def __call__(self, runs: Box, spec: SuiteConfig, result: SuiteResult, log_dir: Path) -> None:
        failing = [t.id for t in result.failures if t.id not in self.by_test]
        if not failing:
            return
        if not self.changed:
            self._all(failing, Executed(not_measured="the PR changes no Python line"))
            return
        measured, rest = failing[:MAX_TESTS], failing[MAX_TESTS:]
        self._all(rest, Executed(not_measured=f"only the first {MAX_TESTS} failing tests of a suite are re-run"))
        self._measure(runs, spec, measured, log_dir)

    def _all(self, tests: Sequence[str], executed: Executed) -> None:
        for test in tests:
            self.by_test[test] = executed

    def _measure(self, runs: Box, spec: SuiteConfig, tests: Sequence[str], log_dir: Path) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.name)
        plugin_dir = runs.scratch / "reviewbot-coverage"
        plugin_dir.mkdir(exist_ok=True)
        (plugin_dir / f"{PLUGIN}.py").write_text(_PLUGIN_SOURCE)
        data_name, junit_name = f"{safe}.coverage", f"{safe}.coverage.xml"
        rcfile = plugin_dir / "coveragerc"
        rcfile.write_text(f"[run]\ndata_file = {runs.scratch / data_name}\nsource = {runs.tree}\n")
        argv = [
            sys.executable,
            "-m",
            "coverage",
            "run",
            f"--rcfile={rcfile}",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            PLUGIN,
            f"--junitxml={runs.scratch / junit_name}",
            *tests,
        ]
        env = child_env(runs.tree, runs.scratch, {"PYTHONPATH": f"{runs.tree}{os.pathsep}{plugin_dir}"})
        log = log_dir / f"{safe}.coverage.log"
        try:
            rc, _ = runs.run_logged(argv, env, spec.timeout_s, log)
        except SandboxError as exc:
            self._all(tests, Executed(not_measured=f"the sandbox could not be built: {exc}"))
            return
        data, junit = log_dir / data_name, log_dir / junit_name
        if rc is None:
            self._all(tests, Executed(not_measured=f"the re-run under coverage passed the {spec.timeout_s:.0f}s limit"))
        elif not runs.take(data_name, data) or not runs.take(junit_name, junit):
            self._all(tests, Executed(not_measured=f"the re-run under coverage wrote no data (exit {rc}, log {log})"))
        else:
            self._read(runs.tree, tests, data, junit)

    def _read(self, tree: Path, tests: Sequence[str], data_path: Path, junit: Path) -> None:
        try:
            rerun = {t.id for t in parse_junit_xml(junit)[0]}
        except ValueError as exc:
            self._all(tests, Executed(not_measured=f"the re-run's JUnit report is unreadable: {exc}"))
            return
        data = CoverageData(basename=str(data_path))
        try:
            data.read()
        except DataError as exc:
            self._all(tests, Executed(not_measured=f"the re-run's coverage data is unreadable: {exc}"))
            return
        root = tree.resolve()
        hits: dict[str, dict[str, set[int]]] = {test: {} for test in tests}
        for measured in data.measured_files():
            path = Path(measured).resolve()
            if not path.is_relative_to(root):
                continue
            rel = path.relative_to(root).as_posix()
            changed = self.changed.get(rel)
            if changed is None:
                continue
            for line, contexts in data.contexts_by_lineno(measured).items():
                if line not in changed:
                    continue
                for context in contexts:
                    if context in hits:
                        hits[context].setdefault(rel, set()).add(line)
        for test in tests:
            if test not in rerun:
                self.by_test[test] = Executed(not_measured="the test did not run again under coverage")
            else:
                self.by_test[test] = Executed({p: tuple(sorted(ls)) for p, ls in hits[test].items()})
