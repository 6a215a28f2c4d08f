"""One regression run: the configured suites of a revision through the suite runner, into `results.json`.

This is the body of `ci/run_regression.py` (the GPU workflow's entry point) and of the bot's
`local` GPU dispatch mode, which runs it as ``python -m reviewbot.results.run`` in a child process.
The suites themselves run through `reviewbot.suites.run_suites` (worktree of the revision, time
limit per suite, JUnit XML, logs); this module only selects them, converts their reports and
writes the output directory::

    OUT_DIR/results.json          the versioned summary (reviewbot.results.schema)
    OUT_DIR/suites/<suite>.xml    JUnit XML per suite
    OUT_DIR/suites/<suite>.log    the suite's combined stdout/stderr

The suites are read from the `.reviewbot.yml` of the revision under test. Exit status: 0 when
every selected suite passed, 1 when any failed, errored, timed out or could not run (and when no
suite was selected), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from reviewbot.gitrepo import GitError, GitRepo
from reviewbot.repo_config import RepoConfig, SuiteConfig, load_config
from reviewbot.results.environment import collect_environment
from reviewbot.results.schema import RegressionResults, SuiteResult
from reviewbot.suites import run_suites

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.json"
SUITES_DIR = "suites"
DETAIL_LOG_LINES = 20
# names `select_suites` takes for a group of the configured suites rather than one suite
SUITE_GROUPS: dict[str, Callable[[SuiteConfig], bool]] = {
    "all": lambda suite: True,
    "gpu": lambda suite: suite.gpus > 0,
    "cpu": lambda suite: suite.gpus == 0,
}


def select_suites(config: RepoConfig, spec: str | Sequence[str]) -> list[str]:
    """Suite names from ``"all"``, ``"gpu"`` (suites asking for a GPU), ``"cpu"`` (suites asking for
    none), or a comma-separated list (or a sequence of names). Keywords keep config order; a list
    keeps its order. Unknown names raise ValueError listing the known ones."""
    names = [n.strip() for n in (spec.split(",") if isinstance(spec, str) else spec) if n.strip()]
    if len(names) == 1 and names[0] in SUITE_GROUPS:
        selected = [n for n, suite in config.suites.items() if SUITE_GROUPS[names[0]](suite)]
        if not selected:
            configured = ", ".join(config.suites) or "none"
            raise ValueError(f"--suites {names[0]!r} matched no suite (nothing to run); configured: {configured}")
        return selected
    unknown = [n for n in names if n not in config.suites]
    if unknown:
        raise ValueError(f"unknown suite(s) {', '.join(unknown)}; configured: {', '.join(config.suites) or 'none'}")
    if not names:
        raise ValueError("no suite named (use 'all' for every configured suite)")
    return list(dict.fromkeys(names))


def convert_suite(result: SuiteResult, failure_meaning: str, out_dir: Path) -> SuiteResult:
    """The runner's result of one suite as a `results.json` entry: its failure meaning, paths
    relative to `out_dir`, times rounded, and the log's end in `detail` when the suite did not run
    to a usable report."""
    detail = result.detail
    if result.status in ("error", "timeout", "not-run") and result.log_tail:
        tail = "\n".join(result.log_tail.splitlines()[-DETAIL_LOG_LINES:])
        detail = f"{detail}\n{tail}" if detail else tail
    junit = Path(result.junit_xml) if result.junit_xml else None
    return dataclasses.replace(
        result,
        duration_s=round(result.duration_s, 3),
        failure_meaning=failure_meaning,
        detail=detail,
        junit_xml=_relative(junit, out_dir) if junit is not None and junit.is_file() else None,
        log=_relative(Path(result.log), out_dir) if result.log else None,
    )


def _relative(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def run_regression(
    repo: Path,
    revision: str,
    out_dir: Path,
    suites: str | Sequence[str] = "all",
    *,
    request_id: str | None = None,
    pr_number: int | None = None,
    gpus_available: int | None = None,
    cpu: bool = False,
    timeout_cap_s: float | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> RegressionResults:
    """Run the selected suites of `revision` and write `out_dir/results.json`; returns what it wrote.

    `cpu`: start every selected suite whatever GPU count it asks for (a CPU run: the suites skip
    their GPU-only assertions, and results.json lists those skips). Otherwise a suite that needs
    more GPUs than `gpus_available` (default: detected) is reported `not-run`. `timeout_cap_s`
    caps every suite's own time limit."""
    started = _now()
    out_dir = out_dir.resolve()  # the suites run in a worktree elsewhere: their report paths must be absolute
    with GitRepo(repo) as git:
        if git.git("rev-parse", "--git-dir", check=False).strip() == "":
            raise ValueError(f"--repo {repo} is not a git repository")
        if not git.has_revision(revision):
            raise ValueError(f"revision {revision!r} is not a commit in {repo}")
        sha = git.rev_parse(revision)
    config = load_config(repo, sha)
    names = select_suites(config, suites)
    out_dir.mkdir(parents=True, exist_ok=True)
    environment = collect_environment()
    progress(
        f"environment: torch {environment.torch}, CUDA {environment.cuda}, "
        f"{environment.gpu_count} GPU(s) {environment.gpu_model or ''}".rstrip()
    )
    if cpu:
        gpus_available = max((config.suite(n).gpus for n in names), default=0)
        progress("CPU run: suites start regardless of their GPU count; GPU-only assertions skip (listed below)")
    runner_results = run_suites(
        repo,
        sha,
        names,
        config=config,
        log_dir=out_dir / SUITES_DIR,
        gpus_available=gpus_available,
        timeout_s=timeout_cap_s,
        progress=progress,
    )
    results = RegressionResults(
        revision=sha,
        request_id=request_id,
        pr_number=pr_number,
        started_at=started,
        finished_at=_now(),
        environment=environment,
        suites=tuple(convert_suite(r, config.suite(r.name).failure_means, out_dir) for r in runner_results),
    )
    results.write(out_dir / RESULTS_FILE)
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_regression",
        description="Run the regression suites of .reviewbot.yml on one revision; write JUnit XML, logs and "
        "results.json; exit 1 on any failed, errored, timed-out or not-run suite.",
    )
    parser.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: current directory)")
    parser.add_argument("--revision", default="HEAD", help="commit to test (default: HEAD)")
    parser.add_argument(
        "--suites",
        default="all",
        help="comma-separated suite names, or 'all' (default), 'gpu' (suites asking for GPUs), 'cpu' (the others)",
    )
    parser.add_argument("--out-dir", type=Path, required=True, help="where results.json, JUnit XML and logs go")
    parser.add_argument("--request-id", default=None, help="the bot's request id, echoed into results.json")
    parser.add_argument("--pr-number", type=int, default=None, help="pull request number, echoed into results.json")
    parser.add_argument(
        "--timeout-cap", type=float, default=None, metavar="SECONDS", help="cap every suite's own time limit"
    )
    gpus = parser.add_mutually_exclusive_group()
    gpus.add_argument(
        "--gpus", type=int, default=None, help="GPUs available to suites (default: REVIEWBOT_GPUS or nvidia-smi -L)"
    )
    gpus.add_argument(
        "--cpu",
        action="store_true",
        help="CPU run: start every suite whatever GPU count it asks for; GPU-only assertions skip and are reported",
    )
    return parser


