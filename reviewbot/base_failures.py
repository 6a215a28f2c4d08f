"""Which failing tests already failed before the change.

After the suites ran at head, the tests that failed or errored there and that exist at the merge
base (their file, and a def or class of their name in it) run again at the merge base by node id
(`python -m pytest` with the base's own test files, in a worktree and box like a suite's), with
the longest time limit of the suites they came from. A test that fails or errors there too was
failing before the change: its failure at head is no evidence against the change, and the review
says so instead of blocking (`reviewbot.rules.suite_results`). A test the change adds, or one
whose file or def the base lacks, is not re-run: its failure stays the change's. At most
`MAX_TESTS` are re-run; the rest keep their blocking finding.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import RepoConfig, SuiteConfig
from reviewbot.results.schema import SuiteResult
from reviewbot.suites import run_suites
from reviewbot.testplan import locate_test

MAX_TESTS = 200
FAILING = ("failed", "error")


def outcomes_at_base(
    git: GitRepo,
    merge_base: str,
    results: Sequence[SuiteResult],
    config: RepoConfig,
    *,
    log_dir: Path | None = None,
    progress: Callable[[str], None],
) -> dict[str, str]:
    """Node id -> outcome at the merge base (`passed`, `failed`, `error`, `skipped`) of each test
    that failed at head and exists at the base; a test that did not run there is left out."""
    ids: list[str] = []
    limit = 0.0
    for result in results:
        for case in result.failures:
            path, _, name = case.id.partition("::")
            if case.id in ids or not path.endswith(".py") or not name:
                continue
            if locate_test(git, merge_base, path, name.split("::")[-1]) is None:
                continue
            ids.append(case.id)
            limit = max(limit, config.suite(result.name).timeout_s if result.name in config.suites else 600.0)
    if not ids:
        return {}
    ids = ids[:MAX_TESTS]
    command = "python -m pytest -q -p no:cacheprovider " + " ".join(shlex.quote(test) for test in ids)
    progress(f"failing tests: re-running {len(ids)} at the merge base {merge_base[:12]}")
    (base,) = run_suites(
        git.path,
        merge_base,
        [SuiteConfig("failing-at-base", command, timeout_s=limit)],
        log_dir=log_dir,
        progress=progress,
    )
    wanted = set(ids)
    return {test.id: test.status for test in base.tests if test.id in wanted}
