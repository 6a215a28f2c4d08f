"""Which failing tests already failed before the change.

After the suites and the test plan ran at head, the tests that failed or errored there and that
exist at the merge base (their file, and a def or class of their name in it) run again at the
merge base by node id (`python -m pytest` with the base's own test files, in a worktree and box
like a suite's), with the longest time limit of the suites they came from (the test plan's for a
test only the plan ran). A module that failed to be collected (its id is its file,
`reviewbot.results.junit.case_id`) runs again when the base has that file: an import error of the
environment (a dependency the runner lacks) fails there too. A test that fails or errors there too (`FAILING`) was failing before the
change: its failure at head is no evidence against the change, so it is no finding of it; the
review lists it in its suite summary instead (`reviewbot.rules.suite_results`). A test the change
adds, or one whose file or def the base lacks, is not re-run: its failure stays the change's. At
most `MAX_TESTS` are re-run; the rest keep their blocking finding.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import RepoConfig, SuiteConfig
from reviewbot.results.schema import SuiteResult
from reviewbot.suites import run_suites
from reviewbot.testplan import PLAN_TIMEOUT_S, locate_test

MAX_TESTS = 200
FAILING = ("failed", "error")


def outcomes_at_base(
    git: GitRepo,
    merge_base: str,
    results: Sequence[SuiteResult],
    config: RepoConfig,
    *,
    planned: Sequence[str] = (),
    log_dir: Path | None = None,
    progress: Callable[[str], None],
) -> dict[str, str]:
    """Node id -> outcome at the merge base (`passed`, `failed`, `error`, `skipped`) of each test
    that failed at head, in a suite of `results` or as the node id of a test-plan test in `planned`,
    and exists at the base; a test that did not run there is left out."""
    ids: list[str] = []
    limit = 0.0
    failing = [
        (case.id, config.suite(result.name).timeout_s if result.name in config.suites else PLAN_TIMEOUT_S)
        for result in results
        for case in result.failures
    ]
    for test_id, timeout_s in failing + [(test_id, PLAN_TIMEOUT_S) for test_id in planned]:
        path, _, name = test_id.partition("::")
        if test_id in ids or not path.endswith(".py"):
            continue
        if not name:  # a module that failed to be collected: it runs again if its file is there
            if git.read(merge_base, path) is None:
                continue
        elif locate_test(git, merge_base, path, name.split("::")[-1]) is None:
            continue
        ids.append(test_id)
        limit = max(limit, timeout_s)
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
