"""The suite runner: configured test suites run in a git worktree of one revision.

The user's checkout is never touched: `run_suites` checks the revision out into a temp worktree
(optionally overlaying files, which test-plan verification uses to run head tests against base
code), runs each suite with its own time limit in a fresh process group, collects JUnit XML
(junitparser) and keeps the log under `log_dir`. A suite that could not run (needs more GPUs than
the machine has, command not found, timed out, no JUnit report) has `status` other than
`passed`/`failed` and a plain `reason`; it is never counted as passed.

Used by `reviewbot review`, the service's `/rerun-gpu`, and the GPU workflow.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError

from junitparser import Error, Failure, JUnitXml, JUnitXmlError, Skipped

from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import RepoConfig, SuiteConfig
from reviewbot.results.junit import failing_line, failure_excerpt, node_id
from reviewbot.sandbox import Box, SandboxError, box, build_argv, child_env

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 40

# Suite status values.
PASSED = "passed"
FAILED = "failed"
TIMEOUT = "timeout"
NOT_RUN = "not-run"
ERROR = "error"


@dataclasses.dataclass
class TestCaseResult:
    """One JUnit test case. `id` is pytest's node id (`file.py::Class::name`) rebuilt from JUnit.

    For a failure or error, `excerpt` is this test's own message and traceback tail from the JUnit
    report, and `line` the deepest traceback line in the test's own file (0 when the traceback
    names none).
    """

    id: str
    name: str
    outcome: str
    message: str = ""
    duration_s: float = 0.0
    line: int = 0
    excerpt: str = ""

    @property
    def path(self) -> str:
        """The test file (the node id up to its first `::`), or "" for an id without a file."""
        return self.id.split("::")[0] if "::" in self.id else ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class SuiteResult:
    """`status`: passed | failed | timeout | not-run | error (ran but produced no usable report)."""

    name: str
    revision: str
    status: str
    command: str
    reason: str = ""
    tests: list[TestCaseResult] = dataclasses.field(default_factory=list)
    duration_s: float = 0.0
    log_path: str = ""
    junit_path: str = ""
    log_tail: str = ""
    returncode: int | None = None
    gpus: int = 0

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def ran(self) -> bool:
        return self.status in (PASSED, FAILED)

    @property
    def failures(self) -> list[TestCaseResult]:
        return [t for t in self.tests if t.outcome in ("failed", "error")]

    def counts(self) -> dict[str, int]:
        out = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        for t in self.tests:
            out[t.outcome] = out.get(t.outcome, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["counts"] = self.counts()
        return data


def reviewbot_dir(repo: Path) -> Path:
    """`<repo>/.reviewbot/`, created with a `.gitignore` of `*` so nothing in it is ever committed."""
    directory = repo / ".reviewbot"
    directory.mkdir(exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return directory


def available_gpus() -> int:
    """GPUs this machine can give a suite: `REVIEWBOT_GPUS` if set, else `nvidia-smi -L`, else 0."""
    env = os.environ.get("REVIEWBOT_GPUS")
    if env is not None:
        return int(env)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        logger.warning("nvidia-smi -L timed out; assuming no GPU")
        return 0
    return sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    text = path.read_text(errors="replace") if path.is_file() else ""
    return "\n".join(text.splitlines()[-lines:])


def parse_junit(path: Path) -> list[TestCaseResult]:
    results: list[TestCaseResult] = []
    xml = JUnitXml.fromfile(str(path))
    suites = [xml] if xml._tag == "testsuite" else list(xml)
    for suite in suites:
        for case in suite:
            test = TestCaseResult(node_id(case.classname or "", case.name), case.name, "passed")
            test.duration_s = float(case.time or 0.0)
            for res in case.result:
                if isinstance(res, (Failure, Error)):
                    test.outcome = "failed" if isinstance(res, Failure) else "error"
                    test.message = res.message or ""
                    body = res.text or ""
                    test.excerpt = failure_excerpt(test.message, body) or ""
                    test.line = failing_line(body, test.path)
                elif isinstance(res, Skipped):
                    test.outcome, test.message = "skipped", res.message or ""
            results.append(test)
    return results


ProgressFn = Callable[[str], None]


def _no_progress(_: str) -> None:
    """Progress sink that drops messages."""


def run_suites(
    repo: Path | str,
    revision: str,
    suites: Sequence[str | SuiteConfig],
    *,
    config: RepoConfig | None = None,
    log_dir: Path | None = None,
    overlay: Mapping[str, str] | None = None,
    gpus_available: int | None = None,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
    progress: ProgressFn = _no_progress,
) -> list[SuiteResult]:
    """Run `suites` (configured names, or `SuiteConfig`s) against `revision` in one temp worktree.

    `overlay` maps repo-relative paths to text written into the worktree before any suite runs.
    `timeout_s` caps every suite's own limit. `log_dir` (default
    `<repo>/.reviewbot/runs/<sha12>-<utc time>`) keeps `<suite>.log` and `<suite>.xml`.
    """
    with GitRepo(repo) as git:
        return _run_all(git, revision, suites, config, log_dir, overlay, gpus_available, timeout_s, env, progress)


def _run_all(
    git: GitRepo,
    revision: str,
    suites: Sequence[str | SuiteConfig],
    config: RepoConfig | None,
    log_dir: Path | None,
    overlay: Mapping[str, str] | None,
    gpus_available: int | None,
    timeout_s: float | None,
    env: Mapping[str, str] | None,
    progress: ProgressFn,
) -> list[SuiteResult]:
    sha = git.rev_parse(revision)
    specs: list[SuiteConfig] = []
    for s in suites:
        if isinstance(s, SuiteConfig):
            specs.append(s)
        else:
            if config is None:
                raise ValueError(f"suite {s!r} named without a RepoConfig")
            specs.append(config.suite(s))
    if log_dir is None:
        runs = reviewbot_dir(git.toplevel()) / "runs"
        runs.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        log_dir = Path(tempfile.mkdtemp(prefix=f"{sha[:12]}-{stamp}-", dir=runs))
    log_dir.mkdir(parents=True, exist_ok=True)
    gpus = available_gpus() if gpus_available is None else gpus_available

    results: list[SuiteResult] = []
    runnable: list[SuiteConfig] = []
    for spec in specs:
        if spec.gpus > gpus:
            reason = f"needs {spec.gpus} GPU(s), this machine has {gpus}"
            progress(f"suite {spec.name}: not run ({reason})")
            results.append(SuiteResult(spec.name, sha, NOT_RUN, spec.command, reason=reason, gpus=spec.gpus))
        else:
            runnable.append(spec)
    if not runnable:
        return results
    with git.worktree(sha) as tree:
        for rel, text in (overlay or {}).items():
            target = tree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        with box(tree) as runs:
            for spec in runnable:
                results.append(_run_one(spec, sha, runs, log_dir, timeout_s, env, progress))
    order = {spec.name: i for i, spec in enumerate(specs)}
    return sorted(results, key=lambda r: order.get(r.name, len(order)))


def _run_one(
    spec: SuiteConfig,
    sha: str,
    runs: Box,
    log_dir: Path,
    cap: float | None,
    env: Mapping[str, str] | None,
    progress: ProgressFn,
) -> SuiteResult:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.name)
    junit = log_dir / f"{safe}.xml"
    log = log_dir / f"{safe}.log"
    junit.unlink(missing_ok=True)
    limit = min(spec.timeout_s, cap) if cap is not None else spec.timeout_s
    argv = build_argv(spec.command, runs.scratch / junit.name)
    result = SuiteResult(spec.name, sha, ERROR, spec.command, log_path=str(log), gpus=spec.gpus)
    progress(f"suite {spec.name}: running at {sha[:12]} (limit {limit:.0f}s)")
    try:
        rc, seconds = runs.run_logged(argv, child_env(runs.tree, runs.scratch, env), limit, log)
    except FileNotFoundError as exc:
        result.status, result.reason = NOT_RUN, f"command not found: {exc.filename}"
        progress(f"suite {spec.name}: not run ({result.reason})")
        return result
    except SandboxError as exc:
        result.status, result.reason = NOT_RUN, f"the sandbox could not be built: {exc}"
        progress(f"suite {spec.name}: not run ({result.reason})")
        return result
    runs.take(junit.name, junit)
    result.returncode, result.duration_s, result.log_tail = rc, seconds, _tail(log)
    if rc is None:
        result.status, result.reason = TIMEOUT, f"killed after the {limit:.0f}s time limit"
    if junit.is_file():
        result.junit_path = str(junit)
        try:
            result.tests = parse_junit(junit)
        except (JUnitXmlError, ParseError) as exc:
            result.reason = result.reason or f"JUnit report unreadable: {exc}"
    if rc is not None:
        if not result.tests and rc not in (0, 1):
            result.reason = f"exited with code {rc} without running tests"
        elif not junit.is_file():
            result.reason = f"exited with code {rc} and wrote no JUnit report"
        elif result.failures or rc != 0:
            result.status = FAILED
        else:
            result.status = PASSED
    progress(
        f"suite {spec.name}: {result.status} in {result.duration_s:.1f}s"
        + (f" ({result.reason})" if result.reason else "")
    )
    return result
