"""The suite runner: configured test suites run in a git worktree of one revision.

The user's checkout is never touched: `run_suites` checks the revision out into a temp worktree
(optionally overlaying files, which test-plan verification uses to run head tests against base
code), runs each suite with its own time limit in a fresh process group, collects JUnit XML
(`reviewbot.results.junit`) and keeps the log under `log_dir`. Each suite gives one
`reviewbot.results.schema.SuiteResult`. A suite that could not run (needs more GPUs than the
machine has, command not found, timed out, no usable JUnit report) has `status` other than
`passed`/`failed` and a plain `detail`; it is never counted as passed.

Used by `reviewbot review`, the service's `/rerun-gpu`, and the GPU workflow.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import RepoConfig, SuiteConfig
from reviewbot.results.junit import parse_junit_xml
from reviewbot.results.schema import ERROR, FAILED, NOT_RUN, PASSED, TIMEOUT, SuiteResult
from reviewbot.sandbox import Box, SandboxError, box, build_argv, child_env

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 40


# a suite's JUnit report is parsed in the reviewing process: a larger one is an error, not read
# (a 100 MB report took 1.1 GB of memory and 12 s to parse; pytest writes about 0.5 KB a test)
MAX_JUNIT_BYTES = 32 * 1024 * 1024


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


def _cause(log_tail: str) -> str:
    """`: LINE` for the last line of a log tail that names an error (`ModuleNotFoundError: ...`,
    pytest's `E   ...`, `ERROR: ...`, a program that cannot be executed), else "": why a suite ran
    no test."""
    for line in reversed(log_tail.splitlines()):
        text = line.removeprefix("E").strip() if line.startswith("E ") else line.strip()
        if re.search(
            r"\b\w*(Error|Exception)\b|^ERROR\b|^error:|No such file or directory|command not found|: not found$", text
        ):
            return f": {text[:200]}"
    return ""


ProgressFn = Callable[[str], None]
# Called after each suite that ran, in the same worktree and box, with the log directory.
AfterSuite = Callable[[Box, SuiteConfig, SuiteResult, Path], None]


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
    after_suite: AfterSuite | None = None,
) -> list[SuiteResult]:
    """Run `suites` (configured names, or `SuiteConfig`s) against `revision` in one temp worktree.

    `overlay` maps repo-relative paths to text written into the worktree before any suite runs.
    `timeout_s` caps every suite's own limit. `after_suite` is called after each suite that
    started, before the worktree goes (the engine re-runs failing tests under coverage there). `log_dir` (default
    `<repo>/.reviewbot/runs/<sha12>-<utc time>`) keeps `<suite>.log` and `<suite>.xml`.
    """
    with GitRepo(repo) as git:
        return _run_all(
            git, revision, suites, config, log_dir, overlay, gpus_available, timeout_s, env, progress, after_suite
        )


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
    after_suite: AfterSuite | None,
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
            results.append(
                SuiteResult(spec.name, NOT_RUN, 0.0, gpus=spec.gpus, detail=reason, revision=sha, command=spec.command)
            )
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
                result = _run_one(spec, sha, runs, log_dir, timeout_s, env, progress)
                results.append(result)
                if after_suite is not None and result.status != NOT_RUN:
                    after_suite(runs, spec, result, log_dir)
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
    result = SuiteResult(spec.name, ERROR, 0.0, gpus=spec.gpus, log=str(log), revision=sha, command=spec.command)
    progress(f"suite {spec.name}: running at {sha[:12]} (limit {limit:.0f}s)")
    try:
        rc, seconds = runs.run_logged(argv, child_env(runs.tree, runs.scratch, env), limit, log)
    except FileNotFoundError as exc:
        return _not_run(result, f"command not found: {exc.filename}", progress)
    except SandboxError as exc:
        return _not_run(result, f"the sandbox could not be built: {exc}", progress)
    runs.take(junit.name, junit, limit_bytes=MAX_JUNIT_BYTES + 1)
    result = dataclasses.replace(result, returncode=rc, duration_s=seconds, log_tail=_tail(log))
    status, detail = ERROR, ""
    if rc is None:
        status, detail = TIMEOUT, f"killed after the {limit:.0f}s time limit"
    if junit.is_file() and junit.stat().st_size > MAX_JUNIT_BYTES:
        junit.unlink()
        detail = detail or f"its JUnit report is larger than {MAX_JUNIT_BYTES >> 20} MiB: not read"
    elif junit.is_file():
        result = dataclasses.replace(result, junit_xml=str(junit))
        try:
            tests, bench = parse_junit_xml(junit)
        except ValueError as exc:
            detail = detail or f"JUnit report unreadable: {exc}"
        else:
            result = dataclasses.replace(result, tests=tuple(tests), bench=tuple(bench))
    if rc is not None and not detail:
        if not result.tests and rc not in (0, 1):
            detail = f"exited with code {rc} without running tests" + _cause(result.log_tail)
        elif not junit.is_file():
            detail = f"exited with code {rc} and wrote no JUnit report"
        elif result.failures or rc != 0:
            status = FAILED
        else:
            status = PASSED
    result = dataclasses.replace(result, status=status, detail=detail or None)
    progress(f"suite {spec.name}: {result.status} in {result.duration_s:.1f}s" + (f" ({detail})" if detail else ""))
    return result


def _not_run(result: SuiteResult, reason: str, progress: ProgressFn) -> SuiteResult:
    progress(f"suite {result.name}: not run ({reason})")
    return dataclasses.replace(result, status=NOT_RUN, detail=reason)