def _print_summary(results: RegressionResults) -> None:
    for suite in results.suites:
        counts = ", ".join(f"{suite.count(s)} {s}" for s in ("passed", "failed", "error", "skipped"))
        print(f"  {suite.name}: {suite.status} in {suite.duration_s:.1f}s ({counts})", file=sys.stderr)
        for test in suite.tests:
            if test.status in ("failed", "error"):
                print(f"    {test.status.upper()} {test.id}", file=sys.stderr)
            elif test.gpu_only:
                print(f"    GPU-ONLY SKIP {test.id}: {test.message}", file=sys.stderr)
        if suite.status not in ("passed", "failed") and suite.detail:
            print(f"    {suite.detail.splitlines()[0]}", file=sys.stderr)
    print(f"{'PASSED' if results.passed else 'FAILED'}: {results.summary()}", file=sys.stderr)


def _bad_argument(args: argparse.Namespace) -> str:
    """The first argument that cannot work, as one line ("" when none)."""
    if not args.repo.is_dir():
        return f"--repo {args.repo}: no such directory"
    if args.out_dir.exists() and not args.out_dir.is_dir():
        return f"--out-dir {args.out_dir}: exists and is not a directory"
    if args.gpus is not None and args.gpus < 0:
        return f"--gpus must be 0 or more, got {args.gpus}"
    if args.timeout_cap is not None and args.timeout_cap <= 0:
        return f"--timeout-cap must be positive, got {args.timeout_cap:g}"
    return ""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = _bad_argument(args)
    if problem:
        print(f"run_regression: {problem}", file=sys.stderr)
        return 2

    def progress(line: str) -> None:
        print(f"[run_regression] {line}", file=sys.stderr, flush=True)

    try:
        results = run_regression(
            args.repo,
            args.revision,
            args.out_dir,
            args.suites,
            request_id=args.request_id,
            pr_number=args.pr_number,
            gpus_available=args.gpus,
            cpu=args.cpu,
            timeout_cap_s=args.timeout_cap,
            progress=progress,
        )
    except (ValueError, GitError) as exc:
        print(f"run_regression: {exc}", file=sys.stderr)
        return 2
    _print_summary(results)
    print(f"results written to {args.out_dir / RESULTS_FILE}", file=sys.stderr)
    return 0 if results.passed else 1


if __name__ == "__main__":
    sys.exit(main())
